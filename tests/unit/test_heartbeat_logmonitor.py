"""The heartbeat monitor of a log source (heartbeat/logmonitor.py): per host and table, from the points the
log processor writes; its alerts name the host; its dead letters are read from the log source's topic and
have no table; ``dbus status`` of a log source (status/readers.py)."""

from __future__ import annotations

import json

import pytest
from heartbeat_fakes import FakeChannel, FakeDlq, FakeZk, at

from cli import status
from dbuslib.config import LogHeartbeat, load_config
from heartbeat import deadletters as dl
from heartbeat import main as hbmain
from heartbeat import monitor as hbm
from heartbeat.channels import body, channels, subject
from heartbeat.incidents import Alert, Notification, Observation, Thresholds, alert_key, evaluate
from heartbeat.logmonitor import log_observations
from status import readers

T0 = 1_700_000_000_000
SCHEMA = "applog_schema"


def test_observations_per_host_and_table():
    records = [
        {"schema": SCHEMA, "table": "a", "host": "vm", "_time": at(T0), "_value": 1500.0},
        {"schema": SCHEMA, "table": "a", "host": "vm", "_time": at(T0 - 5), "_value": 9.0},
        {"schema": SCHEMA, "table": "a", "host": "db1", "_time": at(T0 + 1), "_value": 20.0},
        {"schema": SCHEMA, "table": "gone", "host": "vm", "_time": at(T0), "_value": 1.0},  # not monitored
        {"schema": SCHEMA, "table": "a", "_time": at(T0), "_value": 1.0},  # no host: not a log point
    ]
    assert log_observations(records, [(SCHEMA, "a"), (SCHEMA, "quiet")]) == [
        Observation(SCHEMA, "a", T0 + 1, 0.02, host="db1"),
        Observation(SCHEMA, "a", T0, 1.5, host="vm"),
        Observation(SCHEMA, "quiet"),
    ]


def test_a_host_that_stops_goes_stale_alone_and_its_alert_names_it():
    th = Thresholds(600, 300)
    obs = [
        Observation(SCHEMA, "a", T0, 0.5, host="vm"),
        Observation(SCHEMA, "a", T0 + 600_000, 0.5, host="db1"),
    ]
    alerts, notes = evaluate("applog", {}, obs, T0 + 601_000, T0, th)
    assert [(n.event, n.alert.key) for n in notes] == [("alert", f"{SCHEMA}.a@vm.stale")]
    a = notes[0].alert
    assert (
        a.host == "vm" and a.message == f"applog: {SCHEMA}.a from vm: no heartbeat for 601 s (timeout 600 s)"
    )
    assert Alert.from_dict(json.loads(json.dumps(a.to_dict()))) == a
    assert "host" not in Alert("d", "s", "t", "stale", 0, None, None, None, "m").to_dict()
    assert body(notes[0])["host"] == "vm" and subject(notes[0]).endswith(f"{SCHEMA}.a from vm stale")
    back = [Observation(SCHEMA, "a", T0 + 700_000, 0.5, host="vm")]
    _, notes = evaluate("applog", alerts, back, T0 + 701_000, T0, th)
    assert [(n.event, n.alert.key) for n in notes] == [("recovery", f"{SCHEMA}.a@vm.stale")]
    assert notes[0].alert.message.startswith(f"applog: {SCHEMA}.a from vm: heartbeats again")


def test_alert_keys_and_points_with_and_without_a_host():
    assert alert_key("shop", "orders", "stale") == "shop.orders.stale"
    assert alert_key(SCHEMA, "a", "latency", "vm.example.com") == f"{SCHEMA}.a@vm.example.com.latency"
    a = Alert("applog", SCHEMA, "a", "stale", T0, None, 610.0, None, "m", host="vm")
    line = hbm.alert_point(Notification("alert", a, T0)).to_line_protocol()
    assert line.startswith(f"dbus_alert,ds=applog,host=vm,kind=stale,schema={SCHEMA},table=a ")


