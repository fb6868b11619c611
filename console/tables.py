"""The console's Tables page (docs/console.md, Tables): every table of every source with its newest
heartbeat and current schema version, and per table its version history, masking rules and charts.

- ``/tables/``: the list; ``/tables/api/tables`` its JSON, polled every ``refresh_s``. A database source's
  tables are those the meta store holds versions of (``dbus_meta_version``, written by the appender),
  those with a ``dbus_heartbeat`` point in the last day and those the heartbeat writer monitors
  (heartbeat.writer.monitored_tables, listed again every ``MONITORED_TTL_S``); a log source's are its log
  tables in the meta store (dbuslib.logstore).
- ``/tables/<ds>/<schema>.<table>``: one table. Its versions (oldest first in the JSON, newest first on
  the page), each with the columns added, dropped and retyped since the version before and where it
  starts: the binlog position (``since``: file number * 10^13 + offset, as ``ums_id_``) for a database
  table, the publication time for a log table. Its masking rules from the configuration
  (``sources.<ds>.masking``): column, rule type and the pattern that names it; never a salt or a value.
  ``/tables/api/<ds>/<schema>.<table>`` gives its newest heartbeat and the charts' series: per minute of
  the last hour, the mean heartbeat latency and the rows/s between heartbeats (``CHART_QUERY``).

The pure parts (``version_changes``, ``chart_series``, ``table_rows``, ``masking_rules``) are tested
without a server (tests/unit/test_console_tables.py); the readers around them report what they could not
read in ``errors`` and give the rest.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, cast

from flask import Blueprint, abort, render_template

from console.auth import config, viewer_required
from ums.ids import parse_ums_id

TITLE = "Tables"
bp = Blueprint("tables", __name__, url_prefix="/tables")

CHART_WINDOW_S = 3600  # the charts: the last hour ...
CHART_BUCKET_S = 60  # ... per minute
MONITORED_TTL_S = 60.0  # the heartbeat writer's table listing (a MySQL query) is read again after this
HEARTBEAT = "dbus_heartbeat"  # binlog.heartbeat.MEASUREMENT


# ------------------------------------------------------------------------------------------------ pure


@dataclass(frozen=True)
class TableVersion:
    """One schema version of a table as the stores give it: ``since`` the binlog id it starts at (database
    tables), ``published_ms`` when it was published (log tables); ``columns`` (name, type) in order."""

    version: int
    reason: str
    columns: tuple[tuple[str, str], ...]
    since: int | None = None
    published_ms: int | None = None


@dataclass(frozen=True)
class Retyped:
    name: str
    before: str
    after: str


@dataclass(frozen=True)
class VersionChange:
    """A version and what changed from the version before it (nothing for the first one)."""

    version: int
    reason: str
    since: int | None
    binlog_file_number: int | None
    binlog_offset: int | None
    published_ms: int | None
    columns: tuple[tuple[str, str], ...]
    added: tuple[str, ...]
    dropped: tuple[str, ...]
    retyped: tuple[Retyped, ...]


def column_diff(
    old: Sequence[tuple[str, str]], new: Sequence[tuple[str, str]]
) -> tuple[tuple[str, ...], tuple[str, ...], tuple[Retyped, ...]]:
    """(added, dropped, retyped) from ``old`` to ``new`` columns: names in ``new``'s order for added and
    retyped, in ``old``'s for dropped; a column whose type text differs is retyped."""
    before, after = dict(old), dict(new)
    added = tuple(n for n, _ in new if n not in before)
    dropped = tuple(n for n, _ in old if n not in after)
    retyped = tuple(Retyped(n, before[n], t) for n, t in new if n in before and before[n] != t)
    return added, dropped, retyped


def _position(since: int | None) -> tuple[int | None, int | None]:
    if since is None:
        return None, None
    try:
        return parse_ums_id(since)
    except ValueError:
        return None, None  # a since beyond a ums_id_: shown as the number alone


def position_text(since: int | None) -> str | None:
    """A binlog id as ``.000103:12345678`` (file number, offset), None for None."""
    file_number, offset = _position(since)
    return None if file_number is None else f".{file_number:06d}:{offset}"


