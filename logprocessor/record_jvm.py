"""The log processor's whole projection in the JVM: ``dbus.jvm.LogRecordUdf`` (binlog/jvm), one call per Kafka
record giving every output of the record (docs/logs.md, How rules run on Spark).

``batch_outputs(raw, src, ds, rules)`` is the stage's form: ``dbus.jvm.LogBatch`` over each partition of the
Kafka source's records, the same outputs with the rows of up to ``processor.message_records`` consecutive
records in one message per host and table (the original's one message per host and table per poll), each
message at most ``ums.max_message_bytes``; with ``message_records`` 1, ``record_outputs``'s.

``record_outputs(spark, src, ds, rules, ...)`` is a Column ``array<OUT_TYPE>``: every output of the record in
the order docs/logs.md gives, plus the ``metric`` column of logprocessor/metrics.py. The UDF holds the
source's settings and the rule set (the ``spec`` below, a JSON text given to its constructor), registered as
``dbus_log_record_<hash of the spec>``; inside it, the adapter is a port of ``logprocessor.adapters``
(``LogAdapter``), the rules ``logrules.Engine``, the tables' messages ``LogUms`` (shared with ``LogUmsUdf``).
tests/unit/test_record_jvm.py compares it with the Python references (tests/unit/log_oracle.py) on every log
type's corpus."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from dbuslib.config import LogSource
from dbuslib.deadletter import MAX_VALUE_BYTES, UNATTRIBUTED, too_big
from logprocessor.adapters import AdapterSettings
from logprocessor.rules import RuleSet
from logprocessor.rules_jvm import ruleset_json
from logprocessor.switch import Earlier, until_json

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

FUNCTION, CLASS = "dbus_log_record", "dbus.jvm.LogRecordUdf"
OUT_TYPE = "struct<topic:string,key:binary,value:string,metric:string>"
STAGE = "logprocessor"


def spec(
    src: LogSource,
    ds: str,
    rules: RuleSet,
    batch: bool = False,
    earlier: Sequence[Earlier] = (),
    base: Path | None = None,
) -> str:
    """The JSON ``LogRecordUdf``'s constructor reads: the adapter's settings, the rule set, per table its
    namespace up to the host, result topic and message frame, the aborted tables, the heartbeat frame, the
    unknown and dead-letter topics, and the dead letters' withheld rule; with ``earlier`` (after a reload,
    logprocessor/switch.py), each replaced rule set's own spec and the offsets until which it applies;
    ``base``: the configuration file's folder (a relative ``heartbeat.file``, ``AdapterSettings.of``)."""
    from logprocessor.logums import heartbeat_frame, message_frame, namespace_head

    settings = AdapterSettings.of(src, base)
    heads = set()
    tables = []
    for t in rules.tables:
        head, middle = message_frame(t.columns)
        heads.add(head)
        tables.append(
            {
                "table": t.table,
                "namespace": namespace_head(src.type, ds, rules.schema, t.table, t.version),
                "topic": src.topics.name("result", ds, rules.schema, t.table),
                "middle": middle,
                "types": "".join("d" if c.type == "double" else "s" for c in t.columns),
            }
        )
    if len(heads) > 1:
        msg = f"logprocessor: tables' messages start differently: {sorted(heads)}"
        raise ValueError(msg)
    aborted = [
        {
            "table": t.table,
            "namespace": namespace_head(src.type, ds, rules.schema, t.table, t.version),
            "topic": src.topics.name("result", ds, rules.schema, t.table),
        }
        for t in rules.aborted
    ]
    hb_head, hb_middle = heartbeat_frame()
    big_head, big_tail = too_big(0).split("0", 1)
    doc: dict[str, object] = {
        "adapter": {
            "type": settings.log_type,
            "heartbeat_type": settings.heartbeat_type,
            "max_record_bytes": settings.max_record_bytes,
            "json_host": settings.json_host,
            "timezone": settings.timezone,
            "heartbeat_files": settings.heartbeat_files,
        },
        "rules": ruleset_json(rules.tables, src.processor.multi_table, src.processor.regex_budget_ms),
        "head": heads.pop() if heads else message_frame(())[0],
        "tables": tables,
        "aborted": aborted,
        "heartbeat_head": hb_head,
        "heartbeat_middle": hb_middle,
        "unknown_topic": src.topics.name("unknown", ds),
        "dead_letter_topic": src.topics.name("dead_letter", ds),
        "stage": STAGE,
        "unattributed": UNATTRIBUTED if src.masking else None,
        "max_value_bytes": MAX_VALUE_BYTES,
        "too_big": [big_head, big_tail],
        "timezone": src.ums.timezone,
    }
    if batch:  # LogBatch's: the records sharing a message, a message's bytes at most
        doc |= {"message_records": src.processor.message_records, "message_bytes": src.ums.max_message_bytes}
    if earlier:
        doc["earlier"] = [
            {"until": until_json(e.until), "spec": spec(src, ds, e.rules, batch, base=base)} for e in earlier
        ]
    return json.dumps(doc, ensure_ascii=False, separators=(",", ":"))


def batch_outputs(
    raw: DataFrame,
    src: LogSource,
    ds: str,
    rules: RuleSet,
    earlier: Sequence[Earlier] = (),
    base: Path | None = None,
) -> DataFrame:
    """(topic, key, value, metric) of the Kafka source's records ``raw`` (value, key, topic, partition,
    offset, timestamp), by ``dbus.jvm.LogBatch`` (a JVM ``mapPartitions``: no Python per record); a record
    before an ``earlier`` set's switch offset shaped by that set."""
    from pyspark.sql import DataFrame

    from dbuslib.spark import jvm_class

    jvm = raw.sparkSession._jvm  # py4j's view of the JVM, untyped
    cls = jvm_class(jvm, "dbus.jvm.LogBatch", STAGE)
    jdf = cls.apply(raw._jdf, spec(src, ds, rules, batch=True, earlier=earlier, base=base))
    return DataFrame(jdf, raw.sparkSession)


def record_outputs(
    spark: SparkSession,
    src: LogSource,
    ds: str,
    rules: RuleSet,
    value: Column,
    key: Column,
    topic: Column,
    partition: Column,
    offset: Column,
    timestamp: Column,
    earlier: Sequence[Earlier] = (),
    base: Path | None = None,
) -> Column:
    """``array<OUT_TYPE>``: every output of the Kafka record (``timestamp`` a timestamp column; a record
    before an ``earlier`` set's switch offset shaped by that set). A jar without the class, or a rule set the
    engine cannot read, fails here, before the query starts."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import ArrayType, _parse_datatype_string

    from dbuslib.errors import StackError
    from dbuslib.spark import jvm_class

    text = spec(src, ds, rules, earlier=earlier, base=base)
    name = f"{FUNCTION}_{hashlib.sha256(text.encode()).hexdigest()[:16]}"
    jvm = spark._jvm  # py4j's view of the JVM, untyped
    if jvm is None:  # pyspark sets it as the session starts
        msg = f"{STAGE}: the Spark session has no JVM"
        raise StackError(msg)
    cls = jvm_class(jvm, CLASS, STAGE)
    returns = ArrayType(_parse_datatype_string(OUT_TYPE))
    jtype = jvm.org.apache.spark.sql.types.DataType.fromJson(returns.json())
    spark._jsparkSession.udf().register(name, cls(text), jtype)  # py4j
    return F.call_function(name, value, key, topic, partition, offset, F.unix_millis(timestamp))
