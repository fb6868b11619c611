"""Full-puller test helpers: a throwaway source with its own database, the service as ``spark-submit``,
requests through the real ``dbus fullpull request`` CLI, and the pulled rows read back from Kafka.

``FullPullEnv`` is built on pipeline_env.make_pipeline_env (source ``pytest_<hex>``, its own topics, so
its control topic and consumer group start empty). ``pulled`` returns the tuples of one request as
``{key: [tuple, ...]}`` together with the marker order seen on the result topic.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from extractor_env import REPO, ExtractorEnv
from helpers import delete_zk_tree
from pipeline_env import cleanup_pipeline, make_pipeline_env

from cli.stages import Stages
from dbuslib import kafka, mysql, zk
from fullpuller.progress import Progress, ProgressStore

DBUS = [sys.executable, "-m", "cli.main"]


def run_dbus(
    cfg_path: Path | str, *args: str, timeout: float = 900, environ: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    """``dbus --config <cfg_path> <args>`` as a user runs it (Spark's Python workers on this venv), with
    ``environ`` added to this process's environment (its own for each of commands run side by side)."""
    import os

    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, **(environ or {})}
    return subprocess.run(
        [*DBUS, "--config", str(cfg_path), *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )


@dataclass
class FullPullEnv:
    env: ExtractorEnv
    db: Any  # writer connection, database selected
    stages: Stages
    started: list[str] = field(default_factory=list)

    @property
    def ds(self) -> str:
        return self.env.ds

    @property
    def database(self) -> str:
        return self.env.database

    @property
    def cfg(self) -> Any:
        return self.env.cfg

    def sql(self, *statements: str) -> None:
        with self.db.cursor() as cur:
            for s in statements:
                cur.execute(s)

    def start(self, timeout: float = 180) -> None:
        self.stages.start("fullpuller")
        self.stages.wait_log("fullpuller", "listening on", timeout)

    def dbus(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
        return run_dbus(self.env.cfg_path, *args, timeout=timeout)

    def request(
        self, table: str, *args: str, wait: float = 120
    ) -> tuple[int | None, subprocess.CompletedProcess]:
        """``dbus fullpull request`` of ``<database>.<table>``: (request id or None, the process)."""
        out = self.dbus(
            "fullpull",
            "request",
            "--source",
            self.ds,
            "--table",
            f"{self.database}.{table}",
            "--wait",
            str(wait),
            *args,
        )
        first = out.stdout.split("\t", 1)[0].strip()
        return (int(first) if first.isdigit() else None), out

    def store(self) -> ProgressStore:
        client = zk.client(self.cfg.endpoints.zookeeper)
        return ProgressStore(client, zk.path(self.cfg.endpoints.zookeeper, "FullPuller", self.ds))

    def wait_finished(self, table: str, seqno: int, timeout: float = 300) -> Progress:
        store = self.store()
        try:
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                p = store.get(self.database, table, seqno)
                if p is not None and p.finished:
                    return store.refreshed(p)
                self.stages.check_alive()
                time.sleep(0.5)
        finally:
            store.zk.stop()
            store.zk.close()
        msg = f"full pull {seqno} of {table} did not finish in {timeout:.0f}s"
        raise AssertionError(msg)

    def result_topic(self, table: str) -> str:
        return self.cfg.source(self.ds).topics.name("result", self.ds, self.database, table)

    def pulled(self, table: str, seqno: int) -> tuple[list[tuple], list[str], list[dict[str, Any]]]:
        """(the pull's tuples between its markers, in topic order; the markers seen; the fields)."""
        rows: list[tuple] = []
        markers: list[str] = []
        fields: list[dict[str, Any]] = []
        inside = False
        for rec in kafka.read_range(self.cfg.endpoints.kafka, [self.result_topic(table)]):
            headers = dict(rec.headers or [])
            msg = json.loads(rec.value)
            if msg["protocol"]["type"] != "data_initial_data":
                continue
            if "dbus_fullpull" in headers:
                if headers["dbus_fullpull_id"] == str(seqno).encode():
                    markers.append(headers["dbus_fullpull"].decode())
                    inside = markers[-1] == "start"
                continue
            fields = msg["schema"]["fields"]
            if inside:
                rows.extend(tuple(t["tuple"]) for t in msg["payload"])
        return rows, markers, fields

    def callback(self) -> list[dict[str, Any]]:
        topic = self.cfg.source(self.ds).topics.name("callback", self.ds)
        return [json.loads(r.value)["payload"] for r in kafka.read_range(self.cfg.endpoints.kafka, [topic])]


def make_fullpull_env(tmp_path: Path, source: Any) -> FullPullEnv:
    db = mysql.connect(source.mysql, as_writer=True)
    name = f"dbus_test_{uuid.uuid4().hex[:12]}"
    with db.cursor() as cur:
        cur.execute(f"CREATE DATABASE `{name}`")
    db.select_db(name)
    env = make_pipeline_env(tmp_path, name)
    return FullPullEnv(env, db, Stages(env.cfg, env.ds, tmp_path / "stage-logs"))


def cleanup_fullpull(fp: FullPullEnv) -> None:
    fp.stages.stop_all()
    from dbuslib.metastore import MetaStore, fullpull_history

    store = MetaStore(fp.cfg.endpoints.meta_store.url.get_secret_value())
    try:
        with store.engine.begin() as conn:
            conn.execute(fullpull_history.delete().where(fullpull_history.c.ds == fp.ds))
    finally:
        store.dispose()
    delete_zk_tree(fp.cfg.endpoints.zookeeper, "FullPuller", fp.ds)
    cleanup_pipeline(fp.env)
    with fp.db.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS `{fp.database}`")
    fp.db.close()


def wait_for_row(cfg, topic: str, marker: str, timeout: float) -> None:
    """Until a tuple holding ``marker`` is in ``topic`` (the appender has caught up to it)."""
    deadline = time.monotonic() + timeout
    consumer = kafka.consumer(
        cfg.endpoints.kafka, topic, auto_offset_reset="earliest", enable_auto_commit=False
    )
    try:
        while time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                if any(marker.encode() in r.value for r in records):
                    return
    finally:
        consumer.close()
    msg = f"{marker!r} did not reach {topic} in {timeout:.0f}s"
    raise AssertionError(msg)