def version_changes(versions: Iterable[TableVersion]) -> list[VersionChange]:
    """Each version (sorted by number) with its columns added, dropped and retyped since the one before."""
    out: list[VersionChange] = []
    previous: tuple[tuple[str, str], ...] | None = None
    for v in sorted(versions, key=lambda v: v.version):
        added, dropped, retyped = column_diff(previous, v.columns) if previous is not None else ((), (), ())
        file_number, offset = _position(v.since)
        out.append(
            VersionChange(
                v.version,
                v.reason,
                v.since,
                file_number,
                offset,
                v.published_ms,
                v.columns,
                added,
                dropped,
                retyped,
            )
        )
        previous = v.columns
    return out


def chart_query(ds: str, schema: str, table: str, window_s: int = CHART_WINDOW_S) -> str:
    """InfluxQL: per ``CHART_BUCKET_S`` of the last ``window_s``, the mean and max heartbeat latency (ms)
    and the rows counted between heartbeats (summed over a log table's hosts) of one table."""
    from dbuslib.seriesread import influxql_string as lit

    return (
        f'SELECT mean("latency_ms") AS "latency_ms", max("latency_ms") AS "latency_max_ms", '
        f'sum("rows") AS "rows" FROM "{HEARTBEAT}" WHERE "ds" = {lit(ds)} AND "schema" = {lit(schema)} '
        f'AND "table" = {lit(table)} AND time > now() - {int(window_s)}s '
        f"GROUP BY time({CHART_BUCKET_S}s) fill(null)"
    )


def chart_series(series: Iterable[Mapping[str, Any]], bucket_s: int = CHART_BUCKET_S) -> dict[str, Any]:
    """``chart_query``'s answer as the page's chart data: ``{"bucket_s", "latency_ms": [[t_ms, ms|None],
    ...], "rows_per_s": [[t_ms, rows/s|None], ...]}``, sorted by time, one point per bucket (None: no
    heartbeat in it, a gap in the line). Several series (should a tag split them) add their rows and take
    the larger latency."""
    latency: dict[int, float | None] = {}
    rows: dict[int, float | None] = {}
    for s in series:
        cols = list(s.get("columns") or [])
        for values in s.get("values") or []:
            r = dict(zip(cols, values, strict=False))
            t = int(r["time"])
            lat, n = r.get("latency_ms"), r.get("rows")
            latency.setdefault(t, None)
            rows.setdefault(t, None)
            if lat is not None:
                prev = latency[t]
                latency[t] = float(lat) if prev is None else max(prev, float(lat))
            if n is not None:
                rows[t] = (rows[t] or 0.0) + float(n)
    times = sorted(latency)
    return {
        "bucket_s": bucket_s,
        "latency_ms": [[t, latency[t]] for t in times],
        "rows_per_s": [[t, _per_s(rows[t], bucket_s)] for t in times],
    }


def _per_s(n: float | None, seconds: int) -> float | None:
    return None if n is None else n / seconds


@dataclass(frozen=True)
class Beat:
    """A table's newest heartbeat: latency (ms), rows between it and the one before, its age (s)."""

    latency_ms: float | None
    rows: int | None
    age_s: float


def table_rows(
    ds: str,
    kind: str,
    versions: Mapping[tuple[str, str], tuple[int, int | None]],
    beats: Mapping[tuple[str, str], Beat],
    monitored: Iterable[tuple[str, str]] = (),
) -> list[dict[str, Any]]:
    """One row per table known to any of the readers, sorted by schema and table: ``versions`` (schema,
    table) -> (current version, since), ``beats`` the newest heartbeats, ``monitored`` the tables the
    heartbeat writer monitors (None fields where a reader does not know the table)."""
    watched = set(monitored)
    out = []
    for schema, table in sorted(set(versions) | set(beats) | watched):
        version, since = versions.get((schema, table), (None, None))
        beat = beats.get((schema, table))
        out.append(
            {
                "source": ds,
                "kind": kind,
                "schema": schema,
                "table": table,
                "version": version,
                "since": since,
                "position": position_text(since),
                "latency_ms": None if beat is None else beat.latency_ms,
                "rows": None if beat is None else beat.rows,
                "heartbeat_age_s": None if beat is None else beat.age_s,
                "monitored": (schema, table) in watched if kind == "database" else None,
            }
        )
    return out


