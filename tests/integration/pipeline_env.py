"""Whole-pipeline helpers: extractor -> dispatcher -> appender on the real stack, checked against the binlog.

``make_pipeline_env`` builds on extractor_env.make_env (a throwaway source ``pytest_<hex>`` capturing only
the test's database, checkpoints under the test's tmp dir) and sets the topic partitions; its topics and
meta store rows are removed by ``cleanup_pipeline``. The Spark stages run either in-process
(``run_dispatcher_now`` / ``run_appender_now``) or as real ``spark-submit`` processes in their own process
group (``SparkStage``), so that ``kill -9`` takes the Python driver, its JVM and its Python workers at once.

The source truth is read straight from the binlog (``binlog_changes``): every row change of the
database, with its values, in binlog order. UMS output is read back with ``read_ums`` as one entry per
tuple (or termination), in result-topic partition order.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import yaml
from binlog_truth import rows_events
from extractor_env import REPO, ExtractorEnv, cleanup, make_env

from cli.stages import group_members, stop_group
from dbuslib import kafka, topics
from dbuslib import spark as dspark
from dbuslib.config import load_config, raw_config

# ---------------------------------------------------------------- environment


COMMITTED = "a restart replays nothing"  # what a real-time stage's planned stop says (docs/realtime.md)


def planned_stop(stage, how: str) -> str:
    """SIGTERM to ``stage``'s Python driver (``how`` "driver") or its whole process group ("group"); once it
    exited (0, or 143 when the signal reached its JVM) and without STAGE_STOP_TIMEOUT: its log."""
    if how == "driver":
        pid = stage.driver_pid()
        assert pid is not None, f"{stage.name}: no Python driver"
        os.kill(pid, signal.SIGTERM)
        code = stage.proc.wait(120)
    else:
        code = stage.terminate(signal.SIGTERM, timeout=120)
    log = stage.log.read_text(errors="replace")
    assert code in (0, 143), f"{stage.name} ({how}) exited {code}:\n{stage.tail()}"
    assert "STAGE_STOP_TIMEOUT" not in log
    return log


def make_pipeline_env(
    tmp_path: Path, database: str, partitions: int = 1, **extractor: object
) -> ExtractorEnv:
    """An extractor env whose source uses ``partitions`` partitions per topic; every topic is created."""
    env = make_env(tmp_path, database, **extractor)
    raw = yaml.safe_load(env.cfg_path.read_text())
    raw["sources"][env.ds]["topics"]["partitions"] = partitions
    env.cfg_path.write_text(yaml.safe_dump(raw))
    env.cfg = load_config(env.cfg_path)
    src = env.cfg.source(env.ds)
    kafka.ensure_topics(env.cfg.endpoints.kafka, topics.source_topics(env.ds, src), partitions=partitions)
    return env


def set_trigger(env: ExtractorEnv, trigger: str, *stages: str, checkpoint_s: int | None = None) -> None:
    """The env's config with ``trigger`` (``microbatch`` or ``realtime``) for ``stages`` (default: the
    dispatcher and the appender), and their real-time batch length when given."""
    raw = yaml.safe_load(env.cfg_path.read_text())
    for stage in stages or ("dispatcher", "appender"):
        settings = raw["sources"][env.ds].setdefault(stage, {})
        settings["trigger"] = trigger
        if checkpoint_s is not None:
            settings["realtime_checkpoint_s"] = checkpoint_s
    env.cfg_path.write_text(yaml.safe_dump(raw))
    env.cfg = load_config(env.cfg_path)


def variant_config(env: ExtractorEnv, path: Path, **topic_templates: str) -> Path:
    """A copy of the env's config with other topic templates (same source name, so same meta store rows)."""
    raw = raw_config(env.cfg_path)
    raw["sources"][env.ds]["topics"].update(topic_templates)
    path.write_text(yaml.safe_dump(raw))
    return path


