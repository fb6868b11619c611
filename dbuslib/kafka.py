"""The Kafka edge: kafka-python clients built from the one config, and explicit topic creation.

Topics are never auto-created (the broker has auto.create.topics.enable=false): a stage creates the
topics it writes with ``ensure_topics`` so partitions and replication are what the config says, and
``max.message.bytes`` is ``endpoints.kafka.max_message_bytes``. Producers get that limit as their
``max_request_size``; ``check_message_limit`` refuses it when the broker's ``message.max.bytes`` is lower
(asked once per process, when the first producer of a stage is made).
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import OffsetSpec
from kafka.errors import (
    KafkaError,
    KafkaTimeoutError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
    for_code,
)

from dbuslib.config import DbusConfig, KafkaEndpoint
from dbuslib.errors import CERTIFICATE_REFUSALS, ConfigError, EndpointError
from dbuslib.kafka_security import python_options

if TYPE_CHECKING:
    from dbuslib.topics import Subscription

# A producer that must not lose or reorder records: acknowledged by all in-sync replicas, idempotent
# (kafka-python 3 keeps order across retries with up to 5 requests in flight), never auto-creating topics.
SAFE_PRODUCER = {"acks": "all", "enable_idempotence": True, "allow_auto_create_topics": False}


# The kafka-python clients DBus makes. Each refuses a setting it does not know (KafkaProducer asserts
# "Unrecognized configs", KafkaConsumer raises KafkaConfigurationError), so each takes from
# ``endpoints.kafka.client`` only the keys of its own ``DEFAULT_CONFIG``.
_CLIENTS = (KafkaProducer, KafkaConsumer, KafkaAdminClient)
Client = type[KafkaProducer | KafkaConsumer | KafkaAdminClient]


def check_client_extras(cfg: KafkaEndpoint) -> None:
    """ConfigError naming each key of ``endpoints.kafka.client`` that none of the three clients knows (a
    typo, kafka-clients' dotted spelling). Asked when a client is made and by ``dbus config check``, not
    when the configuration is loaded: that does not import kafka-python (the ``dbus`` command's start)."""
    unknown = sorted(k for k in cfg.client if not any(k in c.DEFAULT_CONFIG for c in _CLIENTS))
    if unknown:
        keys = ", ".join(f"endpoints.kafka.client.{k}" for k in unknown)
        msg = f"{keys}: no option of kafka-python's KafkaProducer, KafkaConsumer or KafkaAdminClient"
        raise ConfigError(msg)


def client_extras(cfg: KafkaEndpoint, client: Client) -> dict[str, Any]:
    """The options of ``endpoints.kafka.client`` that the kafka-python class ``client`` knows: a consumer's
    ``session_timeout_ms`` goes to consumers, a producer's ``linger_ms`` to producers, a common
    ``request_timeout_ms`` to all (``check_client_extras`` first)."""
    check_client_extras(cfg)
    return {k: v for k, v in cfg.client.items() if k in client.DEFAULT_CONFIG}


def _options(cfg: KafkaEndpoint, client: Client, overrides: dict[str, Any]) -> dict[str, Any]:
    """The settings of a kafka-python ``client`` (its class): the servers, ``endpoints.kafka.security``
    (every client follows it), the ``client`` extras that class knows, then the caller's, as given."""
    return {
        "bootstrap_servers": cfg.bootstrap_servers,
        **python_options(cfg.security),
        **client_extras(cfg, client),
        **overrides,
    }


def _unreachable(cfg: KafkaEndpoint, err: Exception) -> EndpointError:
    sasl = cfg.security.sasl
    # kafka-python may see a refused SASL password only as a connection the broker closed: say it may be that
    maybe = (
        f"; or it refused {sasl.mechanism} as {sasl.username!r} (the broker's log says which)" if sasl else ""
    )
    return EndpointError(f"Kafka at {cfg.bootstrap_servers} is not reachable: {err}{maybe}")


class KafkaAuthFailed(EndpointError):
    """Kafka refused DBus's identity: its SASL credentials, its certificate, or the broker's certificate
    is not one ``endpoints.kafka.security.tls`` trusts (or names another host). Retrying cannot help;
    exits 3 as an endpoint that refuses an account does (``REGISTRY_AUTH_FAILED`` alike)."""

    code = "KAFKA_AUTH_FAILED"
    retriable = False


# What a refusal of DBus's identity reads like: Python's ssl module (kafka-python) and kafka-clients' own
# exceptions (a Spark stage's failed query carries them as text). kafka-python reads a refused SASL
# password's SaslAuthenticate error only when it arrives before the broker closes the connection; else it
# sees a closed connection, which ``_unreachable`` says may be the credentials.
_REFUSALS = (
    *CERTIFICATE_REFUSALS,
    "SaslAuthenticationException",
    "SslAuthenticationException",
    "AuthenticationException",
    "SaslAuthenticationFailedError",
)


# A plaintext client at a TLS listener: the broker answers its first request with a TLS alert record
# (15 03 03 00 02 ...), which the client reads as the length of a Kafka frame: 0x1503xxxx (an alert) or
# 0x1603xxxx (a handshake). kafka-python: "Invalid frame length: 352518912"; kafka-clients: "Invalid
# receive (size = 352518912 larger than ...)".
_BACKOFF = re.compile(r"\s*\(backoff [\d.]+ secs\)$")  # kafka-python's end of a failed attempt's line
_FRAME_LENGTH = re.compile(r"(?:Invalid frame length: |Invalid receive \(size = )(\d+)")
_TLS_RECORDS = (0x1503, 0x1603)


def _tls_answer(line: str) -> str | None:
    """``line`` said how, when it shows a TLS record read as a frame length; else None."""
    m = _FRAME_LENGTH.search(line)
    if m is None or int(m[1]) >> 16 not in _TLS_RECORDS or int(m[1]) >> 8 & 0xFF > 4:
        return None
    line = _BACKOFF.sub("", line.strip())
    return (
        f"{line}: the broker answered in TLS, so this listener takes TLS clients only "
        "(endpoints.kafka.security.protocol SSL or SASL_SSL)"
    )


def refused_in(failure: BaseException | str) -> str | None:
    """The line of ``failure`` (an exception, or a failed query's text) that says Kafka refused DBus's
    identity or DBus refused the broker's certificate, or that a plaintext client reached a TLS listener;
    None when it says no such thing."""
    for line in str(failure).splitlines():
        if any(r in line for r in _REFUSALS):
            return line.strip()
        tls = _tls_answer(line)
        if tls is not None:
            return tls
    return None


def _hand_on_before_the_end() -> None:
    """kafka-python 3.0.12 drops the bytes it read together with the end of a connection: its transports'
    ``_sock_recv`` returns them with the "socket disconnected" error, and ``_read_from_sock`` aborts on the
    error without handing them on. A broker's answer to a refused SASL login, sent just before it closes
    the connection, is lost that way, and the refusal looks like a broker that went away (most attempts).
    Wrapped here: bytes read before the end are returned without the error, and the next read, which
    finds the end again, returns it (kafka-python's later changes to this code, dpkp/kafka-python#2995,
    are not released)."""
    from kafka.errors import KafkaConnectionError
    from kafka.net import transport

    for cls in (transport.KafkaTCPTransport, transport.KafkaSSLTransport):
        recv = cls.__dict__.get("_sock_recv")
        if recv is None or getattr(recv, "dbus_hands_on", False):
            continue

        def _sock_recv(self: Any, _recv: Any = recv) -> tuple[bytes, Exception | None]:
            data, err = _recv(self)
            if data and isinstance(err, KafkaConnectionError) and "socket disconnected" in str(err):
                return data, None
            return data, err

        _sock_recv.dbus_hands_on = True  # type: ignore[attr-defined]
        cls._sock_recv = _sock_recv


_hand_on_before_the_end()


class _Failures(logging.Handler):
    """kafka-python's reasons for failed connections while a client bootstraps (it only logs them). A
    bootstrap attempt that failed because Kafka refused DBus's identity, or DBus the broker's certificate,
    ends the bootstrap at once: the handler raises ``KafkaAuthFailed`` from the logging call inside
    kafka-python's bootstrap loop (which retries every other failure until its timeout), and the client's
    constructor raises it."""

    def __init__(self, cfg: KafkaEndpoint) -> None:
        super().__init__(logging.WARNING)
        self.cfg = cfg
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if len(self.messages) < 50:
            self.messages.append(message)
        if record.name == "kafka.net.manager" and message.startswith("Bootstrap connection"):
            refusal = refused_in(message)
            if refusal is not None:
                raise _auth_failed(self.cfg, refusal)


def _auth_failed(cfg: KafkaEndpoint, refusal: str) -> KafkaAuthFailed:
    reason = _BACKOFF.sub("", re.sub(r"^Bootstrap connection to \S+ failed: ", "", refusal))
    return KafkaAuthFailed(
        f"Kafka at {cfg.bootstrap_servers} ({cfg.security.protocol}): connection refused: {reason}"
    )


@contextmanager
def _bootstrapping(cfg: KafkaEndpoint) -> Iterator[None]:
    """A kafka-python client made inside: ``KafkaAuthFailed`` as soon as a bootstrap attempt is refused for
    DBus's identity or the broker's certificate (``_Failures``); a bootstrap that times out is
    ``KafkaAuthFailed`` when such a reason was logged after all, else ``EndpointError``."""
    failures = _Failures(cfg)
    logger = logging.getLogger("kafka.net")
    logger.addHandler(failures)
    try:
        yield
    except KafkaTimeoutError as e:  # kafka-python 3: 'Unable to bootstrap from ...'
        refusal = next((r for m in failures.messages if (r := refused_in(m)) is not None), None)
        if refusal is not None:
            raise _auth_failed(cfg, refusal) from e
        raise _unreachable(cfg, e) from e
    finally:
        logger.removeHandler(failures)


def producer(cfg: KafkaEndpoint, **overrides: Any) -> KafkaProducer:
    """A producer with acks=all and ordered retries unless ``overrides`` say otherwise, taking records up
    to ``max_message_bytes`` (checked against the broker once per process)."""
    check_message_limit(cfg)
    with _bootstrapping(cfg):
        return KafkaProducer(
            **_options(
                cfg, KafkaProducer, {**SAFE_PRODUCER, "max_request_size": cfg.max_message_bytes, **overrides}
            )
        )


def send_control(cfg: KafkaEndpoint, topic: str, message: Any) -> None:
    """One control message (``ums.control.ControlMessage``) on ``topic``, keyed as its readers expect, and
    acknowledged; EndpointError naming its type, the topic and the servers when Kafka does not take it
    (``dbus reload``, ``dbus logrules publish``/``reload``, the console)."""
    from ums.control import control_key, to_json

    sender = producer(cfg, max_block_ms=15_000)
    try:
        sender.send(topic, key=control_key(message).encode(), value=to_json(message).encode()).get(30)
    except Exception as e:
        msg = f"could not send {message.type.value} to {topic} on {cfg.bootstrap_servers}: {e}"
        raise EndpointError(msg) from e
    finally:
        sender.close()


def consumer(cfg: KafkaEndpoint, *topics: str, **overrides: Any) -> KafkaConsumer:
    with _bootstrapping(cfg):
        return KafkaConsumer(*topics, **_options(cfg, KafkaConsumer, overrides))


def admin(cfg: KafkaEndpoint, bootstrap_timeout_s: float | None = None) -> KafkaAdminClient:
    """An admin client; ``bootstrap_timeout_s``: how long to try to reach the cluster (kafka-python's
    default, 30 s, when None)."""
    wait = {} if bootstrap_timeout_s is None else {"bootstrap_timeout_ms": int(bootstrap_timeout_s * 1000)}
    options = _options(cfg, KafkaAdminClient, {"client_id": "dbus-admin", **wait})
    with _bootstrapping(cfg):
        return KafkaAdminClient(**options)


# a topic's records carry the broker's append time: when a consumer can first read them (the latency benches)
LOG_APPEND_TIME = {"message.timestamp.type": "LogAppendTime"}


def ensure_topics(
    cfg: KafkaEndpoint,
    names: Iterable[str],
    partitions: int = 1,
    replication_factor: int = 1,
    configs: Mapping[str, str] | None = None,
    bootstrap_timeout_s: float | None = None,
) -> list[str]:
    """Create the topics that do not exist yet, with ``topic_configs`` and ``configs`` over them (e.g.
    ``{"message.timestamp.type": "LogAppendTime"}``); returns the names created. ``bootstrap_timeout_s``:
    how long to try to reach the cluster (``admin``)."""
    client = admin(cfg, bootstrap_timeout_s)
    try:
        missing = sorted(set(names) - set(client.list_topics()))
        if not missing:
            return []
        new = {
            n: {
                "num_partitions": partitions,
                "replication_factor": replication_factor,
                "configs": {**topic_configs(cfg), **(configs or {})},
            }
            for n in missing
        }
        try:
            client.create_topics(new, wait_for_metadata=True)
            _await_leaders(client, missing, partitions)
        except TopicAlreadyExistsError:
            pass  # a concurrent creator won the race; the topic is there either way
        except KafkaError as e:
            msg = f"could not create topics {missing} on {cfg.bootstrap_servers}: {e}"
            raise EndpointError(msg) from e
        return missing
    finally:
        client.close()


def ensure_source_topics(cfg: DbusConfig, ds: str, names: Iterable[str]) -> list[str]:
    """``ensure_topics`` for a stage of source ``ds`` at its start: the source's partitions and replication
    factor (``topics``), Kafka retried within ``endpoints.retry``. An attempt waits for the cluster at most
    ``bootstrap_wait_s`` of the retry budget, so an unreachable Kafka is reported when the budget is spent
    (kafka-python alone waits 30 s per attempt)."""
    from dbuslib import retry

    src = cfg.source(ds)
    policy = retry.RetryPolicy.of(cfg)
    return retry.call(
        policy,
        f"kafka at {cfg.endpoints.kafka.bootstrap_servers}: create topics",
        ensure_topics,
        cfg.endpoints.kafka,
        list(names),
        src.topics.partitions,
        src.topics.replication_factor,
        bootstrap_timeout_s=bootstrap_wait_s(policy.budget_s),
    )


def bootstrap_wait_s(budget_s: float) -> float:
    """How long one attempt within a retry budget of ``budget_s`` waits to reach the cluster: the budget,
    but at least 1 s (a TLS and SASL handshake on a slow link) and at most kafka-python's 30 s."""
    return min(30.0, max(1.0, budget_s))


def _await_leaders(client: KafkaAdminClient, names: list[str], partitions: int) -> None:
    """Wait until each new partition's leader answers (a ListOffsets, retried while the broker says
    NOT_LEADER_OR_FOLLOWER). On KRaft a topic is in the metadata with a leader named before that broker
    has taken the partition up; an idempotent producer's first batches then meet NOT_LEADER and
    OUT_OF_ORDER_SEQUENCE_NUMBER and can expire (seen with Spark's producer, 120 s then a failed task)."""
    specs = {TopicPartition(n, p): OffsetSpec.LATEST for n in names for p in range(partitions)}
    client.list_partition_offsets(specs, timeout_ms=30_000)


def topic_configs(cfg: KafkaEndpoint) -> dict[str, str]:
    """Configs of the topics DBus creates: records up to ``max_message_bytes``."""
    return {"max.message.bytes": str(cfg.max_message_bytes)}


BROKER_LIMIT = "message.max.bytes"


class MessageLimitError(ConfigError):
    """``endpoints.kafka.max_message_bytes`` is above what the broker accepts (``message.max.bytes``)."""

    code = "KAFKA_MESSAGE_LIMIT"


def limit_problem(configured: int, broker: int | None, bootstrap: str) -> str | None:
    """Why ``endpoints.kafka.max_message_bytes`` cannot be used with a broker whose ``message.max.bytes`` is
    ``broker`` (None: the broker did not say), or None when it can."""
    if broker is None or configured <= broker:
        return None
    return (
        f"endpoints.kafka.max_message_bytes {configured} is above the broker's {BROKER_LIMIT} {broker} "
        f"at {bootstrap}: lower the key to at most {broker}, or raise {BROKER_LIMIT} on every broker"
    )


def broker_message_limit(cfg: KafkaEndpoint) -> int | None:
    """The smallest ``message.max.bytes`` among the brokers (None when no broker reports it)."""
    from kafka.admin import ConfigResource, ConfigResourceType

    client = admin(cfg)
    try:
        ids = [str(b["broker_id"]) for b in client.describe_cluster()["brokers"]]
        asked = [ConfigResource(ConfigResourceType.BROKER, i, [BROKER_LIMIT]) for i in ids]
        found = client.describe_configs(asked, config_filter="all")
    except KafkaError as e:
        raise _unreachable(cfg, e) from e
    finally:
        client.close()
    values = [
        int(c[BROKER_LIMIT]["value"])
        for c in found.get("broker", {}).values()
        if c.get(BROKER_LIMIT, {}).get("value") is not None
    ]
    return min(values) if values else None


_limits_checked: set[tuple[str, int]] = set()


def check_message_limit(cfg: KafkaEndpoint) -> None:
    """ConfigError when ``max_message_bytes`` exceeds the broker's ``message.max.bytes``; asked of the
    broker once per process and (bootstrap servers, limit)."""
    key = (cfg.bootstrap_servers, cfg.max_message_bytes)
    if key in _limits_checked:
        return
    problem = limit_problem(cfg.max_message_bytes, broker_message_limit(cfg), cfg.bootstrap_servers)
    if problem is not None:
        raise MessageLimitError(problem)
    _limits_checked.add(key)


_made: set[tuple[str, str]] = set()  # (bootstrap servers, topic) this process knows exist


def ensure_topic_once(
    cfg: KafkaEndpoint, topic: str, partitions: int = 1, replication_factor: int = 1
) -> None:
    """``ensure_topics`` for one topic, asked of the broker once per process: for Spark tasks that write
    to topics named by the data (the broker does not auto-create them; Spark reuses Python workers, so
    the set outlives a task)."""
    key = (cfg.bootstrap_servers, topic)
    if key not in _made:
        ensure_topics(cfg, [topic], partitions, replication_factor)
        _made.add(key)


def subscribed_topics(cfg: KafkaEndpoint, subscription: Subscription) -> list[str]:
    """The topics ``subscription`` (dbuslib.topics.appender_subscription) reads now: its named topics and
    the broker's topics its pattern matches."""
    if not subscription.pattern:
        return list(subscription.topics)
    client = admin(cfg)
    try:
        existing = client.list_topics()
    finally:
        client.close()
    return sorted({*subscription.topics, *(t for t in existing if subscription.follows(t))})


def delete_topics(cfg: KafkaEndpoint, names: Iterable[str]) -> None:
    """Delete ``names`` that exist; a topic already gone is not an error (the listing may be a moment
    older than the deletion: another deleter, or a broker's stale metadata), any other refusal is."""
    client = admin(cfg)
    try:
        existing = set(client.list_topics())
        doomed = [n for n in names if n in existing]
        if doomed:
            answer = client.delete_topics(doomed, raise_errors=False)
            refused = [
                (t["name"], t["error_code"], t.get("error_message"))
                for t in answer["topics"]
                if t["error_code"] not in (0, UnknownTopicOrPartitionError.errno)
            ]
            if refused:
                msg = f"deleting topics {refused} at {cfg.bootstrap_servers}"
                raise for_code(refused[0][1])(msg)
    finally:
        client.close()


def partition_count(cfg: KafkaEndpoint, topics: Iterable[str]) -> int:
    """How many partitions ``topics`` have together (a missing topic: none)."""
    c = consumer(cfg, enable_auto_commit=False, group_id=None)
    try:
        return sum(len(c.partitions_for_topic(t) or ()) for t in topics)
    finally:
        c.close()


def end_offsets(cfg: KafkaEndpoint, topics: Iterable[str]) -> dict[Any, int]:
    """``TopicPartition -> end offset`` of every partition of ``topics`` (missing topics: none)."""

    c = consumer(cfg, enable_auto_commit=False, group_id=None)
    try:
        parts = [TopicPartition(t, p) for t in topics for p in sorted(c.partitions_for_topic(t) or ())]
        return c.end_offsets(parts) if parts else {}
    finally:
        c.close()


def read_range(
    cfg: KafkaEndpoint, topics: Iterable[str], since: dict[Any, int] | None = None, quiet_s: float = 60.0
) -> list[Any]:
    """Every record of ``topics`` from ``since`` (``TopicPartition -> offset``; default: the start) to the
    end offsets as they are now, in offset order per partition (kafka-python ``ConsumerRecord``s), one
    partition after the other. EndpointError when no record comes for ``quiet_s`` while some are still to
    be read (a busy broker or host may answer a single poll empty)."""
    names = list(dict.fromkeys(topics))
    got: dict[tuple[str, int], list[Any]] = {}
    for r in iter_range(cfg, names, since, quiet_s):
        got.setdefault((r.topic, r.partition), []).append(r)
    return [r for tp in sorted(got, key=lambda tp: (names.index(tp[0]), tp[1])) for r in got[tp]]


def iter_range(
    cfg: KafkaEndpoint, topics: Iterable[str], since: dict[Any, int] | None = None, quiet_s: float = 60.0
) -> Iterator[Any]:
    """``read_range``'s records as they are polled, none kept: in offset order per partition, the
    partitions interleaved (a count over gigabytes of records: bench/e2e.py)."""
    c = consumer(cfg, enable_auto_commit=False, group_id=None)
    try:
        parts = [TopicPartition(t, p) for t in topics for p in sorted(c.partitions_for_topic(t) or ())]
        ends = c.end_offsets(parts) if parts else {}
        start = {tp: (since or {}).get(tp, 0) for tp in parts}
        todo = [tp for tp in parts if ends[tp] > start[tp]]
        if not todo:
            return
        c.assign(todo)
        for tp in todo:
            c.seek(tp, start[tp])
        left = set(todo)
        last = time.monotonic()
        while left:
            batch = c.poll(timeout_ms=1000, max_records=50_000)
            if not batch:
                left -= {tp for tp in left if c.position(tp) >= ends[tp]}  # past trailing control records
                if left and time.monotonic() - last > quiet_s:
                    where = sorted(t.topic for t in left)
                    msg = f"{where}: no records for {quiet_s:g} s before the end offsets {ends}"
                    raise EndpointError(msg)
                continue
            last = time.monotonic()
            for tp, records in batch.items():
                yield from (r for r in records if r.offset < ends[tp])
                if c.position(tp) >= ends[tp]:
                    left.discard(tp)
    finally:
        c.close()
