"""The appender's Spark Structured Streaming query: per-schema topics -> UMS result topics (+ dead letters).

Read (Kafka source, the source's ``<ds>.<schema>`` topics), one named transform (``append_ums``: each
Spark partition is one Kafka partition, processed in offset order by ``appender.process``), write (Kafka
sink, the ``topic`` column picks the result or dead-letter topic). The executor function is module level
and picklable; it loads the configuration and opens its meta store connection itself.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from dbuslib.config import DbusConfig, load_config

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming import StreamingQuery

log = logging.getLogger("dbus.appender")
JVM_FUNCTION, JVM_CLASS = "dbus_rows", "dbus.jvm.RowsUdf"
OUT_SCHEMA = "topic string, key binary, value binary, headers array<struct<key: string, value: binary>>"
BACKFILL_WINDOW = 2000  # records read back at most to find the first chunks of a cut sequence


def read_schema_topics(spark: SparkSession, cfg: DbusConfig, ds: str, topics: list[str]) -> DataFrame:
    return (spark.readStream.format("kafka")
            .option("kafka.bootstrap.servers", cfg.endpoints.kafka.bootstrap_servers)
            .option("subscribe", ",".join(topics))
            .option("startingOffsets", "earliest")
            .option("maxOffsetsPerTrigger", str(cfg.source(ds).appender.max_offsets_per_trigger))
            .load()
            .select("topic", "partition", "offset", "key", "value"))


def register_jvm_decoder(spark: SparkSession) -> bool:
    """Register ``dbus_rows`` (appender/jvm, ``dbus.jvm.RowsUdf``): raw rows record -> its rows as UMS
    JSON text, decoded in the JVM. False (and a warning) when its jar is not on the classpath: the
    appender then decodes every record in Python, correct but several times slower."""
    from pyspark.sql.types import BinaryType

    try:
        spark.udf.registerJavaFunction(JVM_FUNCTION, JVM_CLASS, BinaryType())
    except Exception as e:  # the class is missing: py4j/analysis errors differ by version
        log.warning("appender: JVM decoder %s unavailable (%s); rows are decoded in Python",
                    JVM_CLASS, str(e).splitlines()[0][:200])
        return False
    return True


def with_rendered_rows(df: DataFrame, jvm: bool) -> DataFrame:
    """Adds ``rendered``: the JVM's text of the record's rows, or null where Python must decode."""
    from pyspark.sql import functions as F

    rendered = F.expr(f"{JVM_FUNCTION}(value)") if jvm else F.lit(None).cast("binary")
    return df.withColumn("rendered", rendered)


def append_ums(df: DataFrame, config_path: str, ds: str) -> DataFrame:
    """Raw records -> UMS (and dead-letter) records, partition by partition."""
    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        return process_batches(batches, config_path, ds)

    return df.mapInArrow(run, OUT_SCHEMA)


def process_batches(batches: Iterator[pa.RecordBatch], config_path: str, ds: str) -> Iterator[pa.RecordBatch]:
    """Executor side: one PartitionProcessor for this task's partition, records in offset order."""
    import pyarrow as pa

    from appender.process import InRecord

    processor = None
    state = _worker_state(config_path, ds)
    for batch in batches:
        if processor is None:
            processor = build_processor(config_path, ds)
        out = {"topic": [], "key": [], "value": [], "headers": []}
        cols = batch.to_pydict()
        rendered = cols.get("rendered") or [None] * batch.num_rows
        for t, p, o, k, v, r in zip(cols["topic"], cols["partition"], cols["offset"], cols["key"], cols["value"],
                                    rendered, strict=True):
            for rec in processor.process(InRecord(t, p, o, k, v), r):
                state.ensure_topic(rec.topic)
                out["topic"].append(rec.topic)
                out["key"].append(rec.key)
                out["value"].append(rec.value)
                out["headers"].append([{"key": hk, "value": hv} for hk, hv in rec.headers])
        yield pa.RecordBatch.from_pydict(out, schema=_arrow_schema())


def _arrow_schema():
    import pyarrow as pa

    header = pa.struct([("key", pa.string()), ("value", pa.binary())])
    return pa.schema([("topic", pa.string()), ("key", pa.binary()), ("value", pa.binary()),
                      ("headers", pa.list_(header))])


