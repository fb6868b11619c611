"""The dispatcher's Spark query: ``<ds>`` -> ``<ds>.<schema>`` (and ``<ds>.dlq``), records unchanged.

Read, tag, route, write:

- ``read_raw``: the Kafka source on the first-level topic, from the earliest offset on a first start
  (afterwards the checkpoint decides), at most ``max_offsets`` records per micro-batch (back pressure).
- ``tag_records`` (in the JVM): Spark SQL functions over the binary value (magic, header length, header
  JSON parsed once) give each record its schema topic and whether the JVM can route it alone.
- ``route_records``: routable records get their topic; the rest (heartbeat-table records and malformed
  ones) go through a small Python UDF running ``dispatcher.routing.route``. A dead letter's value
  becomes the JSON of ``dead_letter_value``.
- ``BatchWriter`` (``foreachBatch``): caches the batch, routes it, creates the target topics it has
  not seen (the broker does not auto-create them) and writes with Spark's Kafka writer, key kept,
  value byte for byte.

Order: one Kafka partition of ``<ds>`` is one Spark partition, nothing is shuffled, and the target
partition is chosen from the key by Kafka's default partitioner, so a table's records keep their order
(chunks included). Delivery is at least once: a batch replayed after a crash is written again.
"""

from __future__ import annotations

import functools
import logging
from typing import TYPE_CHECKING, Any

from dbuslib.config import DbusConfig
from dispatcher.routing import TOPIC_NAME, Router, route

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession
    from pyspark.sql.streaming import StreamingQuery

log = logging.getLogger("dispatcher")

_MAGIC_V1 = "X'44425201'"  # b"DBR" + version 1
_ROUTES = "array<struct<topic:string,reason:string,error:string>>"


def query_name(ds: str) -> str:
    return f"dispatcher_{ds}"


# ---------------------------------------------------------------- read


