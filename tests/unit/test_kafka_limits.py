"""The record limit of DBus's Kafka writers: endpoints.kafka.max_message_bytes, checked against the broker."""

from __future__ import annotations

from pathlib import Path

import pytest

from dbuslib import kafka
from dbuslib import spark as dspark
from dbuslib.config import KafkaEndpoint


def test_the_default_limit_is_the_local_brokers_message_max_bytes():
    text = (Path(__file__).parents[2] / "conf/stack/kafka-server.properties").read_text()
    props = dict(line.split("=", 1) for line in text.splitlines() if "=" in line and not line.startswith("#"))
    assert KafkaEndpoint(bootstrap_servers="x").max_message_bytes == int(props["message.max.bytes"])


@pytest.mark.parametrize(
    ("configured", "broker", "ok"),
    [(100, 100, True), (99, 100, True), (101, 100, False), (10**9, None, True)],
)
def test_a_limit_above_the_brokers_names_both_keys(configured, broker, ok):
    problem = kafka.limit_problem(configured, broker, "127.0.0.1:19092")
    assert (problem is None) == ok
    if not ok:
        assert "endpoints.kafka.max_message_bytes 101" in problem and "message.max.bytes 100" in problem


def test_a_limit_above_the_brokers_is_refused_before_any_producer(monkeypatch):
    monkeypatch.setattr(kafka, "broker_message_limit", lambda cfg: 1_048_576)
    cfg = KafkaEndpoint(bootstrap_servers="127.0.0.1:1", max_message_bytes=2_000_000)
    with pytest.raises(kafka.MessageLimitError, match="KAFKA_MESSAGE_LIMIT|max_message_bytes 2000000") as err:
        kafka.producer(cfg)
    assert err.value.code == "KAFKA_MESSAGE_LIMIT"


def test_topics_are_created_with_the_limit():
    assert kafka.topic_configs(KafkaEndpoint(bootstrap_servers="x", max_message_bytes=70_000)) == {
        "max.message.bytes": "70000"
    }


class _Writer:
    def __init__(self) -> None:
        self.options: dict[str, str] = {}

    def format(self, name: str) -> _Writer:
        return self

    def option(self, key: str, value: str) -> _Writer:
        self.options[key] = value
        return self


def test_the_spark_sink_takes_records_up_to_the_limit(monkeypatch):
    monkeypatch.setattr(kafka, "broker_message_limit", lambda cfg: 16_777_216)
    w = dspark.kafka_sink(_Writer(), KafkaEndpoint(bootstrap_servers="b:1", max_message_bytes=5_000_000))
    assert w.options["kafka.max.request.size"] == "5000000"
    assert w.options["kafka.bootstrap.servers"] == "b:1"
    assert dspark.kafka_sink(_Writer(), "b:1").options["kafka.max.request.size"] == "16777216"


def test_real_time_sinks_send_at_once_but_per_row_sources_batch():
    linger = [
        dspark.kafka_sink(_Writer(), "b:1", realtime=rt, batching=b).options["kafka.linger.ms"]
        for rt, b in ((False, False), (True, False), (True, True), (False, True))
    ]
    assert linger == ["5", "0", "5", "5"]


def test_a_raw_record_limit_that_the_topics_would_refuse_fails_at_load(tmp_path):
    from dbuslib.config import load_config
    from dbuslib.errors import ConfigError

    path = tmp_path / "dbus.yaml"
    path.write_text(
        'endpoints: {kafka: {bootstrap_servers: "x:1", max_message_bytes: 1000000}, '
        'zookeeper: {hosts: "x:2"}, influxdb: {url: "http://x"}, meta_store: {url: "sqlite://"}}\n'
        "sources: {demo: {mysql: {host: h, user: u, password: p, server_id: 1}}}\n"
    )
    with pytest.raises(ConfigError, match=r"sources.demo.extractor.max_record_bytes .*max_message_bytes"):
        load_config(path)


@pytest.mark.parametrize(
    ("budget", "wait"), [(0.05, 1.0), (1.0, 1.0), (12.5, 12.5), (60.0, 30.0), (3600.0, 30.0)]
)
def test_a_start_up_attempt_waits_for_kafka_within_the_retry_budget(budget, wait):
    """An unreachable Kafka is reported when ``endpoints.retry.budget_s`` is spent, not after kafka-python's
    own 30 s per attempt (a budget of 0.05 s took 30 s); a short budget still leaves 1 s for a handshake."""
    assert kafka.bootstrap_wait_s(budget) == wait