@dataclass
class _WorkerState:
    """What every task of one Python worker shares (Spark reuses workers across micro-batches):
    the configuration, the meta store connection pool and the encoder, made once instead of per task."""

    cfg: DbusConfig
    ds: str
    store: Any
    settings: Any
    outputs: Any
    encoder: Any

    def ensure_topic(self, topic: str) -> None:
        """Output topics (per-table result topics, the global control topic) are created when a worker
        first writes to one: the Kafka sink would wait on a missing topic, never create it."""
        from dbuslib import kafka

        t = self.cfg.source(self.ds).topics
        kafka.ensure_topic_once(self.cfg.endpoints.kafka, topic, t.partitions, t.replication_factor)


_workers: dict[tuple[str, str], _WorkerState] = {}


def _worker_state(config_path: str, ds: str) -> _WorkerState:
    state = _workers.get((config_path, ds))
    if state is None:
        from appender.convert import ConvertSettings
        from appender.output import MessageEncoder
        from appender.process import Outputs
        from dbuslib.metastore import MetaStore

        cfg = load_config(config_path)
        src = cfg.source(ds)
        store = MetaStore(cfg.endpoints.meta_store.url.get_secret_value())
        store.create_schema()  # idempotent: the tables are created once, by whichever worker comes first
        settings = ConvertSettings(ds=ds, timezone=src.ums.timezone,
                                   before_update_image=src.ums.before_update_image,
                                   max_tuples=src.ums.tuples_per_message, max_bytes=src.ums.max_message_bytes)
        outputs = Outputs(result_topic=lambda s, t: src.topics.name("result", ds, s, t),
                          dead_letter_topic=src.topics.name("dead_letter", ds),
                          global_control_topic=src.topics.name("global_ctrl", ds))
        state = _workers[(config_path, ds)] = _WorkerState(cfg, ds, store, settings, outputs,
                                                           MessageEncoder.from_source(src, store))
    return state


def build_processor(config_path: str, ds: str):
    """A processor for one task: shared worker state, the rules applied now, versions read afresh."""
    from appender.process import PartitionProcessor
    from appender.rules import current_plan  # the rules applied now: reloadable (appender/rules.py)

    w = _worker_state(config_path, ds)
    return PartitionProcessor(w.settings, w.outputs,
                              history=lambda s, t: w.store.history(ds, s, t),
                              persist=lambda s, t, v: w.store.add(ds, s, t, v),
                              mask_plan=current_plan(w.cfg, ds)[1],
                              backfill=_kafka_backfill(w.cfg),
                              encoder=w.encoder)


def _kafka_backfill(cfg: DbusConfig):
    """Reads back the earlier chunks of a chunk sequence that began before this micro-batch."""
    def backfill(rec, event):
        from kafka import TopicPartition

        from dbuslib import kafka
        from dbuslib.rawevent import decode

        tp = TopicPartition(rec.topic, rec.partition)
        consumer = kafka.consumer(cfg.endpoints.kafka, enable_auto_commit=False, group_id=None)
        try:
            consumer.assign([tp])
            consumer.seek(tp, max(0, rec.offset - BACKFILL_WINDOW))
            found = []
            done = False
            while not done:
                for m in consumer.poll(timeout_ms=2000).get(tp, []):
                    if m.offset >= rec.offset:
                        done = True
                        break
                    part = decode(m.value, m.key)
                    same = (part.key == event.key and part.header.get("file") == event.header.get("file")
                            and part.header.get("pos") == event.header.get("pos") and part.chunk)
                    if same:
                        found = [] if part.chunk[0] == 0 else found
                        found.append(part)
            return found[: event.chunk[0]]
        finally:
            consumer.close()

    return backfill


def start(spark: SparkSession, cfg: DbusConfig, ds: str, topics: list[str], checkpoint: str,
          available_now: bool = False) -> StreamingQuery:
    """Start the query; ``topics`` are the per-schema topics to read. ``available_now`` processes what
    is there and stops (tests, catch-up runs)."""
    from dbuslib.spark import kafka_sink, with_trigger

    settings = cfg.source(ds).appender
    jvm = settings.jvm_decoder and register_jvm_decoder(spark)
    raw = with_rendered_rows(read_schema_topics(spark, cfg, ds, topics), jvm)
    out = append_ums(raw, str(cfg.path), ds)
    writer = (kafka_sink(out.writeStream, cfg.endpoints.kafka.bootstrap_servers)
              .queryName(f"appender_{ds}")
              .option("checkpointLocation", checkpoint))
    return with_trigger(writer, available_now, settings.trigger_interval_ms, settings.async_progress).start()