def read_raw(spark: SparkSession, bootstrap: str, topic: str, max_offsets: int) -> DataFrame:
    """The first-level topic as a stream of (key, value, topic, partition, offset)."""
    return (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", str(max_offsets))
        .load()
        .select("key", "value", "topic", "partition", "offset")
    )


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
    header is parsed once per record (``json_tuple``). Not routable here: a bad prefix or header, a kind
    other than rows/ddl, no schema, a topic name Kafka refuses, and every record of the heartbeat table
    (those need their rows decoded).
    """
    from pyspark.sql import functions as F

    hlen = F.conv(F.hex(F.expr("substring(value, 5, 4)")), 16, 10).cast("long")
    whole = F.expr(f"substring(value, 1, 4) = {_MAGIC_V1}") & (F.length("value") >= F.lit(8) + hlen)
    header_bytes = F.expr("substring(value, 9, try_cast(conv(hex(substring(value, 5, 4)), 16, 10) as int))")
    header = F.when(whole, header_bytes.cast("string"))
    fields = F.json_tuple(header, "kind", "schema", "table").alias("_kind", "_schema", "_table")
    parsed = raw.select("*", fields)
    topic = _schema_topic(router, F.col("_schema"))
    heartbeat_table = ((F.col("_schema") == router.heartbeat_schema)
                       & (F.col("_table") == router.heartbeat_table))
    routable = (F.col("_kind").isin("rows", "ddl") & F.col("_schema").isNotNull() & ~heartbeat_table
                & topic.rlike(TOPIC_NAME.pattern))
    return parsed.select(*raw.columns, F.coalesce(routable, F.lit(False)).alias("_routable"),
                         topic.alias("_topic"))


def _python_routes(router: Router, value: bytes, key: bytes | None) -> list[tuple[str, Any, Any]]:
    """The UDF body (module level, picklable): every route of one record."""
    return [(r.topic, r.reason, r.error) for r in route(router, value, key)]


def dead_letter_value() -> Column:
    """The value of a dead letter (every member present, ``null`` when unknown), by example::

        {"reason": "RAW_BAD_RECORD", "error": "bad magic b'gar': not a DBus raw event", "topic": "demo",
         "partition": 0, "offset": 42, "key": "shop.orders", "value_base64": "Z2FyYmFnZQ=="}
    """
    from pyspark.sql import functions as F

    return F.to_json(F.struct(
        F.col("route.reason").alias("reason"), F.col("route.error").alias("error"), F.col("topic"),
        F.col("partition"), F.col("offset"), F.col("key").cast("string").alias("key"),
        F.base64("value").alias("value_base64"),
    ), {"ignoreNullFields": "false"})


def route_records(tagged: DataFrame, router: Router) -> DataFrame:
    """(key, value, topic) to write, from ``tag_records``: routed records unchanged, dead letters as JSON.

    The two branches are unioned rather than joined in one ``when``: Spark evaluates a Python UDF for
    every row of its input whatever the condition around it, so the UDF only sees the filtered rows.
    A table's records all take the same branch (heartbeat-table ones the Python one), so unioning keeps
    their order; a malformed record only goes to the dead-letter topic.
    """
    from pyspark.sql import functions as F

    fast = tagged.where("_routable").select("key", "value", F.col("_topic").alias("topic"))
    udf = F.udf(functools.partial(_python_routes, router), _ROUTES)
    slow = (tagged.where(~F.col("_routable"))
            .withColumn("route", F.explode(udf("value", "key")))
            .select("key",
                    F.when(F.col("route.reason").isNull(), F.col("value")).otherwise(
                        dead_letter_value().cast("binary")).alias("value"),
                    F.col("route.topic").alias("topic")))
    return fast.unionByName(slow)


# ---------------------------------------------------------------- write


class BatchWriter:
    """``foreachBatch`` function (runs on the driver): route the tagged batch, create missing topics, write.

    The tagged batch is cached so the Kafka source is read and each header parsed once although both
    branches of ``route_records`` and the topic listing use it; the routed batch is cached so each
    heartbeat is decoded once.
    """

    def __init__(self, router: Router, bootstrap: str, partitions: int, replication_factor: int) -> None:
        self.router = router
        self.bootstrap = bootstrap
        self.partitions = partitions
        self.replication_factor = replication_factor
        self.known: set[str] = set()

    def __call__(self, tagged: DataFrame, batch_id: int) -> None:
        tagged.persist()
        routed = route_records(tagged, self.router).persist()
        try:
            targets = {r.topic for r in routed.select("topic").distinct().collect()}
            self.ensure(targets - self.known)
            (routed.write.format("kafka")
             .option("kafka.bootstrap.servers", self.bootstrap)
             .option("kafka.acks", "all")
             .save())
            log.info("batch %d: wrote to %d topic(s)", batch_id, len(targets))
        finally:
            routed.unpersist()
            tagged.unpersist()

    def ensure(self, topics: set[str]) -> None:
        """Create ``topics`` where missing (auto-creation is off), with the source's partitions."""
        if not topics:
            return
        from dbuslib.config import KafkaEndpoint
        from dbuslib.kafka import ensure_topics

        created = ensure_topics(KafkaEndpoint(bootstrap_servers=self.bootstrap), sorted(topics),
                                partitions=self.partitions, replication_factor=self.replication_factor)
        if created:
            log.info("created topics %s", created)
        self.known |= topics


def write_routed(tagged: DataFrame, writer: BatchWriter, name: str, checkpoint: str,
                 available_now: bool = False, interval_ms: int = 0) -> StreamingQuery:
    from dbuslib.spark import with_trigger

    stream = (tagged.writeStream.queryName(name).option("checkpointLocation", checkpoint)
              .foreachBatch(writer))
    return with_trigger(stream, available_now, interval_ms).start()


# ---------------------------------------------------------------- wiring


def start(spark: SparkSession, cfg: DbusConfig, ds: str, *, checkpoint: str, max_offsets: int,
          available_now: bool = False, known_topics: set[str] | None = None) -> StreamingQuery:
    """Start the dispatcher query of source ``ds``; ``known_topics`` exist already (no need to check)."""
    src = cfg.source(ds)
    bootstrap = cfg.endpoints.kafka.bootstrap_servers
    router = Router.for_source(ds, src)
    tagged = tag_records(read_raw(spark, bootstrap, src.topics.name("raw", ds), max_offsets), router)
    writer = BatchWriter(router, bootstrap, src.topics.partitions, src.topics.replication_factor)
    writer.known |= known_topics or set()
    return write_routed(tagged, writer, query_name(ds), checkpoint, available_now,
                        src.dispatcher.trigger_interval_ms)
