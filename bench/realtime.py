"""Spark's real-time mode on this machine: Kafka -> Kafka latency of a JVM-only query and of a Python step.

Not in the default ``make bench`` run (``python -m bench realtime``): it measures what issue #14's design
rests on, with pyspark's own Kafka source and sink on the local broker.

A writer sends one record every 20 ms for BENCH_RT_SECONDS (default 20) to a 2-partition topic, each
record holding its send time; a query copies it to another topic; a reader takes the latency from the
output record's Kafka timestamp (the sink's send time) minus the send time inside it.

- ``rt_jvm_latency_p50_ms`` / ``p99``: ``selectExpr`` only, ``trigger(realTime=...)``; the baseline is the
  same query in micro-batches (no trigger interval, as fast as batches go).
- ``rt_python_delivered_pct``: the same query with a ``mapInArrow`` step (identity), real-time mode with
  Spark's operator allowlist switched off (Python operators are not on it in 4.2) and one record per
  Arrow batch: the share of the records sent that came out before the 30 s real-time batch ended.
  Measured 0 with pyspark 4.2.0 (and 0 for a Python UDF, Arrow UDF, small buffers): in real-time mode a
  Python step gives its output only when the long batch ends, so DBus's real-time path keeps the
  record path in the JVM.
- ``rt_boundary_stall_ms``: what a batch boundary costs the records (issue #32's p99). The JVM-only query
  with BENCH_RT_BOUNDARY_BATCH_S (10) second batches, a writer of 5,000 records/s for
  BENCH_RT_BOUNDARY_S (45) seconds into a LogAppendTime topic pair; for each boundary after the first
  batch, the largest latency of the records sent within a second of the next batch's start; the figure
  is their median, the baseline the median of the driver's part of a boundary (``triggerExecution`` less
  ``addBatch``: offsets, planning, commits). ``rt_boundary_delayed_pct``: the share of those steady
  records over 20 ms.
"""

from __future__ import annotations

import os
import tempfile
import threading
import time
import uuid
from typing import Any

from bench.report import bench_line
from dbuslib import kafka
from dbuslib.config import DbusConfig
from dbuslib.spark import kafka_client_options, kafka_source, session
from dbuslib.stagemetrics import work_ms

SECONDS = float(os.environ.get("BENCH_RT_SECONDS", "20"))
REALTIME_BATCH = "30 seconds"  # the checkpoint interval: longer than the measured window


def _percentile(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))] if values else float("nan")


def measure(cfg: DbusConfig, spark: Any, mode: str, python: bool = False) -> tuple[list[float], int]:
    """(latencies in ms of the records that came out, records sent) of one query."""
    tag = uuid.uuid4().hex[:8]
    source, sink = f"bench_rt_in_{tag}", f"bench_rt_out_{tag}"
    endpoint = cfg.endpoints.kafka
    kafka.ensure_topics(endpoint, [source, sink], partitions=2)
    df = (
        kafka_source(spark.readStream, endpoint)
        .option("subscribe", source)
        .option("startingOffsets", "earliest")
        .load()
        .selectExpr("key", "value")
    )
    if python:
        df = df.mapInArrow(_identity, "key binary, value binary")
    writer = _copy_to(df, endpoint, sink)
    if mode == "realtime":
        writer = writer.outputMode("update").trigger(realTime=REALTIME_BATCH)
    query = writer.start()
    latencies: list[float] = []
    stop = threading.Event()
    reader = threading.Thread(target=_read, args=(endpoint, sink, latencies, stop), daemon=True)
    try:
        _wait_started(query)
        reader.start()
        producer = kafka.producer(endpoint, linger_ms=0)
        sent, end = 0, time.monotonic() + SECONDS
        while time.monotonic() < end:
            producer.send(source, key=str(sent % 7).encode(), value=repr(time.time()).encode())
            producer.flush()
            sent += 1
            time.sleep(0.02)
        producer.close()
        time.sleep(2)  # the last records' way through
    finally:
        stop.set()
        query.stop()
        kafka.delete_topics(endpoint, [source, sink])
    return latencies, sent


def _copy_to(df: Any, endpoint: Any, sink: str) -> Any:
    """The writer of a query that copies ``df`` to topic ``sink`` at once (no linger), its own checkpoint."""
    return (
        df.writeStream.format("kafka")
        .options(**kafka_client_options(endpoint))
        .option("kafka.linger.ms", "0")
        .option("topic", sink)
        .option("checkpointLocation", tempfile.mkdtemp(prefix="dbus-bench-rt-"))
    )


