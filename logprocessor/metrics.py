"""The log processor's counts: the ``metric`` column of its output, the per-batch aggregate of it, and the
InfluxDB points the driver writes from that aggregate (docs/monitoring.md, docs/logs.md "Heartbeats").

The metric contract (the one home of it; ``dbus.jvm`` code that produces or reads it names this module).
``logprocessor.job.process`` returns one row per output message, ``(topic, key, value, metric)``, the
``metric`` a string ``"<kind>\\t<host>\\t<name>\\t<n>"``:

- ``rows``: a table's UMS data message; ``host`` the record's host (as in the namespace), ``name`` the
  table, ``n`` the rows (tuples) of the message;
- ``unknown``: a line written to the unknown topic; ``name`` empty; ``n`` 1;
- ``error``: a dead letter; ``host`` the record's host, empty when the record could not be read; ``name``
  the dead-letter code (``LOG_RECORD_NOT_JSON``, ``LOG_LINE_RULE_ERROR``, ...); ``n`` 1;
- ``heartbeat``: a heartbeat UMS written to a table; ``name`` the table; ``n`` the latency in ms: the
  processor's wall clock when it handled the record minus the heartbeat's own time.

``n`` is a decimal integer (a heartbeat's may be negative when clocks disagree). The last two fields are
``name`` and ``n``, the first the kind: a host holding a tab still parses (the fields between are the host).

The aggregate of a micro-batch (``dbus.jvm.LogCountsAgg``, registered as ``dbus_log_counts`` by
``logprocessor.counts_jvm``; ``fold`` + ``counts_json`` is its reference in Python) is a compact JSON array,
one entry per (kind, host, name), sorted::

    [["error","","LOG_RECORD_NOT_JSON",2,2,1],["heartbeat","vm","app_orders",1,812,812],
     ["rows","vm","app_orders",3,17,9]]

each ``[kind, host, name, count, sum, max]``: how many metric rows, the sum of their ``n``, the largest
``n``. A metric that does not parse counts under the kind ``invalid`` (host and name empty, ``n`` 0), so a
producer's mistake is seen, not dropped.

The driver (``dbuslib.stagemetrics``, from each batch progress's ``observedMetrics``) writes per batch:

- ``dbus_log,ds=<ds>,host=<host>,kind=rows,table=<table> count=<rows>i`` (``kind=unknown``: no ``table``;
  ``kind=error``: ``code=<code>`` instead of ``table``; ``kind=invalid``: neither);
- per (host, table) that had a heartbeat in the batch,
  ``dbus_heartbeat,ds=<ds>,schema=<schema>,table=<table>,host=<host> latency_ms=<max>,rows=<r>i,beats=<c>i``,
  ``rows`` the table's rows from that host since its previous heartbeat point (``RowsSinceBeat``, kept on
  the driver: a restarted processor starts again from 0).

Points are timed at the batch progress's timestamp (ms). An empty host is written without the ``host`` tag.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

ROWS = "rows"
UNKNOWN = "unknown"
ERROR = "error"
HEARTBEAT = "heartbeat"
KINDS = (ROWS, UNKNOWN, ERROR, HEARTBEAT)
INVALID = "invalid"  # a metric that did not parse (counted, never dropped)
SEP = "\t"

COLUMN = "metric"  # the column of job.process's output
OBSERVATION = "dbus_log_counts"  # the name of the observed metrics (progress's observedMetrics)
FIELD = "counts"  # the observed row's field holding the aggregate's JSON
LOG_MEASUREMENT = "dbus_log"
HEARTBEAT_MEASUREMENT = "dbus_heartbeat"  # binlog.heartbeat.MEASUREMENT, with a ``host`` tag for log tables

Key = tuple[str, str, str]  # (kind, host, name)
log = logging.getLogger("logprocessor.metrics")


@dataclass(frozen=True)
class Metric:
    kind: str
    host: str
    name: str
    n: int


def format_metric(kind: str, host: str, name: str, n: int) -> str:
    """The metric string of the contract (the producer's side, for tests and Python producers)."""
    return SEP.join((kind, host, name, str(int(n))))


def parse_metric(text: str | None) -> Metric | None:
    """The metric ``text`` holds; None when it is not one (null, fewer than 4 fields, unknown kind, ``n``
    not an integer). Never raises."""
    if not isinstance(text, str):
        return None
    parts = text.split(SEP)
    if len(parts) < 4 or parts[0] not in KINDS:
        return None
    n = parts[-1]
    digits = n[1:] if n[:1] in ("-", "+") else n
    if not digits or not digits.isascii() or not digits.isdigit() or len(digits) > 18:
        return None
    return Metric(parts[0], SEP.join(parts[1:-2]), parts[-2], int(n))


@dataclass(frozen=True)
class Tally:
    """The metric rows of one (kind, host, name) in a batch: how many, the sum and the largest of ``n``."""

    count: int
    total: int
    max: int

    def plus(self, other: Tally) -> Tally:
        return Tally(self.count + other.count, self.total + other.total, max(self.max, other.max))


def key_of(text: str | None) -> tuple[Key, int]:
    """The (kind, host, name) and ``n`` a metric string is counted under (``invalid`` when it does not
    parse)."""
    m = parse_metric(text)
    if m is None:
        return (INVALID, "", ""), 0
    return (m.kind, m.host, m.name), m.n


def fold(metrics: Iterable[str | None]) -> dict[Key, Tally]:
    """The aggregate of a batch's metric strings (``dbus.jvm.LogCountsAgg`` computes the same; nulls are not
    counted: a row with no metric)."""
    out: dict[Key, Tally] = {}
    for text in metrics:
        if text is None:
            continue
        key, n = key_of(text)
        t = Tally(1, n, n)
        out[key] = out[key].plus(t) if key in out else t
    return out


def counts_json(tallies: Mapping[Key, Tally]) -> str:
    """The aggregate's JSON (see the module docstring): compact, sorted by key."""
    rows = [[*k, t.count, t.total, t.max] for k, t in sorted(tallies.items())]
    return json.dumps(rows, separators=(",", ":"), ensure_ascii=False)


def parse_counts(text: Any) -> dict[Key, Tally]:
    """The aggregate a JSON text holds ({} for null or anything that is not one: never raises); entries of
    the same key add up."""
    if not isinstance(text, str):
        return {}
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError):
        return {}
    out: dict[Key, Tally] = {}
    for e in doc if isinstance(doc, list) else ():
        if not (isinstance(e, list) and len(e) == 6 and all(isinstance(x, str) for x in e[:3])):
            continue
        if not all(isinstance(x, int) and not isinstance(x, bool) for x in e[3:]):
            continue
        key, t = (e[0], e[1], e[2]), Tally(e[3], e[4], e[5])
        out[key] = out[key].plus(t) if key in out else t
    return out


