"""DBus's figures read back from Prometheus (``prometheus.server``), for a deployment without InfluxDB.

What ``dbus status``, the console and the heartbeat monitor ask of InfluxDB (dbuslib/seriesread.py) asked
of the Prometheus that scrapes DBus's exporter (dbuslib/promexport.py) instead, and answered in the shape
InfluxDB's ``/query`` answers (``[{"name", "tags", "columns", "values"}]``, times in epoch ms), so every
reader folds both alike:

- the newest point of each series: ``last_over_time`` of each field's gauge, timed by the point's own
  time (``dbus_point_timestamp_seconds``), not by the scrape that served it again;
- what was counted in a window or per bucket (dead letters, log lines, rows between heartbeats): the
  difference of the exporter's counter between the window's end and its start; a series that appeared in
  the window counts from 0, and after the exporter restarted (its counters at 0 again) the count since.

The PromQL is built here (pure, unit-tested); ``query`` and ``query_range`` are the HTTP edge.
"""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from dbuslib.errors import EndpointError
from dbuslib.promnames import POINT_TIME, TALLIES, label_name, metric_name

Series = dict[str, Any]


def lit(text: str) -> str:
    """``text`` as a PromQL string literal."""
    return json.dumps(text)


def selector(ds: str, **labels: str) -> str:
    """``{ds="demo",schema="shop"}``: the label matchers of one source's series."""
    pairs = [("ds", ds), *((label_name(k), v) for k, v in labels.items())]
    return "{" + ",".join(f"{k}={lit(v)}" for k, v in pairs) + "}"


def names(measurement: str, fields: Iterable[str]) -> str:
    """A ``__name__`` regex matching each field's gauge and, for a string field, its ``_info`` gauge."""
    gauges = []
    for f in fields:
        name = metric_name(measurement, f)
        gauges += [name, f"{name}_info"]
    return "|".join(re.escape(n) for n in gauges)


def last_queries(
    ds: str, lookback_s: float, measurement: str, fields: Sequence[str]
) -> tuple[dict[str, str], str]:
    """PromQL for the newest value of each of ``fields`` in every series of ``measurement`` and ``ds``
    within ``lookback_s`` (one query per field: ``last_over_time`` drops the series' name), and for those
    points' own times."""
    window = f"[{max(1, int(lookback_s))}s]"
    values = {
        f: f'last_over_time({{__name__=~"{names(measurement, (f,))}",ds={lit(ds)}}}{window})' for f in fields
    }
    times = f"last_over_time({POINT_TIME}{selector(ds, measurement=measurement)}{window})"
    return values, times


def tally(measurement: str, field: str, ds: str, window_s: int, by: Sequence[str], **labels: str) -> str:
    """PromQL: per ``by``, the ``field`` tally of ``measurement`` counted within ``window_s`` (the counter's
    difference; a series new in the window from 0; after a reset, the count since)."""
    counter = TALLIES[(measurement, field)]
    sel = f"{counter}_total{selector(ds, **labels)}"
    seconds = max(1, int(window_s))
    now, before = f"last_over_time({sel}[{seconds}s])", f"last_over_time({sel}[{seconds}s] offset {seconds}s)"
    group = ", ".join(label_name(b) for b in by)
    return f"sum by ({group}) ((({now} - {before}) >= 0) or {now})"


def _key(metric: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((k, v) for k, v in metric.items() if k not in ("__name__", "value", "measurement")))


def _newest(r: Mapping[str, Any]) -> Any:
    """The value of an instant vector's sample, or the last of a range vector's."""
    values = r.get("values")
    return values[-1][1] if values else r["value"][1]


def _cell(r: Mapping[str, Any]) -> Any:
    """A result's newest value: the text of an ``_info`` gauge (its ``value`` label), else the number."""
    metric = r["metric"]
    return metric["value"] if "value" in metric else _number(_newest(r))


def fold_last(
    values: Mapping[str, Sequence[Mapping[str, Any]]],
    times: Sequence[Mapping[str, Any]],
    measurement: str,
    field: str,
    also: Sequence[str],
) -> list[Series]:
    """``last_queries``' answers (a vector per field, and the points' times) as InfluxQL's: one series per
    label set with a ``field`` value and a time, columns ``time``, ``last``, then ``also``."""
    at = {_key(r["metric"]): float(_newest(r)) for r in times}
    rows: dict[tuple[tuple[str, str], ...], dict[str, Any]] = {}
    for f, vector in values.items():
        for r in vector:
            rows.setdefault(_key(r["metric"]), {})[f] = _cell(r)
    out = []
    for key, row in sorted(rows.items()):
        if field not in row or key not in at:
            continue
        values_row = [int(at[key] * 1000), row[field], *(row.get(a) for a in also)]
        out.append(
            {
                "name": measurement,
                "tags": dict(key),
                "columns": ["time", "last", *also],
                "values": [values_row],
            }
        )
    return out


