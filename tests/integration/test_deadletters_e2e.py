"""Dead letters are seen, end to end on the real stack: a garbage record written between good ones to the
raw topic of a throwaway source is dead-lettered by the running dispatcher (spark-submit); the running
``dbus heartbeat run`` counts it, alerts the webhook once with its coordinates, and ``dbus status --json``
(the CLI) shows it per stage and code with the garbage record's topic, partition and offset; the
dispatcher is still running."""

from __future__ import annotations

import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import yaml
from extractor_env import REPO
from helpers import Receiver, delete_zk_tree, forget_dead_letters, wait_until
from pipeline_env import cleanup_pipeline, make_pipeline_env

from cli.stages import Stages
from dbuslib import kafka
from dbuslib.config import load_config
from heartbeat import deadletters


def status_json(cfg_path, ds: str) -> dict:
    out = subprocess.run(
        [sys.executable, "-m", "cli.main", "--config", str(cfg_path), "status", "--source", ds, "--json"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    return json.loads(out.stdout)


def test_a_dispatchers_dead_letter_is_counted_alerted_and_in_status(tmp_path, writer_db):
    db, database = writer_db
    with db.cursor() as cur:  # a table to beat for: the heartbeat process's batches show that it runs on
        cur.execute("CREATE TABLE beats (id INT PRIMARY KEY)")
    env = make_pipeline_env(tmp_path, database)
    hook = Receiver()
    raw = yaml.safe_load(env.cfg_path.read_text())
    raw["sources"][env.ds]["heartbeat"] = {
        "schema": database,
        "table": "db_heartbeat_monitor",
        "interval_s": 5,
        "check_interval_s": 1,
        "timeout_s": 3600,
        "webhook_url": f"http://127.0.0.1:{hook.port}/dbus",
    }
    env.cfg_path.write_text(yaml.safe_dump(raw))
    env.cfg = cfg = load_config(env.cfg_path)
    ds = env.ds
    stages = Stages(cfg, ds, tmp_path / "stage-logs")
    try:
        stages.start("dispatcher")
        stages.start("heartbeat")
        stages.wait_ready("dispatcher", "heartbeat")
        producer = kafka.producer(cfg.endpoints.kafka)
        try:
            sent = producer.send(ds, key=b"shop.orders", value=b"garbage, not a raw event").get(timeout=30)
        finally:
            producer.close()

        def counted() -> dict | None:
            snap = status_json(env.cfg_path, ds)
            return next((d for d in snap.get("dead_letters", []) if d["stage"] == "dispatcher"), None)

        # the alert first: the monitor sends it as it counts the letter, and the webhook is polled in this
        # process, where each look at dbus status is a CLI process (~1 CPU-s)
        alerts = wait_until(
            lambda: hook.events("alert"), 180, "the dead-letter alert at the webhook", alive=[stages]
        )
        letter = wait_until(counted, 60, "the dead letter in dbus status", alive=[stages], interval=1)
        assert (letter["count"], letter["topic"], letter["partition"], letter["offset"]) == (
            1,
            ds,
            sent.partition,
            sent.offset,
        ), letter
        assert letter["code"] not in ("", deadletters.UNREADABLE) and letter["dlq_topic"] == f"{ds}.dlq"
        ((_, body),) = alerts
        assert (body["kind"], body["stage"], body["code"], body["topic"], body["offset"]) == (
            "dead_letter",
            "dispatcher",
            letter["code"],
            ds,
            sent.offset,
        ), body
        stages.check_alive()  # the dispatcher and the monitor go on
        # about five more checks (one more heartbeat batch): no second alert, no second count
        with db.cursor() as cur:
            cur.execute("SELECT COALESCE(MAX(ID), 0) FROM db_heartbeat_monitor")
            (since,) = cur.fetchone()

        def batches_since() -> int:
            with db.cursor() as cur:
                cur.execute("SELECT COUNT(*) FROM db_heartbeat_monitor WHERE ID > %s", (since,))
                return cur.fetchone()[0]

        wait_until(batches_since, 30, "one more heartbeat batch", alive=[stages])
        assert len(hook.events("alert")) == 1
        assert counted()["count"] == 1
    finally:
        with ThreadPoolExecutor() as pool:  # both groups stop at once, not one after the other
            list(pool.map(stages.stop, list(stages.procs)))
        hook.close()
        cleanup_pipeline(env)
        delete_zk_tree(cfg.endpoints.zookeeper, "HeartBeat", ds)
        forget_dead_letters(cfg, ds)