def masking_rules(masking: Mapping[str, Mapping[str, Any]], schema: str, table: str) -> list[dict[str, Any]]:
    """The masking rules that apply to ``schema.table`` (``sources.<ds>.masking``: the most specific
    pattern naming a column wins, as the appender applies them), by column: its rule ``type``, the
    ``pattern`` that names it, ``salted`` ("fixed salt", "column <name>" or None) and a truncate's
    ``length``. No salt, replacement value or regex is given: the page needs none of them."""
    from ums.masking import compile_rules

    rules = compile_rules(masking).rules_for(schema, table)
    if rules is None:
        return []
    out = []
    for column in sorted(rules.rules):
        rule = rules.rules[column].rule
        salted = (
            f"column {rule.salt_field}"
            if rule.salt_field
            else ("fixed salt" if rule.salt is not None and rule.salt.get_secret_value() else None)
        )
        out.append(
            {
                "column": column,
                "type": rule.type,
                "pattern": rules.rules[column].pattern,
                "salted": salted,
                "length": rule.length if rule.type == "truncate" else None,
            }
        )
    return out


def utc(ms: int | None) -> str:
    """Epoch milliseconds as ``2026-11-25 10:26:23 UTC`` ("-" for None)."""
    if ms is None:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(ms / 1000))


def split_name(name: str) -> tuple[str, str] | None:
    """``"shop.orders"`` -> ("shop", "orders"); None when it is not ``schema.table``."""
    schema, dot, table = name.partition(".")
    return (schema, table) if dot and schema and table else None


# --------------------------------------------------------------------------------------------- readers


class Errors:
    """What could not be read, each named; the rest of the answer still stands."""

    def __init__(self) -> None:
        self.items: list[str] = []

    def attempt(self, what: str, fn: Callable[[], Any], default: Any) -> Any:
        try:
            return fn()
        except Exception as e:
            self.items.append(f"{what}: {type(e).__name__}: {e}")
            return default


_stores: dict[tuple[str, str], Any] = {}
_stores_lock = threading.Lock()


def _store(kind: str, url: str) -> Any:
    """One MetaStore / LogStore (its connection pool) per meta store URL for the console's life."""
    with _stores_lock:
        if (kind, url) not in _stores:
            if kind == "meta":
                from dbuslib.metastore import MetaStore

                _stores[(kind, url)] = MetaStore(url)
            else:
                from dbuslib.logstore import LogStore

                _stores[(kind, url)] = LogStore(url)
        return _stores[(kind, url)]


def _meta_url(cfg: Any) -> str:
    return str(cfg.endpoints.meta_store.url.get_secret_value())


def current_versions(cfg: Any, ds: str) -> dict[tuple[str, str], tuple[int, int | None]]:
    """(schema, table) -> (newest version, its since) of a database source, from ``dbus_meta_version``."""
    from sqlalchemy import select

    from dbuslib.metastore import meta_version

    store = _store("meta", _meta_url(cfg))
    q = select(
        meta_version.c.schema_name, meta_version.c.table_name, meta_version.c.version, meta_version.c.since_id
    ).where(meta_version.c.ds == ds)
    out: dict[tuple[str, str], tuple[int, int | None]] = {}
    with store.engine.connect() as conn:
        for schema, table, version, since in conn.execute(q).all():
            if (schema, table) not in out or out[(schema, table)][0] < version:
                out[(schema, table)] = (int(version), int(since))
    return out


def _log_columns(text: str) -> tuple[tuple[str, str], ...]:
    return tuple((c["name"], c["type"]) for c in json.loads(text or "[]"))


