"""The heartbeat monitor against real InfluxDB points and ZooKeeper, alerting a local HTTP receiver and a
local SMTP receiver: exactly one alert when a table goes quiet, one recovery when it beats again."""

from __future__ import annotations

import json
import socketserver
import threading
import time
from email import message_from_bytes
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from influxdb_client import Point
from test_heartbeat_writer import heartbeat_config, wait_until

from dbuslib import influx, zk
from heartbeat.monitor import Monitor, alerts_path


class Webhook(BaseHTTPRequestHandler):
    received: list[dict]

    def do_POST(self) -> None:
        length = int(self.headers["Content-Length"])
        self.received.append(json.loads(self.rfile.read(length)))
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args) -> None:
        pass


class Smtp(socketserver.StreamRequestHandler):
    """Just enough SMTP for smtplib: EHLO/HELO, MAIL, RCPT, DATA, QUIT."""

    received: list[bytes]

    def reply(self, line: str) -> None:
        self.wfile.write(line.encode() + b"\r\n")

    def handle(self) -> None:
        self.reply("220 localhost test SMTP")
        while line := self.rfile.readline():
            verb = line[:4].upper()
            if verb == b"DATA":
                self.reply("354 end with .")
                data = b""
                while (chunk := self.rfile.readline()) not in (b".\r\n", b""):
                    data += chunk[1:] if chunk.startswith(b"..") else chunk
                self.received.append(data)
                self.reply("250 queued")
            elif verb == b"QUIT":
                self.reply("221 bye")
                return
            else:
                self.reply("250 ok")


@pytest.fixture
def receivers():
    hooks: list[dict] = []
    mails: list[bytes] = []
    http = ThreadingHTTPServer(("127.0.0.1", 0), type("H", (Webhook,), {"received": hooks}))
    smtp = socketserver.ThreadingTCPServer(("127.0.0.1", 0), type("S", (Smtp,), {"received": mails}))
    for server in (http, smtp):
        threading.Thread(target=server.serve_forever, daemon=True).start()
    yield http.server_address[1], hooks, smtp.server_address[1], mails
    for server in (http, smtp):
        server.shutdown()
        server.server_close()


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
    http_port, hooks, smtp_port, mails = receivers
    ds, cfg = heartbeat_config(
        tmp_path,
        database,
        interval_s=1,
        check_interval_s=1,
        timeout_s=3,
        latency_alert_s=60,
        webhook_url=f"http://127.0.0.1:{http_port}/alerts",
        webhook_timeout_s=5,
        smtp={
            "host": "127.0.0.1",
            "port": smtp_port,
            "from_addr": "dbus@localhost",
            "to_addrs": ["ops@localhost"],
        },
    )
    client = zk.client(cfg.endpoints.zookeeper)
    beat(cfg, ds, database, "t1", 40.0)
    monitor = Monitor(cfg, ds, client=client)
    thread = threading.Thread(target=monitor.run, daemon=True)
    thread.start()
    node = f"{alerts_path(cfg.endpoints.zookeeper.root, ds)}/{database}.t1.stale"
    try:
        time.sleep(2)
        assert hooks == [] and mails == []  # fresh heartbeat: nothing to say
        wait_until(lambda: hooks, 10, "the stale alert at the webhook")
        time.sleep(3)  # three more checks while still stale: no repeat
        assert [h["event"] for h in hooks] == ["alert"]
        alert = hooks[0]
        assert (alert["ds"], alert["schema"], alert["table"], alert["kind"]) == (ds, database, "t1", "stale")
        assert alert["age_s"] > 3 and alert["latency_s"] == pytest.approx(0.04)
        stored = json.loads(client.get(node)[0])
        assert stored["kind"] == "stale" and stored["notified_ms"] is not None
        wait_until(lambda: len(mails) == 1, 10, "the alert email")
        assert message_from_bytes(mails[0])["Subject"] == f"[DBus ALERT] {ds} {database}.t1 stale"

        for _ in range(4):  # the appender is back: a heartbeat a second
            beat(cfg, ds, database, "t1", 30.0)
            if len(hooks) < 2:
                wait_until(lambda: len(hooks) == 2, 10, "the recovery at the webhook")
            time.sleep(1)
        assert [h["event"] for h in hooks] == ["alert", "recovery"]
        assert hooks[1]["since"] == alert["since"] and hooks[1]["latency_s"] == pytest.approx(0.03)
        wait_until(lambda: len(mails) == 2, 10, "the recovery email")
        assert message_from_bytes(mails[1])["Subject"] == f"[DBus RECOVERED] {ds} {database}.t1 stale"
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
        monitor.stop()
        thread.join(15)
        client.delete(zk.path(cfg.endpoints.zookeeper, "HeartBeat", ds), recursive=True)
        client.stop()
        client.close()