def kafka_client_config(env: ExtractorEnv, path: Path, **options: object) -> Path:
    """A copy of the env's config with more ``endpoints.kafka.client`` options (kafka-python's spelling),
    e.g. a consumer group's shorter session."""
    raw = raw_config(env.cfg_path)
    kafka_cfg = raw["endpoints"]["kafka"]
    kafka_cfg["client"] = {**(kafka_cfg.get("client") or {}), **options}
    path.write_text(yaml.safe_dump(raw))
    return path


def ds_topics(env: ExtractorEnv) -> list[str]:
    admin = kafka.admin(env.cfg.endpoints.kafka)
    try:
        return [t for t in admin.list_topics() if t == env.ds or t.startswith((f"{env.ds}.", f"{env.ds}_"))]
    finally:
        admin.close()


def cleanup_pipeline(env: ExtractorEnv, stages: list[SparkStage] = ()) -> None:
    for s in stages:
        s.kill()
    cleanup(env)
    kafka.delete_topics(env.cfg.endpoints.kafka, ds_topics(env))
    from dbuslib.metastore import MetaStore, meta_version

    store = MetaStore(env.cfg.endpoints.meta_store.url.get_secret_value())
    try:
        with store.engine.begin() as conn:
            conn.execute(meta_version.delete().where(meta_version.c.ds == env.ds))
    finally:
        store.dispose()


class PipelineParts(NamedTuple):
    """A test source's pipeline, not started (``pipeline_parts``)."""

    env: ExtractorEnv
    dispatcher: SparkStage
    appender: SparkStage
    result: str  # the schema's result topic
    dlq: str  # the source's dead-letter topic


def pipeline_parts(
    tmp_path: Path, name: str, *, partitions: int, trigger: str, checkpoint_s: int | None = None
) -> PipelineParts:
    """The env of database ``name`` with ``partitions`` per topic, its dispatcher and appender in
    ``trigger`` mode (``checkpoint_s``: their real-time batch length), and its result and dead-letter
    topics."""
    env = make_pipeline_env(tmp_path, name, partitions=partitions)
    set_trigger(env, trigger, checkpoint_s=checkpoint_s)
    src = env.cfg.source(env.ds)
    result, dlq = src.topics.name("result", env.ds, name), src.topics.name("dead_letter", env.ds)
    return PipelineParts(env, dispatcher_stage(env), appender_stage(env), result, dlq)


# ---------------------------------------------------------------- Spark stages


