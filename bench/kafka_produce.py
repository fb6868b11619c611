"""Kafka produce rows/s with kafka-python against the local broker, acks=all.

value: the producer DBus stages use (acks=all, batching, pipelined sends, one flush at the end).
baseline: the plain loop, one synchronous send().get() per record, same record size, same broker.
"""

from __future__ import annotations

import os
import time
import uuid

from bench.report import bench_line
from dbuslib import kafka
from dbuslib.config import DbusConfig

RECORD = b"x" * 300
ROWS = int(os.environ.get("BENCH_KAFKA_ROWS", "200000"))
BASELINE_ROWS = int(os.environ.get("BENCH_KAFKA_BASELINE_ROWS", "3000"))


def _rate(rows: int, fn) -> float:
    t0 = time.perf_counter()
    fn()
    return rows / (time.perf_counter() - t0)


def batched(cfg: DbusConfig, topic: str, rows: int) -> float:
    producer = kafka.producer(cfg.endpoints.kafka, linger_ms=5, batch_size=512 * 1024)

    def run() -> None:
        for _ in range(rows):
            producer.send(topic, key=b"shop.orders", value=RECORD)
        producer.flush()

    rate = _rate(rows, run)
    producer.close()
    return rate


def one_by_one(cfg: DbusConfig, topic: str, rows: int) -> float:
    producer = kafka.producer(cfg.endpoints.kafka)

    def run() -> None:
        for _ in range(rows):
            producer.send(topic, key=b"shop.orders", value=RECORD).get(timeout=30)

    rate = _rate(rows, run)
    producer.close()
    return rate


def run(cfg: DbusConfig) -> list[str]:
    topic = f"bench_kafka_produce_{uuid.uuid4().hex[:8]}"
    kafka.ensure_topics(cfg.endpoints.kafka, [topic], partitions=1)
    try:
        batched(cfg, topic, min(ROWS, 10_000))  # warm-up: connections, metadata, JIT of the broker
        baseline = one_by_one(cfg, topic, BASELINE_ROWS)
        value = batched(cfg, topic, ROWS)
    finally:
        kafka.delete_topics(cfg.endpoints.kafka, [topic])
    return [bench_line("kafka_produce_rows_per_s", value, "rows/s", baseline)]
