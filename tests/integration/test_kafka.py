"""Python produce/consume on the real broker."""

import uuid

import pytest
from kafka.errors import KafkaTimeoutError

from dbuslib import kafka


def test_produce_then_consume_keeps_keys_and_order(kafka_up, new_topic):
    topic = new_topic()
    producer = kafka.producer(kafka_up)
    sent = [(b"shop.orders", f"row-{i}".encode()) for i in range(100)]
    for key, value in sent:
        producer.send(topic, key=key, value=value)
    producer.flush()
    producer.close()

    consumer = kafka.consumer(
        kafka_up,
        topic,
        auto_offset_reset="earliest",
        consumer_timeout_ms=10_000,
        enable_auto_commit=False,
        group_id=None,
    )
    got = []
    for record in consumer:
        got.append((record.key, record.value))
        if len(got) == len(sent):
            break
    consumer.close()
    assert got == sent


def test_topics_are_not_auto_created(kafka_up):
    topic = "pytest_never_created_by_a_producer"
    producer = kafka.producer(kafka_up, max_block_ms=2000)
    try:
        with pytest.raises(KafkaTimeoutError):
            producer.send(topic, b"x").get(timeout=5)
    finally:
        producer.close(timeout=1)
    admin = kafka.admin(kafka_up)
    try:
        assert topic not in admin.list_topics()
    finally:
        admin.close()


def test_ensure_topics_sets_extra_configs_over_dbus_ones(kafka_up):
    """``configs`` adds topic settings (the log latency bench: the broker's clock on every record)."""
    topic = f"pytest_log_append_time_{uuid.uuid4().hex[:8]}"
    made = kafka.ensure_topics(kafka_up, [topic], configs={"message.timestamp.type": "LogAppendTime"})
    assert made == [topic]
    try:
        producer = kafka.producer(kafka_up)
        producer.send(topic, b"x", timestamp_ms=1000).get(timeout=30)
        producer.close()
        (record,) = kafka.read_range(kafka_up, [topic])
        assert record.timestamp_type == 1 and record.timestamp > 1000  # LogAppendTime, not the producer's
    finally:
        kafka.delete_topics(kafka_up, [topic])


def test_delete_topics_takes_a_topic_gone_since_the_listing(kafka_up, monkeypatch):
    """The listing may be older than the deletion (another deleter, a broker's stale metadata): a
    topic gone by then is deleted already, the others still are (CI stop 44 failed a clean-up on it)."""
    topic = f"pytest_delete_{uuid.uuid4().hex[:8]}"
    gone = f"pytest_gone_{uuid.uuid4().hex[:8]}"
    kafka.ensure_topics(kafka_up, [topic])
    real_admin = kafka.admin

    def stale_admin(cfg):
        client = real_admin(cfg)
        listed = client.list_topics
        client.list_topics = lambda: [*listed(), gone]
        return client

    monkeypatch.setattr(kafka, "admin", stale_admin)
    kafka.delete_topics(kafka_up, [topic, gone])
    monkeypatch.undo()
    admin = kafka.admin(kafka_up)
    try:
        assert topic not in admin.list_topics()
    finally:
        admin.close()
