"""The log processor's projection in Python, record by record: the oracle the JVM's
(``dbus.jvm.LogRecordUdf``, ``job.process``) is compared with (tests/unit/test_record_jvm.py). Only tests run
it: the processor runs the JVM alone. It joins the Python references (the adapters, the rule engine
``operators``, ``logums``, ``dbuslib.deadletter``) in the order docs/logs.md gives for a record's outputs:

1. per table that took rows of the record's lines (its rows in line order, each row's index its position
   among the table's rows of the record, one past ``ums_id_``'s last index left out), its UMS message,
   keyed by the namespace and the record's event time;
2. per line no table took and that broke no rule: the line, to the unknown topic, keyed by the host;
3. per line error a dead letter (the rule's code), then per row whose ``ums_id_`` is out of range one
   ``LOG_LINE_UMS_ID_RANGE`` (the row's index among its table's rows of that line);
4. the record's dead letter when the adapter refused it;
5. a heartbeat record: a heartbeat UMS to every table's result topic (``ok``, then aborted ones ``abort``),
   its value null when the record's offset is past ``ums_id_``'s range.

A dead letter is ``DeadLetter.to_json``'s JSON (the JVM writes it compact, as Spark's ``to_json``; compare
them parsed).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from dbuslib.config import LogSource
from dbuslib.deadletter import UNATTRIBUTED, DeadLetter
from logprocessor import operators
from logprocessor.adapters import AdapterSettings, KafkaRecord, RecordError, adapt
from logprocessor.grammar import TableRules
from logprocessor.logums import (
    MAX_INDEX,
    UMS_ID_RANGE,
    LogRow,
    data_key,
    heartbeat_key,
    heartbeat_message,
    log_namespace,
    message_json,
    ums_id_problem,
    value_problem,
)
from logprocessor.operators import LINE_ERROR
from logprocessor.rules import RuleSet
from ums.encoding import to_json

STAGE = "logprocessor"


@dataclass
class LineResult:
    """One line through the rule set: rows as (table, index among the table's rows of the line, cells),
    errors as (code, "table t: message"), and whether no table took it."""

    rows: list[tuple[str, int, list[str | None]]] = field(default_factory=list)
    errors: list[tuple[str, str]] = field(default_factory=list)
    unmatched: bool = True


def _text(v: object) -> str | None:
    """A typed cell as the JVM holds it after saveAs: text (a DOUBLE as Java's Double.toString, whose
    value Python's repr reads back the same)."""
    return repr(v) if isinstance(v, float) else None if v is None else str(v)


def run_line(tables: tuple[TableRules, ...], line: str, multi: bool, budget_ms: int | None) -> LineResult:
    """``Engine.runLine``: every active group of every table (multi) or up to the first that takes rows."""
    groups = [(t.table, g) for t in tables for g in t.groups if g.active]
    out = LineResult()
    results = [(table, operators.run_group(g, line, budget_ms)) for table, g in groups]
    if not multi:
        for table, res in results:
            if res.rows:
                out.rows = [(table, i, [_text(v) for v in row]) for i, row in enumerate(res.rows)]
                out.unmatched = False
                return out
            if res.failure is not None:
                out.errors.append((res.failure.code, f"table {table}: {res.failure.message}"))
        return out
    index: dict[str, int] = {}
    for table, res in results:  # the tables in order: each table's groups are consecutive
        for row in res.rows:
            out.rows.append((table, index.get(table, 0), [_text(v) for v in row]))
            index[table] = index.get(table, 0) + 1
    out.errors = [
        (res.failure.code, f"table {table}: {res.failure.message}")
        for table, res in results
        if res.failure is not None
    ]
    out.unmatched = not out.rows
    return out


def _dead_letter(src: LogSource, record: KafkaRecord, topic: str, code: str, error: str) -> str:
    withheld = UNATTRIBUTED if src.masking else ""  # a line is no table's until the rules took it
    value = None if withheld else record.value
    where = (topic, record.partition, record.offset, record.key)
    letter = DeadLetter(code, error, *where, value, STAGE, withheld)
    return letter.to_json()


def outputs(
    record: KafkaRecord, src: LogSource, ds: str, rules: RuleSet, topic: str, base: Path | None = None
) -> list[tuple[str, bytes | None, str | None]]:
    """(topic, key, value) of every output of ``record`` (read from ``topic``), in the JVM's order."""
    dlq = src.topics.name("dead_letter", ds)
    adapted = adapt(record, AdapterSettings.of(src, base))
    if isinstance(adapted, RecordError):
        return [(dlq, record.key, _dead_letter(src, record, topic, adapted.code, adapted.message))]
    p, o, tz = record.partition, record.offset, src.ums.timezone
    settings = src.processor
    budget = settings.regex_budget_ms
    results = [run_line(rules.tables, line, settings.multi_table, budget) for line in adapted.lines]

    def namespace(t: TableRules) -> object:
        return log_namespace(src.type, ds, rules.schema, t.table, t.version, adapted.host)

    out: list[tuple[str, bytes | None, str | None]] = []
    if results and ums_id_problem(p, o, 0) is None:
        for t in rules.tables:
            cells = [row for r in results for table, _, row in r.rows if table == t.table]
            rows = []
            for index, row in enumerate(cells):
                if index > MAX_INDEX:
                    continue
                values = (list(row) + [None] * len(t.columns))[: len(t.columns)]
                values = [
                    None if value_problem([v], [c]) else v for v, c in zip(values, t.columns, strict=True)
                ]
                rows.append(LogRow(p, o, index, adapted.event_ms, tuple(values)))
            if rows:
                ns = namespace(t)
                value = message_json(ns, t.columns, rows, tz)  # type: ignore[arg-type]
                key = data_key(ns, adapted.event_ms).encode()  # type: ignore[arg-type]
                out.append((src.topics.name("result", ds, rules.schema, t.table), key, value))
    unknown = src.topics.name("unknown", ds)
    for line, r in zip(adapted.lines, results, strict=True):
        if r.unmatched and not r.errors:
            out.append((unknown, adapted.host.encode(), line))
    for r in results:
        for code, error in r.errors:
            out.append((dlq, record.key, _dead_letter(src, record, topic, code, error)))
    for r in results:
        for _, index, _ in r.rows:
            problem = ums_id_problem(p, o, index)
            if problem is not None:
                out.append((dlq, record.key, _dead_letter(src, record, topic, UMS_ID_RANGE, problem)))
    if adapted.heartbeat:
        at = adapted.heartbeat_ms if adapted.heartbeat_ms is not None else adapted.event_ms
        for status, tables in (("ok", rules.tables), ("abort", rules.aborted)):
            for t in tables:
                ns = namespace(t)
                key = heartbeat_key(ns, at, adapted.event_ms, status).encode()  # type: ignore[arg-type]
                value = (
                    to_json(heartbeat_message(ns, p, o, at, tz))  # type: ignore[arg-type]
                    if ums_id_problem(p, o, 0) is None
                    else None
                )
                out.append((src.topics.name("result", ds, rules.schema, t.table), key, value))
    return out


__all__ = ["LINE_ERROR", "outputs", "run_line"]
