"""The log processor's Spark query: a log source's raw topic -> UMS per table, the unknown bucket and dead
letters, in one projection with no Python per line (docs/logs.md, The log processor).

``process`` runs it in the JVM (``dbus.jvm.LogBatch`` over a partition's records, or one
``dbus.jvm.LogRecordUdf`` call per record; logprocessor/record_jvm.py). The Python references (the adapters,
``operators``, ``logums``) are its oracle, joined by tests/unit/log_oracle.py and compared byte for byte.
Per raw record, in order:

- ``adapt``: the shipper record read by its type's adapter (``dbus.jvm.LogAdapter``; the reference
  ``logprocessor.adapters``): its lines (one, or one per tuple for log_ums), host, event time, heartbeat
  flag, or a record error;
- ``rules``: every line through the published rule set (the JVM's rule engine, logprocessor/rules_jvm.py):
  per table the rows it took, the line errors naming the rule, and whether nothing took the line;
- ``outputs``: an array of ``(topic, key, value)``:
  - per table that took rows of the record: one UMS message of those rows (``ums_id_`` from partition,
    offset and the row's index among the table's rows of the record), to the table's result topic;
  - per line no table took: the line, unchanged, to ``topics.unknown`` keyed by the host;
  - per line error, record error or ``ums_id_`` out of range: a dead letter (dbuslib.deadletter's JSON,
    ``stage`` "logprocessor") to ``topics.dead_letter``;
  - per heartbeat record: a heartbeat UMS to every ``ok`` table's result topic (and ``abort`` tables').
- written by the Kafka sink, ``topic`` per record.

A record is read once; nothing is shuffled, so one partition's records keep their order in each output
topic partition the key picks. Delivery is at least once: a replayed batch writes the same messages again
(same ``ums_id_`` and ``ums_uid_``).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

from dbuslib.config import DbusConfig, KafkaEndpoint
from logprocessor.rules import RuleSet
from logprocessor.switch import Earlier

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming import StreamingQuery

log = logging.getLogger("logprocessor")

STAGE = "logprocessor"


def query_name(ds: str) -> str:
    return f"logprocessor_{ds}"


# ---------------------------------------------------------------- read


def read_raw(
    spark: SparkSession, kafka: KafkaEndpoint | str, topic: str, max_offsets: int | None
) -> DataFrame:
    """The raw topic as (key, value, topic, partition, offset, timestamp) (``dbuslib.spark.read_topic``)."""
    from dbuslib.spark import read_topic

    return read_topic(spark, kafka, topic, max_offsets).select(
        "key", "value", "topic", "partition", "offset", "timestamp"
    )


# ---------------------------------------------------------------- process


def process(
    raw: DataFrame,
    cfg: DbusConfig,
    ds: str,
    rules: RuleSet,
    per_record: bool = False,
    earlier: Sequence[Earlier] = (),
) -> DataFrame:
    """(topic, key, value, metric) for the records of ``raw`` (the Kafka source's columns), with the
    ``metric`` of logprocessor/metrics.py; the Kafka sink writes topic, key and value (``metric`` dropped
    before it). ``dbus.jvm.LogBatch`` over each partition (logprocessor/record_jvm.py ``batch_outputs``):
    the rows of up to ``processor.message_records`` consecutive records in one message per host and table.
    ``per_record`` (real-time mode, where a partition's records never end: a message must not wait for the
    next ones): one JVM call per record (``dbus.jvm.LogRecordUdf``), each record its own messages (key as
    bytes). ``earlier``: the rule sets a reload replaced, each shaping the
    records before its switch offsets (logprocessor/switch.py)."""
    from pyspark.sql import functions as F

    from logprocessor.record_jvm import batch_outputs, record_outputs

    src = cfg.log_source(ds)
    base = cfg.path.parent  # a relative heartbeat.file's folder
    if not per_record:
        return batch_outputs(raw, src, ds, rules, earlier, base)
    outputs = record_outputs(
        raw.sparkSession,
        src,
        ds,
        rules,
        F.col("value"),
        F.col("key"),
        F.col("topic"),
        F.col("partition"),
        F.col("offset"),
        F.col("timestamp"),
        earlier,
        base,
    )
    return raw.select(F.explode(outputs).alias("o")).select("o.topic", "o.key", "o.value", "o.metric")


# ---------------------------------------------------------------- wiring


def output_topics(cfg: DbusConfig, ds: str, rules: RuleSet) -> list[str]:
    """Every topic the query may write to, created before it starts (the broker does not auto-create)."""
    src = cfg.log_source(ds)
    tables = [*rules.tables, *rules.aborted]
    results = [src.topics.name("result", ds, rules.schema, t.table) for t in tables]
    fixed = [src.topics.name(k, ds) for k in ("unknown", "dead_letter")]
    return list(dict.fromkeys(results + fixed))


def start(
    spark: SparkSession,
    cfg: DbusConfig,
    ds: str,
    rules: RuleSet,
    checkpoint: str,
    max_offsets: int | None = None,
    available_now: bool = False,
    earlier: Sequence[Earlier] = (),
) -> StreamingQuery:
    """The query ``logprocessor_<ds>`` over ``rules``, resuming from ``checkpoint``; the records before an
    ``earlier`` set's switch offsets shaped by that set (logprocessor/switch.py)."""
    from dbuslib.spark import start_query
    from logprocessor.masking import log_masks, mask_outputs

    src = cfg.log_source(ds)
    settings = src.processor
    realtime = settings.trigger == "realtime" and not available_now
    topic = src.topics.name("raw", ds)
    raw = read_raw(spark, cfg.endpoints.kafka, topic, None if realtime else max_offsets)
    out = observed(process(raw, cfg, ds, rules, per_record=realtime, earlier=earlier), ds)
    every = (*rules.tables, *(t for e in earlier for t in e.rules.tables))  # a replaced version masked too
    out = mask_outputs(out, log_masks(src.masking, src.type, ds, rules.schema, every))
    return start_query(out, cfg.endpoints.kafka, query_name(ds), checkpoint, settings, available_now)


def observed(out: DataFrame, ds: str) -> DataFrame:
    """``out`` without its ``metric`` column (logprocessor/metrics.py), observed first: each batch's counts
    per host and table in its progress (``logprocessor.counts_jvm``; in real-time mode once per batch, every
    ``realtime_checkpoint_s``), made into points on the driver (``dbuslib.stagemetrics``). Without a
    ``metric`` column, ``out`` as it is (logged)."""
    from logprocessor.counts_jvm import observe
    from logprocessor.metrics import COLUMN

    if COLUMN not in out.columns:
        log.info("%s: no %s column in the processor's output: per-table counts are not written", ds, COLUMN)
        return out
    return observe(out).drop(COLUMN)
