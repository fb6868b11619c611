"""A Spark Structured Streaming query reads one real Kafka topic and writes another, through DBus's Kafka
source and sink settings (dbuslib.spark: the servers and endpoints.kafka.security, so the same query runs
on the secure stack's SASL_SSL-only broker)."""

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
