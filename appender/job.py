"""The appender's Spark Structured Streaming query: per-schema topics -> UMS result topics (+ dead letters).

Read (Kafka source, the source's ``<ds>.<schema>`` topics), the JVM decoder's column (``rendered``), one
named transform (``append_ums``: each Spark partition is one Kafka partition, processed in offset order
by ``appender.process``), write (Kafka sink, the ``topic`` column picks the result or dead-letter topic).
The executor function is module level and picklable; what it shares across tasks of one Python worker
(configuration, meta store, encoder, heartbeat bookkeeping) is appender/worker.py.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from dbuslib import pygc
from dbuslib.config import DbusConfig
from dbuslib.ship import config_document

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming import StreamingQuery

    from dbuslib.topics import Subscription

log = logging.getLogger("dbus.appender")
JVM_FUNCTION, JVM_CLASS = "dbus_rows", "dbus.jvm.RowsUdf"
# the same lines, a NUL and their Avro (appender/avrorows.py): for sources with ``ums.format: avro``
JVM_AVRO_FUNCTION, JVM_AVRO_CLASS = "dbus_rows_avro", "dbus.jvm.RowsAvroUdf"
PATTERN_METADATA_MAX_AGE_MS = "5000"  # how old a Kafka client's topic list may be when following a pattern
OUT_SCHEMA = "topic string, key binary, value binary, headers array<struct<key: string, value: binary>>"


def query_name(ds: str) -> str:
    return f"appender_{ds}"


def read_schema_topics(
    spark: SparkSession, cfg: DbusConfig, subscription: Subscription, max_offsets: int | None
) -> DataFrame:
    """The schema topics as (topic, partition, offset, key, value); ``max_offsets`` per micro-batch at most
    (None in real-time mode). With a pattern (glob schemas, dbuslib.topics.schema_topic_pattern) Spark
    asks Kafka for the matching topics at each batch, and reads a topic it finds later from its first
    record (the offset of a partition the checkpoint does not know is its earliest)."""
    from dbuslib.spark import kafka_source, without_stop_markers

    reader = kafka_source(spark.readStream, cfg.endpoints.kafka)
    reader = reader.option(*subscription.option()).option("startingOffsets", "earliest")
    if subscription.pattern:  # topics listed afresh at each batch; a consumer's cached list too (not 5 min)
        reader = reader.option("kafka.metadata.max.age.ms", PATTERN_METADATA_MAX_AGE_MS)
    if max_offsets is not None:
        reader = reader.option("maxOffsetsPerTrigger", str(max_offsets))
    return without_stop_markers(reader.load()).select("topic", "partition", "offset", "key", "value")


def register_jvm_decoder(spark: SparkSession) -> bool:
    """Register ``dbus_rows`` (binlog/jvm, ``dbus.jvm.RowsUdf``): raw rows record -> its rows as UMS
    JSON text, decoded in the JVM. False (and a warning) when its jar is not on the classpath: the
    appender then decodes every record in Python, correct but several times slower."""
    from pyspark.sql.types import BinaryType

    try:
        spark.udf.registerJavaFunction(JVM_FUNCTION, JVM_CLASS, BinaryType())
        spark.udf.registerJavaFunction(JVM_AVRO_FUNCTION, JVM_AVRO_CLASS, BinaryType())
    except Exception as e:  # the class is missing: py4j/analysis errors differ by version
        log.warning(
            "appender: JVM decoder %s unavailable (%s); rows are decoded in Python",
            JVM_CLASS,
            str(e).splitlines()[0][:200],
        )
        return False
    return True


def with_rendered_rows(df: DataFrame, jvm: bool, avro: bool = False) -> DataFrame:
    """Adds ``rendered``: the JVM's text of the record's rows (with ``avro``, followed by a NUL and their
    Avro), or null where Python must decode."""
    from pyspark.sql import functions as F

    function = JVM_AVRO_FUNCTION if avro else JVM_FUNCTION
    rendered = F.expr(f"{function}(value)") if jvm else F.lit(None).cast("binary")
    return df.withColumn("rendered", rendered)


def append_ums(df: DataFrame, document: str, ds: str) -> DataFrame:
    """Raw records -> UMS (and dead-letter) records, partition by partition."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        return process_batches(batches, document, ds)

    return df.mapInArrow(run, OUT_SCHEMA)


# The values an output Arrow batch holds at most before it is sent on: a binary array's offsets are 32-bit,
# so pyarrow makes a ChunkedArray of more than 2 GiB and RecordBatch.from_pydict refuses it (seen: a
# debezium-json micro-batch of the e2e bench, 6 KB a row with its Connect schema); and the JVM allocates
# each batch whole off-heap (256 MiB batches failed with Arrow's OutOfMemoryException in local[2]).
OUT_BATCH_BYTES = 32 << 20


