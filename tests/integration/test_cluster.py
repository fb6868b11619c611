"""The stages on a real Spark standalone cluster (issue #15, acceptance 1 and 2), black box over processes.

stack/cluster.sh starts a Master and two Workers from pyspark's own ``spark-class``; Worker 2 runs in its own
mount namespace where the checkout, ``.stack/`` and the venv do not exist, as on another machine. The
stages are started with ``dbus submit <stage> --source DS -- --master spark://...``: their code goes as the
``--py-files`` zip, the configuration inside the job, the executors' Python as a packed venv
(``spark.archives`` + ``spark.pyspark.python: ./env/bin/python`` in the configuration).

1. A workload of inserts, updates and deletes goes through the extractor, the dispatcher and the appender
   on the cluster; then the same binlog range goes through both queries in ``local[2]`` (this process,
   other schema and result topics): the UMS tuples are the same. A full pull of a table on the cluster
   gives the table's rows.
2. A 100,000-row burst, and ``kill -9`` of Worker 2 while it is in flight: nothing is lost, a tuple seen
   twice is the same tuple (same ``ums_uid_``), each key's changes stay in order; the Worker is started
   again and the stages get their executors back.
3. Planned stops (issue #32): the stages' real-time batches last an hour, and SIGTERM to the appender's
   process group, then to the dispatcher's driver, ends each one's running batch committed within the
   two minutes ``planned_stop`` waits: the executors' readers end at the stop's markers
   (``PlannedStop.Marker``), not at the batch's end.

The counts (lost tasks, duplicates, times) are printed (run with ``-s``).
"""

from __future__ import annotations

import dataclasses
import os
import re
import sys
import threading
import time
from collections import Counter, defaultdict
from pathlib import Path

import cluster_env
import pytest
import yaml
from fullpull_env import FullPullEnv
from helpers import wait_until
from pipeline_env import (
    COMMITTED,
    SparkStage,
    UmsTail,
    binlog_changes,
    cleanup_pipeline,
    make_pipeline_env,
    planned_stop,
    read_records,
    read_ums,
    run_appender_now,
    run_dispatcher_now,
    set_trigger,
)

from cli.stages import Stages
from dbuslib.config import load_config, raw_config

# exclusive: the cluster takes fixed ports (stack/cluster.sh) and both cores, and a worker is killed
pytestmark = [pytest.mark.integration, pytest.mark.exclusive]

DBUS = str(Path(sys.executable).with_name("dbus"))


@dataclasses.dataclass
class SubmittedStage(SparkStage):
    """A stage started as a user starts it on a cluster: ``dbus submit <stage> --source DS -- <extra>``."""

    extra: tuple[str, ...] = ()

    def start(self) -> SubmittedStage:
        import subprocess

        assert self.proc is None or self.proc.poll() is not None, f"{self.name} is already running"
        self.log = self.env.logs / f"{self.name}-{self.runs}.log"
        self.runs += 1
        env = {k: v for k, v in os.environ.items() if k not in ("PYSPARK_PYTHON", "SPARK_HOME")}
        cmd = [DBUS, "--config", str(self.env.cfg_path), "submit", self.name, "--source", self.env.ds]
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(
                [*cmd, "--", *self.extra],
                cwd=self.env.logs,  # not the checkout: nothing may depend on it
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                env={**env, "PYTHONUNBUFFERED": "1"},
            )
        return self

    def ready(self, text: str, timeout: float = 300) -> None:
        wait_until(
            lambda: text in self.log.read_text(errors="replace"),
            timeout,
            f"{self.name}: {text}",
            alive=[self],
        )

    def lost_tasks(self) -> int:
        """Tasks the driver lost: failed (``Lost task``) or on an executor that went away."""
        return len(self.executor_events("Lost task|its executor exited"))

    def executor_events(
        self, pattern: str = "is now LOST|Lost executor|its executor exited|Lost task"
    ) -> list[str]:
        """The driver's log lines about executors lost and their tasks."""
        text = self.log.read_text(errors="replace")
        return [ln[:240] for ln in text.splitlines() if re.search(pattern, ln)]


def on_cluster(env, master: str) -> None:
    """The env's configuration for the cluster: the executors' packed Python (the workers have none of
    the project's), every stage's queries on it."""
    raw = raw_config(env.cfg_path)
    raw["spark"]["conf"].update(cluster_env.spark_conf())
    raw["spark"]["master"] = (
        "local[2]"  # the cluster's master comes from `-- --master`, as a user may give it
    )
    # the drivers' logs keep Spark's INFO lines: the test counts the tasks lost with worker 2 there
    # ("... its executor exited ...", TaskSetManager's INFO)
    raw.setdefault("logging", {})["spark_level"] = "INFO"
    env.cfg_path.write_text(yaml.safe_dump(raw))
    env.cfg = load_config(env.cfg_path)


