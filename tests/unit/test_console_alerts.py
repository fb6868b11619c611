"""Alerts: the heartbeat monitor's acknowledgement and history of incidents (heartbeat.monitor.AlertStore,
against a fake ZooKeeper), the console's alerts page JSON (console/alerts.py ``alerts_view``) and its
acknowledgement (operators only, CSRF, audited), through Flask's test client (no server, no stack)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from console_fakes import CONF, console_app, csrf_token, log_in, with_users
from flask import Flask
from heartbeat_fakes import FakeZk

from console import alerts
from console.overview import Collector, StageDown
from dbuslib import zkpaths
from dbuslib.config import DbusConfig, load_config
from heartbeat.incidents import Alert
from heartbeat.monitor import AlertStore, ClosedAlert

T0 = 1_700_000_000_000
PATH = zkpaths.heartbeat_alerts("/DBus", "demo")


def stale(table: str = "orders", since: int = T0) -> Alert:
    return Alert(
        "demo", "shop", table, "stale", since, None, 610.0, None, f"demo: shop.{table}: no heartbeat"
    )


def node(zk: FakeZk, key: str) -> dict[str, Any]:
    return dict(json.loads(zk.nodes[zkpaths.alert(PATH, key)]))


# ------------------------------------------------------------------------------ the monitor's store


def test_an_acknowledgement_is_kept_on_the_alert_and_the_first_one_wins():
    zk = FakeZk()
    store = AlertStore(zk, PATH)
    store.open(stale())
    acked = store.ack("shop.orders.stale", "alice", T0 + 5)
    assert acked is not None and (acked.acked_by, acked.acked_ms) == ("alice", T0 + 5)
    assert store.ack("shop.orders.stale", "bob", T0 + 9).acked_by == "alice"  # type: ignore[union-attr]
    assert store.ack("shop.quiet.stale", "bob", T0) is None  # not open
    assert store.read()[0].acked_by == "alice"


def test_the_monitors_own_writes_keep_an_acknowledgement():
    zk = FakeZk()
    store = AlertStore(zk, PATH)
    a = stale()
    store.open(a)
    store.ack(a.key, "alice", T0 + 5)
    store.update(a)  # the alert as the monitor opened it: no acknowledgement in it
    store.mark_notified(a, T0 + 6)
    assert {k: node(zk, a.key)[k] for k in ("acked_by", "acked_ms", "notified_ms")} == {
        "acked_by": "alice",
        "acked_ms": T0 + 5,
        "notified_ms": T0 + 6,
    }


def test_an_alert_without_acknowledgement_is_stored_as_before():
    assert "acked_by" not in stale().to_dict() and Alert.from_dict(stale().to_dict()) == stale()


def test_a_closed_incident_goes_to_the_history_with_its_acknowledgement():
    zk = FakeZk()
    store = AlertStore(zk, PATH)
    store.open(stale())
    store.ack("shop.orders.stale", "alice", T0 + 5)
    recovered = Alert("demo", "shop", "orders", "stale", T0, None, 1.0, None, "heartbeats again")
    assert store.close("shop.orders.stale", recovered, T0 + 60_000)
    assert not store.close("shop.orders.stale", recovered, T0 + 60_001)  # gone: no second entry
    assert store.read() == []
    [closed] = store.history()
    assert closed == ClosedAlert(
        Alert.from_dict({**stale().to_dict(), "acked_by": "alice", "acked_ms": T0 + 5}),
        T0 + 60_000,
        "heartbeats again",
    )


def test_the_history_is_bounded_and_newest_first():
    zk = FakeZk()
    store = AlertStore(zk, PATH, history_max=3)
    for i in range(5):
        a = stale(f"t{i}", T0 + i)
        store.open(a)
        store.close(a.key, a, T0 + 1000 + i)
    assert [c.alert.table for c in store.history()] == ["t4", "t3", "t2"]
    zk.nodes[store.history_path] = b"not json"
    assert store.history() == []


def test_the_monitor_writes_the_history_when_an_incident_clears(monkeypatch):
    from heartbeat_fakes import Clock, FakeDlq, at

    from heartbeat import monitor as hbm

    points: list[dict] = []
    monkeypatch.setattr(
        hbm.influx,
        "influxql",
        lambda ep, q: [
            {
                "tags": {"schema": p["schema"], "table": p["table"]},
                "values": [[hbm._ms(p["_time"]), p["_value"]]],
            }
            for p in points
        ],
    )
    monkeypatch.setattr(hbm.influx, "write", lambda ep, pts: None)
    zk, clock = FakeZk(), Clock(T0)
    mon = hbm.Monitor(
        load_config(),
        "demo",
        client=zk,
        chans=[],
        clock=clock,
        list_tables=lambda: [("shop", "orders")],
        dlq=FakeDlq(),
    )
    mon.check()
    clock.ms += 601_000
    mon.check()
    assert mon.store.ack("shop.orders.stale", "alice", clock.ms) is not None
    points.append({"schema": "shop", "table": "orders", "_time": at(clock.ms), "_value": 800.0})
    clock.ms += 30_000
    mon.check()
    [closed] = mon.store.history()
    assert closed.alert.acked_by == "alice" and closed.closed_ms == clock.ms
    assert "heartbeats again" in closed.closed_message


# ------------------------------------------------------------------------------------ the page's JSON


def test_alerts_view_lists_open_incidents_of_both_origins_and_the_history():
    now = T0 + 100_000
    down = StageDown("demo", "heartbeat", T0 + 50_000, "demo: heartbeat is down (process 3 on vm1 is gone)")
    closed_down = StageDown("demo", "appender", T0, "demo: appender is down", closed_ms=T0 + 20_000)
    acked = Alert.from_dict({**stale().to_dict(), "acked_by": "alice", "acked_ms": T0 + 1})
    letters = Alert(
        "demo", "appender", "RAW_UNDECODABLE", "dead_letter", T0 + 10, T0 + 11, None, None, "m", count=3
    )
    history = [ClosedAlert(stale("quiet", T0 - 9000), T0 + 30_000, "heartbeats again")]
    view = alerts.alerts_view(
        ["demo", "applog"], {"demo": [acked, letters]}, {"demo": history}, [down], [closed_down], {}, now
    )
    assert [(a["origin"], a["key"]) for a in view["open"]] == [
        ("console", "heartbeat.stage_down"),
        ("monitor", "appender.RAW_UNDECODABLE.dead_letter"),
        ("monitor", "shop.orders.stale"),
    ]
    first, letters_row, stale_row = view["open"]
    assert first["subject"] == "stage heartbeat" and first["open_s"] == 50.0 and first["acked_by"] is None
    assert letters_row["subject"] == "stage appender, code RAW_UNDECODABLE" and letters_row["count"] == 3
    assert (stale_row["acked_by"], stale_row["acked_ms"]) == ("alice", T0 + 1)
    assert [(h["key"], h["closed_ms"], h["lasted_s"]) for h in view["history"]] == [
        ("shop.quiet.stale", T0 + 30_000, 39.0),
        ("appender.stage_down", T0 + 20_000, 20.0),
    ]
    assert view["history"][1]["closed"] == "demo: appender runs again" and view["errors"] == []


def test_alerts_view_names_a_source_it_could_not_read():
    view = alerts.alerts_view(["demo"], {}, {}, [], [], {"demo": "ZooKeeper: refused"}, T0)
    assert view == {"open": [], "history": [], "errors": ["demo: ZooKeeper: refused"]}


# --------------------------------------------------------------------------- acknowledging, served


@pytest.fixture(scope="module")
def cfg() -> DbusConfig:
    return with_users(load_config(CONF))


@pytest.fixture
def served(cfg: DbusConfig, tmp_path: Path) -> tuple[Flask, FakeZk, Collector]:
    app = console_app(cfg, tmp_path)
    zk = FakeZk()
    AlertStore(zk, PATH).open(stale())
    c = Collector(cfg, snapshot_fn=lambda *a: None, zk_fn=lambda: zk, host="vm1")
    c.refresh_live()
    c.down[("demo", "heartbeat")] = StageDown("demo", "heartbeat", T0, "demo: heartbeat is down")
    c.ready.set()
    app.extensions["dbus_collector"] = c  # not started: no thread, no stack
    return app, zk, c


def logged_in(app: Flask, name: str) -> Any:
    client = app.test_client()
    log_in(client, name)
    return client


def ack(client: Any, body: dict[str, Any], csrf: bool = True) -> Any:
    headers = {
        "Accept": "application/json",
        **({"X-CSRFToken": csrf_token(client, "/alerts/")} if csrf else {}),
    }
    return client.post("/alerts/api/ack", json=body, headers=headers)


def test_an_operator_acknowledges_a_monitor_alert_and_it_is_audited(served, tmp_path):
    app, zk, _ = served
    client = logged_in(app, "op")
    r = ack(client, {"source": "demo", "key": "shop.orders.stale"})
    assert r.status_code == 200, r.get_data(as_text=True)
    assert r.get_json()["alert"]["acked_by"] == "op"
    assert node(zk, "shop.orders.stale")["acked_by"] == "op"
    [record] = [json.loads(line) for line in (tmp_path / "audit.log").read_text().splitlines()]
    assert {k: record[k] for k in ("user", "action", "source", "key", "origin")} == {
        "user": "op",
        "action": "alert-ack",
        "source": "demo",
        "key": "shop.orders.stale",
        "origin": "monitor",
    }


def test_an_operator_acknowledges_a_stage_down(served):
    app, _, c = served
    r = ack(logged_in(app, "op"), {"source": "demo", "key": "heartbeat.stage_down"})
    assert r.status_code == 200 and c.down[("demo", "heartbeat")].acked_by == "op"
    listed = logged_in(app, "vi").get("/alerts/api/alerts").get_json()
    assert [(a["key"], a["acked_by"]) for a in listed["open"]] == [
        ("heartbeat.stage_down", "op"),
        ("shop.orders.stale", None),
    ]


def test_a_viewer_cannot_acknowledge_and_a_post_needs_its_token(served, tmp_path):
    app, zk, _ = served
    r = ack(logged_in(app, "vi"), {"source": "demo", "key": "shop.orders.stale"})
    assert r.status_code == 403 and "viewer" in r.get_json()["error"]
    r = ack(logged_in(app, "op"), {"source": "demo", "key": "shop.orders.stale"}, csrf=False)
    assert r.status_code == 400 and "CSRF" in r.get_json()["error"]
    assert "acked_by" not in node(zk, "shop.orders.stale") and not (tmp_path / "audit.log").exists()


def test_unknown_sources_and_closed_alerts_are_refused(served):
    app, _, _ = served
    client = logged_in(app, "op")
    assert ack(client, {"source": "nope", "key": "x.y.stale"}).status_code == 400
    r = ack(client, {"source": "demo", "key": "shop.quiet.stale"})
    assert r.status_code == 404 and "no open alert" in r.get_json()["error"]
    assert ack(client, {"source": "demo"}).status_code == 400


def test_the_page_hides_nothing_from_its_script_and_inlines_none(served):
    app, _, _ = served
    html = logged_in(app, "vi").get("/alerts/").get_data(as_text=True)
    assert "alerts.js" in html and "<script>" not in html and "style=" not in html
