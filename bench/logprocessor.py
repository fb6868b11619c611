"""The whole log processor: lines/s through ``logprocessor.job.process`` (``dbus.jvm.LogBatch`` over each
partition: adapter -> rules -> one UMS message per host and table per chunk of ``processor.message_records``
records, unknown lines, dead letters, heartbeats) with every output written to Kafka, beside plain Python
doing the same work and producing the same messages to Kafka with kafka-python.

The records: rsyslog records (``{"host","path","timestamp","message"}``, the demo's source type) with the
log4j-style lines of conf/demo/logrules/applog.sample.log, each with its own numbers: a third for each of
the demo's two tables (app_orders: 7 operators, http_access: 6), a third taken by no table (the unknown
topic); BENCH_LOG_LINES of them (default 200000), in memory for both sides: for Spark a DataFrame shaped like
the Kafka source (value, key, topic, partition, offset, timestamp), made in the JVM and cached first, the
first half in partition 0 and the rest in 1, each its own Spark partition (as the Kafka source reads them).

value: Spark (``spark.master``, local[2] in the demo, with the stage's ``spark.stages.logprocessor``
settings) running ``job.process`` over the records and writing every output to its topic with the stage's
Kafka sink settings (a batch write); the clock covers that write; the median of three runs, after five over
the same records while the JIT compiles (a running stage's steady state). The outputs
written are counted from the topics' end offsets. Reading the raw topic is not in the figure (nor in the
baseline): docs/logs.md, How rules run on Spark, measures it apart.
baseline: plain Python over the same records, in the same run: ``json.loads`` of the record, the two tables'
rules as ``re`` patterns, the rows of each chunk of ``processor.message_records`` records of a partition
gathered per host and table into a UMS-like message (``json.dumps``) with its key, the unknown lines as
they are, each message sent with kafka-python (batched, acks=all, the stages' producer) and flushed before
the clock stops: the same messages as the processor's.
"""

from __future__ import annotations

import json
import os
import re
import statistics
import time
from pathlib import Path
from typing import TYPE_CHECKING

from bench.report import bench_line
from dbuslib.config import DbusConfig, LogSource
from logprocessor.grammar import TableRules, groups_from_json, save_as_columns
from logprocessor.rules import RuleSet

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

LINES = int(os.environ.get("BENCH_LOG_LINES", "200000"))
WARM_UPS = 5  # runs over the same records before the measured ones (the engine's JIT needs ~10^6 records)
MEASURED = 3  # the figure is their median: one run lasts about a second, and the machine is shared
DEMO = Path(__file__).resolve().parents[1] / "conf" / "demo" / "logrules"
DS = "benchlog"
TABLES = ("app_orders", "http_access")

# the record of line i: one template per kind, i % 3 (app_orders, http_access, unknown); %d: i, or i's parts
RECORD = '{"host":"app-%d.prod","path":"/var/log/app/app.log","timestamp":"2026-11-24T10:15:%02d.%03dZ",'
MESSAGES = (
    "2026-11-24 10:15:%02d.%03d | [WARN] | OrderService order=%d amount=%d.50 req=5e1f0c2a-%d",
    '10.0.3.7 - - [2026-11-24T10:15:%02d+00:00] \\"GET /api/orders/%d HTTP/1.1\\" 200 %d rt=0.012 req=r-%d',
    "2026-11-24 10:15:%02d.%03d | [INFO] | PaymentService paid=%d req=5e1f0c2a-%d",
)