def merge(a: Mapping[Key, Tally], b: Mapping[Key, Tally]) -> dict[Key, Tally]:
    out = dict(a)
    for k, t in b.items():
        out[k] = out[k].plus(t) if k in out else t
    return out


def observed_counts(progress: Mapping[str, Any]) -> dict[Key, Tally] | None:
    """The aggregate of a batch progress (the dict of ``StreamingQueryProgress.json``, or the progress
    itself): its ``observedMetrics.dbus_log_counts.counts``; None when the progress has none (a query
    without the observation, or a batch that read nothing)."""
    observed = progress.get("observedMetrics") or {}
    row = observed.get(OBSERVATION) if isinstance(observed, Mapping) else None
    # PySpark's StreamingQueryProgress (a dict) holds Rows, its JSON dicts
    if row is not None and hasattr(row, "asDict"):
        row = row.asDict()
    if not isinstance(row, Mapping) or row.get(FIELD) is None:
        return None
    return parse_counts(row.get(FIELD))


# ------------------------------------------------------------------------------------------ heartbeats


@dataclass(frozen=True)
class Beat:
    """The heartbeats of one table from one host in a batch: the largest latency, how many, and the rows
    of that table from that host since the previous beat point."""

    host: str
    table: str
    latency_ms: int
    beats: int
    rows: int


