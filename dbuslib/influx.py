"""The time-series edge: influxdb-client against the configured server (InfluxDB 1.8 on the local stack).

Writes go to ``/api/v2/write``, reads are Flux queries on ``/api/v2/query``; with InfluxDB 1.8 the
bucket is ``<database>/<retention policy>`` (``dbus/autogen``) and the org is ignored.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

from influxdb_client import InfluxDBClient, Point
from influxdb_client.client.write_api import SYNCHRONOUS

from dbuslib.config import InfluxEndpoint
from dbuslib.errors import EndpointError


def _url(cfg: InfluxEndpoint) -> str:
    if cfg.url is None:
        msg = "no InfluxDB is configured (endpoints.influxdb.url): its figures are in Prometheus"
        raise EndpointError(msg)
    return cfg.url


@contextmanager
def client(cfg: InfluxEndpoint) -> Iterator[InfluxDBClient]:
    with InfluxDBClient(url=_url(cfg), token=cfg.token.get_secret_value(), org=cfg.org, timeout=10_000) as c:
        if not c.ping():
            msg = f"the time-series server at {cfg.url} does not answer /ping"
            raise EndpointError(msg)
        yield c


def write(cfg: InfluxEndpoint, points: list[Point]) -> None:
    """Write synchronously: when this returns, the points are stored; and to the Prometheus exporter
    (``cfg.exporter``) first when there is one (``to_exporter``). Without InfluxDB (no ``url``) the
    exporter is the store: EndpointError when it took nothing."""
    if cfg.exporter:
        took = to_exporter(cfg.exporter, points)
        if cfg.url is None:
            if not took:
                msg = f"the Prometheus exporter at {cfg.exporter} took none of {len(points)} point(s)"
                raise EndpointError(msg)
            return
    with client(cfg) as c:
        c.write_api(write_options=SYNCHRONOUS).write(bucket=cfg.bucket, org=cfg.org, record=points)


def to_exporter(url: str, points: list[Point]) -> bool:
    """``points`` as line protocol to DBus's Prometheus exporter (dbuslib/promexport.py), within 2 s, one
    request per timestamp precision among them (``?precision=ms``: a point's time is in its own unit); a
    failure is logged, not raised (``write`` decides what it means)."""
    import logging
    import urllib.error
    import urllib.request

    by_precision: dict[str, list[str]] = {}
    for p in points:
        by_precision.setdefault(str(p.write_precision), []).append(p.to_line_protocol())
    try:
        for precision, lines in by_precision.items():
            body = "\n".join(lines).encode()
            request = urllib.request.Request(
                f"{url.rstrip('/')}/api/v2/write?precision={precision}", data=body, method="POST"
            )
            request.add_header("Content-Type", "text/plain; charset=utf-8")
            with urllib.request.urlopen(request, timeout=2) as resp:
                if resp.status != 204:
                    return False
        return True
    except (urllib.error.URLError, OSError) as e:
        now = time.monotonic()
        _exporter_failed[url] = _exporter_failed.get(url, 0) + 1
        if now - _exporter_warned.get(url, -EXPORTER_WARN_S) >= EXPORTER_WARN_S:  # not at every write
            _exporter_warned[url] = now
            failed, _exporter_failed[url] = _exporter_failed[url], 0
            logging.getLogger(__name__).warning(
                "the Prometheus exporter at %s took no points (%d write(s) since the last warning): %s",
                url,
                failed,
                e,
            )
        return False


EXPORTER_WARN_S = 600.0  # an exporter that is down is said at once, then every 10 minutes
_exporter_warned: dict[str, float] = {}
_exporter_failed: dict[str, int] = {}


def query(cfg: InfluxEndpoint, flux: str) -> list[dict]:
    """Run a Flux query; each record as a dict of its values (``_time``, ``_field``, ``_value``, tags)."""
    with client(cfg) as c:
        tables = c.query_api().query(flux, org=cfg.org)
    return [record.values for table in tables for record in table.records]


def influxql(cfg: InfluxEndpoint, q: str) -> list[dict]:
    """Run one InfluxQL SELECT on ``/query`` (the 1.x API; times in epoch ms); its series, each
    ``{"name", "tags", "columns", "values"}``. EndpointError when the server refuses or fails it."""
    import json
    import urllib.error
    import urllib.parse
    import urllib.request

    db, _, rp = cfg.bucket.partition("/")
    params = urllib.parse.urlencode({"db": db, "rp": rp or "autogen", "q": q, "epoch": "ms"})
    request = urllib.request.Request(f"{_url(cfg)}/query?{params}")
    token = cfg.token.get_secret_value()
    if token:
        request.add_header("Authorization", f"Token {token}")
    try:
        with urllib.request.urlopen(request, timeout=10) as resp:
            body = json.load(resp)
    except (urllib.error.URLError, OSError, ValueError) as e:
        msg = f"the time-series server at {cfg.url} did not answer an InfluxQL query: {e}"
        raise EndpointError(msg) from e
    result = body["results"][0]
    if "error" in result:
        msg = f"the time-series server at {cfg.url} refused {q!r}: {result['error']}"
        raise EndpointError(msg)
    return result.get("series", [])
