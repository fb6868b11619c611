"""The Kafka edge: kafka-python clients built from the one config, and explicit topic creation.

Topics are never auto-created (the broker has auto.create.topics.enable=false): a stage creates the
topics it writes with ``ensure_topics`` so partitions and replication are what the config says.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka.errors import KafkaError, KafkaTimeoutError, TopicAlreadyExistsError

from dbuslib.config import KafkaEndpoint
from dbuslib.errors import EndpointError

# A producer that must not lose or reorder records: acknowledged by all in-sync replicas, idempotent
# (kafka-python 3 keeps order across retries with up to 5 requests in flight), never auto-creating topics.
SAFE_PRODUCER = {"acks": "all", "enable_idempotence": True, "allow_auto_create_topics": False}


def _options(cfg: KafkaEndpoint, overrides: dict[str, Any]) -> dict[str, Any]:
    return {"bootstrap_servers": cfg.bootstrap_servers, **cfg.client, **overrides}


def _unreachable(cfg: KafkaEndpoint, err: Exception) -> EndpointError:
    return EndpointError(f"Kafka at {cfg.bootstrap_servers} is not reachable: {err}")


def producer(cfg: KafkaEndpoint, **overrides: Any) -> KafkaProducer:
    """A producer with acks=all and ordered retries unless ``overrides`` say otherwise."""
    try:
        return KafkaProducer(**_options(cfg, {**SAFE_PRODUCER, **overrides}))
    except KafkaTimeoutError as e:  # kafka-python 3: 'Unable to bootstrap from ...'
        raise _unreachable(cfg, e) from e


def consumer(cfg: KafkaEndpoint, *topics: str, **overrides: Any) -> KafkaConsumer:
    try:
        return KafkaConsumer(*topics, **_options(cfg, overrides))
    except KafkaTimeoutError as e:  # kafka-python 3: 'Unable to bootstrap from ...'
        raise _unreachable(cfg, e) from e


def admin(cfg: KafkaEndpoint) -> KafkaAdminClient:
    try:
        return KafkaAdminClient(bootstrap_servers=cfg.bootstrap_servers, client_id="dbus-admin")
    except KafkaTimeoutError as e:  # kafka-python 3: 'Unable to bootstrap from ...'
        raise _unreachable(cfg, e) from e


def ensure_topics(
    cfg: KafkaEndpoint, names: Iterable[str], partitions: int = 1, replication_factor: int = 1
) -> list[str]:
    """Create the topics that do not exist yet; returns the names created."""
    client = admin(cfg)
    try:
        missing = sorted(set(names) - set(client.list_topics()))
        if not missing:
            return []
        new = {n: {"num_partitions": partitions, "replication_factor": replication_factor} for n in missing}
        try:
            client.create_topics(new, wait_for_metadata=True)
        except TopicAlreadyExistsError:
            pass  # a concurrent creator won the race; the topic is there either way
        except KafkaError as e:
            msg = f"could not create topics {missing} on {cfg.bootstrap_servers}: {e}"
            raise EndpointError(msg) from e
        return missing
    finally:
        client.close()


def delete_topics(cfg: KafkaEndpoint, names: Iterable[str]) -> None:
    client = admin(cfg)
    try:
        existing = set(client.list_topics())
        doomed = [n for n in names if n in existing]
        if doomed:
            client.delete_topics(doomed)
    finally:
        client.close()
