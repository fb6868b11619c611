"""The appender's executor side: what every task of one Python worker shares, and the processor of a task.

Spark reuses a Python worker across micro-batches, so the configuration, the meta store connection pool,
the encoder and the heartbeat bookkeeping are made once per worker (``worker_state``) instead of per task;
``build_processor`` makes one task's ``PartitionProcessor`` from them, with the masking rules applied now
(reloadable, appender/rules.py) and a Kafka read-back of chunks cut by a micro-batch boundary. Heartbeats
a task measured are written to InfluxDB (``dbus_heartbeat``) when its partition is done, in one write; a
failed write is logged and counted, never fails the task.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from dbuslib import pygc
from dbuslib.config import DbusConfig
from dbuslib.ship import load_document

log = logging.getLogger("dbus.appender")
BACKFILL_WINDOW = 2000  # records read back at most to find the first chunks of a cut sequence
KNOWN_TABLE_TTL_S = 60.0  # how long a worker trusts "this table is (not) at the source"


@dataclass
class _WorkerState:
    """What every task of one Python worker shares (Spark reuses workers across micro-batches):
    the configuration, the meta store connection pool and the encoder, made once instead of per task;
    and the heartbeat bookkeeping: row changes per table since its last heartbeat (``rows``, as the
    tasks of this worker converted them), heartbeat rows dead-lettered and failed InfluxDB writes."""

    cfg: DbusConfig
    ds: str
    store: Any
    settings: Any
    outputs: Any
    encoder: Any
    heartbeat: Any = None  # binlog.heartbeat.HeartbeatTable
    rows: dict[tuple[str, str], int] = field(default_factory=dict)
    bad_heartbeats: Counter = field(default_factory=Counter)
    influx_failures: int = 0
    _known: dict[tuple[str, str], tuple[bool, float]] = field(default_factory=dict)
    _capture: Any = None  # dbuslib.filters.TableFilter of the source, made when first needed

    def ensure_topic(self, topic: str) -> None:
        """Output topics (per-table result topics, the global control topic) are created when a worker
        first writes to one: the Kafka sink would wait on a missing topic, never create it."""
        from dbuslib import kafka, retry

        t = self.cfg.source(self.ds).topics
        retry.call(
            retry.RetryPolicy.of(self.cfg),
            f"Kafka: create topic {topic}",
            kafka.ensure_topic_once,
            self.cfg.endpoints.kafka,
            topic,
            t.partitions,
            t.replication_factor,
        )

    def known_table(self, schema: str, table: str) -> bool:
        """Asked for a heartbeat's table that has no versions yet: captured by the source's
        ``capture`` patterns and present at the source (information_schema, remembered for
        ``KNOWN_TABLE_TTL_S``). When the source cannot be asked the table counts as known."""
        if self._capture is None:
            from dbuslib.filters import TableFilter

            self._capture = TableFilter(self.cfg.source(self.ds).capture)
        if not self._capture.allows(schema, table):
            return False
        hit = self._known.get((schema, table))
        if hit is None or time.monotonic() - hit[1] > KNOWN_TABLE_TTL_S:
            hit = self._known[(schema, table)] = (
                _at_source(self.cfg.source(self.ds).mysql, schema, table),
                time.monotonic(),
            )
        return hit[0]

    def report_heartbeats(self, processor: Any) -> None:
        """Writes the heartbeats a task measured (and its dead-lettered heartbeat rows) in one InfluxDB
        write; a failure is logged and counted (``influx_failures``), never raised."""
        from appender.heartbeat import bad_point

        now_ms = int(time.time() * 1000)
        points = [b.to_point() for b in processor.beats]
        for reason, n in processor.bad.items():
            self.bad_heartbeats[reason] += n
            points.append(bad_point(self.ds, reason, n, now_ms))
            log.warning(
                "appender %s: %d heartbeat row(s) dead-lettered as %s (%d so far in this worker)",
                self.ds,
                n,
                reason,
                self.bad_heartbeats[reason],
            )
        processor.beats.clear()
        processor.bad.clear()
        if not points:
            return
        from dbuslib import influx

        try:
            influx.write(self.cfg.endpoints.influxdb, points)
        except Exception as e:  # the time-series server is optional for the data path
            self.influx_failures += 1
            log.warning(
                "appender %s: %d heartbeat point(s) not written to %s (%d failed writes in this worker): %s",
                self.ds,
                len(points),
                self.cfg.endpoints.influxdb.where,
                self.influx_failures,
                e,
            )


def _at_source(conn: Any, schema: str, table: str) -> bool:
    from dbuslib import mysql

    try:
        db = mysql.connect(conn, connect_timeout=5)
        try:
            with db.cursor() as cur:
                cur.execute(
                    "SELECT 1 FROM information_schema.TABLES WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s",
                    (schema, table),
                )
                return cur.fetchone() is not None
        finally:
            db.close()
    except Exception as e:  # the source unreachable: a heartbeat is not dead-lettered for that
        log.warning(
            "appender: cannot ask %s:%s whether %s.%s exists (%s); taken as known",
            conn.host,
            conn.port,
            schema,
            table,
            e,
        )
        return True


_workers: dict[tuple[str, str], _WorkerState] = {}


def worker_state(document: str, ds: str) -> _WorkerState:
    state = _workers.get((document, ds))
    if state is None:
        from appender.convert import ConvertSettings
        from appender.output import MessageEncoder
        from appender.process import Outputs
        from binlog.heartbeat import HeartbeatTable
        from dbuslib import topics
        from dbuslib.metastore import MetaStore
        from dbuslib.retry import RetryPolicy

        cfg = load_document(document)
        src = cfg.source(ds)
        # every call retried on a transient failure within endpoints.retry (dbuslib/retry.py): a restart
        # of the meta store's server costs the task latency, not the query
        store = MetaStore(cfg.endpoints.meta_store.url.get_secret_value(), retry=RetryPolicy.of(cfg))
        store.create_schema()  # idempotent: the tables are created once, by whichever worker comes first
        settings = ConvertSettings(
            ds=ds,
            timezone=src.ums.timezone,
            before_update_image=src.ums.before_update_image,
            max_tuples=src.ums.tuples_per_message,
            max_bytes=src.ums.max_message_bytes,
        )
        per_row = src.output.per_row
        outputs = Outputs(
            result_topic=lambda s, t: topics.result_topic(ds, src, s, t),
            dead_letter_topic=src.topics.name("dead_letter", ds),
            global_control_topic=src.topics.name("global_ctrl", ds),
            repull_topic=src.topics.name("ctrl", ds) if src.fullpull.repull_on_row_loss else None,
            row_format=(lambda s, t: topics.row_format(src, s, t)) if per_row else None,
            events_topic=(lambda s: topics.events_topic(ds, src, s)) if per_row else None,
            formatter=_formatters(cfg, ds) if per_row else None,
        )
        heartbeat = HeartbeatTable(
            src.heartbeat.schema_, src.heartbeat.table, lambda schema: src.topics.name("schema", ds, schema)
        )
        state = _workers[(document, ds)] = _WorkerState(
            cfg, ds, store, settings, outputs, MessageEncoder.from_source(src, store), heartbeat
        )
        pygc.settle()  # the worker's long-lived state is made: freeze it (dbuslib/pygc.py)
    return state


def _formatters(cfg: DbusConfig, ds: str) -> Any:
    """Format name -> its ``ums.formats.Format`` for source ``ds``, each made once per worker; ``avro``'s
    schema ids come from the registry (dbuslib/registry.py, made when first needed), each subject's
    compatibility level (``output.compatibility``) set before its first registration."""
    from ums.formats import formatter

    src = cfg.source(ds)
    made: dict[str, Any] = {}

    def of(name: str) -> Any:
        if name not in made:
            made[name] = formatter(
                name, src.output.options(), _schema_ids(cfg, ds) if name == "avro" else None
            )
        return made[name]

    return of


def _schema_ids(cfg: DbusConfig, ds: str) -> Any:
    """The ``ums.formats.SchemaIds`` of source ``ds``: the registry of ``endpoints.registry`` (retried
    within ``endpoints.retry``), each subject's level set to ``output.compatibility`` before the first
    schema registered under it."""
    from dbuslib.registry import Registry

    return Registry.of(cfg).schema_ids(cfg.source(ds).output.compatibility)


def build_processor(document: str, ds: str):
    """A processor for one task: shared worker state, the rules applied now, versions read afresh."""
    from appender.process import PartitionProcessor
    from appender.rules import current_plan  # the rules applied now: reloadable (appender/rules.py)

    w = worker_state(document, ds)
    return PartitionProcessor(
        w.settings,
        w.outputs,
        history=lambda s, t: w.store.history(ds, s, t),
        persist=lambda s, t, v: w.store.add(ds, s, t, v),
        mask_plan=current_plan(w.cfg, ds)[1],
        backfill=_kafka_backfill(w.cfg),
        encoder=w.encoder,
        heartbeat=w.heartbeat,
        known_table=w.known_table,
        counts=w.rows,
    )


def _kafka_backfill(cfg: DbusConfig):
    """Reads back the earlier chunks of a chunk sequence that began before this micro-batch."""

    def backfill(rec, event):
        from kafka import TopicPartition

        from binlog.rawevent import decode
        from dbuslib import kafka, retry

        tp = TopicPartition(rec.topic, rec.partition)
        consumer = retry.call(
            retry.RetryPolicy.of(cfg),
            f"Kafka: read back chunks of {rec.topic}",
            kafka.consumer,
            cfg.endpoints.kafka,
            enable_auto_commit=False,
            group_id=None,
        )
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
                    same = (
                        part.key == event.key
                        and (part.header.file, part.header.pos) == (event.header.file, event.header.pos)
                        and part.chunk
                    )
                    if same:
                        found = [] if part.chunk[0] == 0 else found
                        found.append(part)
            return found[: event.chunk[0]]
        finally:
            consumer.close()

    return backfill
