"""DBus's Prometheus exporter: every measurement DBus writes (docs/monitoring.md), served on ``/metrics``.

DBus's processes write their measurements as InfluxDB points (dbuslib/influx.py), some of them from
places no scraper can reach (a Spark executor's Python worker, a one-shot command). With
``endpoints.influxdb.exporter`` set, every write is sent to this exporter too, in the same line protocol
(``POST /api/v2/write`` or ``/write``, as InfluxDB takes it); the exporter keeps the newest value of each
series and serves them in Prometheus's text format:

- a point's numeric field ``f`` of measurement ``m`` is the gauge ``m_f`` (``dbus_stage_rows_per_s``,
  ``dbus_heartbeat_latency_ms``), its tags its labels; a boolean is 1 or 0, a string field is left out;
- names and label names are made Prometheus-safe (any other character becomes ``_``);
- a series nobody wrote for ``expire_s`` is dropped, so a stopped stage's figures vanish and an alert on
  their absence (``absent_over_time``) fires;
- ``dbus_exporter_points_total`` and ``dbus_exporter_refused_lines_total`` count what was written.

``Latest`` is the pure part (the store and its Prometheus collector); ``app`` the WSGI edge, served by
``dbus metrics exporter`` (cli/metrics.py) with waitress.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from prometheus_client.core import CounterMetricFamily, Metric
from prometheus_client.registry import Collector

from dbuslib.lineprotocol import LineProtocolError, Sample, parse

_UNSAFE = re.compile(r"[^a-zA-Z0-9_]")


def _safe(text: str) -> str:
    """``text`` as a Prometheus name: every character it does not take made ``_``, no leading digit."""
    name = _UNSAFE.sub("_", text)
    return name if not name[:1].isdigit() else f"_{name}"


def metric_name(measurement: str, field: str) -> str:
    """``<measurement>_<field>``, made Prometheus-safe."""
    return _safe(f"{measurement}_{field}")


def label_name(tag: str) -> str:
    name = _safe(tag)
    return name if not name.startswith("__") else f"tag{name}"  # "__" is Prometheus's own


class Latest(Collector):
    """The newest value of each series (metric name and labels), forgotten ``expire_s`` after it was
    last written (``clock``: seconds, monotonic)."""

    def __init__(self, expire_s: float = 600.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.expire_s, self.clock = expire_s, clock
        self._series: dict[tuple[str, tuple[tuple[str, str], ...]], tuple[float, float]] = {}
        self._lock = threading.Lock()
        self.points = 0
        self.refused = 0

    def add(self, samples: Iterable[Sample]) -> int:
        """Keep ``samples``' numeric fields; the number of values kept."""
        now, kept = self.clock(), 0
        with self._lock:
            for s in samples:
                self.points += 1
                labels = tuple(sorted((label_name(k), v) for k, v in s.tags))
                for field, value in s.fields:
                    if isinstance(value, str):
                        continue
                    self._series[(metric_name(s.measurement, field), labels)] = (float(value), now)
                    kept += 1
        return kept

    def write(self, body: bytes) -> int:
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
        return self.add(samples)

    def collect(self) -> Iterator[Metric]:
        now = self.clock()
        families: dict[str, Metric] = {}
        with self._lock:
            for key in [k for k, (_, at) in self._series.items() if now - at > self.expire_s]:
                del self._series[key]
            series = sorted(self._series.items())
            points, refused = self.points, self.refused
        for (name, labels), (value, _) in series:
            family = families.get(name)
            if family is None:
                family = families[name] = Metric(name, f"DBus measurement {name} (newest value)", "gauge")
            family.add_sample(name, dict(labels), value)
        yield from families.values()
        yield CounterMetricFamily("dbus_exporter_points", "points written to the exporter", value=points)
        yield CounterMetricFamily(
            "dbus_exporter_refused_lines", "write requests refused (not line protocol)", value=refused
        )


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
                latest.write(body)
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