def local_twin(env, tmp_path: Path):
    """The same source in ``local[2]`` with its own schema and result topics and checkpoints: the same
    binlog range through the same code, in this process."""
    raw = raw_config(env.cfg_path)
    raw["spark"]["conf"] = {
        k: v for k, v in raw["spark"]["conf"].items() if "archives" not in k and "pyspark" not in k
    }
    raw["spark"]["checkpoint_root"] = str(tmp_path / "local-checkpoints")
    raw.get("logging", {}).pop("spark_level", None)  # this process's session: Spark's default here
    topics = raw["sources"][env.ds]["topics"]
    topics["schema"] = "{ds}.local.{schema}"
    topics["result"] = "{ds}.local.{schema}.result"
    path = tmp_path / "local.yaml"
    path.write_text(yaml.safe_dump(raw))
    return dataclasses.replace(env, cfg_path=path, cfg=load_config(path))


def workload(db, rounds: int) -> None:
    """Inserts, updates and deletes over two tables, in small transactions."""
    with db.cursor() as cur:
        for n in range(rounds):
            cur.execute("BEGIN")
            base = n * 10
            cur.execute(
                "INSERT INTO a VALUES " + ",".join(f"({base + i},{i},'a {n}/{i}',{i}.25)" for i in range(10))
            )
            cur.execute("INSERT INTO b VALUES " + ",".join(f"({base + i},'b {n}/{i}')" for i in range(5)))
            cur.execute(f"UPDATE a SET v = v + 1, s = 'upd {n}' WHERE id BETWEEN {base} AND {base + 3}")
            if n:
                cur.execute(f"DELETE FROM b WHERE id = {base - 10}")
            cur.execute("COMMIT")


def burst(db, rows: int, written: list[int]) -> None:
    """``rows`` inserts in transactions of 1,000, then two updates of every 100th row (per-key order);
    ``written[0]``: the rows committed so far."""
    with db.cursor() as cur:
        for start in range(0, rows, 1000):
            cur.execute(
                "INSERT INTO burst VALUES " + ",".join(f"({i},0,'r{i}')" for i in range(start, start + 1000))
            )
            db.commit()
            written[0] = start + 1000
        for step in (1, 2):
            cur.execute(f"UPDATE burst SET v = {step} WHERE id % 100 = 0")
            db.commit()


def increments(endpoint, topic: str) -> list:
    return [o for o in read_ums(endpoint, topic) if o.kind == "data_increment_data"]


