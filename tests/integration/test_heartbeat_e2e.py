"""Heartbeats through the whole path on the real stack: the operator sees that every table is alive.

Extractor, dispatcher, appender (spark-submit) and ``dbus heartbeat run`` (writer + monitor) run for a
throwaway source whose heartbeat table lives in a schema of the test's own (interval 2 s, monitor check
1 s, stale after 10 s, webhook to a receiver in this test). One table is written to, one is never
written to. The test checks, in order:

1. per-table latency reaches InfluxDB within two intervals of a heartbeat's packet time, and the
   dashboard's own queries (conf/grafana) return it; on a configuration without InfluxDB (the secure
   stack's) the same through the exporter and Prometheus, within one scrape interval more;
2. a quiet table still gets fresh heartbeats, and the extractor's committed position keeps moving;
3. ``dbus status --json`` reports the figures the test reads itself (last heartbeat per table, the
   extractor's position);
4. stopping the appender raises exactly one webhook alert per table within threshold plus one interval,
   and restarting it sends exactly one recovery per alert.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from contextlib import ExitStack

import pytest
import yaml
from dashboards import influxql, panel_queries, render
from extractor_env import REPO
from helpers import Receiver, delete_zk_tree, metrics_exporter, wait_until
from pipeline_env import cleanup_pipeline, make_pipeline_env

from binlog import heartbeat as hbt
from cli.stages import Stages
from dbuslib import kafka, seriesread, zk
from dbuslib.config import load_config, raw_config

pytestmark = pytest.mark.integration
INTERVAL_S, CHECK_S, TIMEOUT_S = 2.0, 1.0, 10.0


def last_heartbeats(cfg, ds: str) -> dict[str, dict[str, float]]:
    """The newest dbus_heartbeat point per table with its fields (InfluxDB, or without one Prometheus)."""
    what = seriesread.Newest(hbt.MEASUREMENT, "latency_ms", ("table",), ("packet_ms", "rows"))
    series = seriesread.last(cfg, ds, 3600, what)
    out: dict[str, dict[str, float]] = {}
    for s in series:
        for _, latency, packet_ms, rows in s["values"]:
            table = s["tags"]["table"]
            if packet_ms is not None and packet_ms >= out.get(table, {}).get("packet_ms", 0):
                out[table] = {"latency_ms": latency, "packet_ms": packet_ms, "rows": rows}
    return out


def committed_position(cfg, ds: str) -> str:
    client = zk.client(cfg.endpoints.zookeeper)
    try:
        data, _ = client.get(zk.path(cfg.endpoints.zookeeper, "Extractor", ds, "position"))
        return data.decode()
    finally:
        client.stop()
        client.close()


def newest_written(db, hb_schema: str, database: str) -> dict[str, int]:
    """The newest heartbeat the writer put in its table, per monitored table: its packet's emit time, ms."""
    with db.cursor() as cur:
        cur.execute(
            f"SELECT TABLE_NAME, PACKET FROM `{hb_schema}`.db_heartbeat_monitor WHERE SCHEMA_NAME = %s "
            "ORDER BY ID",
            (database,),
        )
        return {table: hbt.parse_packet(packet).time_ms for table, packet in cur.fetchall()}


def two_more_batches(db, hb_schema: str, database: str) -> None:
    """Waits until the heartbeat process has written two more batches (a row each for busy and quiet),
    about four of its monitor's checks: progress of the process that would repeat an alert, not a clock."""
    table = f"`{hb_schema}`.db_heartbeat_monitor"
    with db.cursor() as cur:
        cur.execute(f"SELECT COALESCE(MAX(ID), 0) FROM {table}")  # IDs only grow; old rows may be purged
        (since,) = cur.fetchone()

    def written() -> int:
        with db.cursor() as cur:
            cur.execute(f"SELECT COUNT(*) FROM {table} WHERE ID > %s AND SCHEMA_NAME = %s", (since, database))
            return cur.fetchone()[0]

    wait_until(lambda: written() >= 4, 10 * INTERVAL_S, "two more heartbeat batches")