@dataclass(frozen=True)
class RowsSinceBeat:
    """Rows per (host, table) counted since that pair's last heartbeat (the driver's bookkeeping)."""

    pending: Mapping[tuple[str, str], int]

    @classmethod
    def empty(cls) -> RowsSinceBeat:
        return cls({})

    def step(self, tallies: Mapping[Key, Tally]) -> tuple[RowsSinceBeat, list[Beat]]:
        """After a batch: a Beat per (host, table) with a heartbeat (its rows: the pending ones plus this
        batch's, whose order against the heartbeat within the batch is not known), and the rows still
        pending of the others."""
        pending = dict(self.pending)
        for (kind, host, name), t in tallies.items():
            if kind == ROWS:
                pending[(host, name)] = pending.get((host, name), 0) + t.total
        beats = []
        for (kind, host, name), t in sorted(tallies.items()):
            if kind == HEARTBEAT:
                beats.append(Beat(host, name, t.max, t.count, pending.pop((host, name), 0)))
        return RowsSinceBeat(pending), beats


# -------------------------------------------------------------------------------------------- points


def log_points(ds: str, tallies: Mapping[Key, Tally], at_ms: int) -> list[Any]:
    """The ``dbus_log`` points of a batch's aggregate (see the module docstring); heartbeats are not
    counted here (``heartbeat_points``)."""
    from influxdb_client import Point, WritePrecision

    out = []
    for (kind, host, name), t in sorted(tallies.items()):
        if kind == HEARTBEAT:
            continue
        p = Point(LOG_MEASUREMENT).tag("ds", ds).tag("kind", kind)
        if host:
            p = p.tag("host", host)
        if kind == ROWS and name:
            p = p.tag("table", name)
        elif kind == ERROR and name:
            p = p.tag("code", name)
        out.append(p.field("count", int(t.total)).time(at_ms, WritePrecision.MS))
    return out


def heartbeat_points(ds: str, schema: str, beats: Iterable[Beat], at_ms: int) -> list[Any]:
    """One ``dbus_heartbeat`` point per Beat (see the module docstring)."""
    from influxdb_client import Point, WritePrecision

    out = []
    for b in beats:
        p = Point(HEARTBEAT_MEASUREMENT).tag("ds", ds).tag("schema", schema).tag("table", b.table)
        if b.host:
            p = p.tag("host", b.host)
        out.append(
            p.field("latency_ms", float(b.latency_ms))
            .field("rows", int(b.rows))
            .field("beats", int(b.beats))
            .time(at_ms, WritePrecision.MS)
        )
    return out


class BatchCounts:
    """The driver's state for one query: each batch progress's aggregate -> points, keeping
    ``RowsSinceBeat`` across batches. ``points(progress)`` never raises on odd input."""

    def __init__(self, ds: str, schema: str) -> None:
        self.ds, self.schema = ds, schema
        self.rows = RowsSinceBeat.empty()
        self.invalid = 0

    def points(self, progress: Mapping[str, Any], at_ms: int | None) -> list[Any]:
        """The points of one batch progress, timed ``at_ms`` (its timestamp; None: now)."""
        tallies = observed_counts(progress)
        if not tallies:
            return []
        if at_ms is None:
            at_ms = int(time.time() * 1000)
        invalid = sum(t.count for (k, _, _), t in tallies.items() if k == INVALID)
        if invalid:
            self.invalid += invalid
            log.warning(
                "%s: %d metric(s) of a batch do not parse (%d so far): counted as kind %r; the producer of "
                "the metric column (logprocessor/metrics.py's contract) has a bug",
                self.ds,
                invalid,
                self.invalid,
                INVALID,
            )
        self.rows, beats = self.rows.step(tallies)
        return log_points(self.ds, tallies, at_ms) + heartbeat_points(self.ds, self.schema, beats, at_ms)
