"""The Grafana dashboard and alert rules in conf/grafana/ query exactly what DBus writes.

The file checks (JSON/YAML parse, every panel has a query, one datasource) need no server. The others
write sample points of every measurement of the metrics contract (docs/monitoring.md) for a fresh ``ds``
into the real InfluxDB, render each query of the dashboard and of the alert rules the way Grafana does
($ds, $timeFilter, $__interval...), run it with InfluxQL on ``/query`` and compare the series it returns
with the sample figures.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest
import yaml
from dashboards import (
    DATASOURCES,
    DS_UID,
    PROVIDERS,
    as_server_type,
    dashboard,
    influxql,
    panel_queries,
    render,
    rule_queries,
    rules,
    server_types,
)

# ------------------------------------------------------------------------------ files (no server)


def test_provisioning_files_parse_and_agree_on_the_datasource():
    ds = yaml.safe_load(DATASOURCES.read_text())["datasources"]
    assert [(d["uid"], d["type"], d["jsonData"]["version"], d["jsonData"]["dbName"]) for d in ds] == [
        (DS_UID, "influxdb", "InfluxQL", "dbus")
    ]
    provider = yaml.safe_load(PROVIDERS.read_text())["providers"][0]
    assert provider["options"]["path"].endswith("conf/grafana/dashboards")
    d = dashboard()
    uids = {p["datasource"]["uid"] for p in d["panels"]} | {
        t["datasource"]["uid"] for p in d["panels"] for t in p["targets"]
    }
    assert uids == {DS_UID}
    assert {q["datasourceUid"] for r in rules() for q in r["data"]} == {DS_UID, "__expr__"}


def test_every_panel_has_an_influxql_query_filtered_by_ds():
    d = dashboard()
    assert [v["name"] for v in d["templating"]["list"]] == ["ds"]
    for p in d["panels"]:
        assert p["targets"], f"panel {p['title']!r} has no query"
        for t in p["targets"]:
            assert t["rawQuery"] is True and t["query"].startswith("SELECT "), (p["title"], t)
            assert "\"ds\" = '$ds'" in t["query"] and "$timeFilter" in t["query"], (p["title"], t["query"])
    titles = " | ".join(p["title"] for p in d["panels"])
    for wanted in [
        "Heartbeat latency",
        "Rows since the previous heartbeat",
        "Rows/s per stage",
        "Extractor lag",
        "Kafka lag per stage",
        "Full-pull progress",
        "Open alerts",
        "Dead letters per stage and code",
        "Dead letters: count and newest coordinates",
    ]:
        assert wanted in titles


def test_alert_rules_cover_heartbeat_age_and_latency_and_dead_letters():
    by_uid = {r["uid"]: r for r in rules()}
    assert set(by_uid) == {"dbus-heartbeat-stale", "dbus-heartbeat-latency", "dbus-dead-letters"}
    for r in by_uid.values():
        refs = {q["refId"]: q for q in r["data"]}
        assert r["condition"] in refs and refs["A"]["model"]["query"].startswith("SELECT ")
    assert _threshold(by_uid["dbus-heartbeat-stale"]) == ("lt", 1)
    assert _threshold(by_uid["dbus-heartbeat-latency"]) == ("gt", 300)
    assert _threshold(by_uid["dbus-dead-letters"]) == ("gt", 0)  # heartbeat.dead_letter_threshold's default


def _threshold(rule: dict[str, Any]) -> tuple[str, float]:
    model = next(q["model"] for q in rule["data"] if q["refId"] == rule["condition"])
    ev = model["conditions"][0]["evaluator"]
    return ev["type"], ev["params"][0]


def figures(series: list[dict[str, Any]], only_ds: str | None = None) -> dict[str, list[list[Any]]]:
    """``{"shop/orders": [[1234.5]], ...}``: tag values joined by '/' (ds dropped) -> rows without time."""
    out: dict[str, list[list[Any]]] = {}
    for s in series:
        tags = dict(s.get("tags") or {})
        if only_ds is not None and tags.pop("ds", None) != only_ds:
            continue
        cols = [i for i, c in enumerate(s["columns"]) if c != "time"]
        rows = [[row[i] for i in cols] for row in s["values"]]
        out["/".join(tags.values()) or s["name"]] = [r for r in rows if any(v is not None for v in r)]
    return out


# -------------------------------------------------------------------------------- sample points

ORDERS_PULL = "1704164645123"


def samples(now_s: float) -> dict[str, list[tuple[dict[str, str], dict[str, Any], int]]]:
    """measurement -> [(tags, fields, time ms)], field types as DBus writes them (docs/monitoring.md).
    Live series are timed 20 s before ``now_s``; shop.quiet's last heartbeat 15 minutes before; the
    dispatcher's dead letter 10 minutes before (out of the dead-letter rule's 5 minutes)."""
    t = int(now_s - 20) * 1000
    quiet_t = int(now_s - 15 * 60) * 1000
    hb = {"schema": "shop"}
    return {
        "dbus_extractor": [
            (
                {},
                {
                    "events_per_s": 50.0,
                    "records_per_s": 812.0,
                    "bytes_per_s": 102400.0,
                    "lag_s": 1.25,
                    "committed_pos": 1234,
                    "committed_file": "mariadb-bin.000003",
                },
                t,
            )
        ],
        "dbus_stage": [
            (
                {"stage": "dispatcher"},
                {"input_rows": 600, "rows_per_s": 640.5, "batch_ms": 210.0, "lag_records": 12},
                t,
            ),
            (
                {"stage": "appender"},
                {"input_rows": 500, "rows_per_s": 500.0, "batch_ms": 120.0, "lag_records": 7},
                t,
            ),
        ],
        "dbus_heartbeat": [
            (
                {**hb, "table": "orders"},
                {"latency_ms": 1234.5, "rows": 120, "packet_ms": t - 1234, "tx_ms": t - 1234},
                t,
            ),
            (
                {**hb, "table": "slow"},
                {"latency_ms": 400000.0, "rows": 3, "packet_ms": t - 400000, "tx_ms": t - 400000},
                t,
            ),
            (
                {**hb, "table": "quiet"},
                {"latency_ms": 800.0, "rows": 0, "packet_ms": quiet_t - 800, "tx_ms": quiet_t - 800},
                quiet_t,
            ),
        ],
        "dbus_alert": [
            ({**hb, "table": "slow", "kind": "latency"}, {"state": "open", "latency_s": 400.0}, t - 60_000),
            ({**hb, "table": "slow", "kind": "latency"}, {"state": "recovered", "latency_s": 1.5}, t),
            ({**hb, "table": "quiet", "kind": "stale"}, {"state": "open", "age_s": 900.0}, t),
        ],
        "dbus_dead_letter": [
            (
                {"stage": "appender", "code": "RAW_UNDECODABLE", **hb, "table": "orders"},
                {
                    "count": 2,
                    "topic": "x.shop",
                    "partition": 0,
                    "offset": 41,
                    "dlq_partition": 0,
                    "dlq_offset": 16,
                    "newest_ms": t - 61_000,
                },
                t - 60_000,
            ),
            (
                {"stage": "appender", "code": "RAW_UNDECODABLE", **hb, "table": "orders"},
                {
                    "count": 1,
                    "topic": "x.shop",
                    "partition": 0,
                    "offset": 42,
                    "dlq_partition": 0,
                    "dlq_offset": 17,
                    "newest_ms": t - 1000,
                },
                t,
            ),
            (
                {"stage": "dispatcher", "code": "RAW_BAD_RECORD"},
                {
                    "count": 1,
                    "topic": "x",
                    "partition": 1,
                    "offset": 7,
                    "dlq_partition": 1,
                    "dlq_offset": 3,
                    "newest_ms": t - 600_000,
                },
                t - 600_000,
            ),
        ],
        "dbus_log": [
            ({"kind": "rows", "host": "app-01_prod", "table": "orders"}, {"count": 40}, t),
            ({"kind": "unknown", "host": "app-01_prod"}, {"count": 7}, t),
            ({"kind": "error", "code": "LOG_RECORD_NOT_JSON"}, {"count": 1}, t),
        ],
        "dbus_fullpull": [
            (
                {**hb, "table": "orders", "id": ORDERS_PULL},
                {
                    "rows": 412000,
                    "total_rows": 1000000,
                    "shards_done": 4,
                    "shards_total": 10,
                    "rows_per_s": 51234.0,
                    "status": "pulling",
                },
                t,
            )
        ],
    }


# query id -> {tag values: rows}: what each dashboard query must return for the samples
EXPECTED: dict[str, dict[str, list[list[Any]]]] = {
    "1A": {"shop/orders": [[1234.5]], "shop/quiet": [[800.0]], "shop/slow": [[400000.0]]},
    "2A": {"shop/orders": [[120]], "shop/quiet": [[0]], "shop/slow": [[3]]},
    "3A": {"appender": [[500.0]], "dispatcher": [[640.5]]},
    "3B": {"dbus_extractor": [[812.0]]},
    "4A": {"dbus_extractor": [[1.25]]},
    "5A": {"appender": [[7]], "dispatcher": [[12]]},
    "6A": {"appender": [[120.0]], "dispatcher": [[210.0]]},
    "6B": {"appender": [[500]], "dispatcher": [[600]]},
    "7A": {f"{ORDERS_PULL}/shop/orders": [[41.2]]},
    "8A": {f"{ORDERS_PULL}/shop/orders": [[412000, 1000000, 4, 10, 51234.0, "pulling"]]},
    "9A": {"stale/shop/quiet": [["open", 900.0, None]]},
    "10A": {"RAW_UNDECODABLE/appender": [[2], [1]], "RAW_BAD_RECORD/dispatcher": [[1]]},
    "11A": {
        "RAW_UNDECODABLE/shop/appender/orders": [[3, "x.shop", 0, 42, 0, 17]],
        "RAW_BAD_RECORD//dispatcher/": [[1, "x", 1, 7, 1, 3]],
    },
    "12A": {
        "/app-01_prod/rows/orders": [[40]],
        "/app-01_prod/unknown/": [[7]],
        "LOG_RECORD_NOT_JSON//error/": [[1]],
    },
}
RULE_EXPECTED: dict[str, tuple[dict[str, list[list[Any]]], set[str]]] = {
    # uid -> (figures for this ds, tables the rule fires for)
    "dbus-heartbeat-stale": ({"shop/orders": [[1]], "shop/quiet": [[0]], "shop/slow": [[1]]}, {"shop/quiet"}),
    "dbus-heartbeat-latency": ({"shop/orders": [[1.2345]], "shop/slow": [[400.0]]}, {"shop/slow"}),
    "dbus-dead-letters": ({"RAW_UNDECODABLE/appender": [[3]]}, {"RAW_UNDECODABLE/appender"}),
}


@pytest.fixture(scope="module")
def sample_ds(cfg):
    """A fresh ``ds`` with SAMPLES written; its series are dropped afterwards."""
    from influxdb_client import Point, WritePrecision

    from dbuslib import influx

    ds = f"pytest_dash_{uuid.uuid4().hex[:8]}"
    points = []
    written = samples(time.time())
    for measurement, rows in written.items():
        server = server_types(cfg, measurement)
        for tags, fields, at_ms in rows:
            p = Point(measurement).tag("ds", ds).time(at_ms, WritePrecision.MS)
            for k, v in tags.items():
                p = p.tag(k, v)
            for k, v in fields.items():
                p = p.field(k, as_server_type(measurement, k, v, server))
            points.append(p)
    influx.write(cfg.endpoints.influxdb, points)
    yield ds
    for measurement in written:
        influxql(cfg, f'DROP SERIES FROM "{measurement}" WHERE "ds" = \'{ds}\'')


def _time_ranges() -> list[tuple[int | None, int | None]]:
    now_ms = int(time.time() * 1000)
    return [(None, None), (now_ms - 3600_000, now_ms + 60_000)]


@pytest.mark.parametrize(("qid", "query"), panel_queries(), ids=[q for q, _ in panel_queries()])
def test_dashboard_query_returns_the_sample(cfg, sample_ds, qid, query):
    for from_ms, to_ms in _time_ranges():
        q = render(query, sample_ds, from_ms, to_ms)
        series = influxql(cfg, q)
        if qid == "var:ds":
            assert [sample_ds] in [[v[1]] for s in series for v in s["values"]], q
            continue
        got = figures(series)
        got = {
            k: [[round(v, 4) if isinstance(v, float) else v for v in row] for row in rows]
            for k, rows in got.items()
        }
        assert got == EXPECTED[qid], f"{q}\nreturned {got}"


def test_every_dashboard_query_is_checked():
    assert {q for q, _ in panel_queries()} - {"var:ds"} == set(EXPECTED)


def _fires(rule: dict[str, Any], last_values: dict[str, float]) -> set[str]:
    """Grafana's reduce (last) + threshold expressions over the rule's query result, per series."""
    kind, limit = _threshold(rule)
    reduce = next(q["model"] for q in rule["data"] if q["model"].get("type") == "reduce")
    assert reduce["reducer"] == "last"
    return {k for k, v in last_values.items() if (v > limit if kind == "gt" else v < limit)}


@pytest.mark.parametrize("uid", sorted(RULE_EXPECTED))
def test_alert_rule_query_returns_the_sample_and_fires_for_the_right_table(cfg, sample_ds, uid):
    rule = next(r for r in rules() if r["uid"] == uid)
    (query,) = [q for qid, q in rule_queries() if qid == uid]
    got = figures(influxql(cfg, render(query, sample_ds, None, None)), only_ds=sample_ds)
    got = {k: [[round(v, 4) for v in row] for row in rows] for k, rows in got.items()}
    expected, firing = RULE_EXPECTED[uid]
    assert got == expected, f"{query}\nreturned {got}"
    assert _fires(rule, {k: rows[-1][0] for k, rows in got.items()}) == firing
