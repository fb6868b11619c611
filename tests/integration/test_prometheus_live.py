"""Prometheus on the real stack (docs/monitoring.md#prometheus): DBus's rules pass ``promtool check rules``;
the stages of a throwaway source and ``dbus heartbeat run`` write to ``dbus metrics exporter``
(``endpoints.influxdb.exporter``), which the stack's Prometheus scrapes; through Prometheus's HTTP API the
test reads the heartbeat latency of each table and the dispatcher's dead-letter count (a garbage record
in the raw topic), and with a configuration without InfluxDB ``dbus status`` and the console read them
back from Prometheus as they read them from InfluxDB; it sees every running stage up, and, once the
appender is stopped, ``DbusStageDown`` firing for it in Prometheus's own ``ALERTS``."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import urllib.parse
import urllib.request

import pytest
import yaml
from dashboards import promql_queries
from extractor_env import REPO
from helpers import delete_zk_tree, forget_dead_letters, wait_until
from pipeline_env import cleanup_pipeline, make_pipeline_env

from cli.stages import Stages
from dbuslib import kafka
from dbuslib.config import load_config

pytestmark = pytest.mark.integration  # the only test on the exporter port the stack scrapes

PROMETHEUS = f"http://127.0.0.1:{os.environ.get('PROMETHEUS_PORT', '19090')}"
EXPORTER = f"127.0.0.1:{os.environ.get('DBUS_EXPORTER_PORT', '19091')}"
RULES = REPO / "conf" / "prometheus" / "dbus-rules.yml"


def promql(query: str) -> list[dict]:
    """An instant query's result through Prometheus's HTTP API."""
    url = f"{PROMETHEUS}/api/v1/query?{urllib.parse.urlencode({'query': query})}"
    with urllib.request.urlopen(url, timeout=10) as resp:
        body = json.load(resp)
    assert body["status"] == "success", body
    return body["data"]["result"]


def by(label: str, result: list[dict]) -> dict[str, float]:
    return {r["metric"].get(label, ""): float(r["value"][1]) for r in result}


def test_promtool_checks_dbus_rules():
    promtool = shutil.which("promtool")
    assert promtool, "promtool (Debian's prometheus package) is not installed: make stack-up"
    done = subprocess.run(
        [promtool, "check", "rules", str(RULES)], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS: 5 rules found" in done.stdout


def test_prometheus_reads_latency_dead_letters_and_fires_stage_down(tmp_path, writer_db):
    writer, database = writer_db
    with writer.cursor() as cur:
        cur.execute(f"CREATE TABLE `{database}`.busy (id INT PRIMARY KEY, v INT)")
        cur.execute(f"CREATE TABLE `{database}`.quiet (id INT PRIMARY KEY, v INT)")
    env = make_pipeline_env(tmp_path, database)
    raw = yaml.safe_load(env.cfg_path.read_text())
    hb_schema = f"{database}_hb"
    raw["sources"][env.ds]["capture"]["include"].append(f"{hb_schema}.db_heartbeat_monitor")
    raw["sources"][env.ds]["heartbeat"] = {
        "schema": hb_schema,
        "table": "db_heartbeat_monitor",
        "interval_s": 2,
        "check_interval_s": 1,
        "timeout_s": 3600,
    }
    raw["endpoints"]["influxdb"]["exporter"] = f"http://{EXPORTER}"
    raw["prometheus"] = {"listen": EXPORTER, "expire_s": 600}
    env.cfg_path.write_text(yaml.safe_dump(raw))
    env.cfg = cfg = load_config(env.cfg_path)
    ds = env.ds
    stages = Stages(cfg, ds, tmp_path / "stage-logs")
    exporter_log = (tmp_path / "exporter.log").open("wb")
    exporter = subprocess.Popen(
        [sys.executable, "-m", "cli.main", "--config", str(env.cfg_path), "metrics", "exporter"],
        cwd=REPO,
        stdout=exporter_log,
        stderr=subprocess.STDOUT,
    )
    try:
        for stage in ("extractor", "dispatcher", "appender"):
            stages.start(stage)
        stages.wait_ready("extractor", "dispatcher", "appender")
        with writer.cursor() as cur:
            for i in range(20):
                cur.execute(f"INSERT INTO `{database}`.busy VALUES ({i}, {i})")
        # a garbage record in the raw topic: the dispatcher's dead letter, which the monitor counts (it reads
        # the dead-letter topic from its beginning, heartbeat/deadletters.py), on its way while the
        # latencies are awaited. (The heartbeat starts only now: a heartbeat written while the stages start
        # would carry their start in its latency.)
        producer = kafka.producer(cfg.endpoints.kafka)
        try:
            producer.send(ds, key=b"shop.orders", value=b"garbage, not a raw event").get(timeout=30)
        finally:
            producer.close()
        stages.start("heartbeat")
        stages.wait_ready("heartbeat")

        # the heartbeat latency of each table, as Prometheus scraped it from the exporter
        latency = wait_until(
            lambda: (
                (got := by("table", promql(f'dbus_heartbeat_latency_ms{{ds="{ds}"}}')))
                and {"busy", "quiet"} <= set(got)
                and got
            ),
            240,
            "each table's heartbeat latency in Prometheus",
            alive=[stages],
        )
        print(f"\nheartbeat latency in Prometheus: {latency} ms")
        assert all(0 <= v < 120_000 for v in latency.values())

        # the dead letter, counted by the monitor
        letters = wait_until(
            lambda: by("stage", promql(f'max_over_time(dbus_dead_letter_count{{ds="{ds}"}}[10m])')),
            180,
            "the dispatcher's dead letter in Prometheus",
            alive=[stages],
        )
        assert letters.get("dispatcher") == 1, letters

        # without InfluxDB (no endpoints.influxdb.url) dbus status and the console read the same figures
        # back from Prometheus (docs/monitoring.md, Without InfluxDB)
        no_influx = tmp_path / "no-influxdb.yaml"
        raw_p = {**raw, "endpoints": {**raw["endpoints"], "influxdb": {"exporter": f"http://{EXPORTER}"}}}
        raw_p["prometheus"] = {**raw["prometheus"], "server": PROMETHEUS}
        no_influx.write_text(yaml.safe_dump(raw_p))
        cfg_p = load_config(no_influx)

        def status_of(path) -> dict:
            argv = [
                sys.executable,
                "-m",
                "cli.main",
                "--config",
                str(path),
                "status",
                "--source",
                ds,
                "--json",
            ]
            done = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=120, check=False)
            assert done.returncode == 0, done.stdout + done.stderr
            return json.loads(done.stdout)

        from_prom = wait_until(
            lambda: (
                (st := status_of(no_influx))
                and {"busy", "quiet"} <= {h["table"] for h in st["heartbeats"] if h["latency_ms"] is not None}
                and st["dead_letters"]
                and st
            ),
            60,
            "dbus status read from Prometheus",
        )

        def rated(st: dict) -> list[str]:
            return [s["stage"] for s in st["stages"] if s["rows_per_s"] is not None]

        # a stage's rows/s reaches InfluxDB at its batch's end and Prometheus at a scrape: the two reads
        # name the same stages once both have them (read again until then, Prometheus first as before)
        reads = {"prom": from_prom}

        def agree() -> bool:
            reads["influx"] = status_of(env.cfg_path)
            if rated(reads["prom"]) != rated(reads["influx"]):
                reads["prom"] = status_of(no_influx)
            return rated(reads["prom"]) == rated(reads["influx"])

        wait_until(agree, 60, "dbus status naming the same stages' rows/s from Prometheus and InfluxDB")
        from_prom, from_influx = reads["prom"], reads["influx"]
        for st in (from_prom, from_influx):  # a heartbeat's age from its own time, not from the scrape
            assert all(0 <= h["age_s"] < 120 for h in st["heartbeats"]), st["heartbeats"]
        for st in (from_prom, from_influx):
            assert [(d["stage"], d["count"]) for d in st["dead_letters"]] == [("dispatcher", 1)], st
            assert st["dead_letters"][0]["dlq_topic"] and st["errors"] == [], st
        assert rated(from_prom) == rated(from_influx), (from_prom["stages"], from_influx["stages"])
        print(f"dbus status from Prometheus: heartbeats {from_prom['heartbeats']}")
        from console import deadletters as console_letters
        from console import tables as console_tables

        page = console_letters.counts(cfg_p, ds)
        assert page["errors"] == [] and [(c["stage"], c["count"]) for c in page["counts"]] == [
            ("dispatcher", 1)
        ]
        assert [s["stage"] for s in page["chart"]["series"]] == ["dispatcher"], page["chart"]
        beats = console_tables.newest_beats(cfg_p, ds, time.time())
        assert {(database, "busy"), (database, "quiet")} <= set(beats), beats
        chart = console_tables.chart(cfg_p, ds, database, "busy")
        assert any(v is not None for _, v in chart["latency_ms"]), chart

        # every running stage up; the appender stopped: DbusStageDown fires for it
        up = by("stage", promql(f'dbus_process_up{{ds="{ds}"}}'))
        assert all(up[s] >= 1 for s in ("extractor", "dispatcher", "appender", "heartbeat")), up
        stages.stop("appender")
        # a full pull's and a log source's figures written to the exporter as those stages write them (in
        # line protocol), for the dashboard's panels below: scraped while the alert is awaited
        lines = (
            f"dbus_fullpull,ds={ds},schema={database},table=busy,id=1 rows=5i,total_rows=20i,shards_done=1i,"
            'shards_total=4i,rows_per_s=2.5,status="pulling"\n'
            f"dbus_log,ds={ds},host=vm,kind=rows,table=app_orders count=17i\n"
        )
        with urllib.request.urlopen(f"http://{EXPORTER}/write", data=lines.encode(), timeout=10) as resp:
            assert resp.status == 204
        firing = wait_until(
            lambda: promql(
                f'ALERTS{{alertname="DbusStageDown",ds="{ds}",stage="appender",alertstate="firing"}}'
            ),
            120,
            "DbusStageDown firing for the stopped appender",
        )
        assert len(firing) == 1

        # every panel of the Prometheus dashboard answers
        queries = promql_queries(ds)
        assert len(queries) >= 12

        def unanswered() -> list[str]:
            return [name for name, q in queries if not promql(q)]

        try:
            wait_until(lambda: not unanswered(), 60, "a series for every panel", interval=1)
        except AssertionError:
            raise AssertionError(f"dbus-prometheus.json: panels without a series: {unanswered()}") from None
    finally:
        exporter.terminate()
        exporter.wait(30)
        exporter_log.close()
        stages.stop_all()
        cleanup_pipeline(env)
        delete_zk_tree(cfg.endpoints.zookeeper, "HeartBeat", ds)
        forget_dead_letters(cfg, ds)
        with writer.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS `{hb_schema}`")
