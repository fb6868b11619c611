"""The dispatcher's Spark query: ``<ds>`` -> ``<ds>.<schema>`` (and ``<ds>.dlq``), records unchanged.

Read, tag, route, write:

- ``read_raw``: the Kafka source on the first-level topic, from the earliest offset on a first start
  (afterwards the checkpoint decides), at most ``max_offsets`` records per micro-batch (back pressure).
- ``tag_records`` (in the JVM): Spark SQL functions over the binary value (magic, header length, header
  JSON parsed once) give each record its schema topic and whether the JVM can route it alone.
- ``route_records``: one Python UDF call per *record* (not per row) gives every record its routes:
  a routable record passes only its topic name, which the UDF creates the first time its worker sees
  it (the broker does not auto-create topics, and the UDF runs before the record reaches the writer in
  the same task); heartbeat-table and malformed records pass their bytes and get
  ``dispatcher.routing.route``. A dead letter's value becomes the JSON of ``dead_letter_value`` (the
  contract of dbuslib.deadletter), its bytes withheld when masked columns could leak. The UDF never
  raises on a record: any error becomes a dead letter (``DISPATCH_UNEXPECTED``), and a target topic
  Kafka refuses to create (``InvalidTopicException``, a name colliding with another) one of
  ``DISPATCH_BAD_TOPIC``; only an unreachable Kafka fails the query.
- written by Spark's Kafka sink in the same streaming query, key kept, value byte for byte: one Spark
  job per micro-batch, nothing cached (measured on 500k rows: docs/dispatcher.md).

Order: one Kafka partition of ``<ds>`` is one Spark partition, nothing is shuffled, and the target
partition is chosen from the key by Kafka's default partitioner, so a table's records keep their order
(chunks included). Delivery is at least once: a batch replayed after a crash is written again.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from dbuslib import pygc
from dbuslib.config import DbusConfig, KafkaEndpoint
from dbuslib.deadletter import MAX_VALUE_BYTES, spark_value, too_big
from dbuslib.ship import config_document
from dispatcher.routing import BAD_TOPIC, TOPIC_NAME, UNEXPECTED, Route, Router, key_tables, route, unexpected

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession
    from pyspark.sql.streaming import StreamingQuery

log = logging.getLogger("dispatcher")

_MAGIC_V1 = "X'44425201'"  # b"DBR" + version 1
_ROUTES = "array<struct<topic:string,code:string,error:string,withheld:string,key:string>>"


def query_name(ds: str) -> str:
    return f"dispatcher_{ds}"


# ---------------------------------------------------------------- read


def read_raw(
    spark: SparkSession, kafka: KafkaEndpoint | str, topic: str, max_offsets: int | None
) -> DataFrame:
    """The first-level topic as a stream of (key, value, topic, partition, offset); ``max_offsets`` per
    micro-batch at most (None in real-time mode, whose batches are as long as a checkpoint interval)."""
    from dbuslib.spark import read_topic

    return read_topic(spark, kafka, topic, max_offsets).select("key", "value", "topic", "partition", "offset")


# ---------------------------------------------------------------- route


def _schema_topic(router: Router, schema: Column) -> Column:
    from pyspark.sql import functions as F

    parts = router.schema_topic_parts()
    pieces = [F.lit(parts[0])]
    for p in parts[1:]:
        pieces += [schema, F.lit(p)]
    return F.concat(*pieces)


def tag_records(raw: DataFrame, router: Router) -> DataFrame:
    """``raw`` plus ``_routable`` (the JVM can route the record alone) and ``_topic`` (its schema topic).

    ``value`` = b"DBR", version 1, u32 big-endian header length H, H bytes of JSON header, body. The
    header is parsed once per record (``json_tuple``). Not routable here: a null value, a bad prefix or
    header, a kind other than rows/ddl, no schema, a schema that needs escaping or gives a topic name
    Kafka refuses (Python escapes it), and every record of the heartbeat table (those need their rows
    decoded).
    """
    from pyspark.sql import functions as F

    hlen = F.conv(F.hex(F.expr("substring(value, 5, 4)")), 16, 10).cast("long")
    whole = F.expr(f"substring(value, 1, 4) = {_MAGIC_V1}") & (F.length("value") >= F.lit(8) + hlen)
    header_bytes = F.expr("substring(value, 9, try_cast(conv(hex(substring(value, 5, 4)), 16, 10) as int))")
    header = F.when(whole, header_bytes.cast("string"))
    fields = F.json_tuple(header, "kind", "schema", "table").alias("_kind", "_schema", "_table")
    parsed = raw.select("*", fields)
    topic = _schema_topic(router, F.col("_schema"))
    heartbeat_table = (F.col("_schema") == router.heartbeat_schema) & (
        F.col("_table") == router.heartbeat_table
    )
    routable = (
        F.col("_kind").isin("rows", "ddl")
        & F.col("_schema").isNotNull()
        & ~heartbeat_table
        & topic.rlike(TOPIC_NAME.pattern)
        & ~topic.isin(".", "..")
    )
    return parsed.select(
        *raw.columns, F.coalesce(routable, F.lit(False)).alias("_routable"), topic.alias("_topic")
    )


def _python_routes(
    router: Router,
    ensure_topic: Callable[[str], None],
    topic: str | None,
    value: bytes | None,
    key: bytes | None,
) -> list[tuple[str, Any, Any, Any, Any]]:
    """The UDF body (module level, picklable): every route of one record as (topic, code, error, withheld,
    key text); each target topic exists when it returns (``ensure_topic``: ``dbuslib.kafka.ensure_topic_once``
    with the source's topic settings). ``topic`` is set when the JVM routed the record, else ``value`` is
    (None for a null value). Never raises on a record; only an unreachable Kafka raises."""
    pygc.settle(task=_task_id())  # a worker's first tasks, once each (dbuslib/pygc.py)
    try:
        routes = (Route(topic),) if topic is not None else route(router, value, key)
    except Exception as e:
        routes = (router.dead(UNEXPECTED, unexpected(router, e), key_tables(key), decoded=False),)
    out = []
    for r in routes:
        r = _ensure(router, ensure_topic, r, key)
        withheld = r.withheld or (
            too_big(len(value)) if r.dead and value is not None and len(value) > MAX_VALUE_BYTES else None
        )
        out.append((r.topic, r.code, r.error, withheld, _key_text(key) if r.dead else None))
    return out


def _key_text(key: Any) -> str | None:
    """A dead letter's ``key``: the record key as text, invalid UTF-8 replaced (as DeadLetter.to_json)."""
    if isinstance(key, (bytes, bytearray, memoryview)):
        return bytes(key).decode("utf-8", "replace")
    return key if isinstance(key, str) else None


def _ensure(router: Router, ensure_topic: Callable[[str], None], r: Route, key: bytes | None) -> Route:
    """``r`` once its topic exists; a dead letter when Kafka refuses to create it for good (an invalid
    name, a collision with a topic that differs only in '.' and '_'). A retriable failure raises."""
    try:
        ensure_topic(r.topic)
        return r
    except Exception as e:
        cause = e.__cause__ if e.__cause__ is not None else e
        if r.dead or getattr(cause, "retriable", True) or not hasattr(cause, "errno"):
            raise
        dead = router.dead(BAD_TOPIC, f"Kafka refuses to create topic {r.topic!r}: {cause}", key_tables(key))
        ensure_topic(dead.topic)
        return dead


def _task_id() -> int | None:
    """The Spark task this Python worker runs now (None outside a task: a unit test)."""
    from pyspark import TaskContext

    ctx = TaskContext.get()
    return None if ctx is None else ctx.taskAttemptId()


def dead_letter_value() -> Column:
    """The value of a dead letter, the JSON of dbuslib.deadletter.DeadLetter (every member present, ``null``
    when unknown; ``value_base64`` null and ``withheld`` set when masked columns could leak), by example::

        {"code": "RAW_BAD_RECORD", "error": "bad magic b'gar': not a DBus raw event", "stage": "dispatcher",
         "topic": "demo", "partition": 0, "offset": 42, "key": "shop.orders", "value_base64": "Z2FyYmFnZQ==",
         "withheld": null}
    """
    from pyspark.sql import functions as F

    route = F.col("route")
    return spark_value("dispatcher", route.code, route.error, route.key, route.withheld)


def route_records(tagged: DataFrame, router: Router, ensure_topic: Callable[[str], None]) -> DataFrame:
    """(key, value, topic) to write, from ``tag_records``: routed records unchanged, dead letters as JSON.

    One projection, one UDF call per record: a routable record's UDF input is its topic name only (so
    the topic gets created), the others' their bytes. Spark evaluates a Python UDF for every row of its
    input whatever the condition around it, so the conditions are on its arguments, not around it.
    """
    from pyspark.sql import functions as F

    udf = F.udf(functools.partial(_python_routes, router, ensure_topic), _ROUTES)
    routable = F.col("_routable")
    routes = udf(F.when(routable, F.col("_topic")), F.when(~routable, F.col("value")), F.col("key"))
    return routed(tagged, routes)


def routed(tagged: DataFrame, routes: Column) -> DataFrame:
    """(key, value, topic) per route of each record: its value unchanged, or its dead letter's JSON."""
    from pyspark.sql import functions as F

    return tagged.withColumn("route", F.explode(routes)).select(
        "key",
        F.when(F.col("route.code").isNull(), F.col("value"))
        .otherwise(dead_letter_value().cast("binary"))
        .alias("value"),
        F.col("route.topic").alias("topic"),
    )


# ---------------------------------------------------------------- wiring


def start(
    spark: SparkSession,
    cfg: DbusConfig,
    ds: str,
    *,
    checkpoint: str,
    max_offsets: int,
    available_now: bool = False,
) -> StreamingQuery:
    """Start the dispatcher query of source ``ds``."""
    from dbuslib.spark import start_query

    src = cfg.source(ds)
    settings = src.dispatcher
    jvm_path = settings.trigger == "realtime"  # with available_now too: the same record path, drained
    realtime = jvm_path and not available_now
    router, ensure_topic = routing(cfg, ds)
    raw = read_raw(spark, cfg.endpoints.kafka, src.topics.name("raw", ds), None if realtime else max_offsets)
    tagged = tag_records(raw, router)
    if jvm_path:
        routed = route_records_jvm(tagged, register_jvm_routes(spark, cfg, ds))
    else:
        routed = route_records(tagged, router, ensure_topic)
    return start_query(routed, cfg.endpoints.kafka, query_name(ds), checkpoint, settings, available_now)


def routing(cfg: DbusConfig, ds: str) -> tuple[Router, Callable[[str], None]]:
    """The source's Router and the function that makes sure a target topic exists (with the source's
    topic settings): what every route decision needs, in the query's UDF or in the sidecar."""
    from dbuslib.kafka import ensure_topic_once

    src = cfg.source(ds)
    ensure_topic = functools.partial(
        ensure_topic_once,
        cfg.endpoints.kafka,
        partitions=src.topics.partitions,
        replication_factor=src.topics.replication_factor,
    )
    return Router.for_source(ds, src), ensure_topic


# ---------------------------------------------------------------- real-time mode

JVM_ROUTES, JVM_ROUTES_CLASS = "dbus_dispatch", "dbus.jvm.DispatchUdf"


def register_jvm_routes(spark: SparkSession, cfg: DbusConfig, ds: str) -> str:
    """``dbus_dispatch`` (dispatcher/jvm ``DispatchUdf``, with ``dispatcher.sidecar`` for what it does not
    route alone): the route UDF of real-time mode, where Spark runs no Python operator. Returns its name."""
    from pyspark.sql.types import _parse_datatype_string

    from dbuslib.sidecar import register_udf

    register_udf(
        spark,
        JVM_ROUTES,
        JVM_ROUTES_CLASS,
        _parse_datatype_string(_ROUTES),
        "dispatcher",
        "dispatcher.sidecar",
        config_document(cfg),
        ds,
    )
    return JVM_ROUTES


def route_records_jvm(tagged: DataFrame, function: str) -> DataFrame:
    """``route_records`` with the JVM's routes: the same columns out, no Python in the query."""
    from pyspark.sql import functions as F

    routes = F.call_function(
        function, F.col("_routable"), F.col("_topic"), F.col("value"), F.col("key"), F.col("partition")
    )
    return routed(tagged, routes)
