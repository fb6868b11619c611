"""The heartbeat monitor of a log source (docs/logs.md, Heartbeats): its tables are the source's log tables
in the meta store, and it judges each table per host, from the ``dbus_heartbeat`` points the log processor
writes (tags ``ds``, ``schema``, ``table``, ``host``; logprocessor/metrics.py).

- Hosts are those whose heartbeats reached a table within the monitor's lookback (a day, or twice
  ``heartbeat.timeout_s``): a host that stops sending heartbeat lines goes stale on every table, with an
  alert per table naming the host (``<schema>.<table>@<host>.stale``); one silent for longer than the
  lookback is no longer monitored (its open alerts recover as "no longer monitored").
- A table no host has reached within the lookback is one Observation without a host: stale, "never seen",
  ``timeout_s`` after the monitor started.

The incidents are heartbeat.incidents' (``stale``, ``latency``), the dead letters heartbeat.deadletters'
(the log source's ``topics.dead_letter``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from heartbeat.incidents import Observation

STATUSES = ("ok", "abort")  # the tables the processor writes heartbeats to (logprocessor.job._heartbeats)


def log_tables(cfg: Any, ds: str) -> list[tuple[str, str]]:
    """(schema, table) of the log source's tables the processor writes heartbeats to, from the meta store."""
    from dbuslib.logstore import LogStore

    schema = cfg.log_source(ds).schema_name(ds)
    store = LogStore(cfg.endpoints.meta_store.url.get_secret_value())
    try:
        return [(t.schema, t.table) for t in store.tables(ds, schema) if t.status in STATUSES]
    finally:
        store.dispose()


def _ms(t: Any) -> int:
    return int(t.timestamp() * 1000) if isinstance(t, datetime) else int(t)


def log_observations(
    records: Iterable[Mapping[str, Any]], tables: Iterable[tuple[str, str]]
) -> list[Observation]:
    """One Observation per (table, host) of the monitored ``tables`` with a point from that host (the
    newest point of the pair wins), sorted by table then host; one without a host for a table with none.
    Points of other tables, or with no host, are left out."""
    # None in a key: a point without the schema or table tag
    last: dict[tuple[str | None, str | None, str], tuple[int, float | None]] = {}
    for r in records:
        host = r.get("host")
        if not host:
            continue
        key = (r.get("schema"), r.get("table"), host)
        t, value = _ms(r["_time"]), r.get("_value")
        if key not in last or t > last[key][0]:
            last[key] = (t, None if value is None else float(value) / 1000)
    out = []
    for schema, table in tables:
        hosts = sorted(h for s, t, h in last if (s, t) == (schema, table))
        if not hosts:
            out.append(Observation(schema, table))
        for h in hosts:
            t, latency = last[(schema, table, h)]
            out.append(Observation(schema, table, t, latency, host=h))
    return out
