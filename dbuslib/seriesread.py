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
from dataclasses import dataclass
from typing import Any

from dbuslib import influx, promread
from dbuslib.config import DbusConfig

Series = dict[str, Any]


def from_prometheus(cfg: DbusConfig) -> bool:
    """True when there is no InfluxDB and Prometheus is where the figures are read."""
    return cfg.endpoints.influxdb.url is None


def influxql_string(s: str) -> str:
    """``s`` as an InfluxQL string literal (backslash and quote escaped)."""
    return "'" + s.replace("\\", "\\\\").replace("'", "\\'") + "'"


@dataclass(frozen=True)
class Newest:
    """What ``last`` reads: the newest ``field`` point of ``measurement`` per ``group_by`` tags, and the
    ``also`` fields of that same point (``*``: every field, InfluxDB only)."""

    measurement: str
    field: str
    group_by: tuple[str, ...]
    also: tuple[str, ...] = ()


def last_points_query(ds: str, lookback_s: float, what: Newest) -> str:
    """InfluxQL for ``what`` in every series of ``ds`` within ``lookback_s`` (the heartbeat monitor: the
    last ``latency_ms`` of every table, heartbeat.monitor; ``dbus status`` asks the same of its other
    measurements). The ``also`` columns follow ``last``, and the row's time is the point's. (InfluxQL, as
    the dashboards use: a Flux ``filter |> last()`` on InfluxDB 1.8 was seen returning nothing to a live
    monitor while the same points were visible to other queries.)"""
    columns = ", ".join([f'last("{what.field}")', *(c if c == "*" else f'"{c}"' for c in what.also)])
    tags = ", ".join(f'"{g}"' for g in what.group_by)
    group = f" GROUP BY {tags}" if what.group_by else ""
    return (
        f'SELECT {columns} FROM "{what.measurement}" WHERE "ds" = {influxql_string(ds)} '
        f"AND time > now() - {int(lookback_s)}s{group}"
    )


def last(cfg: DbusConfig, ds: str, lookback_s: float, what: Newest) -> list[Series]:
    """``last_points_query``'s answer, from InfluxDB or Prometheus (there a series per label set: the
    readers fold them per key, the newest point winning, as they fold InfluxQL's)."""
    if from_prometheus(cfg):
        also = tuple(a for a in what.also if a != "*")
        return promread.last(_server(cfg), ds, lookback_s, what.measurement, what.field, also)
    return influx.influxql(cfg.endpoints.influxdb, last_points_query(ds, lookback_s, what))


@dataclass(frozen=True)
class Tally:
    """What ``tallies`` reads: per ``by`` tags, the ``count`` field of ``measurement`` summed over a
    window, the ``newest`` fields' last values and the ``largest`` fields' maximum."""

    measurement: str
    by: tuple[str, ...]
    newest: tuple[str, ...] = ()
    largest: tuple[str, ...] = ()


def tallies_query(ds: str, seconds: int, what: Tally) -> str:
    """InfluxQL for ``what`` in ``ds`` within ``seconds`` (the ``newest`` of one point: every point carries
    them all)."""
    fields = [
        'sum("count") AS "count"',
        *(f'last("{f}") AS "{f}"' for f in what.newest),
        *(f'max("{f}") AS "{f}"' for f in what.largest),
    ]
    group = ", ".join(f'"{b}"' for b in what.by)
    return (
        f'SELECT {", ".join(fields)} FROM "{what.measurement}" WHERE "ds" = {influxql_string(ds)} '
        f"AND time > now() - {int(seconds)}s GROUP BY {group}"
    )


def tallies(cfg: DbusConfig, ds: str, seconds: int, what: Tally) -> list[Series]:
    """``tallies_query``'s answer, from InfluxDB or Prometheus (the exporter's counter of the tally,
    promread.tally; the gauges' newest and largest values of the window)."""
    if not from_prometheus(cfg):
        return influx.influxql(cfg.endpoints.influxdb, tallies_query(ds, seconds, what))
    server, m = _server(cfg), what.measurement
    count = promread.tally(m, "count", ds, seconds, what.by)
    parts: dict[str, list[dict[str, Any]]] = {"count": promread.query(server, count)}
    newest, _ = promread.last_queries(ds, seconds, m, what.newest)
    parts.update({f: promread.query(server, q) for f, q in newest.items()})
    window = f"{promread.selector(ds)}[{max(1, int(seconds))}s]"
    for f in what.largest:
        parts[f] = promread.query(server, f"max_over_time({promread.metric_name(m, f)}{window})")
    return promread.fold_columns(parts, what.by, m, int(time.time() * 1000))


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