@dataclass
class SparkStage:
    """A ``spark-submit <stage>/main.py`` process in its own process group (driver, JVM, workers)."""

    name: str
    env: ExtractorEnv
    args: tuple[str, ...] = ()
    proc: subprocess.Popen | None = None
    runs: int = 0
    log: Path | None = None

    def start(self) -> SparkStage:
        assert self.proc is None or self.proc.poll() is not None, f"{self.name} is already running"
        self.log = self.env.logs / f"{self.name}-{self.runs}.log"
        self.runs += 1
        submit = Path(sys.executable).with_name("spark-submit")
        cmd = [
            str(submit),
            *dspark.submit_args(self.env.cfg),
            str(REPO / self.name / "main.py"),
            "--config",
            str(self.env.cfg_path),
            "--source",
            self.env.ds,
            *self.args,
        ]
        out = self.log.open("wb")
        self.proc = subprocess.Popen(
            cmd,
            cwd=REPO,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env={
                **os.environ,
                "PYSPARK_PYTHON": sys.executable,
                "PYSPARK_DRIVER_PYTHON": sys.executable,
                "PYTHONUNBUFFERED": "1",
            },
        )
        out.close()
        return self

    def check_alive(self) -> None:
        """The stage must still run. (With Spark 4.1.1 a stage restarted after kill -9 mid-batch died of
        SPARK-55271, a NullPointerException in KafkaMicroBatchStream.metrics; Spark 4.2.0 has the fix,
        and test_pipeline_kill.py::test_restart_after_a_kill_mid_batch_keeps_running holds it.)"""
        self.assert_alive()

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def assert_alive(self) -> None:
        assert self.alive(), f"{self.name} exited with {self.proc.returncode}; see {self.log}:\n{self.tail()}"

    def tail(self, n: int = 40) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-n:]) if self.log else ""

    def members(self) -> dict[int, str]:
        """pid -> command line of each live process of the stage's group (JVM, driver, Python workers)."""
        out = {}
        for pid in group_members(self.proc.pid) if self.proc is not None else ():
            try:
                raw = Path(f"/proc/{pid}/cmdline").read_bytes()
            except OSError:
                continue
            out[pid] = raw.replace(b"\0", b" ").decode(errors="replace")
        return out

    def driver_pid(self) -> int | None:
        """The Python driver (``<stage>/main.py``, a child of the spark-submit JVM), if it runs."""
        script = f"{self.name}/main.py"
        return next(
            (
                pid
                for pid, cmd in self.members().items()
                if script in cmd and "java" not in cmd.split(" ", 1)[0]
            ),
            None,
        )

    def jvm_pid(self) -> int | None:
        """The spark-submit JVM (the driver's parent), if it runs."""
        members = self.members().items()
        return next((pid for pid, cmd in members if cmd.split(" ", 1)[0].endswith("java")), None)

    def terminate(self, sig: int = signal.SIGTERM, timeout: float = 60) -> int:
        """``sig`` to the whole process group (as ``cli.stages.Stages.stop`` does), then wait until
        every process of it is gone (SIGKILL after ``timeout``); spark-submit's exit code."""
        return stop_group(self.proc, sig, timeout)

    def kill(self) -> None:
        """kill -9 the whole process group: the driver, its JVM and the Python workers."""
        if self.proc is None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait(30)
        deadline = time.monotonic() + 30
        while left := group_members(self.proc.pid):  # zombies of the JVM and workers go with their parents
            assert time.monotonic() < deadline, f"{self.name}: processes of the group survive: {left}"
            time.sleep(0.2)


def dispatcher_stage(env: ExtractorEnv) -> SparkStage:
    return SparkStage("dispatcher", env, ("--max-offsets-per-trigger", "20000"))


def appender_stage(env: ExtractorEnv) -> SparkStage:
    return SparkStage("appender", env)


def start_pipeline(
    env: ExtractorEnv, dispatcher: SparkStage, appender: SparkStage, timeout: float = 180
) -> None:
    """The extractor, then both Spark stages; returns once the appender's query runs."""
    from helpers import wait_until

    env.spawn()
    dispatcher.start()
    appender.start()
    wait_until(
        lambda: appender.log is not None and "query appender_" in appender.log.read_text(errors="replace"),
        timeout,
        "the appender's query started",
        alive=(dispatcher, appender),
    )


def run_dispatcher_now(env: ExtractorEnv, max_offsets: int = 100_000) -> None:
    """The dispatcher in this process (the session's Spark), ``--available-now``."""
    from dispatcher import main as dispatcher_main

    code = dispatcher_main.main(
        [
            "--config",
            str(env.cfg_path),
            "--source",
            env.ds,
            "--available-now",
            "--max-offsets-per-trigger",
            str(max_offsets),
        ]
    )
    assert code == 0


class Through:
    """Records through the dispatcher and the appender in one of the two modes of docs/realtime.md:
    ``microbatch``, each ``step()`` drains both queries in this process (``--available-now``);
    ``realtime``, both run as ``spark-submit`` stages from ``start()`` on, and ``step(done)`` waits for
    ``done()`` (the output the test wants) while they run."""

    def __init__(self, env: ExtractorEnv, spark: Any, tmp_path: Path, mode: str, max_offsets: int = 100_000):
        self.env, self.spark, self.tmp_path, self.mode, self.max_offsets = (
            env,
            spark,
            tmp_path,
            mode,
            max_offsets,
        )
        set_trigger(env, mode)
        self.stages = [dispatcher_stage(env), appender_stage(env)] if mode == "realtime" else []

    def start(self) -> Through:
        for stage in self.stages:
            stage.start()
        return self

    def step(self, done: Any, timeout: float = 240) -> None:
        if self.mode == "microbatch":
            run_dispatcher_now(self.env, self.max_offsets)
            run_appender_now(self.spark, self.env.cfg_path, self.env.ds, self.tmp_path / "appender-ckpt")
            assert done(), "everything through after draining both queries"
            return
        from helpers import wait_until

        wait_until(
            done, timeout, f"the output of {self.env.ds} in real-time mode", interval=1, alive=self.stages
        )

    def stop(self) -> None:
        for stage in self.stages:
            stage.kill()


