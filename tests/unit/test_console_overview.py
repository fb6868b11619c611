"""The console's overview (console/overview.py): each stage's state from its announced processes and its
metrics, the topology of a database and a log source, the stage_down incidents, and the collector that
reads in the background while requests read its newest figures."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from console_fakes import CONF, console_app, log_in, with_users
from flask import Flask
from heartbeat_fakes import FakeZk

from console import overview
from console.overview import DOWN, RUNNING, UNKNOWN, WAITING, Collector, StageDown
from dbuslib import zkpaths
from dbuslib.config import DbusConfig, load_config
from dbuslib.liveness import Process
from status import readers as status

HOST = "vm1"
NOW = 1_700_000_000.0


@pytest.fixture(scope="module")
def cfg() -> DbusConfig:
    return with_users(load_config(CONF))


def proc(stage: str, pid: int = 10, host: str = HOST) -> Process:
    return Process(stage, host, pid, NOW - 60)


def snapshot(**kw: Any) -> status.Snapshot:
    stages = (
        status.StageRate("extractor", 812.0, None, None, 4.0),
        status.StageRate("dispatcher", 800.0, 12, 150.0, 3.0),
        status.StageRate("appender", None, None, None, 5.0, waiting=True),
    )
    ext = status.ExtractorStatus("vm1:99", 7, "mariadb-bin.000003", 1234, "0-1-42", 0, 0.8, 1.2, 4.0)
    beats = (status.TableHeartbeat("shop", "orders", 1200.0, 3, 20.0),)
    return status.Snapshot("demo", NOW, 600, extractor=ext, stages=stages, heartbeats=beats, **kw)


def by_stage(view: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {i["stage"]: i for i in [*view["pipeline"], *view["side"]] if i["type"] == "stage"}


def test_a_stage_is_down_without_a_process_and_at_once_when_its_pid_is_gone():
    rate = status.StageRate("heartbeat", None, None, None, 2.0)
    assert overview.stage_state(rate, [], HOST, lambda pid: True) == (DOWN, "no process announced")
    state, why = overview.stage_state(rate, [proc("heartbeat", 42)], HOST, lambda pid: False)
    assert state == DOWN and "process 42 on vm1 is gone" in why
    assert overview.stage_state(None, [proc("heartbeat")], HOST, lambda pid: True)[0] == RUNNING
    assert overview.stage_state(None, [proc("heartbeat", host="vm2")], HOST, lambda pid: False)[0] == RUNNING


def test_a_running_stage_whose_point_waits_is_waiting():
    rate = status.StageRate("appender", None, None, None, 5.0, waiting=True)
    assert overview.stage_state(rate, [proc("appender")], HOST, lambda pid: True)[0] == WAITING


def test_without_zookeeper_the_state_comes_from_the_metrics():
    assert overview.stage_state(status.StageRate("appender", 1.0, 0, 1.0, 3.0), None, HOST)[0] == RUNNING
    assert overview.stage_state(status.StageRate("appender"), None, HOST)[0] == DOWN
    assert overview.stage_state(None, None, HOST)[0] == UNKNOWN


def test_a_database_source_is_its_topology(cfg):
    announced = {s: [proc(s, i)] for i, s in enumerate(["extractor", "dispatcher", "appender", "heartbeat"])}
    view = overview.source_view(cfg, "demo", snapshot(), announced, HOST, lambda pid: pid != 3)
    kinds = [(i["type"], i.get("stage") or i.get("name") or i["names"]) for i in view["pipeline"]]
    assert kinds == [
        ("server", "MariaDB"),
        ("stage", "extractor"),
        ("topic", ["demo"]),
        ("stage", "dispatcher"),
        ("topic", ["demo.shop"]),
        ("stage", "appender"),
        ("topic", ["demo.shop.result"]),
    ]
    assert view["pipeline"][0]["detail"] == "127.0.0.1:13306"
    stages = by_stage(view)
    assert {s: v["state"] for s, v in stages.items()} == {
        "extractor": RUNNING,
        "dispatcher": RUNNING,
        "appender": WAITING,
        "fullpuller": DOWN,  # nothing announced
        "heartbeat": DOWN,  # pid 3 is gone
    }
    assert stages["extractor"]["detail"] == {
        "leader": "vm1:99",
        "epoch": 7,
        "committed": "mariadb-bin.000003:1234",
        "gtid": "0-1-42",
        "lag_s": 1.2,
        "behind_bytes": 0,
    }
    assert stages["dispatcher"]["rows_per_s"] == 800.0 and stages["dispatcher"]["lag_records"] == 12
    assert stages["heartbeat"]["detail"] == {"newest_heartbeat_s": 20.0}
    assert stages["heartbeat"]["processes"] == [{**proc("heartbeat", 3).as_dict(), "alive": False}]
    assert view["kind"] == "database" and view["errors"] == []


def test_a_log_source_is_shipper_raw_topic_processor_result(cfg):
    snap = status.LogSnapshot(
        "applog", NOW, 600, stages=(status.StageRate("logprocessor", 50.0, 0, 200.0, 2.0),)
    )
    view = overview.source_view(
        cfg, "applog", snap, {"logprocessor": [proc("logprocessor")]}, HOST, lambda p: True
    )
    assert [i["type"] for i in view["pipeline"]] == ["server", "topic", "stage", "topic"]
    assert view["pipeline"][0]["name"] == "shipper" and view["pipeline"][1]["names"] == ["applog"]
    assert view["pipeline"][3]["names"] == ["applog.applog_schema.result"]
    assert {s: v["state"] for s, v in by_stage(view).items()} == {"logprocessor": RUNNING, "heartbeat": DOWN}


def test_no_readings_yet_and_zookeeper_unread_are_said(cfg):
    view = overview.source_view(cfg, "demo", None, None, HOST)
    assert view["errors"] == ["stage processes (ZooKeeper): not read"]
    assert by_stage(view)["extractor"]["state"] == UNKNOWN


def test_every_source_database_first(cfg):
    out = overview.overview(cfg, {}, {}, HOST, lambda p: True, updated_at=NOW)
    assert [s["source"] for s in out["sources"]] == ["demo", "applog"] and out["updated_at"] == NOW


def test_a_stage_seen_running_opens_stage_down_when_it_goes_and_closes_when_back():
    seen: set = set()
    up, down = (RUNNING, "announced"), (DOWN, "process 3 on vm1 is gone")
    open_, closed = overview.track({}, seen, {("demo", "heartbeat"): down}, 1000)
    assert open_ == {} and closed == []  # never seen running: the overview shows it, no incident
    open_, _ = overview.track(open_, seen, {("demo", "heartbeat"): up}, 2000)
    open_, closed = overview.track(open_, seen, {("demo", "heartbeat"): down}, 3000)
    assert open_ == {
        ("demo", "heartbeat"): StageDown(
            "demo", "heartbeat", 3000, "demo: heartbeat is down (process 3 on vm1 is gone)"
        )
    }
    again, closed = overview.track(open_, seen, {("demo", "heartbeat"): down}, 4000)
    assert again == open_ and closed == []  # one incident, not one per look
    assert overview.track(open_, seen, {("demo", "heartbeat"): (UNKNOWN, "")}, 4500)[0] == open_
    open_, closed = overview.track(open_, seen, {("demo", "heartbeat"): up}, 5000)
    assert open_ == {} and [(c.stage, c.since_ms, c.closed_ms) for c in closed] == [("heartbeat", 3000, 5000)]


def live_zk(*procs: Process) -> FakeZk:
    zk = FakeZk()
    for p in procs:
        zk.create(
            zkpaths.live_process("/DBus", "demo", p.stage, f"{p.host}:{p.pid}"), p.to_json(), makepath=True
        )
    return zk


def collector_of(cfg, zk, alive: set[int], calls: list | None = None) -> Collector:
    def snap(c, ds, window):
        if calls is not None:
            calls.append(ds)
        return snapshot() if ds == "demo" else status.LogSnapshot(ds, NOW, window)

    return Collector(
        cfg, snapshot_fn=snap, zk_fn=lambda: zk, clock=lambda: NOW, is_alive=alive.__contains__, host=HOST
    )


def test_the_collector_reads_once_per_round_and_a_killed_stage_opens_an_incident(cfg):
    zk, alive, calls = live_zk(proc("heartbeat", 5)), {5}, []
    c = collector_of(cfg, zk, alive, calls)
    c.refresh_snapshots()
    c.refresh_live()
    assert calls == ["demo", "applog"]
    for _ in range(3):
        assert by_stage(c.view()["sources"][0])["heartbeat"]["state"] == RUNNING
    assert calls == ["demo", "applog"]  # views read the newest figures, they do not collect
    alive.clear()  # kill -9: the node stays until its session times out, the pid is gone
    c.refresh_live()
    assert by_stage(c.view()["sources"][0])["heartbeat"]["state"] == DOWN
    assert [(i.ds, i.stage) for i in c.down.values()] == [("demo", "heartbeat")]
    assert c.ack_stage_down("demo", "heartbeat", "op", 7) == StageDown(
        "demo", "heartbeat", int(NOW * 1000), c.down[("demo", "heartbeat")].message, "op", 7
    )
    assert c.ack_stage_down("demo", "appender", "op", 7) is None


def test_a_zookeeper_that_fails_is_named_and_tried_again(cfg):
    class Broken(FakeZk):
        def get_children(self, path):
            raise ConnectionError("refused")

    made: list = []
    c = Collector(cfg, snapshot_fn=lambda *a: None, zk_fn=lambda: made.append(1) or Broken(), host=HOST)
    c.refresh_live()
    c.refresh_live()
    assert len(made) == 4  # a new client after each failure (two sources, two rounds)
    assert c.readings.announced == {"demo": None, "applog": None}
    assert "refused" in c.readings.alert_errors["demo"]


@pytest.fixture
def app(cfg: DbusConfig, tmp_path: Path) -> Flask:
    app = console_app(cfg, tmp_path)
    c = collector_of(cfg, live_zk(proc("heartbeat", 5)), {5})
    c.refresh_snapshots()
    c.refresh_live()
    c.ready.set()
    app.extensions["dbus_collector"] = c  # not started: no thread, no stack
    return app


def test_api_overview_serves_the_collectors_view(app: Flask):
    client = app.test_client()
    assert client.get("/api/overview").status_code == 401
    log_in(client, "vi")
    body = client.get("/api/overview").get_json()
    assert [s["source"] for s in body["sources"]] == ["demo", "applog"]
    assert by_stage(body["sources"][0])["heartbeat"]["state"] == RUNNING
    html = client.get("/").get_data(as_text=True)
    assert "overview.js" in html and "<script>" not in html and "style=" not in html