def coordinates(i: int, n: int) -> tuple[int, int]:
    """The (partition, offset) of record ``i`` of ``n``: the first half in partition 0, the rest in 1."""
    partition = int(i >= n // 2)
    return partition, i - partition * (n // 2)


def record(i: int) -> bytes:
    """The value of record ``i``, as ``frame`` makes it in Spark."""
    head = RECORD % (i % 7, i % 60, i % 1000)
    kind = i % 3
    if kind == 0:
        message = MESSAGES[0] % (i % 60, i % 1000, i, i % 997, i)
    elif kind == 1:
        message = MESSAGES[1] % (i % 60, i, i % 4096, i)
    else:
        message = MESSAGES[2] % (i % 60, i % 1000, i, i)
    return f'{head}"message":"{message}"}}'.encode()


def frame(spark: SparkSession, n: int) -> DataFrame:
    """Records 0..n-1 shaped like the Kafka source, made in the JVM (no Python per row)."""
    from pyspark.sql import functions as F

    i = F.col("id")
    head = F.format_string(RECORD, i % 7, i % 60, i % 1000)
    kind = i % 3
    message = (
        F.when(kind == 0, F.format_string(MESSAGES[0], i % 60, i % 1000, i, i % 997, i))
        .when(kind == 1, F.format_string(MESSAGES[1], i % 60, i, i % 4096, i))
        .otherwise(F.format_string(MESSAGES[2], i % 60, i % 1000, i, i))
    )
    value = F.concat(head, F.lit('"message":"'), message, F.lit('"}'))
    partition = (i >= n // 2).cast("int")
    return spark.range(n, numPartitions=2).select(  # Spark partition k: ids of Kafka partition k
        F.lit(None).cast("binary").alias("key"),
        value.cast("binary").alias("value"),
        F.lit(f"{DS}.raw").alias("topic"),
        partition.alias("partition"),
        (i - partition * (n // 2)).alias("offset"),
        F.timestamp_millis(F.lit(1795947330000) + i).alias("timestamp"),
    )


def rule_set(cfg: DbusConfig) -> RuleSet:
    tables = []
    for name in TABLES:
        groups = groups_from_json((DEMO / f"{name}.json").read_text())
        tables.append(TableRules(name, 1, groups, save_as_columns(groups[0])))
    return RuleSet(DS, cfg.log_source(DS).schema_name(DS), tuple(tables))


def bench_config(cfg: DbusConfig) -> DbusConfig:
    return cfg.model_copy(update={"log_sources": {**cfg.log_sources, DS: LogSource()}})


# ---------------------------------------------------------------- the baseline

ORDER = re.compile(r"^(\S+ \S+) \| \[([^\]]*)\] \| OrderService order=(\d+) amount=([\d.]+) req=(\S+)")
ACCESS = re.compile(r"^(\S+) \S+ \S+ \[([^\]]+)\] \"(\S+) (\S+) [^\"]*\" (\d{3}) (\d+) rt=([\d.]+) req=(\S+)")
STAMP = re.compile(r"^(\d{4}-\d\d-\d\d)T(\d\d:\d\d:\d\d).*$")
TYPES = {
    "app_orders": ("datetime", "string", "long", "double", "string", "string"),
    "http_access": ("datetime", "string", "string", "string", "long", "long", "double", "string", "string"),
}


def _message(ns: str, table: str, tuples: list[tuple[int, int, list[object]]]) -> str:
    fields = [
        {"name": n, "type": t, "nullable": True} for n, t in zip(("c",) * 9, TYPES[table], strict=False)
    ]
    ts = time.strftime("%Y-%m-%d %H:%M:%S")
    payload = []
    for partition, offset, values in tuples:
        ums_id = (partition << 43 | offset) << 12
        payload.append({"tuple": [ums_id, str(ums_id), ts, "i", *values]})
    return json.dumps(
        {
            "protocol": {"type": "data_increment_data", "version": "1.3"},
            "schema": {"namespace": ns, "fields": fields},
            "payload": payload,
        },
        separators=(",", ":"),
    )


def python_rate(cfg: DbusConfig, n: int) -> tuple[float, int]:
    """Lines/s of plain Python doing the processor's work on records 0..n-1 and producing the messages."""
    from dbuslib import kafka

    src = cfg.log_source(DS)
    schema = src.schema_name(DS)
    result = src.topics.name("result", DS, schema, TABLES[0])
    unknown = src.topics.name("unknown", DS)
    chunk = src.processor.message_records
    records = [(*coordinates(i, n), record(i)) for i in range(n)]  # partition, offset, value
    producer = kafka.producer(cfg.endpoints.kafka, linger_ms=5, batch_size=512 * 1024)
    try:
        start = time.perf_counter()
        sent = 0
        # per (host, table) of the open chunk: its first event ms and tuples
        open_: dict[tuple[str, str], tuple[int, list]] = {}

        def flush() -> int:
            for (host, table), (ms, tuples) in open_.items():
                ns = f"log_rsyslog.{DS}.{schema}.{table}.1.{host}.0"
                key = f"data_increment_data.{ns}.{ms}.wh_placeholder".encode()
                producer.send(result, key=key, value=_message(ns, table, tuples).encode())
            done = len(open_)
            open_.clear()
            return done

        held, last = 0, 0
        for partition, offset, value in records:
            if partition != last or held == chunk:
                sent += flush()
                held, last = 0, partition
            held += 1
            obj = json.loads(value.decode())
            message, host = obj["message"], obj["host"].replace(".", "_")
            ms = offset  # the event time: parsing it is the adapter's
            if "dbus-heartbeat" in message:
                continue
            m = ORDER.match(message)
            if m is not None:
                level, order, amount = m.group(2), int(m.group(3)), float(m.group(4))
                values: list[object] = [m.group(1), level, order, amount, m.group(5), host]
                open_.setdefault((host, "app_orders"), (ms, []))[1].append((partition, offset, values))
            else:
                m = ACCESS.match(message)
                if m is not None:
                    stamp = STAMP.sub(r"\1 \2", m.group(2))
                    values = [stamp, m.group(1), m.group(3), m.group(4), int(m.group(5)), int(m.group(6))]
                    values += [float(m.group(7)), m.group(8), host]
                    open_.setdefault((host, "http_access"), (ms, []))[1].append((partition, offset, values))
                else:
                    producer.send(unknown, key=host.encode(), value=value)
                    sent += 1
        sent += flush()
        producer.flush()
        elapsed = time.perf_counter() - start
    finally:
        producer.close()
    return n / elapsed, sent


# ---------------------------------------------------------------- the processor


def spark_rate(cfg: DbusConfig, n: int) -> tuple[float, int]:
    """Lines/s of the processor over records 0..n-1 (in memory, as the baseline's), written to Kafka, and the
    outputs written."""
    from pyspark.sql import functions as F

    from binlog import jvmjar
    from dbuslib import kafka
    from dbuslib.spark import _is_jvm, jars, kafka_sink, scheme, session
    from logprocessor.job import output_topics, process

    for jar in jars(cfg):  # the stack's jar, current with the sources (a no-op when it is)
        if _is_jvm(jar) and scheme(jar) == "file":
            jvmjar.build(Path(jar.removeprefix("file:")))
    stage = {k.replace(".", "__"): v for k, v in cfg.spark.stages.get("logprocessor", {}).items()}
    # realtime_tasks named (the default), or mypy would take **stage for it
    spark = session(cfg, "bench_logprocessor", realtime_tasks=0, spark__ui__enabled="false", **stage)
    try:
        rules = rule_set(cfg)
        outputs = output_topics(cfg, DS, rules)
        kafka.ensure_topics(cfg.endpoints.kafka, outputs)
        raw = frame(spark, n).cache()
        raw.agg(F.sum(F.length("value"))).first()
        out = process(raw, cfg, DS, rules).select("topic", "key", "value")

        def run() -> tuple[float, int]:
            before = sum(kafka.end_offsets(cfg.endpoints.kafka, outputs).values())
            start = time.perf_counter()
            kafka_sink(out.write, cfg.endpoints.kafka).save()
            elapsed = time.perf_counter() - start
            written = sum(kafka.end_offsets(cfg.endpoints.kafka, outputs).values()) - before
            return n / elapsed, written

        for _ in range(WARM_UPS):  # the JIT compiles the engine: a running stage's steady state
            run()
        runs = sorted(run() for _ in range(MEASURED))
        rates, counts = {r for r, _ in runs}, {w for _, w in runs}
        if len(counts) != 1:
            msg = f"log processor: the measured runs wrote {sorted(counts)} messages"
            raise RuntimeError(msg)
        return statistics.median(rates), counts.pop()
    finally:
        spark.stop()


def run(cfg: DbusConfig) -> list[str]:
    cfg = bench_config(cfg)
    spark, spark_out = spark_rate(cfg, LINES)
    python, python_out = python_rate(cfg, LINES)
    if spark_out != python_out:
        msg = f"log processor: Spark wrote {spark_out} messages, plain Python {python_out}, same lines"
        raise RuntimeError(msg)
    return [bench_line("log_lines_per_s", spark, "lines/s", python)]