def test_series_with_a_host_tag_keep_it():
    series = [{"tags": {"schema": SCHEMA, "table": "a", "host": "vm"}, "values": [[T0, 12.5]]}]
    assert hbm.records_of(series) == [
        {"schema": SCHEMA, "table": "a", "host": "vm", "_time": T0, "_value": 12.5}
    ]


def test_a_log_source_has_the_monitor_keys():
    hb = LogHeartbeat(check_interval_s=5, webhook_url="http://h/x", dead_letter_threshold=2)
    assert (hb.timeout_s, hb.latency_alert_s, hb.dead_letter_quiet_s) == (600, 300, 600)
    assert [c.name for c in channels(hb)] == ["log", "webhook"]
    with pytest.raises(ValueError, match="http"):
        LogHeartbeat(webhook_url="ftp://x")
    cfg = load_config()
    assert dl.settings_of(cfg, "applog") is cfg.log_sources["applog"].heartbeat
    assert dl.dead_letter_topic(cfg, "applog") == "applog.dlq"
    assert dl.dead_letter_topic(cfg, "demo") == "demo.dlq"


def test_the_log_processors_letters_have_no_table_from_the_shipper_key():
    doc = {"code": "LOG_RECORD_NOT_JSON", "stage": "logprocessor", "topic": "applog", "partition": 0}
    letter = dl.parse(json.dumps({**doc, "offset": 7, "key": "/srv/app/a.log"}).encode(), b"/srv/app/a.log")
    assert (letter.stage, letter.code, letter.schema, letter.table) == (
        "logprocessor",
        doc["code"],
        None,
        None,
    )
    other = dl.parse(json.dumps({"code": "X", "stage": "appender", "key": "shop.orders"}).encode())
    assert (other.schema, other.table) == ("shop", "orders")


@pytest.fixture
def log_env(monkeypatch):
    points: list[dict] = []
    written: list = []
    queries: list[str] = []

    def influxql(ep, q):
        queries.append(q)
        return [
            {
                "tags": {"schema": SCHEMA, "table": p["table"], "host": p["host"]},
                "values": [[p["_time"], p["v"]]],
            }
            for p in points
        ]

    monkeypatch.setattr(hbm.influx, "influxql", influxql)
    monkeypatch.setattr(
        hbm.influx, "write", lambda ep, pts: written.extend(p.to_line_protocol() for p in pts)
    )
    cfg = load_config()
    zk = FakeZk()
    clock_ms = [T0]

    def make(*chans, dlq=None):
        return hbm.Monitor(
            cfg,
            "applog",
            client=zk,
            chans=list(chans),
            clock=lambda: clock_ms[0] / 1000,
            list_tables=lambda: [(SCHEMA, "app_orders")],
            dlq=dlq or FakeDlq(),
        )

    return make, zk, clock_ms, points, written, queries


def test_the_monitor_of_a_log_source_alerts_per_host_and_counts_its_dead_letters(log_env):
    make, zk, clock_ms, points, written, queries = log_env
    hook, dlq = FakeChannel("webhook"), FakeDlq()
    mon = make(hook, dlq=dlq)
    points.append({"table": "app_orders", "host": "vm", "_time": T0, "v": 400_000.0})
    dlq.pending = [dl.Letter("logprocessor", "LOG_RECORD_NOT_JSON", None, None, "applog", 0, 5, 0, 1, T0)]
    got = [(n.event, n.alert.key) for n in mon.check()]
    assert got == [
        ("alert", f"{SCHEMA}.app_orders@vm.latency"),
        ("alert", "logprocessor.LOG_RECORD_NOT_JSON.dead_letter"),
    ]
    assert 'GROUP BY "schema", "table", "host"' in queries[0]
    assert any(
        w.startswith("dbus_dead_letter,code=LOG_RECORD_NOT_JSON,ds=applog,stage=logprocessor ")
        for w in written
    )
    assert f"/DBus/HeartBeat/applog/alerts/{SCHEMA}.app_orders@vm.latency" in zk.nodes
    clock_ms[0] += 601_000
    assert [(n.event, n.alert.key) for n in mon.check()] == [
        ("alert", f"{SCHEMA}.app_orders@vm.stale"),
        ("recovery", "logprocessor.LOG_RECORD_NOT_JSON.dead_letter"),  # quiet for dead_letter_quiet_s
    ]


