"""The Grafana dashboard and alert rules in conf/grafana/, read as Grafana reads them, and InfluxQL on the
real InfluxDB: what test_dashboards checks and what other live tests (heartbeat e2e, dead letters, status)
query with.

- ``panel_queries()``: ``(id, query)`` of every panel target and template variable; ``rule_queries()`` the
  same for the alert rules.
- ``render(query, ds, from_ms, to_ms)``: the query with Grafana's macros substituted.
- ``influxql(cfg, q)``: the series InfluxDB answers on ``/query``.
- ``server_types``/``as_server_type``: a field in the type the server already holds for it.
"""

from __future__ import annotations

import json
import re
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import yaml

GRAFANA = Path(__file__).resolve().parents[2] / "conf" / "grafana"
DASHBOARD = GRAFANA / "dashboards" / "dbus.json"
PROMETHEUS_DASHBOARD = GRAFANA / "dashboards" / "dbus-prometheus.json"  # the same panels in PromQL
PROMETHEUS_DATASOURCES = GRAFANA / "provisioning" / "datasources" / "dbus-prometheus.yaml"
DATASOURCES = GRAFANA / "provisioning" / "datasources" / "dbus.yaml"
PROVIDERS = GRAFANA / "provisioning" / "dashboards" / "dbus.yaml"
ALERTING = GRAFANA / "provisioning" / "alerting" / "dbus.yaml"
DS_UID = "dbus-influxdb"
INTERVAL = "1m"  # what Grafana would pick for $__interval; every sample series has one point per minute


def dashboard() -> dict[str, Any]:
    return json.loads(DASHBOARD.read_text())


def rules() -> list[dict[str, Any]]:
    return [r for g in yaml.safe_load(ALERTING.read_text())["groups"] for r in g["rules"]]


def panel_queries() -> list[tuple[str, str]]:
    """``(id, query)`` of each panel target and template variable: ``"3B"`` = panel 3, refId B."""
    d = dashboard()
    out = [(f"{p['id']}{t['refId']}", t["query"]) for p in d["panels"] for t in p["targets"]]
    return out + [(f"var:{v['name']}", v["query"]) for v in d["templating"]["list"]]


def promql_queries(ds: str, rate_interval: str = "1m") -> list[tuple[str, str]]:
    """``(panel id and ref, PromQL)`` of every target of the Prometheus dashboard, ``$ds`` and Grafana's
    ``$__rate_interval`` filled in; AssertionError when a panel has no target or another datasource."""
    board = json.loads(PROMETHEUS_DASHBOARD.read_text())
    uid = yaml.safe_load(PROMETHEUS_DATASOURCES.read_text())["datasources"][0]["uid"]
    found = []
    for panel in board["panels"]:
        assert panel["datasource"]["uid"] == uid and panel["targets"], panel["title"]
        for target in panel["targets"]:
            assert target["datasource"]["uid"] == uid, panel["title"]
            expr = target["expr"].replace("$ds", ds).replace("$__rate_interval", rate_interval)
            found.append((f"{panel['id']}{target['refId']} {panel['title']}", expr))
    return found


def rule_queries() -> list[tuple[str, str]]:
    return [
        (r["uid"], q["model"]["query"]) for r in rules() for q in r["data"] if q["datasourceUid"] == DS_UID
    ]


# ----------------------------------------------------------------------- Grafana's macros, InfluxQL


def render(query: str, ds: str, from_ms: int | None, to_ms: int | None, interval: str = INTERVAL) -> str:
    """Substitute the macros as Grafana's InfluxDB datasource does. ``from_ms`` None: a relative range
    (``now-6h`` to ``now``) gives ``time >= now() - 6h``; an absolute one gives
    ``time >= Xms and time <= Yms``."""
    time_filter = "time >= now() - 6h" if from_ms is None else f"time >= {from_ms}ms and time <= {to_ms}ms"
    seconds = int(interval[:-1]) * {"s": 1, "m": 60, "h": 3600}[interval[-1]]
    values = {
        "timeFilter": time_filter,
        "__interval_ms": str(seconds * 1000),
        "__interval": interval,
        "interval": interval,
        "ds": ds,
        "__from": str(from_ms or 0),
        "__to": str(to_ms or 0),
    }
    macro = r"\$\{(\w+)\}|\[\[(\w+)\]\]|\$(\w+)"
    out = re.sub(macro, lambda m: values[next(g for g in m.groups() if g)], query)
    assert not re.search(r"\$\w|\$\{|\[\[", out), f"a macro is left in {out}"
    return out


def influxql(cfg, q: str) -> list[dict[str, Any]]:
    """The series of an InfluxQL query on ``/query``; fails on an error from the server."""
    ep = cfg.endpoints.influxdb
    db, _, rp = ep.bucket.partition("/")
    params = urllib.parse.urlencode({"db": db, "rp": rp or "autogen", "q": q, "epoch": "ms"})
    if q.startswith(("SELECT", "SHOW")):  # as Grafana sends them (httpMode GET)
        request = urllib.request.Request(f"{ep.url}/query?{params}")
    else:  # InfluxDB 1.x takes DROP ... only by POST
        request = urllib.request.Request(f"{ep.url}/query", data=params.encode(), method="POST")
    with urllib.request.urlopen(request, timeout=30) as resp:
        body = json.load(resp)
    result = body["results"][0]
    assert "error" not in result, f"{q}\n-> {result['error']}"
    return result.get("series", [])


def server_types(cfg, measurement: str) -> dict[str, str]:
    series = influxql(cfg, f'SHOW FIELD KEYS FROM "{measurement}"')
    return {row[0]: row[1] for s in series for row in s["values"]}


def as_server_type(measurement: str, name: str, value: Any, server: dict[str, str]) -> Any:
    """A field in the type the server already holds for it (InfluxDB 1.x refuses another type in a shard):
    the contract fixes only some types, and a writer choosing int where we chose float must not break us."""
    kind = server.get(name)
    if kind is None or isinstance(value, str):
        return value
    if (measurement, name) in {
        ("dbus_heartbeat", "latency_ms"),
        ("dbus_heartbeat", "rows"),
        ("dbus_dead_letter", "count"),
        ("dbus_dead_letter", "offset"),
    }:
        want = "float" if name == "latency_ms" else "integer"
        assert kind == want, f"{measurement}.{name} is {kind} on the server; the contract says {want}"
    return float(value) if kind == "float" else int(value)
