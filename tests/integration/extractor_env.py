"""A throwaway extractor setup per test: its own source name, database, topic, ZooKeeper nodes, state dir.

The source ``pytest_<hex>`` captures only the test's database and starts at the binlog position taken
when the environment was made, so a test sees exactly what it wrote.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import yaml
from binlog_truth import TruthEvent
from helpers import delete_zk_tree

from binlog.rawevent import RawEvent, Reassembler, decode
from dbuslib import kafka, mysql
from dbuslib.config import DbusConfig, load_config, raw_config
from extractor.position import Position

REPO = Path(__file__).resolve().parents[2]


@dataclass
class Record:
    partition: int
    offset: int
    event: RawEvent


@dataclass
class ExtractorEnv:
    ds: str
    database: str
    cfg: DbusConfig
    cfg_path: Path
    logs: Path
    procs: list[subprocess.Popen] = field(default_factory=list)
    log_paths: list[Path] = field(default_factory=list)

    @property
    def topic(self) -> str:
        return self.ds

    def position_path(self) -> Path:
        """The local mirror of the committed position."""
        return self.cfg.resolve(self.cfg.source(self.ds).extractor.state_dir) / f"{self.ds}.position.json"

    def spawn(self, name: str = "extractor") -> subprocess.Popen:
        """Start ``python -m extractor run`` for this source; output goes to <tmp>/<name>-<n>.log."""
        path = self.logs / f"{name}-{len(self.procs)}.log"
        self.log_paths.append(path)
        log = path.open("wb")
        proc = subprocess.Popen(
            [sys.executable, "-m", "extractor", "--config", str(self.cfg_path), "run", "--source", self.ds],
            cwd=REPO,
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        self.procs.append(proc)
        return proc

    def run_cli(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "extractor", "--config", str(self.cfg_path), *args],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )

    def stop_all(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self.procs:
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()

    def records(self, done: Callable[[list[Record]], bool], timeout: float = 120) -> list[Record]:
        """Consume the topic from the start until ``done(records)`` holds; fails after ``timeout`` s."""
        consumer = kafka.consumer(
            self.cfg.endpoints.kafka,
            self.topic,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            group_id=None,
            consumer_timeout_ms=1000,
        )
        got: list[Record] = []
        deadline = time.monotonic() + timeout
        try:
            while not done(got):
                if time.monotonic() > deadline:
                    msg = (
                        f"topic {self.topic}: condition not met after {timeout}s with {len(got)} records;"
                        f" logs in {self.logs}"
                    )
                    raise AssertionError(msg)
                for m in consumer:
                    got.append(Record(m.partition, m.offset, decode(m.value, m.key)))
        finally:
            consumer.close()
        return got

    def whole_events(self, records: list[Record]) -> list[Record]:
        """Records with chunks joined, per partition in offset order."""
        out, by_partition = [], {}
        for r in sorted(records, key=lambda r: (r.partition, r.offset)):
            whole = by_partition.setdefault(r.partition, Reassembler()).push(r.event)
            if whole is not None:
                out.append(Record(r.partition, r.offset, whole))
        return out


TEST_BATCH_S = 30


def make_env(tmp_path: Path, database: str, **extractor: object) -> ExtractorEnv:
    base = load_config()
    src = base.source("demo")
    db = mysql.connect(src.mysql)
    start = mysql.binlog_end(db)
    db.close()
    ds = f"pytest_{uuid.uuid4().hex[:10]}"
    raw = raw_config(base.path)  # the active configuration ($DBUS_CONFIG, else conf/dbus.yaml)
    demo = raw["sources"]["demo"]
    demo["capture"] = {"include": [f"{database}.*"], "exclude": []}
    demo["masking"] = {}
    # A replica id of its own: MariaDB drops a replica connection when another one with the same id
    # connects, and tests (and the demo) run extractors side by side.
    demo["mysql"]["server_id"] = random.randint(100_000, 899_999)
    demo["extractor"].update(
        {
            "start": f"{start.file}:{start.pos}",
            "commit_interval_s": 0.2,
            "state_dir": str(tmp_path / "state"),
            "metrics_interval_s": 2,
            **extractor,
        }
    )
    # 30 s real-time batches for the Spark stages (the default, 300 s, is for throughput): a test that waits
    # for a batch's end (a failure at the next offset write, a batch's metrics, a commit before a kill)
    # would otherwise wait five minutes; a test of the batch length sets its own (pipeline_env.set_trigger)
    for stage in ("dispatcher", "appender"):
        demo.setdefault(stage, {}).setdefault("realtime_checkpoint_s", TEST_BATCH_S)
    raw["sources"] = {ds: demo}
    raw["endpoints"]["zookeeper"]["timeout_s"] = 4  # the shortest session ZooKeeper grants: fast failover
    raw["spark"]["jars_file"] = str(base.resolve(base.spark.jars_file))
    raw["spark"]["checkpoint_root"] = str(tmp_path / "checkpoints")
    cfg_path = tmp_path / "dbus.yaml"
    cfg_path.write_text(yaml.safe_dump(raw))
    logs = tmp_path / "logs"
    logs.mkdir()
    return ExtractorEnv(ds=ds, database=database, cfg=load_config(cfg_path), cfg_path=cfg_path, logs=logs)


def cleanup(env: ExtractorEnv) -> None:
    env.stop_all()
    kafka.delete_topics(env.cfg.endpoints.kafka, [env.topic])
    delete_zk_tree(env.cfg.endpoints.zookeeper, "Extractor", env.ds)


def covered(truth: list[TruthEvent]) -> Callable[[list[Record]], bool]:
    """A ``records`` condition: every rows event of ``truth`` (binlog_truth) is in the topic."""
    wanted = {(e.file, e.pos) for e in truth}

    def done(records) -> bool:
        seen = {(r.event.header.file, r.event.header.pos) for r in records if r.event.kind == "rows"}
        return wanted <= seen

    return done


def wait_for_log(env: ExtractorEnv, proc_index: int, text: str, timeout: float = 60) -> None:
    """Until the log of the env's ``proc_index``-th process says ``text``; fails if it exits first."""
    path = env.log_paths[proc_index]
    deadline = time.monotonic() + timeout
    while text not in (path.read_text() if path.exists() else ""):
        assert time.monotonic() < deadline, f"{path} never said {text!r}"
        assert env.procs[proc_index].poll() is None, f"extractor exited early; see {path}"
        time.sleep(0.1)


def start_of(env: ExtractorEnv) -> Position:
    """The position the env's extractor starts at."""
    return Position.parse(env.cfg.source(env.ds).extractor.start)