def _identity(batches):
    yield from batches


def _wait_started(query: Any) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not query.status.get("isTriggerActive"):
        time.sleep(0.2)
    time.sleep(3)  # the Kafka consumers' first assignment and fetch


def _read(endpoint: Any, topic: str, out: list[float], stop: threading.Event) -> None:
    consumer = kafka.consumer(endpoint, topic, auto_offset_reset="earliest", fetch_max_wait_ms=5)
    while not stop.is_set():
        for records in consumer.poll(200).values():
            out.extend(r.timestamp - float(r.value) * 1000 for r in records)
    consumer.close()


BOUNDARY_BATCH_S = int(os.environ.get("BENCH_RT_BOUNDARY_BATCH_S", "10"))
BOUNDARY_S = float(os.environ.get("BENCH_RT_BOUNDARY_S", "45"))
BOUNDARY_RATE_PER_10MS = 50  # 5,000 records/s


def boundaries(cfg: DbusConfig, spark: Any) -> tuple[float, float, float]:
    """(median stall ms at a boundary, median driver gap ms, % of steady records over 20 ms)."""
    from datetime import datetime

    tag = uuid.uuid4().hex[:8]
    source, sink = f"bench_rtb_in_{tag}", f"bench_rtb_out_{tag}"
    endpoint = cfg.endpoints.kafka
    kafka.ensure_topics(endpoint, [source, sink], partitions=2, configs=kafka.LOG_APPEND_TIME)
    df = (
        kafka_source(spark.readStream, endpoint).option("subscribe", source).load().selectExpr("key", "value")
    )
    query = (
        _copy_to(df, endpoint, sink)
        .outputMode("update")
        .trigger(realTime=f"{BOUNDARY_BATCH_S} seconds")
        .start()
    )
    try:
        _wait_started(query)
        producer = kafka.producer(endpoint, linger_ms=0)
        end = time.monotonic() + BOUNDARY_S
        while time.monotonic() < end:
            began = time.monotonic()
            for i in range(BOUNDARY_RATE_PER_10MS):
                producer.send(source, key=str(i % 7).encode(), value=str(time.time_ns()).encode())
            producer.flush()
            time.sleep(max(0.0, 0.01 - (time.monotonic() - began)))
        producer.close()
        time.sleep(2)
        progress = [p for p in query.recentProgress if p.batchId >= 1]
        starts = [datetime.fromisoformat(p.timestamp.replace("Z", "+00:00")).timestamp() for p in progress]
        gaps = [work_ms(p.durationMs, realtime=True) for p in progress]
    finally:
        query.stop()
    records = kafka.read_range(endpoint, [sink], quiet_s=5)
    kafka.delete_topics(endpoint, [source, sink])
    sent = [(int(r.value) / 1e9, r.timestamp - int(r.value) / 1e6) for r in records]
    steady = [(t, ms) for t, ms in sent if starts and t >= starts[0] + 1.0]
    stalls = [max((ms for t, ms in steady if abs(t - b) <= 1.0), default=0.0) for b in starts[1:]]
    over = 100.0 * sum(1 for _, ms in steady if ms > 20) / max(len(steady), 1)
    return _percentile(stalls, 0.5), _percentile(gaps, 0.5), over


def run(cfg: DbusConfig) -> list[str]:
    spark = session(
        cfg,
        "bench-realtime",
        spark__master="local[4]",  # real-time mode needs a slot per task: 2 partitions
        spark__sql__streaming__realTimeMode__allowlistCheck="false",
        spark__sql__execution__arrow__maxRecordsPerBatch="1",
        spark__ui__showConsoleProgress="false",
    )
    try:
        realtime, _ = measure(cfg, spark, "realtime")
        microbatch, _ = measure(cfg, spark, "microbatch")
        python, sent = measure(cfg, spark, "realtime", python=True)
        stall, gap, delayed = boundaries(cfg, spark)
    finally:
        spark.stop()
    return [
        bench_line("rt_jvm_latency_p50_ms", _percentile(realtime, 0.5), "ms", _percentile(microbatch, 0.5)),
        bench_line("rt_jvm_latency_p99_ms", _percentile(realtime, 0.99), "ms", _percentile(microbatch, 0.99)),
        bench_line("rt_python_delivered_pct", 100.0 * len(python) / max(sent, 1), "%"),
        bench_line("rt_boundary_stall_ms", stall, "ms", gap),
        bench_line("rt_boundary_delayed_pct", delayed, "%"),
    ]