def process_batches(batches: Iterator[pa.RecordBatch], document: str, ds: str) -> Iterator[pa.RecordBatch]:
    """Executor side: one PartitionProcessor for this task's partition, records in offset order."""
    import pyarrow as pa

    from appender.convert import chunked
    from appender.process import InRecord
    from appender.worker import build_processor, worker_state

    processor = None
    state = worker_state(document, ds)
    max_bytes = state.cfg.endpoints.kafka.max_message_bytes  # larger UMS records go as chunks (ums.chunks)
    for batch in batches:
        if processor is None:
            processor = build_processor(document, ds)
        out: dict[str, list] = {"topic": [], "key": [], "value": [], "headers": []}
        size = 0  # bytes of the values in ``out``: an Arrow binary array holds at most 2 GiB
        cols = batch.to_pydict()
        rendered = cols.get("rendered") or [None] * batch.num_rows
        for t, p, o, k, v, r in zip(
            cols["topic"],
            cols["partition"],
            cols["offset"],
            cols["key"],
            cols["value"],
            rendered,
            strict=True,
        ):
            for rec in chunked(processor.process(InRecord(t, p, o, k, v), r), max_bytes):
                state.ensure_topic(rec.topic)
                out["topic"].append(rec.topic)
                out["key"].append(rec.key)
                out["value"].append(rec.value)
                out["headers"].append([{"key": hk, "value": hv} for hk, hv in rec.headers])
                size += len(rec.value or b"")
                if size >= OUT_BATCH_BYTES:  # per-row records of a batch of big events: many GB
                    yield pa.RecordBatch.from_pydict(out, schema=_arrow_schema())
                    out, size = {"topic": [], "key": [], "value": [], "headers": []}, 0
        yield pa.RecordBatch.from_pydict(out, schema=_arrow_schema())
    if processor is not None:
        state.report_heartbeats(processor)
    pygc.settle()  # a worker's first tasks still make long-lived objects (dbuslib/pygc.py)


def _arrow_schema():
    import pyarrow as pa

    header = pa.struct([("key", pa.string()), ("value", pa.binary())])
    return pa.schema(
        [("topic", pa.string()), ("key", pa.binary()), ("value", pa.binary()), ("headers", pa.list_(header))]
    )


def start(
    spark: SparkSession,
    cfg: DbusConfig,
    ds: str,
    topics: Subscription | list[str],
    checkpoint: str,
    available_now: bool = False,
) -> StreamingQuery:
    """Start the query; ``topics`` are the per-schema topics to read (dbuslib.topics.appender_subscription,
    or a list of names). ``available_now`` processes what is there and stops (tests, catch-up runs)."""
    from dbuslib.spark import start_query
    from dbuslib.topics import Subscription

    subscription = topics if isinstance(topics, Subscription) else Subscription(tuple(topics))

    settings = cfg.source(ds).appender
    jvm_path = settings.trigger == "realtime"  # with available_now too: the same record path, drained
    realtime = jvm_path and not available_now
    raw = read_schema_topics(spark, cfg, subscription, None if realtime else settings.max_offsets_per_trigger)
    if jvm_path:
        out = append_ums_jvm(raw, register_jvm_append(spark, cfg, ds))
    else:
        jvm = settings.jvm_decoder and register_jvm_decoder(spark)
        avro = cfg.source(ds).ums.format == "avro"
        out = append_ums(with_rendered_rows(raw, jvm, avro), config_document(cfg), ds)
    per_row = cfg.source(ds).output.per_row  # many small records: batched
    return start_query(out, cfg.endpoints.kafka, query_name(ds), checkpoint, settings, available_now, per_row)


# ---------------------------------------------------------------- real-time mode

JVM_APPEND, JVM_APPEND_CLASS = "dbus_append", "dbus.jvm.AppendUdf"


def register_jvm_append(spark: SparkSession, cfg: DbusConfig, ds: str) -> str:
    """``dbus_append`` (appender/jvm ``AppendUdf``, with ``appender.sidecar`` for what it does not write
    alone): the record path of real-time mode, where Spark runs no Python operator. Returns its name."""
    from pyspark.sql.types import _parse_datatype_string

    from appender.rules import node_path
    from dbuslib.sidecar import register_udf

    zk = cfg.endpoints.zookeeper
    register_udf(
        spark,
        JVM_APPEND,
        JVM_APPEND_CLASS,
        _parse_datatype_string(f"array<struct<{OUT_SCHEMA}>>"),
        "appender",
        "appender.sidecar",
        config_document(cfg),
        ds,
        lambda udf: direct(
            spark,
            cfg,
            ds,
            udf.watching(zk.hosts, node_path(cfg, ds), int(zk.timeout_s * 1000)).avro(
                cfg.source(ds).ums.format == "avro"
            ),
        ),
    )
    return JVM_APPEND


def direct(spark: SparkSession, cfg: DbusConfig, ds: str, udf: Any) -> Any:
    """A per-row source's UDF sends its records with its own producer (appender/jvm ``DirectSink``, the Kafka
    sink's options): one record per row change made no more copies through Spark's explode and sink
    (docs/performance.md). A UMS source's records still go through the sink."""
    from dbuslib.sidecar import java_strings
    from dbuslib.spark import kafka_producer_config

    if not cfg.source(ds).output.per_row:
        return udf
    config = kafka_producer_config(cfg.endpoints.kafka, realtime=True, batching=True)
    return udf.direct(java_strings(spark, [x for kv in config.items() for x in kv]))


def append_ums_jvm(df: DataFrame, function: str) -> DataFrame:
    """``append_ums`` with the JVM's record path: the same columns out, no Python in the query."""
    from pyspark.sql import functions as F

    out = F.call_function(
        function, F.col("topic"), F.col("partition"), F.col("offset"), F.col("key"), F.col("value")
    )
    return df.select(F.explode(out).alias("o")).select("o.topic", "o.key", "o.value", "o.headers")
