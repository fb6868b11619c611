"""The log processor's Spark query: a log source's raw topic -> UMS per table, the unknown bucket and dead
letters, in one projection with no Python per line (docs/logs.md, The log processor).

``process`` runs it as one JVM call per record (``dbus.jvm.LogRecordUdf``, logprocessor/record_jvm.py);
``process_sql`` is the same in Spark SQL (with the rules' and the messages' UDFs), the reference the JVM's
outputs are compared with, byte for byte. Per raw record, in order:

- ``adapt``: the shipper record read by its type's adapter (``logprocessor.adapters_sql``): its lines (one,
  or one per tuple for log_ums), host, event time, heartbeat flag, or a record error;
- ``rules``: every line through the published rule set (``rules_results``: the JVM's rule engine, the value
  ``logprocessor.compile.tables_sql`` gives): per table the rows it took, the line errors naming the rule, and
  whether nothing took the line;
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

from dbuslib.config import DbusConfig, KafkaEndpoint, LogSource
from dbuslib.deadletter import MAX_VALUE_BYTES, UNATTRIBUTED, spark_too_big, spark_value
from logprocessor.adapters import AdapterSettings
from logprocessor.grammar import TableRules
from logprocessor.operators import LINE_ERROR  # a rule broke on the line (group, rule and operator named)
from logprocessor.rules import RuleSet
from logprocessor.switch import Earlier

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession
    from pyspark.sql.streaming import StreamingQuery

log = logging.getLogger("logprocessor")

STAGE = "logprocessor"
OUT_TYPE = "struct<topic:string,key:string,value:string>"


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
    next ones): one JVM call per record (``dbus.jvm.LogRecordUdf``), each record its own messages, what
    ``process_sql`` gives (key as bytes). ``earlier``: the rule sets a reload replaced, each shaping the
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


def process_sql(raw: DataFrame, cfg: DbusConfig, ds: str, rules: RuleSet) -> DataFrame:
    """(topic, key, value) to write, for the records of ``raw``: the projection in Spark SQL (the adapter
    ``adapters_sql``, the rules and messages in their own UDFs, unknown lines, dead letters and heartbeats in
    higher-order functions), the reference ``process`` is compared with (tests/unit/test_record_jvm.py)."""
    from pyspark.sql import functions as F

    from logprocessor.adapters_sql import with_adapter

    src = cfg.log_source(ds)
    adapted = with_adapter(raw, AdapterSettings.of(src, cfg.path.parent))
    lines = F.col("adapted.lines")
    results = rules_results(raw.sparkSession, lines, rules, src.processor.multi_table)
    staged = adapted.withColumn("_results", results)
    if rules.tables:
        staged = _with_messages(staged, src, ds, rules, "_messages")
    outputs = F.concat(
        *(_table_messages(src, ds, rules, t, k) for k, t in enumerate(rules.tables)),
        _unknown(src, ds, lines),
        _line_errors(src, ds),
        _record_error(src, ds),
        _heartbeats(src, ds, rules),
    )
    return staged.select(F.explode(outputs).alias("o")).select("o.topic", "o.key", "o.value")


def rules_results(spark: SparkSession, lines: Column, rules: RuleSet, multi_table: bool) -> Column:
    """Every line of the array ``lines`` through the published rules: ``array<compile.LINE_TYPE>``, the value
    of ``transform(lines, line -> compile.tables_sql(...))``, computed by the JVM UDF ``dbus_log_rules``
    (logprocessor.rules_jvm): Spark interprets the higher-order functions of the SQL form, several times
    slower (docs/logs.md, How rules run on Spark)."""
    from logprocessor.rules_jvm import lines_results

    return lines_results(spark, lines, rules.tables, multi_table)


def _table_messages(src: LogSource, ds: str, rules: RuleSet, table: TableRules, k: int) -> Column:
    """The UMS message of the rows ``table`` (``rules.tables[k]``) took from the record's lines, the ``k``-th
    of the column ``_messages`` (``_with_messages``; null: none, an empty array)."""
    from pyspark.sql import functions as F

    from logprocessor.logums_sql import data_key_col, namespace_col

    ns = namespace_col(src.type, ds, rules.schema, table.table, table.version, F.col("adapted.host"))
    message = F.col("_messages")[k]
    out = F.struct(
        F.lit(src.topics.name("result", ds, rules.schema, table.table)).alias("topic"),
        data_key_col(ns, F.col("adapted.event_ms")).alias("key"),
        message.alias("value"),
    )
    return F.when(message.isNotNull(), F.array(out)).otherwise(F.array().cast(f"array<{OUT_TYPE}>"))


def _with_messages(staged: DataFrame, src: LogSource, ds: str, rules: RuleSet, name: str) -> DataFrame:
    """``staged`` with the column ``name``: per table of ``rules.tables``, the UMS message of the rows it took
    from the record's lines (``ums_id_`` from partition, offset and the row's index among the table's rows of
    the record; a row out of range left out), or null when none: ``logums.message_json``'s bytes, built in
    the JVM for every table at once (logprocessor.logums_jvm; the Spark SQL form,
    ``logums_sql.tuple_json_col`` in higher-order functions, is interpreted and tens of times slower). A
    column of its own, so each message is built once."""
    from pyspark.sql import functions as F

    from logprocessor.logums_jvm import table_messages
    from logprocessor.logums_sql import namespace_col, ums_ts_col

    host = F.col("adapted.host")
    namespaces = [namespace_col(src.type, ds, rules.schema, t.table, t.version, host) for t in rules.tables]
    messages = table_messages(
        staged.sparkSession,
        [(t.table, t.columns) for t in rules.tables],
        F.col("partition"),
        F.col("offset"),
        ums_ts_col(F.col("adapted.event_ms"), src.ums.timezone),
        namespaces,
        F.col("_results"),
    )
    return staged.withColumn(name, messages)


def _unknown(src: LogSource, ds: str, lines: Column) -> Column:
    """Each line no table took (and that broke no rule), unchanged, keyed by the host."""
    from pyspark.sql import functions as F

    topic = F.lit(src.topics.name("unknown", ds))
    pairs = F.arrays_zip(lines.alias("line"), F.col("_results").alias("r"))
    missed = F.filter(pairs, lambda p: p["r"]["unmatched"] & (F.size(p["r"]["errors"]) == 0))
    return F.transform(
        missed,
        lambda p: F.struct(
            topic.alias("topic"), F.col("adapted.host").alias("key"), p["line"].alias("value")
        ),
    )


def _dead_letter(src: LogSource, ds: str, code: Column, error: Column) -> Column:
    """One dead letter (dbuslib.deadletter's JSON) of the current record."""
    from pyspark.sql import functions as F

    size = F.octet_length("value")
    withheld = (
        F.lit(UNATTRIBUTED)
        if src.masking
        else F.when(size > MAX_VALUE_BYTES, spark_too_big(size)).otherwise(F.lit(None).cast("string"))
    )
    value = spark_value(STAGE, code, error, F.col("key").cast("string"), withheld)
    return F.struct(
        F.lit(src.topics.name("dead_letter", ds)).alias("topic"),
        F.col("key").cast("string").alias("key"),
        value.alias("value"),
    )


def _line_errors(src: LogSource, ds: str) -> Column:
    """A dead letter per rule a line broke (``LOG_LINE_RULE_ERROR``, the message naming table, group, rule,
    operator), and per row whose ``ums_id_`` would be out of range (``LOG_LINE_UMS_ID_RANGE``)."""
    from pyspark.sql import functions as F

    from logprocessor.logums import UMS_ID_RANGE
    from logprocessor.logums_sql import ums_id_problem_col

    errors = F.flatten(F.transform(F.col("_results"), lambda r: r["errors"]))
    rule_letters = F.transform(
        errors,
        lambda e: _dead_letter(
            src, ds, F.lit(LINE_ERROR), F.concat(F.lit("table "), e["table"], F.lit(": "), e["error"])
        ),
    )
    rows = F.flatten(F.transform(F.col("_results"), lambda r: r["rows"]))
    out_of_range = F.filter(
        F.transform(rows, lambda x: ums_id_problem_col(F.col("partition"), F.col("offset"), x["index"])),
        lambda p: p.isNotNull(),
    )
    range_letters = F.transform(out_of_range, lambda p: _dead_letter(src, ds, F.lit(UMS_ID_RANGE), p))
    return F.concat(rule_letters, range_letters)


def _record_error(src: LogSource, ds: str) -> Column:
    """The record's dead letter when its adapter refused it (not JSON, not UTF-8, too large, ...)."""
    from pyspark.sql import functions as F

    err = F.col("adapted.error")
    return F.when(err.isNotNull(), F.array(_dead_letter(src, ds, err["code"], err["message"]))).otherwise(
        F.array().cast(f"array<{OUT_TYPE}>")
    )


def _heartbeats(src: LogSource, ds: str, rules: RuleSet) -> Column:
    """A heartbeat record: a heartbeat UMS (``data_increment_heartbeat``) to every table's result topic,
    ``ok`` tables with status ok, ``abort`` ones with status abort (spec §6.2)."""
    from pyspark.sql import functions as F

    from logprocessor.logums_sql import heartbeat_json_col, heartbeat_key_col, namespace_col

    beats = []
    for status, tables in (("ok", rules.tables), ("abort", rules.aborted)):
        for t in tables:
            ns = namespace_col(src.type, ds, rules.schema, t.table, t.version, F.col("adapted.host"))
            at = F.col("adapted.heartbeat_ms")
            beats.append(
                F.struct(
                    F.lit(src.topics.name("result", ds, rules.schema, t.table)).alias("topic"),
                    heartbeat_key_col(ns, at, F.col("adapted.event_ms"), status).alias("key"),
                    heartbeat_json_col(ns, F.col("partition"), F.col("offset"), at, src.ums.timezone).alias(
                        "value"
                    ),
                )
            )
    if not beats:
        return F.array().cast(f"array<{OUT_TYPE}>")
    return F.when(F.col("adapted.heartbeat") == F.lit(True), F.array(*beats)).otherwise(
        F.array().cast(f"array<{OUT_TYPE}>")
    )


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