def run_appender_now(spark, cfg_path: Path, ds: str, checkpoint: Path) -> None:
    """The appender's query in this process over the source's schema topics, until they are drained."""
    from appender import job

    cfg = load_config(cfg_path)
    src = cfg.source(ds)
    kafka.ensure_topics(cfg.endpoints.kafka, topics.source_topics(ds, src), src.topics.partitions)
    subscription = topics.appender_subscription(cfg, ds)  # the literal schemas, and a pattern for globs
    query = job.start(spark, cfg, ds, subscription, str(checkpoint), available_now=True)
    try:
        query.awaitTermination(300)
        assert query.exception() is None, query.exception()
    finally:
        query.stop()


# ---------------------------------------------------------------- source truth


@dataclass(frozen=True)
class Change:
    table: str
    op: str  # i u d
    values: tuple[tuple[str, Any], ...]  # (column, value) of the after image (the row itself for d)
    file: str
    pos: int

    def content(self) -> tuple:
        return self.table, self.op, self.values


def norm(value: Any) -> Any:
    """One spelling for a value from the binlog reader or from a UMS tuple (numbers may be JSON strings)."""
    return None if value is None else str(value)


def binlog_changes(env: ExtractorEnv, database: str) -> list[Change]:
    """Every row change of ``database`` since the env's start position, in binlog order."""
    from pymysqlreplication.row_event import DeleteRowsEvent, UpdateRowsEvent, WriteRowsEvent

    src = env.cfg.source(env.ds)
    file, pos = src.extractor.start.rsplit(":", 1)
    server_id = random.randint(900_000, 990_000)
    out = []
    for log_file, at, e in rows_events(src.mysql, file, int(pos), database, server_id):
        op = {WriteRowsEvent: "i", UpdateRowsEvent: "u", DeleteRowsEvent: "d"}[type(e)]
        for row in e.rows:
            image = row["after_values"] if op == "u" else row["values"]
            values = tuple((k, norm(v)) for k, v in image.items())
            out.append(Change(e.table, op, values, log_file, at))
    return out


# ---------------------------------------------------------------- UMS output


@dataclass(frozen=True)
class Out:
    """One tuple of a UMS data message (or one termination message), where it was read."""

    partition: int
    offset: int
    kind: str  # data_increment_data | data_increment_termination | ...
    namespace: str
    fields: tuple[tuple[str, str], ...]  # (name, type)
    tuple_: tuple

    @property
    def table(self) -> str:
        return self.namespace.split(".")[3]

    @property
    def version(self) -> int:
        return int(self.namespace.split(".")[4])

    @property
    def ums_id(self) -> int:
        return int(self.tuple_[0])

    @property
    def op(self) -> str:
        return self.tuple_[2]

    @property
    def uid(self) -> str:
        return self.tuple_[3]

    def values(self) -> tuple[tuple[str, Any], ...]:
        return tuple((name, norm(v)) for (name, _), v in zip(self.fields[4:], self.tuple_[4:], strict=True))

    def content(self) -> tuple:
        return self.table, self.op, self.values()


def read_records(endpoint, topic: str) -> list[tuple[int, int, bytes | None, bytes]]:
    """Every record now in ``topic``: (partition, offset, key, value), per partition in offset order."""
    return [(r.partition, r.offset, r.key, r.value) for r in kafka.read_range(endpoint, [topic])]


def read_ums(endpoint, topic: str) -> list[Out]:
    out = []
    for partition, offset, _, value in read_records(endpoint, topic):
        m = json.loads(value)
        kind = m["protocol"]["type"]
        fields = tuple((f["name"], f["type"]) for f in m["schema"]["fields"])
        for p in m["payload"]:
            out.append(Out(partition, offset, kind, m["schema"]["namespace"], fields, tuple(p["tuple"])))
    return out


