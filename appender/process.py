"""The appender's work on one partition of a per-schema topic, record by record, in offset order.

A raw record (binlog.rawevent) becomes:
- for a ``rows`` event: UMS ``data_increment_data`` messages on the table's result topic, under the
  table's current schema version (a version change first sends ``data_increment_termination`` under the
  old namespace); masking is applied before anything leaves;
- for a ``ddl`` TRUNCATE, or DDL the extractor marks ``removes_rows`` (TRUNCATE/DROP/EXCHANGE PARTITION
  ...): a termination of the current version and the next version; with ``fullpull.repull_on_row_loss``
  also a full-pull request of the table on ``<ds>_ctrl``;
- for an insert into the heartbeat table: per row of this topic's schema, a ``data_increment_heartbeat``
  message on the monitored table's result topic and a ``Beat`` (latency, rows since the table's previous
  heartbeat) in ``beats`` for the caller to write (appender.heartbeat); other records of the heartbeat
  table (the writer's purge, DDL) give nothing: they are no data of any monitored table;
- for anything that cannot be parsed, decoded or converted: one dead letter on ``<ds>.dlq`` with the reason
  and the record's coordinates (its bytes withheld where masked columns could leak), and the stream goes
  on. ``process`` never raises for what a record holds; only an endpoint down past its retries stops it.

Chunks of one event are joined; a chunk sequence cut by a micro-batch boundary is finished from Kafka
itself (``backfill``), so no state has to survive between batches.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass, field, replace
from typing import Any
from zoneinfo import ZoneInfo

from appender.convert import ConvertSettings, masked, original_key, record_key, rendered_messages, to_ums
from appender.heartbeat import TABLE_STATUS, UNKNOWN_TABLE, Beat, measure
from appender.versions import Change, Version, compare, on_rows, on_truncate, version_at
from binlog.heartbeat import BadHeartbeat, Heartbeat, HeartbeatTable, heartbeat_of, owner
from binlog.rawevent import RawEvent, RawEventError, RawHeader, Reassembler, decode
from binlog.rows import RowDecodeError, decode_rows, table_of
from dbuslib.deadletter import DeadLetter, withheld_reason
from dbuslib.errors import DbusError, EndpointError
from dbuslib.lifecycle import first_line
from dbuslib.retry import transient
from ums import Namespace, ProtocolType, build_termination_message, data_key, to_json, ums_id, ums_ts_ms
from ums.build import build_heartbeat_message, data_schema, user_columns
from ums.control import ControlType, control_key, new_control_message
from ums.control import to_json as control_json
from ums.keys import heartbeat_key
from ums.masktext import LineMask, masked_event_messages, masked_prefix
from ums.text import event_messages, message_prefix


@dataclass(frozen=True)
class InRecord:
    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes


@dataclass(frozen=True)
class OutRecord:
    """One output record; a per-row record of a table without a primary key has no key, and a per-row
    tombstone no value (``ums.formats.Record``)."""

    topic: str
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes], ...] = ()


LONG_MAX = (1 << 63) - 1  # no ums_id_ reaches it: "no next version yet"
_UNCUT = 1 << 62  # tuples/bytes per message on the per-row path: an update's b and u stay in one message
RECORD_FAILED = "APPENDER_RECORD_FAILED"  # dead-letter code: converting the record raised an unforeseen error
History = Callable[[str, str], list[Version]]  # (schema, table) -> versions, oldest first
# The earlier chunks of the event ``record`` (a chunk i > 0) belongs to, read back from Kafka, in order.
Backfill = Callable[[InRecord, RawEvent], list[RawEvent]]
Persist = Callable[[str, str, Version], Version]  # store a new version; returns the stored one
KnownTable = Callable[[str, str], bool]  # (schema, table) -> captured and present at the source


def _now_ms() -> float:
    return time.time() * 1000


@dataclass
class Outputs:
    result_topic: Callable[[str, str], str]  # (schema, table) -> topic (dbuslib.topics.result_topic)
    dead_letter_topic: str
    global_control_topic: str | None = None  # G_META_SYNC_WARNING on schema changes; None = not sent
    repull_topic: str | None = None  # <ds>_ctrl: a full pull after DDL removed rows; None = not asked
    # (schema, table) -> its per-row format (ums.formats.PER_ROW), None for UMS; no function: UMS for all
    row_format: Callable[[str, str], str | None] | None = None
    # schema -> where the UMS heartbeats and terminations of its per-row tables go (topics.events)
    events_topic: Callable[[str], str] | None = None
    formatter: Callable[[str], Any] | None = None  # format name -> its ums.formats.Format (made once)

    def format_of(self, schema: str, table: str) -> str | None:
        """The per-row format of ``schema.table``, None when it is written as UMS."""
        return None if self.row_format is None else self.row_format(schema, table)

    def ums_topic(self, schema: str, table: str) -> str:
        """Where UMS messages of ``schema.table`` go: its result topic, or for a per-row table (whose
        result topic holds per-row records alone) its schema's events topic."""
        if self.events_topic is not None and self.format_of(schema, table) is not None:
            return self.events_topic(schema)
        return self.result_topic(schema, table)


