"""The appender's sidecar in real-time mode: the records the JVM does not write alone, in order.

Usage: python -m appender.sidecar --config conf/dbus.yaml --source demo

Started by the JVM (appender/jvm ``AppendUdf``), one per partition of the source's schema topics, never by
hand: it answers frames on stdin/stdout (dbuslib/sidecar.py). A request is one record::

    record, topic, partition, offset, key, value, lines, counts

``lines`` is the JVM decoder's text of its rows (null when the JVM declined it), ``counts`` the row
changes the JVM wrote since the last request (``schema NUL table NUL count`` lines: a heartbeat reports
them). A request ``begin`` comes first in each task Spark starts on the partition: the processor takes
the masking rules of now and reads its tables' versions again (as each micro-batch's task does), and
answers ``1`` when either changed (the JVM then forgets its shapes), else ``0``; ``rules`` (sent when the
JVM's watch on the rules node fired: a ``dbus reload``) takes the rules of now alone, answered the same
way. A record's answer is what ``appender.job.process_batches`` would write for it
(``appender.process.PartitionProcessor``)::

    n, n x (topic, key, value, header count, header key, header value, ...), versions changed (0/1),
    [shape]

and, when the record is a rows event the JVM may write alone from now on (not the heartbeat table, and
the text path with nothing masked: ``PartitionProcessor.unmasked_text_prefix``), the ``shape``: the
``ums_id_`` range its table version holds for, the message prefix, topic, key, the ``ums_key`` around
its time, the time zone and the cut settings; for a table written in a per-row format the JVM writes
(debezium-json, canal-json, avro), the format's description instead (appender/rowshape.py). Any version
change makes the JVM forget the shapes it was given.
"""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from appender.convert import PROTOCOL, chunked
from appender.process import InRecord
from appender.worker import build_processor, worker_state
from binlog.rawevent import RawEventError, decode
from binlog.rows import RowDecodeError, table_of
from dbuslib import pygc, sidecar
from dbuslib.sidecar import Field, ProtocolError, number, text
from ums import Namespace, chunks, data_key, ums_id