class UmsTail:
    """Follows a result topic from its start: ``poll()`` adds what arrived since the last call."""

    def __init__(self, endpoint, topic: str) -> None:
        from kafka import TopicPartition

        self.consumer = kafka.consumer(
            endpoint, enable_auto_commit=False, group_id=None, consumer_timeout_ms=1000
        )
        parts = [TopicPartition(topic, p) for p in sorted(self.consumer.partitions_for_topic(topic) or ())]
        assert parts, f"{topic} does not exist"
        self.consumer.assign(parts)
        self.consumer.seek_to_beginning(*parts)
        self.parts = parts
        self.out: list[Out] = []
        self.uids: set[str] = set()

    def poll(self) -> UmsTail:
        """Reads up to the end offsets of the moment it is called: a stage that writes all the time
        (a 200 ms trigger under a steady workload) would otherwise never leave a 500 ms gap to stop at."""
        ends = self.consumer.end_offsets(self.parts)
        while any(self.consumer.position(tp) < end for tp, end in ends.items()):
            batch = self.consumer.poll(timeout_ms=500, max_records=20_000)
            if not batch:
                return self
            for tp, records in batch.items():
                for r in records:
                    m = json.loads(r.value)
                    fields = tuple((f["name"], f["type"]) for f in m["schema"]["fields"])
                    for p in m["payload"]:
                        o = Out(
                            tp.partition,
                            r.offset,
                            m["protocol"]["type"],
                            m["schema"]["namespace"],
                            fields,
                            tuple(p["tuple"]),
                        )
                        self.out.append(o)
                        if o.kind == "data_increment_data":
                            self.uids.add(o.uid)
        return self

    def close(self) -> None:
        self.consumer.close()


# ---------------------------------------------------------------- a steady workload

TABLES = ("orders", "items", "audit")


def create_tables(db) -> None:
    with db.cursor() as cur:
        for t in TABLES:
            cur.execute(
                f"CREATE TABLE {t} (id INT PRIMARY KEY, v INT NOT NULL, s VARCHAR(40), "
                f"amt DECIMAL(12,2), n BIGINT)"
            )


class Writer(threading.Thread):
    """Small transactions over every table until told to stop (and at least ``minimum`` changes made)."""

    def __init__(self, db, minimum: int) -> None:
        super().__init__(daemon=True)
        self.db, self.minimum, self.stop = db, minimum, threading.Event()
        self.changes, self.error = 0, None

    def run(self) -> None:
        rng = random.Random(7)
        live: dict[str, list[int]] = defaultdict(list)
        next_id = Counter({t: 1 for t in TABLES})
        try:
            with self.db.cursor() as cur:
                n = 0
                while not self.stop.is_set() or self.changes < self.minimum:
                    n += 1
                    cur.execute("BEGIN")
                    for t in TABLES:
                        ids = list(range(next_id[t], next_id[t] + rng.randint(1, 3)))
                        next_id[t] += len(ids)
                        cur.execute(
                            f"INSERT INTO {t} VALUES "
                            + ",".join(f"({i},0,'row {i} of txn {n}',{i}.5,{i * 1000003})" for i in ids)
                        )
                        live[t] += ids
                        self.changes += len(ids)
                        touched = rng.sample(live[t], min(2, len(live[t])))
                        keys = ",".join(map(str, touched))
                        cur.execute(f"UPDATE {t} SET v = v + 1, s = 'upd {n}' WHERE id IN ({keys})")
                        self.changes += cur.rowcount
                        if rng.random() < 0.3:
                            gone = live[t].pop(rng.randrange(len(live[t])))
                            cur.execute(f"DELETE FROM {t} WHERE id = {gone}")
                            self.changes += cur.rowcount
                    cur.execute("COMMIT")
                    time.sleep(0.2)  # ~50 row changes/s: a few thousand over the test
        except Exception as e:
            self.error = e