def fold_columns(
    parts: Mapping[str, Sequence[Mapping[str, Any]]], by: Sequence[str], measurement: str, at_ms: int = 0
) -> list[Series]:
    """Answers, one per column (``{"count": [...], "offset": [...]}``, instant or range vectors: the newest
    sample counts), joined per ``by`` labels into InfluxQL's series (columns ``time`` then the parts', the
    time ``at_ms``); a column a group lacks is None."""
    rows: dict[tuple[str | None, ...], dict[str, Any]] = {}
    for column, vector in parts.items():
        for r in vector:
            key = tuple(r["metric"].get(label_name(b)) for b in by)
            rows.setdefault(key, {})[column] = _cell(r)
    columns = list(parts)
    return [
        {
            "name": measurement,
            "tags": {b: v for b, v in zip(by, key, strict=True) if v is not None},
            "columns": ["time", *columns],
            "values": [[at_ms, *(row.get(c) for c in columns)]],
        }
        for key, row in sorted(rows.items(), key=lambda kv: tuple(v or "" for v in kv[0]))
    ]


def fold_range(
    parts: Mapping[str, Sequence[Mapping[str, Any]]], by: Sequence[str], measurement: str
) -> list[Series]:
    """Range vectors (``query_range``), one per column, joined per ``by`` labels and per time into
    InfluxQL's ``GROUP BY time(...)`` series (columns ``time`` then the parts'), sorted by time."""
    rows: dict[tuple[str | None, ...], dict[int, dict[str, Any]]] = {}
    for column, matrix in parts.items():
        for r in matrix:
            key = tuple(r["metric"].get(label_name(b)) for b in by)
            for t, v in r.get("values") or []:
                rows.setdefault(key, {}).setdefault(int(float(t) * 1000), {})[column] = _number(v)
    columns = list(parts)
    return [
        {
            "name": measurement,
            "tags": {b: v for b, v in zip(by, key, strict=True) if v is not None},
            "columns": ["time", *columns],
            "values": [[t, *(at.get(c) for c in columns)] for t, at in sorted(points.items())],
        }
        for key, points in sorted(rows.items(), key=lambda kv: tuple(v or "" for v in kv[0]))
    ]


def _number(text: Any) -> float | int | None:
    """A Prometheus sample value (a string) as a number: an integral one as int; NaN as None."""
    v = float(text)
    if v != v:  # NaN
        return None
    return int(v) if v.is_integer() and abs(v) < 2**53 else v


# ------------------------------------------------------------------------------------------ the edge


def _get(server: str, path: str, params: Mapping[str, str]) -> Any:
    url = f"{server.rstrip('/')}{path}?{urllib.parse.urlencode(params)}"
    try:
        with urllib.request.urlopen(url, timeout=10) as resp:
            body = json.load(resp)
    except urllib.error.HTTPError as e:
        detail = e.read()[:300].decode("utf-8", "replace")
        msg = f"Prometheus at {server} refused a query ({e.code}): {detail}"
        raise EndpointError(msg) from None
    except (urllib.error.URLError, OSError, ValueError) as e:
        msg = f"Prometheus at {server} cannot be read: {e}"
        raise EndpointError(msg) from None
    if body.get("status") != "success":
        msg = f"Prometheus at {server}: {body.get('errorType')}: {body.get('error')}"
        raise EndpointError(msg)
    return body["data"]["result"]


def query(server: str, promql: str) -> list[dict[str, Any]]:
    """An instant query on ``/api/v1/query``: its vector. EndpointError when the server fails or refuses."""
    return list(_get(server, "/api/v1/query", {"query": promql}))


def query_range(server: str, promql: str, start: float, end: float, step_s: int) -> list[dict[str, Any]]:
    """A range query on ``/api/v1/query_range``: its matrix."""
    params = {"query": promql, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": f"{int(step_s)}s"}
    return list(_get(server, "/api/v1/query_range", params))


def last(
    server: str, ds: str, lookback_s: float, measurement: str, field: str, also: Sequence[str] = ()
) -> list[Series]:
    """The newest point of every series of ``measurement`` and ``ds`` within ``lookback_s`` with ``field``
    and ``also``, in InfluxQL's shape (``fold_last``)."""
    values_q, times_q = last_queries(ds, lookback_s, measurement, (field, *also))
    values = {f: query(server, q) for f, q in values_q.items()}
    return fold_last(values, query(server, times_q), measurement, field, also)