def log_tables(cfg: Any, ds: str) -> list[Any]:
    store = _store("log", _meta_url(cfg))
    return cast(list[Any], store.tables(ds, cfg.log_source(ds).schema_name(ds)))


def newest_beats(cfg: Any, ds: str, now: float) -> dict[tuple[str, str], Beat]:
    """The newest ``dbus_heartbeat`` point of each table of ``ds`` within the last day (``dbus status``'s
    query and folding: dbuslib.seriesread.last, status.readers.last_points)."""
    from binlog.heartbeat import LOOKBACK_S
    from dbuslib import seriesread
    from status.readers import last_points

    keys = ("schema", "table")
    series = seriesread.last(cfg, ds, LOOKBACK_S, seriesread.Newest(HEARTBEAT, "latency_ms", keys, ("rows",)))
    points = last_points(series, "latency_ms", keys)
    out = {}
    for (schema, table), p in points.items():
        if schema is None or table is None:
            continue
        latency, rows = p.get("latency_ms"), p.get("rows")
        out[(schema, table)] = Beat(
            None if latency is None else float(latency),
            None if rows is None else int(rows),
            round(max(0.0, now - p["_time"] / 1000), 3),
        )
    return out


_monitored: dict[str, tuple[float, list[tuple[str, str]]]] = {}


def monitored(cfg: Any, ds: str, now: float) -> list[tuple[str, str]]:
    """The tables the heartbeat writer of ``ds`` monitors now (a MySQL listing, kept ``MONITORED_TTL_S``)."""
    cached = _monitored.get(ds)
    if cached is not None and now - cached[0] < MONITORED_TTL_S:
        return cached[1]
    from dbuslib import mysql
    from heartbeat.writer import monitored_tables

    db = mysql.connect(cfg.source(ds).mysql)
    try:
        tables = monitored_tables(cfg, ds, db)
    finally:
        db.close()
    _monitored[ds] = (now, tables)
    return tables


def _database_tables(cfg: Any, ds: str, at: float) -> dict[str, Any]:
    errors = Errors()
    versions = errors.attempt("meta store", lambda: current_versions(cfg, ds), {})
    beats = errors.attempt(HEARTBEAT, lambda: newest_beats(cfg, ds, at), {})
    watched = errors.attempt("monitored tables (MySQL)", lambda: monitored(cfg, ds, at), [])
    rows = table_rows(ds, "database", versions, beats, watched)
    return {"source": ds, "kind": "database", "tables": rows, "errors": errors.items}


def _log_tables(cfg: Any, ds: str, at: float) -> dict[str, Any]:
    errors = Errors()
    found = errors.attempt("meta store (log tables)", lambda: log_tables(cfg, ds), [])
    versions = {(t.schema, t.table): (t.version, None) for t in found}
    beats = errors.attempt(HEARTBEAT, lambda: newest_beats(cfg, ds, at), {})
    ours = {k: v for k, v in beats.items() if k in versions}  # a table removed since: not listed
    rows = table_rows(ds, "log", versions, ours)
    return {"source": ds, "kind": "log", "tables": rows, "errors": errors.items}


def all_tables(cfg: Any, now: float | None = None) -> dict[str, Any]:
    """``{"sources": [{"source", "kind", "tables": [table_rows...], "errors"}]}``, database sources first."""
    at = time.time() if now is None else now
    out = []
    for ds in sorted(cfg.sources):
        out.append(_database_tables(cfg, ds, at))
    for ds in sorted(cfg.log_sources):
        out.append(_log_tables(cfg, ds, at))
    return {"sources": out}


def history(cfg: Any, ds: str, schema: str, table: str) -> list[TableVersion]:
    """Every version of one table, oldest first (the meta store's, or the log store's published ones)."""
    if ds in cfg.log_sources:
        store = _store("log", _meta_url(cfg))
        found = store.table(ds, schema, table)
        if found is None:
            return []
        return [
            TableVersion(
                p.version,
                "columns" if p.columns_changed else "rules",
                _log_columns(p.columns),
                published_ms=p.published_ms,
            )
            for p in store.versions(found)
        ]
    meta = _store("meta", _meta_url(cfg))
    return [
        TableVersion(
            v.version, v.reason.value, tuple((c.name, c.column_type) for c in v.columns), since=v.since
        )
        for v in meta.history(ds, schema, table)
    ]


