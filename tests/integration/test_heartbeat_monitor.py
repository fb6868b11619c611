"""The heartbeat monitor against real InfluxDB points and ZooKeeper, alerting a local HTTP receiver and a
local SMTP server (aiosmtpd): exactly one alert when a table goes quiet, one recovery when it beats again.

The test calls ``Monitor.check()`` itself, so "no repeat" is said of counted checks, not of a stretch of
time."""

from __future__ import annotations

import json
import time

import pytest
from helpers import heartbeat_config, wait_until
from influxdb_client import Point

from dbuslib import influx, zk
from heartbeat.monitor import Monitor, alerts_path


def beat(cfg, ds: str, schema: str, table: str, latency_ms: float) -> None:
    """A dbus_heartbeat point as the appender writes it, stamped now."""
    now_ms = int(time.time() * 1000)
    influx.write(
        cfg.endpoints.influxdb,
        [
            Point("dbus_heartbeat")
            .tag("ds", ds)
            .tag("schema", schema)
            .tag("table", table)
            .field("latency_ms", float(latency_ms))
            .field("rows", 0)
            .field("packet_ms", now_ms - int(latency_ms))
            .field("tx_ms", now_ms - int(latency_ms))
            .time(now_ms * 1_000_000)
        ],
    )


def test_one_alert_then_one_recovery_by_log_webhook_and_email(tmp_path, writer_db, receivers):
    db, database = writer_db
    with db.cursor() as cur:
        cur.execute("CREATE TABLE t1 (id int PRIMARY KEY)")
    hook, mail = receivers
    ds, cfg = heartbeat_config(
        tmp_path,
        database,
        interval_s=1,
        check_interval_s=1,
        timeout_s=3,
        latency_alert_s=60,
        webhook_url=f"http://127.0.0.1:{hook.port}/alerts",
        webhook_timeout_s=5,
        smtp={
            "host": "127.0.0.1",
            "port": mail.port,
            "from_addr": "dbus@localhost",
            "to_addrs": ["ops@localhost"],
        },
    )
    client = zk.client(cfg.endpoints.zookeeper)
    beat(cfg, ds, database, "t1", 40.0)
    monitor = Monitor(cfg, ds, client=client)
    node = f"{alerts_path(cfg.endpoints.zookeeper.root, ds)}/{database}.t1.stale"
    try:
        assert monitor.check() == []  # fresh heartbeat: nothing to say
        assert hook.hooks == [] and mail.messages == []
        notes = wait_until(monitor.check, 15, "the stale verdict", interval=1)
        assert [(n.event, n.alert.kind) for n in notes] == [("alert", "stale")]
        for _ in range(3):  # three more checks while still stale: no repeat
            assert monitor.check() == []
        assert [h["event"] for h in hook.hooks] == ["alert"]
        alert = hook.hooks[0]
        assert (alert["ds"], alert["schema"], alert["table"], alert["kind"]) == (ds, database, "t1", "stale")
        assert alert["age_s"] > 3 and alert["latency_s"] == pytest.approx(0.04)
        stored = json.loads(client.get(node)[0])
        assert stored["kind"] == "stale" and stored["notified_ms"] is not None
        assert [m["Subject"] for m in mail.messages] == [f"[DBus ALERT] {ds} {database}.t1 stale"]

        def beat_and_check():  # the appender is back: a heartbeat a second
            beat(cfg, ds, database, "t1", 30.0)
            return monitor.check()

        notes = wait_until(beat_and_check, 15, "the recovery", interval=1)
        assert [(n.event, n.alert.kind) for n in notes] == [("recovery", "stale")]
        for _ in range(3):  # beating on: no second recovery
            assert beat_and_check() == []
        assert [h["event"] for h in hook.hooks] == ["alert", "recovery"]
        assert hook.hooks[1]["since"] == alert["since"] and hook.hooks[1]["latency_s"] == pytest.approx(0.03)
        assert [m["Subject"] for m in mail.messages][1:] == [f"[DBus RECOVERED] {ds} {database}.t1 stale"]
        assert not client.exists(node)
        points = influx.query(
            cfg.endpoints.influxdb,
            f'from(bucket:"{cfg.endpoints.influxdb.bucket}") |> range(start:-10m) '
            f'|> filter(fn:(r) => r._measurement == "dbus_alert" and r.ds == "{ds}" '
            f'and r._field == "state")',
        )
        assert [(p["table"], p["kind"], p["_value"]) for p in sorted(points, key=lambda p: p["_time"])] == [
            ("t1", "stale", "open"),
            ("t1", "stale", "recovered"),
        ]
    finally:
        monitor.close()
        client.delete(zk.path(cfg.endpoints.zookeeper, "HeartBeat", ds), recursive=True)
        client.stop()
        client.close()