def test_stages_on_a_standalone_cluster_and_a_worker_killed(spark, writer_db, tmp_path, kafka_up):
    db, name = writer_db
    master = cluster_env.up()
    env = make_pipeline_env(tmp_path, name, partitions=3)
    on_cluster(env, master)
    set_trigger(env, "realtime", checkpoint_s=3600)  # no batch ends by itself while the test runs (3.)
    stages = [SubmittedStage(s, env, extra=("--master", master)) for s in ("dispatcher", "appender")]
    dispatcher, appender = stages
    puller = SubmittedStage("fullpuller", env, extra=("--master", master))
    src = env.cfg.source(env.ds)
    t0 = time.monotonic()
    tail = None
    try:
        with db.cursor() as cur:
            cur.execute("CREATE TABLE a (id INT PRIMARY KEY, v INT, s VARCHAR(40), amt DECIMAL(10,2))")
            cur.execute("CREATE TABLE b (id INT PRIMARY KEY, s VARCHAR(40))")
            cur.execute("CREATE TABLE burst (id INT PRIMARY KEY, v INT, s VARCHAR(20))")
        env.spawn()
        for s in stages:
            s.start()
        for s in stages:
            s.ready(f"query {s.name}_{env.ds} started")
        print(f"\n{time.monotonic() - t0:.0f}s: dispatcher and appender started on {master}")

        # 1. the workload on the cluster, then the same binlog range in local[2]
        workload(db, 100)
        truth = binlog_changes(env, name)
        results = {t: src.topics.name("result", env.ds, name) for t in ("a", "b")}
        result = results["a"]  # one result topic per schema
        tail = UmsTail(kafka_up, result)
        wait_until(
            lambda: len(tail.poll().uids) >= len(truth),
            240,
            f"{len(truth)} changes on the cluster",
            interval=1,
            alive=stages,
        )
        print(f"{time.monotonic() - t0:.0f}s: {len(truth)} row changes through the cluster")
        used = {w["port"]: w["coresused"] for w in cluster_env.workers() if w["state"] == "ALIVE"}
        assert len(used) == 2 and all(used.values()), f"both workers run the stages' executors: {used}"

        twin = local_twin(env, tmp_path)
        run_dispatcher_now(twin)
        run_appender_now(spark, twin.cfg_path, twin.ds, tmp_path / "local-appender")
        local_result = twin.cfg.source(env.ds).topics.name("result", env.ds, name)

        def tuples(topic: str) -> Counter:
            return Counter(
                (o.namespace, o.fields, o.tuple_)
                for o in {o.uid: o for o in increments(kafka_up, topic)}.values()
            )

        on_cluster_tuples, local_tuples = tuples(result), tuples(local_result)
        assert sum(local_tuples.values()) == len(truth)
        assert on_cluster_tuples == local_tuples, "the cluster wrote the UMS tuples local[2] writes"

        # ... and a full pull on the cluster gives the table's rows
        puller.start()
        puller.ready("listening on")
        fp = FullPullEnv(env, db, Stages(env.cfg, env.ds, tmp_path / "stage-logs"))
        seqno, out = fp.request("a")
        assert seqno is not None, out.stdout + out.stderr
        progress = fp.wait_finished("a", seqno, timeout=300)
        rows, markers, fields = fp.pulled("a", seqno)
        with db.cursor() as cur:
            cur.execute("SELECT COUNT(*) FROM a")
            count = cur.fetchone()[0]
        assert markers == ["start", "end"] and len(rows) == count == progress.FinishedRows, (
            markers,
            len(rows),
        )
        print(f"{time.monotonic() - t0:.0f}s: full pull of {count} rows on the cluster")
        puller.terminate()

        # 2. a 100,000-row burst, and kill -9 of worker 2 while it is in flight
        written = [0]
        writer = threading.Thread(target=burst, args=(db, 100_000, written), daemon=True)
        writer.start()
        wait_until(lambda: written[0] >= 20_000, 240, "the burst is being written", interval=0.01)
        at_kill = written[0]  # kill_worker's kill -9 comes at once; it returns when the master saw it
        cluster_env.kill_worker(2)
        print(f"{time.monotonic() - t0:.0f}s: worker 2 killed, {at_kill} of the burst's 100,000 rows written")
        assert at_kill < 100_000, "the kill lands while the burst is written"
        writer.join(300)
        cluster_env.start_worker(2)
        truth = binlog_changes(env, name)
        wait_until(
            lambda: len(tail.poll().uids) >= len(truth),
            600,
            f"{len(truth)} changes after the kill",
            interval=2,
            alive=stages,
        )
        print(f"{time.monotonic() - t0:.0f}s: caught up: {len(truth)} row changes")

        def executors_back() -> bool:
            apps = {a["name"]: a["cores"] for a in cluster_env.apps()}
            used = {w["port"]: w["coresused"] for w in cluster_env.workers() if w["state"] == "ALIVE"}
            return len(apps) >= 2 and all(apps.values()) and len(used) == 2 and all(used.values())

        wait_until(
            executors_back, 300, "both workers run the stages' executors again", interval=1, alive=stages
        )
        lost = {s.name: s.lost_tasks() for s in stages}
        print(f"lost tasks at the kill: {lost}")
        for s in stages:
            print(f"{s.name}:", *s.executor_events(), sep="\n  ")
        assert sum(lost.values()) > 0, "tasks were running on worker 2 when it was killed"

        out = [o for t in set(results.values()) for o in increments(kafka_up, t)]
        by_uid = defaultdict(set)
        for o in out:
            by_uid[o.uid].add((o.namespace, o.fields, o.tuple_))
        differing = {u: v for u, v in by_uid.items() if len(v) > 1}
        assert not differing, f"{len(differing)} uids with other content: {next(iter(differing.items()))}"
        once = list({o.uid: o for o in out}.values())
        want, got = Counter(c.content() for c in truth), Counter(o.content() for o in once)
        assert not want - got, f"{sum((want - got).values())} of {len(truth)} changes missing"
        assert not got - want, f"{sum((got - want).values())} output tuples that are no source change"
        # each key's changes in order: first sightings of its uids, in the topic's order, by ums_id_
        seen, per_key = set(), defaultdict(list)
        for o in out:
            if o.uid not in seen:
                seen.add(o.uid)
                per_key[(o.table, o.tuple_[4])].append(o.ums_id)
        disordered = [k for k, ids in per_key.items() if ids != sorted(ids)]
        assert not disordered, f"{len(disordered)} keys out of order, e.g. {disordered[0]}"
        assert read_records(kafka_up, src.topics.name("dead_letter", env.ds)) == [], "no dead letters"
        print(
            f"kill -9 of worker 2 in a 100,000-row burst: {len(truth)} row changes, {len(out)} tuples out, "
            f"{len(out) - len(by_uid)} duplicates; lost tasks {lost}; {time.monotonic() - t0:.0f}s"
        )

        # 3. planned stops: an hour-long batch read on the executors ends at once, committed
        for stage, how in ((appender, "group"), (dispatcher, "driver")):
            began = time.monotonic()
            log = planned_stop(stage, how)
            assert "stopped after batch" in log and COMMITTED in log, f"{stage.name} ({how}):\n{stage.tail()}"
            print(f"{stage.name}: planned stop ({how}) committed in {time.monotonic() - began:.1f}s")
    finally:
        if tail is not None:
            tail.close()
        cleanup_pipeline(env, [*stages, puller])
        cluster_env.down()  # its JVMs and unpacked environments are not left to the rest of the suite