@dataclass
class AppenderSidecar:
    document: str
    ds: str
    processor: Any = None
    changes: int = 0  # versions stored by this process
    _writer: ThreadPoolExecutor = field(default_factory=lambda: ThreadPoolExecutor(1, "heartbeat-points"))

    def __post_init__(self) -> None:
        self.state = worker_state(self.document, self.ds)
        self.record_limit = chunks.limit(self.state.cfg.endpoints.kafka.max_message_bytes)

    def handle(self, fields: list[Field]) -> list[Field]:
        if fields == [b"begin"]:
            return [b"1" if self.begin() else b"0"]
        if fields == [b"rules"]:
            return [b"1" if self.take_rules() else b"0"]
        if len(fields) != 8 or fields[0] != b"record":
            msg = f"expected begin, or a record request of 8 fields; got {len(fields)} field(s)"
            raise ProtocolError(msg)
        _, topic, partition, offset, key, value, lines, counts = fields
        if self.processor is None:
            self.begin()
        self._add_counts(counts)
        before = self.changes
        rec = InRecord(text(topic) or "", number(partition), number(offset), key, value)  # type: ignore[arg-type]
        out: list[Field] = []
        records = list(
            chunked(self.processor.process(rec, lines), self.state.cfg.endpoints.kafka.max_message_bytes)
        )
        out.append(str(len(records)).encode())
        for r in records:
            self.state.ensure_topic(r.topic)
            out += [r.topic.encode(), r.key, r.value, str(len(r.headers)).encode()]
            for hk, hv in r.headers:
                out += [hk.encode(), hv]
        out.append(b"1" if self.changes != before else b"0")
        if lines is not None and self.changes == before:
            out += self._shape(rec)
        self._report_heartbeats()
        return out

    def begin(self) -> bool:
        """A new task on the partition (each real-time batch, each micro-batch): the masking rules of now,
        the versions of the tables seen read again from the meta store (another executor's sidecar may
        have served the partition meanwhile). True when either changed: the JVM forgets its shapes."""
        if self.processor is None:
            self.processor = self._new_processor()
            return True
        changed = self.processor.reread_versions()
        return self.take_rules() or changed

    def take_rules(self) -> bool:
        """The masking rules of now (``appender.rules.current_plan``); True when they changed."""
        from appender.rules import current_plan

        if self.processor is None:
            self.processor = self._new_processor()
            return True
        return bool(self.processor.use_rules(current_plan(self.state.cfg, self.ds)[1]))

    def _new_processor(self) -> Any:
        processor = build_processor(self.document, self.ds)
        persist = processor.persist

        def counted(schema: str, table: str, version: Any) -> Any:
            self.changes += 1
            return persist(schema, table, version)

        processor.persist = counted
        pygc.settle()
        return processor

    def _add_counts(self, counts: Field) -> None:
        """Row changes the JVM wrote since the last request, into the heartbeat bookkeeping."""
        if not counts:
            return
        for line in counts.decode().splitlines():
            schema, table, n = line.split("\0")
            key = (schema, table)
            self.processor.counts[key] = self.processor.counts.get(key, 0) + int(n)

    def _shape(self, rec: InRecord) -> list[Field]:
        """The shape of a rows record the JVM may write alone from now on, or nothing."""
        p = self.processor
        try:
            event = decode(rec.value, rec.key)
            if event.kind != "rows" or event.chunk is not None:
                return []
            if p.heartbeat is not None and p.heartbeat.holds(event.header):
                return []
            shape = table_of(event)
        except (RawEventError, RowDecodeError):
            return []
        h = event.header
        at = int(ums_id(*h.position))
        span = p.version_span(shape.schema, shape.table, at)
        if span is None:
            return []
        current, until = span
        s = p.settings
        ns = Namespace(s.ds_type, s.ds, shape.schema, shape.table, current.version)
        if p.outputs.format_of(shape.schema, shape.table) is not None:
            return self._row_shape(shape, ns, at, until)
        prefix = p.unmasked_text_prefix(shape, ns)  # the processor's own choice of the text path
        if prefix is None:
            return []
        head = f"{PROTOCOL.value}.{ns}."
        key0 = data_key(PROTOCOL, ns, 0, s.ds)
        if not key0.startswith(head + "0|"):
            return []
        fields = (
            str(at),
            str(until),
            prefix,
            p.outputs.result_topic(shape.schema, shape.table),
            f"{shape.schema}.{shape.table}".encode(),
            head,
            key0[len(head) + 1 :],
            s.timezone,
            "1" if s.before_update_image else "0",
            str(s.max_tuples),
            str(s.max_bytes),
            str(self.record_limit),
            shape.schema,
            shape.table,
        )
        return [f if isinstance(f, bytes) else f.encode() for f in fields]

    def _row_shape(self, shape: Any, ns: Namespace, at: int, until: int) -> list[Field]:
        """The description of a per-row table the JVM may write alone (appender/rowshape.py), or nothing:
        a format the JVM writes, nothing masked, no column named like a system field, JSON UMS lines."""
        from appender.rowshape import describer, table_shape
        from ums.build import user_columns

        p, s = self.processor, self.processor.settings
        fmt = p.outputs.format_of(shape.schema, shape.table)
        describe = None if fmt is None else describer(fmt)
        if describe is None or p.outputs.formatter is None:
            return []
        if len(user_columns(shape.columns)) != len(shape.columns):
            return []
        plan = p.mask_plan
        if plan is not None and plan.has_rules and plan.rules_for(shape.schema, shape.table):
            return []
        if getattr(p.encoder, "format", "json") != "json":
            return []  # the JVM's lines carry their Avro then
        encoder = p.outputs.formatter(fmt)
        table = table_shape(shape, ns, s)
        head = f"{PROTOCOL.value}.{ns}."
        key0 = data_key(PROTOCOL, ns, 0, s.ds)
        if not key0.startswith(head + "0|"):
            return []
        where = (at, until, p.outputs.result_topic(shape.schema, shape.table), head, key0[len(head) + 1 :],
                 self.record_limit)  # fmt: skip
        described = describe(table, encoder, where)
        return [] if described is None else list(described)

    def _report_heartbeats(self) -> None:
        """Heartbeats measured go to InfluxDB from a thread: the partition's next records do not wait."""
        p = self.processor
        if not p.beats and not p.bad:
            return
        measured = SimpleNamespace(beats=list(p.beats), bad=Counter(p.bad))
        p.beats.clear()
        p.bad.clear()
        self._writer.submit(self.state.report_heartbeats, measured)


def main(argv: Sequence[str] | None = None) -> int:
    return sidecar.main("appender.sidecar", __doc__, lambda doc, ds: AppenderSidecar(doc, ds).handle, argv)


if __name__ == "__main__":
    sys.exit(main())
