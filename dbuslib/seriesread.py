"""Reading DBus's measurements back: from InfluxDB when there is one (``endpoints.influxdb.url``), else from
the Prometheus that scrapes DBus's exporter (``prometheus.server``, dbuslib/promread.py). Every reader
(``dbus status``, the console, the heartbeat monitor, the demo) asks here, and gets InfluxQL's answer shape
(``[{"name", "tags", "columns", "values"}]``, times in epoch ms) from either.

- ``last``: the newest point of each series of a measurement, one field and ``also`` fields of it;
- ``tallies``: per tag tuple, a tally field (``count``) added up over a window, with the newest values of
  some fields and the largest of others;
- ``buckets``: per fixed bucket of a window, aggregates of fields (the console's charts).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from dbuslib import influx, promread
from dbuslib.config import DbusConfig

Series = dict[str, Any]


def from_prometheus(cfg: DbusConfig) -> bool:
    """True when there is no InfluxDB and Prometheus is where the figures are read."""
    return cfg.endpoints.influxdb.url is None


def _lit(s: str) -> str:
    return "'" + s.replace("\\", "\\\\").replace("'", "\\'") + "'"


def last_points_query(
    ds: str,
    lookback_s: float,
    *,
    measurement: str,
    field: str,
    group_by: tuple[str, ...],
    also: tuple[str, ...] = (),
) -> str:
    """InfluxQL for the last ``field`` point of ``measurement`` in every series of ``ds`` within
    ``lookback_s`` (the heartbeat monitor: the last ``latency_ms`` of every table, heartbeat.monitor;
    ``dbus status`` asks the same of its other measurements).
    ``also`` names fields or ``*`` read from that same point: its columns follow ``last``, and the row's
    time is the point's. (InfluxQL, as the dashboards use: a Flux ``filter |> last()`` on InfluxDB 1.8
    was seen returning nothing to a live monitor while the same points were visible to other queries.)"""
    columns = ", ".join([f'last("{field}")', *(c if c == "*" else f'"{c}"' for c in also)])
    tags = ", ".join(f'"{g}"' for g in group_by)
    group = f" GROUP BY {tags}" if group_by else ""
    return (
        f'SELECT {columns} FROM "{measurement}" WHERE "ds" = {_lit(ds)} '
        f"AND time > now() - {int(lookback_s)}s{group}"
    )


def last(
    cfg: DbusConfig,
    ds: str,
    lookback_s: float,
    *,
    measurement: str,
    field: str,
    group_by: tuple[str, ...],
    also: tuple[str, ...] = (),
) -> list[Series]:
    """``last_points_query``'s answer, from InfluxDB or Prometheus (there a series per label set: the
    readers fold them per key, the newest point winning, as they fold InfluxQL's)."""
    if from_prometheus(cfg):
        server = _server(cfg)
        return promread.last(server, ds, lookback_s, measurement, field, tuple(a for a in also if a != "*"))
    q = last_points_query(ds, lookback_s, measurement=measurement, field=field, group_by=group_by, also=also)
    return influx.influxql(cfg.endpoints.influxdb, q)


def tallies_query(
    ds: str,
    seconds: int,
    measurement: str,
    by: Sequence[str],
    newest: Sequence[str] = (),
    largest: Sequence[str] = (),
) -> str:
    """InfluxQL: per ``by`` tags of ``ds`` within ``seconds``, the ``count`` field summed, the ``newest``
    fields' last values (every point carries them all, so they are of one point) and the ``largest``
    fields' maximum."""
    fields = [
        'sum("count") AS "count"',
        *(f'last("{f}") AS "{f}"' for f in newest),
        *(f'max("{f}") AS "{f}"' for f in largest),
    ]
    group = ", ".join(f'"{b}"' for b in by)
    return (
        f'SELECT {", ".join(fields)} FROM "{measurement}" WHERE "ds" = {_lit(ds)} '
        f"AND time > now() - {int(seconds)}s GROUP BY {group}"
    )


def tallies(
    cfg: DbusConfig,
    ds: str,
    seconds: int,
    measurement: str,
    by: Sequence[str],
    newest: Sequence[str] = (),
    largest: Sequence[str] = (),
) -> list[Series]:
    """``tallies_query``'s answer, from InfluxDB or Prometheus (the exporter's counter of the tally,
    promread.tally; the gauges' newest and largest samples of the window)."""
    if not from_prometheus(cfg):
        return influx.influxql(
            cfg.endpoints.influxdb, tallies_query(ds, seconds, measurement, by, newest, largest)
        )
    server, w = _server(cfg), f"[{max(1, int(seconds))}s]"
    sel = promread.selector(ds)
    parts: dict[str, list[dict[str, Any]]] = {
        "count": promread.query(server, promread.tally(measurement, "count", ds, seconds, by))
    }
    for f in newest:
        names = promread.names(measurement, (f,))
        parts[f] = promread.query(server, f'{{__name__=~"{names}",ds={promread.lit(ds)}}}{w}')
    for f in largest:
        parts[f] = promread.query(server, f"max_over_time({promread.metric_name(measurement, f)}{sel}{w})")
    return promread.fold_columns(parts, by, measurement, int(time.time() * 1000))


def buckets(
    cfg: DbusConfig,
    influxql: str,
    promql: Mapping[str, str],
    by: Sequence[str],
    measurement: str,
    window_s: int,
    bucket_s: int,
) -> list[Series]:
    """Per ``bucket_s`` of the last ``window_s``: ``influxql`` on InfluxDB, else each column's PromQL of
    ``promql`` as a range query on Prometheus (one step per bucket), joined per ``by`` labels."""
    if not from_prometheus(cfg):
        return influx.influxql(cfg.endpoints.influxdb, influxql)
    server, end = _server(cfg), time.time()
    parts = {c: promread.query_range(server, q, end - window_s, end, bucket_s) for c, q in promql.items()}
    return promread.fold_range(parts, by, measurement)


def _server(cfg: DbusConfig) -> str:
    server = cfg.prometheus.server
    assert server is not None  # DbusConfig._a_metrics_reader
    return server
