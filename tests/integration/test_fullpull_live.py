"""A full pull under live writes gives an exact copy: the whole path on the real stack.

A table of FULLPULL_LIVE_ROWS rows (default 200,000 in the suite; `FULLPULL_LIVE_ROWS=1000000` is the
full pull issue's 1M-row acceptance run) is filled, then the extractor, dispatcher,
appender and full puller run as deployed while a writer inserts, updates and deletes rows of that table
all through the pull. Once the writes stop and the last one has reached the result topic, ``dbus
reconcile`` merges the pull and the increments into a Parquet snapshot and ``dbus verify`` compares it
with the live table: 0 differences, exit 0. Then one more source change makes verify fail (it can).
"""

from __future__ import annotations

import json
import os

import pytest
from fullpull_env import FullPullEnv, cleanup_fullpull, run_dbus, wait_for_row
from helpers import wait_until
from live_workload import Workload, filled
from pipeline_env import make_pipeline_env

from cli.stages import Stages
from dbuslib import kafka

pytestmark = pytest.mark.integration
ROWS = int(os.environ.get("FULLPULL_LIVE_ROWS", "200000"))


def test_a_full_pull_under_live_writes_reconciles_to_an_exact_copy(tmp_path, source):
    database, writer = filled(source, ROWS)  # before the extractor starts: only a pull has these rows
    env = make_pipeline_env(tmp_path, database)
    stages = Stages(env.cfg, env.ds, tmp_path / "stage-logs")
    workload = Workload(source, database, ROWS + 1)
    try:
        for stage in ("extractor", "dispatcher", "appender", "fullpuller"):
            stages.start(stage)
        stages.wait_ready("extractor", "dispatcher", "appender", "fullpuller")
        workload.start()
        wait_until(lambda: workload.total() >= 200, 60, "the workload's first 200 writes")
        producer = kafka.producer(env.cfg.endpoints.kafka)  # bad requests first: they must disturb nothing
        producer.send(
            env.cfg.source(env.ds).topics.name("ctrl", env.ds),
            key=b"FULL_DATA_INDEPENDENT_PULL_REQ",
            value=b"{not json",
        ).get(30)
        producer.close()
        out = run_dbus(env.cfg_path, "fullpull", "request", "--source", env.ds, "--table", f"{database}.nope")
        assert out.returncode == 2 and "FULLPULL_UNKNOWN_TABLE" in out.stderr, out.stdout + out.stderr
        out = run_dbus(
            env.cfg_path,
            "fullpull",
            "request",
            "--source",
            env.ds,
            "--table",
            f"{database}.live",
            "--follow",
            "--wait",
            "300",
        )
        assert out.returncode == 0, out.stdout + out.stderr
        print(out.stdout.splitlines()[-1])
        after_pull = workload.total()
        wait_until(lambda: workload.total() >= after_pull + 200, 60, "200 writes after the pull")
        workload.stop_flag.set()
        workload.join(30)
        assert workload.error is None, workload.error
        print(f"\nworkload during the pull: {workload.counts}")
        assert min(workload.counts.values()) > 0
        with writer.cursor() as cur:  # the last change; in one partition, so all before it arrived too
            cur.execute("UPDATE live SET note = 'drain-marker' WHERE id = (SELECT MIN(id) FROM live)")
        topic = env.cfg.source(env.ds).topics.name("result", env.ds, database, "live")
        wait_for_row(env.cfg, topic, "drain-marker", 300)
        for stage in ("fullpuller", "appender", "dispatcher", "extractor"):  # free the cores for the checks
            stages.stop(stage)
        snapshot = tmp_path / "snapshot"
        out = run_dbus(
            env.cfg_path,
            "reconcile",
            "--source",
            env.ds,
            "--table",
            f"{database}.live",
            "--out",
            str(snapshot),
        )
        assert out.returncode == 0, out.stdout + out.stderr
        result = json.loads(out.stdout.strip().splitlines()[-1])
        print(f"reconcile: {result}")
        out = run_dbus(
            env.cfg_path,
            "verify",
            "--source",
            env.ds,
            "--table",
            f"{database}.live",
            "--snapshot",
            str(snapshot),
        )
        print(out.stdout)
        assert out.returncode == 0, out.stdout + out.stderr
        assert "equal, 0 differences" in out.stdout, out.stdout
        with writer.cursor() as cur:
            cur.execute("UPDATE live SET note = 'changed after' WHERE id = (SELECT MAX(id) FROM live)")
        out = run_dbus(
            env.cfg_path,
            "verify",
            "--source",
            env.ds,
            "--table",
            f"{database}.live",
            "--snapshot",
            str(snapshot),
        )
        assert out.returncode == 1, out.stdout + out.stderr
    finally:
        workload.stop_flag.set()
        cleanup_fullpull(FullPullEnv(env, writer, stages))
