"""A Spark Structured Streaming query reads one real Kafka topic and writes another, through DBus's Kafka
source and sink settings (dbuslib.spark: the servers and endpoints.kafka.security, so the same query runs
on the secure stack's SASL_SSL-only broker)."""

import os

from dbuslib import kafka
from dbuslib.spark import kafka_sink, kafka_source


def _produce(endpoint, topic, records):
    producer = kafka.producer(endpoint)
    for key, value in records:
        producer.send(topic, key=key, value=value)
    producer.flush()
    producer.close()


def _consume(endpoint, topic, n):
    consumer = kafka.consumer(
        endpoint,
        topic,
        auto_offset_reset="earliest",
        consumer_timeout_ms=15_000,
        enable_auto_commit=False,
        group_id=None,
    )
    got = []
    for record in consumer:
        got.append((record.key, record.value))
        if len(got) == n:
            break
    consumer.close()
    return got


def test_streaming_query_kafka_to_kafka(spark, kafka_up, new_topic, tmp_path):
    source_topic, sink_topic = new_topic(partitions=2), new_topic()
    records = [(f"shop.t{i % 3}".encode(), f"v{i}".encode()) for i in range(50)]
    _produce(kafka_up, source_topic, records)

    stream = (
        kafka_source(spark.readStream, kafka_up)
        .option("subscribe", source_topic)
        .option("startingOffsets", "earliest")
        .load()
        .selectExpr("key", "upper(CAST(value AS STRING)) AS value")
    )
    query = (
        kafka_sink(stream.writeStream, kafka_up)
        .queryName("pytest_kafka_roundtrip")
        .option("topic", sink_topic)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    try:
        query.awaitTermination(120)
        assert query.exception() is None
    finally:
        query.stop()

    got = _consume(kafka_up, sink_topic, len(records))
    assert sorted(got) == sorted((k, v.upper()) for k, v in records)


ONE_WORKER = """
import os, sys
sys.path[:0] = [sys.argv[1] + "/tests/unit", sys.argv[1]]
import jvm_jar
from dbuslib import spark as dspark
from dbuslib.config import load_config

jvm_jar.spark_session("a-unit-test", "dbus.jvm.LogUmsUdf")  # launches this process's JVM
session = dspark.session(load_config(os.environ.get("DBUS_CONFIG")), "an-integration-test")
reader = session.readStream.format("kafka").option("kafka.bootstrap.servers", "127.0.0.1:1")
reader.option("subscribe", "t").load()
print("kafka source found")
"""


def test_a_unit_tests_session_first_in_a_worker_leaves_the_kafka_source_findable(tmp_path):
    """One pytest worker runs unit and integration files: the first session launches the JVM, whose class
    path stays (stopping the session does not change it); the unit tests' session carries the connectors."""
    import subprocess
    import sys
    from pathlib import Path

    repo = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    done = subprocess.run(
        [sys.executable, "-c", ONE_WORKER, str(repo)], capture_output=True, text=True, timeout=300, env=env
    )
    assert done.returncode == 0 and "kafka source found" in done.stdout, done.stderr[-3000:]