def chart_promql(ds: str, schema: str, table: str, bucket_s: int = CHART_BUCKET_S) -> dict[str, str]:
    """``chart_query``'s columns in PromQL, for a range query with one step per bucket: the latency's
    mean and max over the scrapes of each bucket (the larger of a log table's hosts), the rows counted
    between heartbeats added up (the exporter's counter, dbuslib.promread.tally)."""
    from dbuslib import promread

    sel = promread.selector(ds, schema=schema, table=table)
    latency, w = f"dbus_heartbeat_latency_ms{sel}", f"[{int(bucket_s)}s]"
    return {
        "latency_ms": f"max(avg_over_time({latency}{w}))",
        "latency_max_ms": f"max(max_over_time({latency}{w}))",
        "rows": promread.tally(HEARTBEAT, "rows", ds, bucket_s, (), schema=schema, table=table),
    }


def chart(cfg: Any, ds: str, schema: str, table: str) -> dict[str, Any]:
    from dbuslib import seriesread

    series = seriesread.buckets(
        cfg,
        chart_query(ds, schema, table),
        chart_promql(ds, schema, table),
        (),
        HEARTBEAT,
        CHART_WINDOW_S,
        CHART_BUCKET_S,
    )
    return chart_series(series)


def table_figures(cfg: Any, ds: str, schema: str, table: str, now: float | None = None) -> dict[str, Any]:
    """What the table's page polls: its newest heartbeat, current version and the charts' series."""
    at = time.time() if now is None else now
    errors = Errors()
    beats = errors.attempt(HEARTBEAT, lambda: newest_beats(cfg, ds, at), {})
    beat = beats.get((schema, table))
    versions = errors.attempt("versions (meta store)", lambda: history(cfg, ds, schema, table), [])
    empty = chart_series([])
    return {
        "source": ds,
        "schema": schema,
        "table": table,
        "version": versions[-1].version if versions else None,
        "versions": len(versions),
        "heartbeat": None if beat is None else asdict(beat),
        "charts": errors.attempt(
            f"{HEARTBEAT} over the last hour", lambda: chart(cfg, ds, schema, table), empty
        ),
        "window_s": CHART_WINDOW_S,
        "errors": errors.items,
    }


# ----------------------------------------------------------------------------------------------- pages


def _known(ds: str, name: str) -> tuple[str, str]:
    cfg = config()
    if ds not in cfg.sources and ds not in cfg.log_sources:
        abort(404, description=f"no source {ds!r} in the configuration")
    parts = split_name(name)
    if parts is None:
        abort(404, description=f"{name!r} is not schema.table")
    return parts


@bp.route("/")
@viewer_required
def index() -> Any:
    return render_template("tables.html")


@bp.route("/api/tables")
@viewer_required
def api_tables() -> Any:
    return all_tables(config())


@bp.route("/<ds>/<name>")
@viewer_required
def table_page(ds: str, name: str) -> Any:
    schema, table = _known(ds, name)
    cfg = config()
    errors = Errors()
    versions = errors.attempt("versions (meta store)", lambda: history(cfg, ds, schema, table), [])
    masking = (cfg.log_sources[ds] if ds in cfg.log_sources else cfg.sources[ds]).masking
    masks = errors.attempt("masking rules", lambda: masking_rules(masking, schema, table), [])
    return render_template(
        "table.html",
        ds=ds,
        kind="log" if ds in cfg.log_sources else "database",
        schema=schema,
        table=table,
        changes=list(reversed(version_changes(versions))),
        masks=masks,
        errors=errors.items,
        window_min=CHART_WINDOW_S // 60,
        utc=utc,
    )


@bp.route("/api/<ds>/<name>")
@viewer_required
def api_table(ds: str, name: str) -> Any:
    schema, table = _known(ds, name)
    return table_figures(config(), ds, schema, table)
