"""DBus's Prometheus exporter: every measurement DBus writes (docs/monitoring.md), served on ``/metrics``.

DBus's processes write their measurements as InfluxDB points (dbuslib/influx.py), some of them from
places no scraper can reach (a Spark executor's Python worker, a one-shot command). With
``endpoints.influxdb.exporter`` set, every write is sent to this exporter too, in the same line protocol
(``POST /api/v2/write`` or ``/write``, as InfluxDB takes it); the exporter keeps the newest value of each
series and serves them in Prometheus's text format:

- a point's numeric field ``f`` of measurement ``m`` is the gauge ``m_f`` (``dbus_stage_rows_per_s``,
  ``dbus_heartbeat_latency_ms``), its tags its labels; a boolean is 1 or 0;
- names and label names are made Prometheus-safe (any other character becomes ``_``);
- a string field ``f`` is the info gauge ``m_f_info`` (value 1) with the newest text as its label ``value``;
- the newest point's own time (its timestamp, or the exporter's clock when it has none) is
  ``dbus_point_timestamp_seconds{measurement="m", <its tags>}``: Prometheus stamps a sample with its scrape,
  so this is how a reader (dbuslib/promread.py) tells a fresh heartbeat from one served again;
- a tally (the ``count`` field of ``dbus_dead_letter`` and ``dbus_log``, ``rows`` of ``dbus_heartbeat``:
  what was counted since the writer's last point) is also added up into a counter, which never expires,
  so what was counted in any window is the counter's difference, not one point's value
  (``dbus_dead_letters_total``, ``dbus_log_lines_total``, ``dbus_heartbeat_rows_total``);
- a series nobody wrote for ``expire_s`` is dropped, so a stopped stage's figures vanish and an alert on
  their absence (``absent_over_time``) fires;
- ``dbus_exporter_points_total`` and ``dbus_exporter_refused_lines_total`` count what was written.

``Latest`` is the pure part (the store and its Prometheus collector); ``app`` the WSGI edge, served by
``dbus metrics exporter`` (cli/metrics.py) with waitress.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from prometheus_client.core import CounterMetricFamily, Metric
from prometheus_client.registry import Collector

from dbuslib.lineprotocol import LineProtocolError, Sample, parse
from dbuslib.promnames import POINT_TIME, TALLIES, label_name, metric_name

Labels = tuple[tuple[str, str], ...]


class Latest(Collector):
    """The newest value of each series (metric name and labels), forgotten ``expire_s`` after it was
    last written (``clock``: seconds, monotonic); ``wall``: the time of a point written without one."""

    def __init__(
        self,
        expire_s: float = 600.0,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.expire_s, self.clock, self.wall = expire_s, clock, wall
        # (name, labels) -> (value, written at); a string field's value is its text
        self._series: dict[tuple[str, Labels], tuple[float | str, float]] = {}
        self._totals: dict[tuple[str, Labels], float] = {}
        self._lock = threading.Lock()
        self.points = 0
        self.refused = 0

    def add(self, samples: Iterable[Sample], unit_ns: int = 1) -> int:
        """Keep ``samples``' fields, each point's time (its timestamp in units of ``unit_ns`` nanoseconds,
        the write's precision), the tallies' totals; the number of values kept."""
        now, kept = self.clock(), 0
        with self._lock:
            for s in samples:
                self.points += 1
                labels = tuple(sorted((label_name(k), v) for k, v in s.tags))
                # int / int: correctly rounded
                at = self.wall() if s.time_ns is None else s.time_ns * unit_ns / 10**9
                point_labels = tuple(sorted((*labels, ("measurement", s.measurement))))
                self._series[(POINT_TIME, point_labels)] = (at, now)
                for field, value in s.fields:
                    name = metric_name(s.measurement, field)
                    if isinstance(value, str):
                        self._series[(f"{name}_info", labels)] = (value, now)
                        continue
                    self._series[(name, labels)] = (float(value), now)
                    counter = TALLIES.get((s.measurement, field))
                    if counter:
                        key = (counter, labels)
                        self._totals[key] = self._totals.get(key, 0.0) + float(value)
                    kept += 1
        return kept

    def write(self, body: bytes, unit_ns: int = 1) -> int:
        """A write request's body (line protocol, UTF-8): the values kept; ``LineProtocolError`` refuses
        the whole body (as InfluxDB does), counted in ``refused``."""
        try:
            try:
                text = body.decode("utf-8")
            except UnicodeDecodeError as e:
                msg = f"not UTF-8: {e}"
                raise LineProtocolError(msg) from None
            samples = parse(text)
        except LineProtocolError:
            with self._lock:
                self.refused += 1
            raise
        return self.add(samples, unit_ns)

    def collect(self) -> Iterator[Metric]:
        now = self.clock()
        families: dict[str, Metric] = {}
        with self._lock:
            for key in [k for k, (_, at) in self._series.items() if now - at > self.expire_s]:
                del self._series[key]
            series = sorted(self._series.items())
            points, refused = self.points, self.refused
            totals = sorted(self._totals.items())
        for (name, labels), (value, _) in series:
            family = families.get(name)
            if family is None:
                family = families[name] = Metric(name, _help(name), "gauge")
            if isinstance(value, str):
                family.add_sample(name, {**dict(labels), "value": value}, 1.0)
            else:
                family.add_sample(name, dict(labels), value)
        yield from families.values()
        counters: dict[str, Metric] = {}
        for (name, labels), total in totals:
            if name not in counters:
                counters[name] = Metric(
                    name, f"DBus tally {name} added up since the exporter started", "counter"
                )
            counters[name].add_sample(f"{name}_total", dict(labels), total)
        yield from counters.values()
        yield CounterMetricFamily("dbus_exporter_points", "points written to the exporter", value=points)
        yield CounterMetricFamily(
            "dbus_exporter_refused_lines", "write requests refused (not line protocol)", value=refused
        )


# a write's ``precision`` (InfluxDB's 2.x API: ns, us, ms, s; 1.x's /write: n, u, ms, s, m, h) in nanoseconds
_PRECISION_NS = {
    "ns": 1,
    "n": 1,
    "us": 1_000,
    "u": 1_000,
    "ms": 1_000_000,
    "s": 1_000_000_000,
    "m": 60_000_000_000,
    "h": 3_600_000_000_000,
}


def precision_ns(query_string: str) -> int:
    """The unit of a write's timestamps, in nanoseconds, from its ``precision`` parameter (ns when none or
    unknown, as InfluxDB's default)."""
    from urllib.parse import parse_qs

    values = parse_qs(query_string).get("precision") or ["ns"]
    return _PRECISION_NS.get(values[-1], 1)


def _help(name: str) -> str:
    if name == POINT_TIME:
        return "the time of the newest point of each DBus series (epoch seconds)"
    if name.endswith("_info"):
        return f"DBus measurement {name.removesuffix('_info')} (newest text, as the label value)"
    return f"DBus measurement {name} (newest value)"


def app(latest: Latest, *more: Any) -> Callable[..., Iterable[bytes]]:
    """The exporter's WSGI application: ``/metrics`` (``latest``'s series and those of ``more``
    collectors), the writes (``/api/v2/write``, ``/write``) and ``/ping`` (which influxdb-client asks
    first)."""
    from prometheus_client import CollectorRegistry
    from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest

    registry = CollectorRegistry(auto_describe=False)
    for collector in (latest, *more):
        registry.register(collector)

    def wsgi(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        path, method = environ.get("PATH_INFO", ""), environ.get("REQUEST_METHOD", "GET")
        if path == "/metrics" and method == "GET":
            start_response("200 OK", [("Content-Type", CONTENT_TYPE_LATEST)])
            return [generate_latest(registry)]
        if path in ("/api/v2/write", "/write") and method == "POST":
            length = int(environ.get("CONTENT_LENGTH") or 0)
            body = environ["wsgi.input"].read(length)
            if environ.get("HTTP_CONTENT_ENCODING") == "gzip":
                import gzip

                body = gzip.decompress(body)
            try:
                latest.write(body, precision_ns(environ.get("QUERY_STRING", "")))
            except LineProtocolError as e:
                start_response("400 Bad Request", [("Content-Type", "application/json")])
                return [f'{{"code":"invalid","message":{_json_text(str(e))}}}'.encode()]
            start_response("204 No Content", [])
            return []
        if path in ("/ping", "/health"):
            start_response("204 No Content", [("X-Influxdb-Version", "dbus-exporter")])
            return []
        start_response("404 Not Found", [("Content-Type", "text/plain")])
        return [b"not found: /metrics, /api/v2/write, /write, /ping\n"]

    return wsgi


def _json_text(text: str) -> str:
    import json

    return json.dumps(text)