# exclusive and alone: it times latencies and alert delays of seconds; a Spark test beside it raised alerts
# early, so not even a unit test may run beside it (tests/fileorder.py)
@pytest.mark.exclusive(alone=True)
def test_heartbeats_latency_alerts_and_status(tmp_path, writer_db):
    writer, database = writer_db  # dropped by the fixture; the heartbeat schema below by the test
    with writer.cursor() as cur:
        cur.execute(f"CREATE TABLE `{database}`.busy (id INT PRIMARY KEY, v INT)")
        cur.execute(f"CREATE TABLE `{database}`.quiet (id INT PRIMARY KEY, v INT)")
    env = make_pipeline_env(tmp_path, database)
    hook = Receiver()
    raw = raw_config(env.cfg_path)
    hb_schema = f"{database}_hb"  # the heartbeat table's own schema, as `dbus` is in production
    raw["sources"][env.ds]["capture"]["include"].append(f"{hb_schema}.db_heartbeat_monitor")
    raw["sources"][env.ds]["heartbeat"] = {
        "schema": hb_schema,
        "table": "db_heartbeat_monitor",
        "interval_s": INTERVAL_S,
        "check_interval_s": CHECK_S,
        "timeout_s": TIMEOUT_S,
        "latency_alert_s": 120,
        "webhook_url": f"http://127.0.0.1:{hook.port}/dbus",
    }
    env.cfg_path.write_text(yaml.safe_dump(raw))
    env.cfg = cfg = load_config(env.cfg_path)
    stages = Stages(cfg, env.ds, tmp_path / "stage-logs")
    ds = env.ds
    # through Prometheus a point is seen at the exporter's next scrape (conf/stack/prometheus.yml: 5 s)
    seen_s = 6.0 if seriesread.from_prometheus(cfg) else 0.0
    exporter = ExitStack()
    exporter.enter_context(metrics_exporter(cfg, tmp_path / "exporter.log"))
    try:
        for stage in ("extractor", "dispatcher", "appender"):
            stages.start(stage)
        stages.wait_ready("extractor", "dispatcher", "appender")
        with writer.cursor() as cur:
            for i in range(20):
                cur.execute(f"INSERT INTO `{database}`.busy VALUES ({i}, {i})")
        result = cfg.source(ds).topics.name("result", ds, database, "busy")
        wait_until(
            lambda: (
                sum(r.value.count(b'{"tuple":') for r in kafka.read_range(cfg.endpoints.kafka, [result]))
                >= 20
            ),
            180,
            "the first rows through the path",
            alive=[stages],
        )
        # the monitor starts once the path runs: its first micro-batches take longer than the test's 10 s
        # threshold (the default threshold is 600 s)
        stages.start("heartbeat")
        t_hb = time.time()

        # 1. latency per table within two intervals of the packet time
        wait_until(
            lambda: {"busy", "quiet"} <= set(last_heartbeats(cfg, ds)),
            120,
            "first heartbeats",
            alive=[stages],
        )
        since_ms = time.time() * 1000
        fresh = wait_until(
            lambda: (
                (h := last_heartbeats(cfg, ds))
                and all(h.get(t, {}).get("packet_ms", 0) >= since_ms for t in ("busy", "quiet"))
                and h
            ),
            4 * INTERVAL_S + seen_s,
            "heartbeats newer than the check's start",
            alive=[stages],
        )
        arrived_ms = time.time() * 1000
        for table in ("busy", "quiet"):
            assert arrived_ms - fresh[table]["packet_ms"] <= (2 * INTERVAL_S + seen_s) * 1000, fresh[table]
            assert fresh[table]["latency_ms"] <= 2 * INTERVAL_S * 1000, fresh[table]
        print(f"\nlatency per table: { {t: round(fresh[t]['latency_ms']) for t in ('busy', 'quiet')} } ms")
        # the dashboard's queries, as Grafana runs them (the PromQL dashboard's: test_prometheus_live)
        answered = {
            title: influxql(cfg, render(q, ds, None, None))
            for title, q in panel_queries()
            if "dbus_heartbeat" in q and "latency_ms" in q and not seriesread.from_prometheus(cfg)
        }
        assert answered or seriesread.from_prometheus(cfg), "no heartbeat latency panel in dbus.json"
        for title, series in answered.items():
            tables = {tag for s in series for tag in (s.get("tags") or {}).values()}
            assert {"busy", "quiet"} <= tables, (title, series)

        # 2. the quiet table: fresh heartbeats and a moving position
        first_quiet, first_pos = fresh["quiet"]["packet_ms"], committed_position(cfg, ds)
        wait_until(
            lambda: last_heartbeats(cfg, ds)["quiet"]["packet_ms"] > first_quiet,
            6 * INTERVAL_S + seen_s,
            "a newer heartbeat of the quiet table",
            alive=[stages],
        )
        wait_until(
            lambda: committed_position(cfg, ds) != first_pos,
            6 * INTERVAL_S,
            "the committed position to move on",
            alive=[stages],
        )

        # 3. dbus status reports what the test reads itself (writer stopped: the figures hold still)
        stages.stop("heartbeat")
        written = newest_written(writer, hb_schema, database)
        measured = wait_until(
            lambda: (
                (h := last_heartbeats(cfg, ds))
                and all(h[t]["packet_ms"] >= written[t] for t in ("busy", "quiet"))
                and h
            ),
            60,
            "the writer's last heartbeats read back",
            alive=[stages],
        )
        before = json.loads(committed_position(cfg, ds))  # the extractor commits on: status reads in between
        out = subprocess.run(
            [
                sys.executable,
                "-m",
                "cli.main",
                "--config",
                str(env.cfg_path),
                "status",
                "--source",
                ds,
                "--json",
            ],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert out.returncode == 0, out.stderr
        status = json.loads(out.stdout)
        by_table = {(h["schema"], h["table"]): h for h in status["heartbeats"]}
        for table in ("busy", "quiet"):
            h = by_table[(database, table)]
            assert h["latency_ms"] == pytest.approx(measured[table]["latency_ms"]), (h, measured[table])
            assert h["rows"] == measured[table]["rows"], (h, measured[table])
        after = json.loads(committed_position(cfg, ds))
        shown = (status["extractor"]["committed_file"], status["extractor"]["committed_pos"])
        assert (before["file"], before["pos"]) <= shown <= (after["file"], after["pos"]), (
            status["extractor"],
            before,
            after,
        )
        assert status["alerts"] == []

        # 4. stop the appender: one alert per table within threshold + one interval; restart: one recovery
        assert hook.bodies == [], [
            (round(t - t_hb, 1), b["event"], b["table"], b["kind"], b.get("message")) for t, b in hook.bodies
        ]  # a healthy path raised nothing so far
        restarted_ms = time.time() * 1000
        stages.start("heartbeat")
        wait_until(
            lambda: (
                (h := last_heartbeats(cfg, ds))
                and all(h[t]["packet_ms"] >= restarted_ms for t in ("busy", "quiet"))
            ),
            60,
            "heartbeats of the restarted writer through the path",
            alive=[stages],
        )
        stopped = time.time()
        stages.stop("appender")
        alerts = wait_until(
            lambda: len(hook.events("alert")) >= 2 and hook.events("alert"),
            TIMEOUT_S + 60,
            "webhook alerts",
            alive=[stages],
        )
        assert all(at >= stopped for at, _ in alerts)
        for at, body in alerts:
            assert body["kind"] == "stale" and body["ds"] == ds
            assert at - stopped <= TIMEOUT_S + INTERVAL_S + CHECK_S + 2, (at - stopped, body)
        print(
            f"alerts {sorted(b['table'] for _, b in alerts)} after "
            f"{max(t for t, _ in alerts) - stopped:.1f}s (threshold {TIMEOUT_S:.0f}s)"
        )
        # no repeats while it lasts: the heartbeat process (writer and monitor) runs on for two more
        # writer batches, about four monitor checks
        two_more_batches(writer, hb_schema, database)
        assert len(hook.events("alert")) == 2  # one per incident
        stages.start("appender")
        wait_until(lambda: len(hook.events("recovery")) >= 2, 180, "recovery notices", alive=[stages])
        two_more_batches(writer, hb_schema, database)
        assert sorted(b["table"] for _, b in hook.events("alert")) == ["busy", "quiet"]
        assert sorted(b["table"] for _, b in hook.events("recovery")) == ["busy", "quiet"]
    finally:
        stages.stop_all()
        exporter.close()
        hook.close()
        cleanup_pipeline(env)
        delete_zk_tree(cfg.endpoints.zookeeper, "HeartBeat", ds)
        with writer.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS `{hb_schema}`")