def test_monitor_and_run_accept_a_log_source(monkeypatch):
    cfg = load_config()
    ran = []

    class FakeMonitor:
        def __init__(self, cfg, ds):
            ran.append(("monitor", ds))

        def run(self):
            pass

        def stop(self):
            pass

    class FakeWriter:
        def __init__(self, cfg, ds):
            ran.append(("writer", ds))

        def run(self):
            pass

        def stop(self):
            pass

    monkeypatch.setattr(hbm, "Monitor", FakeMonitor)
    monkeypatch.setattr("heartbeat.logbeats.LogHeartbeatWriter", FakeWriter)
    assert hbmain.run_log(cfg, "applog", monitor=True) == 0
    assert sorted(ran) == [("monitor", "applog"), ("writer", "applog")]
    ran.clear()
    assert hbmain.run(cfg, "applog", monitor=False) == 0
    assert ran == [("writer", "applog")]
    ran.clear()
    assert hbmain.monitor(cfg, "applog") == 0
    assert ran == [("monitor", "applog")]


# ------------------------------------------------------------------------------------------ dbus status


def test_status_of_a_log_source_per_host_and_table():
    counts = [
        {"tags": {"kind": "rows", "host": "vm", "table": "app_orders", "code": ""}, "values": [[0, 120]]},
        {"tags": {"kind": "rows", "host": "db1", "table": "app_orders", "code": ""}, "values": [[0, 4]]},
        {"tags": {"kind": "unknown", "host": "vm", "table": "", "code": ""}, "values": [[0, 3]]},
        {
            "tags": {"kind": "error", "host": "", "table": "", "code": "LOG_RECORD_NOT_JSON"},
            "values": [[0, 2]],
        },
        {
            "tags": {"kind": "error", "host": "vm", "table": "", "code": "LOG_LINE_RULE_ERROR"},
            "values": [[0, None]],
        },
    ]
    now = T0 / 1000
    beats = {
        ("app_orders", "vm"): {"_time": T0 - 32_000, "latency_ms": 812.0, "rows": 100},
        ("http_access", "vm"): {"_time": T0 - 10_000, "latency_ms": 900.0, "rows": 0},
    }
    tables, lc = readers.log_status(counts, beats, now)
    assert tables == (
        readers.LogTableStatus("db1", "app_orders", 4),
        readers.LogTableStatus("vm", "app_orders", 120, 812.0, 100, 32.0),
        readers.LogTableStatus("vm", "http_access", 0, 900.0, 0, 10.0),
    )
    assert lc == (
        readers.LogCount("", "error", "LOG_RECORD_NOT_JSON", 2),
        readers.LogCount("vm", "unknown", "", 3),
    )
    snap = readers.LogSnapshot(
        "applog",
        now,
        600,
        stages=readers.stage_rates(None, {}, now, ("logprocessor",)),
        tables=tables,
        counts=lc,
        alerts=(Alert("applog", SCHEMA, "app_orders", "stale", T0, None, 700.0, None, "m", host="vm"),),
    )
    screen = status.render_log(snap)
    assert "log source applog" in screen and "logprocessor" in screen
    assert "vm    app_orders" in screen and "0.812 s" in screen and "32 s ago" in screen
    assert "none in the last day" in screen  # db1 wrote no heartbeat
    assert "LOG_RECORD_NOT_JSON" in screen and "unknown lines" in screen
    assert f"  {SCHEMA}.app_orders from vm stale since" in screen
    doc = json.loads(snap.to_json())
    assert doc["tables"][1] == {
        "host": "vm",
        "table": "app_orders",
        "rows": 120,
        "latency_ms": 812.0,
        "rows_since_heartbeat": 100,
        "heartbeat_age_s": 32.0,
    }
    assert doc["alerts"][0]["host"] == "vm"
    assert readers.log_counts_query("it's", 60).startswith('SELECT sum("count") AS "count" FROM "dbus_log"')
    assert "'it\\'s'" in readers.log_counts_query("it's", 60)