@dataclass
class PartitionProcessor:
    settings: ConvertSettings
    outputs: Outputs
    history: History
    persist: Persist
    mask_plan: Any = None  # ums.masking.MaskPlan of the source, None = nothing masked
    backfill: Backfill | None = None
    encoder: Any = None  # appender.output encoder; None = JSON
    heartbeat: HeartbeatTable | None = None  # None: heartbeat-table rows are ordinary data
    known_table: KnownTable | None = None  # asked for a heartbeat's table without versions; None = known
    counts: dict[tuple[str, str], int] = field(default_factory=dict)  # row changes since a table's heartbeat
    clock: Callable[[], float] = _now_ms  # epoch ms, for heartbeat latency
    beats: list[Beat] = field(default_factory=list)  # heartbeats measured; the caller drains it
    bad: Counter = field(default_factory=Counter)  # heartbeat rows dead-lettered, by reason
    _versions: dict[tuple[str, str], list[Version]] = field(default_factory=dict)
    _assembler: Reassembler = field(default_factory=Reassembler)
    _line_masks: dict[int, tuple[Any, LineMask | None]] = field(default_factory=dict)  # by id(TableMask)

    def process(self, rec: InRecord, rendered: bytes | None = None) -> Iterator[OutRecord]:
        """Output records for ``rec``, or one dead letter: never raises for what the record holds.

        ``rendered`` is the JVM decoder's text of its rows (``dbus_rows``, see ums.text), None when the
        JVM did not decode it (then the reference decoder, binlog/rows.py, decodes it). A record's
        outputs are all produced before the first is given out, so a record that fails half-way gives
        its dead letter alone. Only an
        endpoint that stays unreachable (a retriable ``DbusError``: the meta store, after its retries)
        raises: that stops the task instead of dead-lettering every record while it lasts.
        """
        try:
            out = list(self._process(rec, rendered))
        except (RawEventError, RowDecodeError) as e:
            out = [self._dead(rec, getattr(e, "code", "RAW_BAD_RECORD"), str(e), _table_of(rec, e))]
        except DbusError as e:
            if e.retriable or isinstance(e, EndpointError):
                raise
            out = [self._dead(rec, e.code, str(e), _table_of(rec, e))]
        except Exception as e:
            if transient(e):  # an endpoint's failure that got past its retries: not the record's fault
                raise
            code = getattr(e, "code", None)
            code = code if isinstance(code, str) else RECORD_FAILED
            out = [self._dead(rec, code, f"{type(e).__name__}: {first_line(e)[:500]}", _table_of(rec, e))]
        yield from out

    def _process(self, rec: InRecord, rendered: bytes | None) -> Iterator[OutRecord]:
        event = self._join(rec, decode(rec.value, rec.key))
        if event is None:
            return  # a chunk: the event is emitted with its last chunk
        if self.heartbeat is not None and self.heartbeat.holds(event.header):
            yield from self._heartbeats(rec, event, self.heartbeat)
        elif event.kind == "rows" and self._per_row(event) is not None:
            yield from self._rows_per_row(rec, event, rendered if event.chunk is None else None)
        elif event.kind == "rows" and rendered is not None and event.chunk is None:
            yield from self._rows_rendered(event, rendered)
        elif event.kind == "rows":
            yield from self._rows(event)
        elif event.kind == "ddl" and event.header.ddl == "TRUNCATE":
            yield from self._truncate(event)
        elif event.kind == "ddl" and event.header.removes_rows is True:
            yield from self._row_loss(event)

    def _join(self, rec: InRecord, part: RawEvent) -> RawEvent | None:
        """The whole event once its last chunk is in; a sequence begun before this batch is read back."""
        if part.chunk and part.chunk[0] > 0 and not self._assembler.pending(part.key) and self.backfill:
            for earlier in self.backfill(rec, part):
                self._assembler.push(earlier)
        return self._assembler.push(part)

    def _rows(self, event: RawEvent) -> Iterator[OutRecord]:
        """Rows the JVM declined: the reference decoder (binlog/rows.py) and ``ums.values``."""
        rows = decode_rows(event)
        current = yield from self._version(event, rows.schema, rows.table, rows.columns)
        for message in masked(self.mask_plan, to_ums(event.header, rows, current.version, self.settings)):
            yield self._out(event, message)
        self._count(rows.schema, rows.table, len(rows.rows))

    def _per_row(self, event: RawEvent) -> str | None:
        """The per-row format of a rows event's table (from its header), None for UMS."""
        h = event.header
        if self.outputs.row_format is None or h.schema is None or h.table is None:
            return None
        return self.outputs.format_of(h.schema, h.table)

    def _rows_per_row(self, rec: InRecord, event: RawEvent, rendered: bytes | None) -> Iterator[OutRecord]:
        """Rows of a table written in a per-row format: the value path's UMS messages (the JVM's lines
        parsed, or the reference decoder), with before images whatever ``ums.before_update_image`` says
        (the old key of an update and Debezium's ``before``) and uncut, masked as UMS is; then one
        ``RowChange`` per row (ums.rowchange.from_message) and its records in the table's format, on its
        result topic. A schema the registry refuses makes the event's rows one dead letter (what came
        before them, a termination, still goes out)."""
        from ums.formats import SchemaRefused
        from ums.rowchange import from_message

        settings = replace(self.settings, before_update_image=True, max_tuples=_UNCUT, max_bytes=_UNCUT)
        h = event.header
        shape = table_of(event) if rendered is not None else decode_rows(event)
        current = yield from self._version(event, shape.schema, shape.table, shape.columns)
        if rendered is None:
            messages = to_ums(h, shape, current.version, settings)
        else:  # the JVM's lines (before a NUL and their Avro when the source's UMS is Avro)
            text = rendered.split(b"\x00", 1)[0]
            lines = text.split(b"\n") if text else []
            messages = rendered_messages(h, shape, lines, current.version, settings) if lines else []
        fmt = self.outputs.format_of(shape.schema, shape.table)
        topic = self.outputs.result_topic(shape.schema, shape.table)
        encoder = self.outputs.formatter(fmt) if self.outputs.formatter and fmt else None
        if encoder is None:
            msg = f"{shape.schema}.{shape.table}: format {fmt!r} has no formatter (Outputs.formatter)"
            raise ValueError(msg)
        out: list[OutRecord] = []
        rows = 0
        try:
            for message in masked(self.mask_plan, messages):
                ums_key = ("ums_key", original_key(message, h, self.settings.ds).encode())
                changes = from_message(
                    message,
                    shape.columns,
                    tuple(shape.primary_key),
                    file=h.position[0],
                    ts_ms=h.ts_ms,
                    server_id=h.server_id if isinstance(h.server_id, int) else None,
                    gtid=h.gtid,
                )
                rows += len(changes)
                for change in changes:
                    for r in encoder.records(topic, change):
                        out.append(OutRecord(topic, r.key, r.value, (*r.headers, ums_key)))
        except SchemaRefused as e:
            reason = f"{shape.schema}.{shape.table} ({fmt} on {topic}): {first_line(e)[:500]}"
            yield self._dead(rec, e.code, reason, (shape.schema, shape.table), decoded=True)
            return
        yield from out
        self._count(shape.schema, shape.table, rows)

    def _rows_rendered(self, event: RawEvent, rendered: bytes) -> Iterator[OutRecord]:
        """Rows the JVM rendered: message text straight from its lines for JSON output (a masked table's
        masked columns rewritten in its lines, ums.masktext); otherwise (Avro, a column named like a
        system field) its lines parsed into values (one ``json.loads`` per event), masked and encoded."""
        shape = table_of(event)
        current = yield from self._version(event, shape.schema, shape.table, shape.columns)
        cut = rendered.find(b"\x00")  # dbus_rows_avro: the lines, NUL, their Avro (appender/avrorows.py)
        section = rendered[cut + 1 :] if cut >= 0 else None
        lines = (rendered[:cut] if cut >= 0 else rendered).split(b"\n") if rendered else []
        if not lines:
            return  # a rows event without rows (the reference path emits nothing for it either)
        if self._avro_ok(shape):
            yield from self._rows_avro(event, shape, lines, current.version, section)
            return
        s = self.settings
        ns = Namespace(s.ds_type, s.ds, shape.schema, shape.table, current.version)
        prefix, line_mask = self._text_prefix(shape, ns)
        if prefix is None:
            messages = rendered_messages(event.header, shape, lines, current.version, self.settings)
            for message in masked(self.mask_plan, messages):
                yield self._out(event, message)
            self._count(shape.schema, shape.table, len(lines) // 2 if shape.op == "u" else len(lines))
            return
        topic = self.outputs.result_topic(shape.schema, shape.table)
        key = f"{shape.schema}.{shape.table}".encode()
        headers = (
            (
                "ums_key",
                data_key(ProtocolType.DATA_INCREMENT_DATA, ns, event.header.ts_ms, s.ds).encode(),
            ),
        )
        op = shape.op  # an update has a before and an after line per row
        uid = ums_id(*event.header.position)
        ts = ums_ts_ms(event.header.ts_ms, ZoneInfo(s.timezone))
        if line_mask is None:
            texts = event_messages(
                prefix, uid, ts, op, lines, s.before_update_image, s.max_tuples, s.max_bytes
            )
        else:
            texts = masked_event_messages(
                prefix, line_mask, uid, ts, op, lines, s.before_update_image, s.max_tuples, s.max_bytes
            )
        for text in texts:
            yield OutRecord(topic, key, text, headers)
        self._count(shape.schema, shape.table, len(lines) // 2 if op == "u" else len(lines))

    def _rows_avro(
        self, event: RawEvent, shape: Any, lines: list[bytes], version: int, section: bytes | None
    ) -> Iterator[OutRecord]:
        """Rows the JVM rendered, Avro out and nothing masked: each message's Avro straight from the
        parsed lines' columns (appender/avrorows.py), no tuple per row."""
        from appender.avrorows import rendered_avro
        from appender.output import SCHEMA_HEADER

        s = self.settings
        schema, values = rendered_avro(event.header, shape, lines, version, s, section=section)
        ns = schema.namespace
        topic = self.outputs.result_topic(shape.schema, shape.table)
        key = f"{shape.schema}.{shape.table}".encode()
        headers = (
            (
                "ums_key",
                data_key(ProtocolType.DATA_INCREMENT_DATA, ns, event.header.ts_ms, s.ds).encode(),
            ),
            (SCHEMA_HEADER, self.encoder.schema_id_of(schema).encode("ascii")),
        )
        for value in values:
            yield OutRecord(topic, key, value, headers)
        self._count(shape.schema, shape.table, len(lines) // 2 if shape.op == "u" else len(lines))

    def _avro_ok(self, shape: Any) -> bool:
        """Avro output, no masking rule for the table, no column named like a system field."""
        if getattr(self.encoder, "format", "json") != "avro":
            return False
        if (
            self.mask_plan is not None
            and self.mask_plan.has_rules
            and self.mask_plan.rules_for(shape.schema, shape.table)
        ):
            return False
        return len(user_columns(shape.columns)) == len(shape.columns)

    def _count(self, schema: str, table: str, rows: int) -> None:
        """Row changes (tuples, a ``b`` image not counted) of a table since its last heartbeat."""
        key = (schema, table)
        self.counts[key] = self.counts.get(key, 0) + rows

    def _heartbeats(self, rec: InRecord, event: RawEvent, table: HeartbeatTable) -> Iterator[OutRecord]:
        """A record of the heartbeat ``table``: per row of this topic's schema, its heartbeat message (or a
        dead letter) and a Beat in ``self.beats``. Not an insert (the writer's purge, DDL): nothing."""
        if not table.inserted(event.header):
            return
        at = int(ums_id(*event.header.position))
        where = f"heartbeat at {event.header.where}"
        for i, image in enumerate(r.after or {} for r in decode_rows(event).rows):
            if not owner(image, self.settings.ds, rec.topic, table):
                continue  # another source's row, or another schema's (it is handled on that topic)
            try:
                hb = heartbeat_of(image)
                version = self._heartbeat_version(hb, at)
            except BadHeartbeat as e:
                self.bad[e.code] += 1
                yield self._dead(
                    rec,
                    e.code,
                    f"{where}, row {i}: {e}",
                    (table.schema, table.table),
                    decoded=True,
                )
                continue
            yield self._heartbeat_out(event, hb, version)
            self.beats.append(measure(hb, self.clock(), self.counts.pop((hb.schema, hb.table), 0)))

    def _heartbeat_version(self, hb: Heartbeat, at: int) -> int:
        """The version of the monitored table valid at the heartbeat (0 before its first rows); a table
        without versions must be known (captured and at the source), else UNKNOWN_TABLE."""
        history = self._history(hb.schema, hb.table)
        if not history:
            if self.known_table is not None and not self.known_table(hb.schema, hb.table):
                msg = f"{hb.schema}.{hb.table}: no rows seen, and not captured or not at the source"
                raise BadHeartbeat(UNKNOWN_TABLE, msg)
            return 0
        return (version_at(history, at) or history[0]).version

    def _heartbeat_out(self, event: RawEvent, hb: Heartbeat, version: int) -> OutRecord:
        s = self.settings
        ns = Namespace(s.ds_type, s.ds, hb.schema, hb.table, version)
        ts = ums_ts_ms(event.header.ts_ms, ZoneInfo(s.timezone))
        message = build_heartbeat_message(ns, ums_id(*event.header.position), ts)
        key = heartbeat_key(ns, hb.packet.time_ms, hb.packet.tx_ms, TABLE_STATUS, s.ds)
        enc = self.encoder
        value, extra = (to_json(message).encode(), ()) if enc is None else enc.encode(message)
        return OutRecord(
            self.outputs.ums_topic(hb.schema, hb.table),
            record_key(message).encode(),
            value,
            (("ums_key", key.encode()), *extra),
        )

    def unmasked_text_prefix(self, shape: Any, ns: Namespace) -> bytes | None:
        """The message prefix when rows of ``shape`` take the text path with nothing masked (what the
        real-time JVM writes alone, appender/sidecar.py); None when they are masked or take the value path."""
        if self.outputs.format_of(shape.schema, shape.table) is not None:
            return None  # a per-row table: its records are made here (no JVM fast path for them yet)
        prefix, line_mask = self._text_prefix(shape, ns)
        return prefix if line_mask is None else None

    def _text_prefix(self, shape: Any, ns: Namespace) -> tuple[bytes | None, LineMask | None]:
        """The message prefix for the text path and, for a masked table, its ``LineMask``; ``(None, None)``
        when the event takes the value path (not JSON, a column named like a system field, a masked or
        salt column the text path cannot reach)."""
        if getattr(self.encoder, "format", "json") != "json":
            return None, None
        if len(user_columns(shape.columns)) != len(shape.columns):
            return None, None
        plan = self.mask_plan
        if plan is None or not plan.has_rules or not plan.rules_for(shape.schema, shape.table):
            return message_prefix(ns, shape.columns), None
        fields = data_schema(ns, shape.columns).fields
        mask = plan.for_table(shape.schema, shape.table, fields)
        if mask is None:  # rules for the table, none for these columns: nothing masked
            return message_prefix(ns, shape.columns), None
        cached = self._line_masks.get(id(mask))
        if cached is None or cached[0] is not mask:
            cached = (mask, LineMask.of(mask, len(fields) - len(shape.columns), len(shape.columns)))
            self._line_masks[id(mask)] = cached
        line_mask = cached[1]
        return (None, None) if line_mask is None else (masked_prefix(ns, mask.fields), line_mask)

    def _version(
        self, event: RawEvent, schema: str, table: str, columns: Any
    ) -> Generator[OutRecord, None, Version]:
        """The schema version the event's rows belong to; a change is stored and its termination
        message yielded first. Used as ``current = yield from self._version(...)``."""
        at = int(ums_id(*event.header.position))
        history = self._history(schema, table)
        current = version_at(history, at) or (history[0] if history else None)  # older than all: the first
        if current is None or current is history[-1]:
            change = on_rows(current, columns, at)
            if change is not None:
                yield from self._apply(event, schema, table, change)
                current = change.new
        if current is None:  # on_rows opens version 0 of a table without versions: never here
            msg = f"{schema}.{table}: no schema version for the rows at {event.header.where}"
            raise ValueError(msg)
        return current

    def _truncate(self, event: RawEvent) -> Iterator[OutRecord]:
        schema, table = event.header.schema, event.header.table
        if schema is None or table is None:
            return  # a DDL naming no table (a null table in its header): no table versions to end
        history = self._history(schema, table)
        at = int(ums_id(*event.header.position))
        change = on_truncate(history[-1] if history else None, at)
        if change is not None:
            yield from self._apply(event, schema, table, change)

    def _row_loss(self, event: RawEvent) -> Iterator[OutRecord]:
        """DDL that removed rows without rows events (TRUNCATE/DROP/EXCHANGE PARTITION ...): like TRUNCATE,
        with reason ``row_loss``; then, when ``fullpull.repull_on_row_loss``, a full-pull request of the
        table on ``<ds>_ctrl`` whose SEQNO is the DDL's ``ums_id`` (appender/versions.py). DDL that
        leaves the table empty (DROP TABLE, CREATE OR REPLACE TABLE) is a TRUNCATE: no pull."""
        from appender.versions import Reason, loss_reason, repull_record

        reason = loss_reason(event.header)
        if reason is None:
            return
        schema, table = event.header.schema, event.header.table
        if schema is None or table is None:
            return  # a DDL naming no table (a null table in its header): no versions, nothing to pull
        history = self._history(schema, table)
        at = int(ums_id(*event.header.position))
        change = on_truncate(history[-1] if history else None, at, reason)
        if change is not None:
            yield from self._apply(event, schema, table, change)
        if self.outputs.repull_topic and reason is Reason.ROW_LOSS:
            key, value = repull_record(self.settings.ds, event.header)
            yield OutRecord(self.outputs.repull_topic, key, value)

    def _apply(self, event: RawEvent, schema: str, table: str, change: Change) -> Iterator[OutRecord]:
        stored = self.persist(schema, table, change.new)
        self._versions[(schema, table)].append(stored)
        if change.ends is not None:
            ns = Namespace(self.settings.ds_type, self.settings.ds, schema, table, change.ends.version)
            ts = ums_ts_ms(event.header.ts_ms)
            yield self._out(event, build_termination_message(ns, ts))
            if self.outputs.global_control_topic:
                yield self._meta_warning(self.outputs.global_control_topic, event, schema, table, change)

    def _meta_warning(
        self, topic: str, event: RawEvent, schema: str, table: str, change: Change
    ) -> OutRecord:
        """``G_META_SYNC_WARNING`` (spec 2.6) on the global control ``topic``: a table's schema version
        changed; before/after columns, what changed, the new version and the binlog position."""
        old = change.ends.columns if change.ends is not None else ()
        payload = {
            "datasource": self.settings.ds,
            "schema": schema,
            "tableId": _table_id(event),
            "table": table,
            "before": [_column(c) for c in old],
            "after": [_column(c) for c in change.new.columns],
            "compare-result": {"reason": change.new.reason.value, **compare(old, change.new.columns)},
            "version": change.new.version,
            "since": str(change.new.since),
        }
        message = new_control_message(ControlType.G_META_SYNC_WARNING, "dbus-appender", payload)
        return OutRecord(topic, control_key(message).encode(), control_json(message).encode())

    def version_span(self, schema: str, table: str, at: int) -> tuple[Version, int] | None:
        """The version of ``schema.table`` a rows event at binlog id ``at`` belongs to, and the id where
        the next version starts (``LONG_MAX`` while it is the last); None before the table's first version."""
        history = self._history(schema, table)
        current = version_at(history, at)
        if current is None:
            return None
        later = [v.since for v in history if v.since > at]
        return current, min(later) if later else LONG_MAX

    def reread_versions(self) -> bool:
        """The versions of every table seen read again from the store (another process may have added
        some); True when any differ from what this processor held."""
        fresh = {key: list(self.history(*key)) for key in self._versions}
        changed = fresh != self._versions
        self._versions = fresh
        return changed

    def use_rules(self, plan: Any) -> bool:
        """Mask with ``plan`` (ums.masking.MaskPlan) from the next record on; True when it is another plan."""
        if plan is self.mask_plan:
            return False
        self.mask_plan = plan
        self._line_masks.clear()
        return True

    def _history(self, schema: str, table: str) -> list[Version]:
        key = (schema, table)
        if key not in self._versions:
            self._versions[key] = list(self.history(schema, table))
        return self._versions[key]

    def _out(self, event: RawEvent, message: Any) -> OutRecord:
        ns = message.schema.namespace
        headers = (("ums_key", original_key(message, event.header, self.settings.ds).encode()),)
        # JSON without an encoder; else appender.output.MessageEncoder: JSON, or Avro + its schema header
        enc = self.encoder
        value, extra = (to_json(message).encode(), ()) if enc is None else enc.encode(message)
        return OutRecord(
            self.outputs.ums_topic(ns.schema, ns.table),
            record_key(message).encode(),
            value,
            headers + extra,
        )

    def _dead(
        self, rec: InRecord, code: str, error: str, table: tuple[str, str] | None, decoded: bool = False
    ) -> OutRecord:
        withheld = self._withhold(table, decoded)
        letter = DeadLetter(
            code=code,
            error=error,
            topic=rec.topic,
            partition=rec.partition,
            offset=rec.offset,
            key=rec.key,
            value=None if withheld else rec.value,
            stage="appender",
            withheld=withheld,
        )
        return OutRecord(self.outputs.dead_letter_topic, rec.key or b"", letter.to_json().encode())

    def _withhold(self, table: tuple[str, str] | None, decoded: bool = False) -> str:
        """Why the record's bytes must not go to the dead-letter topic ("" = they may).

        In a source that masks columns, only a record whose rows were decoded (so its table is the one
        its table map names) may be carried; a record that failed may hold another table's rows than its
        header or key claims (a damaged header), so its bytes are withheld whatever it claims."""
        masks_any = self.mask_plan is not None and self.mask_plan.has_rules
        masked = bool(self.mask_plan.rules_for(*table)) if masks_any and table is not None else None
        return withheld_reason(masks_any, masked, decoded)


def _table_id(event: RawEvent) -> int:
    """The binlog table id of a rows event's table map (-1 for a DDL, which has none)."""
    if event.kind != "rows":
        return -1
    return int.from_bytes(event.table_map_bytes()[19:25], "little")


def _column(c: Any) -> dict[str, Any]:
    return {"name": c.name, "type": c.column_type, "nullable": c.nullable, "ums_type": c.ums_type.value}


def _table_of(rec: InRecord, err: Exception) -> tuple[str, str] | None:
    """``(schema, table)`` of a failed record, from the decoder's event or the record key (None when
    the key is not ``schema.table`` with exactly one dot: then masking rules cannot be ruled out)."""
    event = getattr(err, "event", None)
    header = getattr(event, "header", None)
    if isinstance(header, RawHeader) and isinstance(header.schema, str) and isinstance(header.table, str):
        return header.schema, header.table
    key = bytes(rec.key or b"").decode("utf-8", "replace")
    if key.count(".") != 1:
        return None
    schema, table = key.split(".")
    return schema, table
