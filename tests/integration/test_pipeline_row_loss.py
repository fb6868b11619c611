"""TRUNCATE PARTITION mid-stream, through the whole pipeline as deployed (issue #12, acceptance 5).

A table partitioned BY RANGE (id) is filled and then written all the time (inserts, updates, deletes,
and re-inserts of ids of the partition that goes) while extractor, dispatcher, appender and full puller
run as ``spark-submit``/processes with ``fullpull.repull_on_row_loss: true``. ``ALTER TABLE t TRUNCATE
PARTITION p0`` is run mid-stream. Checked:

- the result topic has the table's version 0 rows, a ``data_increment_termination`` of version 0, then
  version 1 rows; the meta store has version 1 with reason ``row_loss`` at the DDL's position;
- the appender asked once for a full pull on ``<ds>_ctrl`` (SEQNO = the DDL's ums_id), the full puller
  served it (start and end markers, rows under version 1);
- ``dbus reconcile`` (which drops the rows older than the re-pull's snapshot) and ``dbus verify`` give
  0 differences, although the truncated rows' inserts are still in the topic;
- the same request sent again (a replayed micro-batch) is answered again and pulls nothing.
"""

from __future__ import annotations

import json
import random
import threading
import time
import uuid

import pytest
from fullpull_env import FullPullEnv, cleanup_fullpull, run_dbus, wait_for_row
from helpers import wait_until
from pipeline_env import make_pipeline_env, read_ums

from cli.stages import Stages
from dbuslib import kafka, mysql
from dbuslib.config import load_config
from dbuslib.metastore import MetaStore, Reason

pytestmark = pytest.mark.integration
DDL = (
    "CREATE TABLE t (id INT NOT NULL, note VARCHAR(40), amount DECIMAL(10,2), PRIMARY KEY (id)) "
    "PARTITION BY RANGE (id) (PARTITION p0 VALUES LESS THAN (1000), PARTITION p1 VALUES LESS THAN (2000), "
    "PARTITION p2 VALUES LESS THAN MAXVALUE)"
)
FILL = 1500  # ids 1..1500 before the stages start: p0 full, p1 half
TERM, DATA, INITIAL = "data_increment_termination", "data_increment_data", "data_initial_data"


class Workload(threading.Thread):
    """Inserts of new ids, updates and deletes of random ids, and inserts of ids below 1000 (the
    partition that is truncated), each committed, until stopped."""

    def __init__(self, source, database: str) -> None:
        super().__init__(daemon=True)
        self.db = mysql.connect(source.mysql, database, as_writer=True)
        self.stop_flag = threading.Event()
        self.counts = {"insert": 0, "update": 0, "delete": 0, "low": 0}
        self.next_id = FILL + 1
        self.error: BaseException | None = None

    def run(self) -> None:
        rnd = random.Random(12)
        try:
            with self.db.cursor() as cur:
                while not self.stop_flag.is_set():
                    op = rnd.choice(("insert", "insert", "update", "delete", "low"))
                    if op == "insert":
                        cur.execute("INSERT INTO t VALUES (%s, 'new', %s)", (self.next_id, rnd.random()))
                        self.next_id += 1
                    elif op == "update":
                        cur.execute(
                            "UPDATE t SET note = %s, amount = %s WHERE id = %s",
                            (f"upd {rnd.random()}", rnd.random() * 100, rnd.randint(1, self.next_id)),
                        )
                    elif op == "delete":
                        cur.execute("DELETE FROM t WHERE id = %s", (rnd.randint(1, self.next_id),))
                    else:
                        cur.execute("INSERT IGNORE INTO t VALUES (%s, 'low', 1)", (rnd.randint(1, 999),))
                    self.counts[op] += 1
                    time.sleep(0.01)
        except BaseException as e:
            self.error = e


def _history(cfg, ds: str, database: str):
    store = MetaStore(cfg.endpoints.meta_store.url.get_secret_value())
    try:
        return store.history(ds, database, "t")
    finally:
        store.dispose()


def _records(cfg, topic: str) -> list:
    return list(kafka.read_range(cfg.endpoints.kafka, [topic]))


@pytest.mark.timeout(1800)  # four stages on a shared machine
def test_truncate_partition_mid_stream_is_signalled_re_pulled_and_reconciles(tmp_path, source):
    import yaml

    database = f"dbus_test_{uuid.uuid4().hex[:12]}"
    writer = mysql.connect(source.mysql, as_writer=True)
    with writer.cursor() as cur:
        cur.execute(f"CREATE DATABASE `{database}`")
        cur.execute(f"USE `{database}`")
    env = make_pipeline_env(tmp_path, database)
    raw = yaml.safe_load(env.cfg_path.read_text())
    raw["sources"][env.ds].setdefault("fullpull", {})["repull_on_row_loss"] = True
    env.cfg_path.write_text(yaml.safe_dump(raw))
    env.cfg = cfg = load_config(env.cfg_path)
    src = cfg.source(env.ds)
    result = src.topics.name("result", env.ds, database, "t")
    ctrl, callback = src.topics.name("ctrl", env.ds), src.topics.name("callback", env.ds)
    stages = Stages(cfg, env.ds, tmp_path / "stage-logs")
    workload = Workload(source, database)
    try:
        with writer.cursor() as cur:  # after the extractor's start position: these rows are increments
            cur.execute(DDL)
            cur.execute(f"INSERT INTO t SELECT seq, 'fill', seq / 10 FROM seq_1_to_{FILL}")
        writer.commit()
        for stage in ("extractor", "dispatcher", "appender", "fullpuller"):
            stages.start(stage)
        stages.wait_ready("extractor", "dispatcher", "appender", "fullpuller", timeout=600)
        workload.start()
        wait_until(lambda: workload.counts["insert"] >= 100, 300, "the workload runs", alive=())
        with writer.cursor() as cur:
            cur.execute("SELECT COUNT(*) FROM t PARTITION (p0)")
            lost = cur.fetchone()[0]
            cur.execute("ALTER TABLE t TRUNCATE PARTITION p0")  # mid-stream
        assert lost > 0, "the partition held rows"

        store = MetaStore(cfg.endpoints.meta_store.url.get_secret_value())  # one for every poll

        def row_loss_version():
            stages.check_alive()
            found = [v for v in store.history(env.ds, database, "t") if v.reason is Reason.ROW_LOSS]
            return found[0] if found else None

        try:
            version = wait_until(row_loss_version, 600, "the appender's row_loss version")
        finally:
            store.dispose()
        fp = FullPullEnv(env, writer, stages)
        pull = fp.wait_finished("t", version.since, timeout=900)
        assert pull.Status == "ending", pull
        wait_until(lambda: workload.counts["insert"] >= 300, 300, "writes after the pull")
        workload.stop_flag.set()
        workload.join(30)
        assert workload.error is None, workload.error
        print(f"\nworkload: {workload.counts}; rows truncated with p0: {lost}")
        with writer.cursor() as cur:  # the last change; one partition, so everything before it arrived too
            cur.execute("UPDATE t SET note = 'drain-marker' WHERE id = (SELECT MAX(id) FROM t)")
        writer.commit()
        wait_for_row(cfg, result, "drain-marker", 600)  # one consumer reading on, not the topic each poll
        stages.check_alive()

        # consumers see the termination and the new version, at the DDL's position
        out = [o for o in read_ums(cfg.endpoints.kafka, result) if o.table == "t"]
        increments = [(o.kind, o.version) for o in out if o.kind in (DATA, TERM)]
        runs = [k for i, k in enumerate(increments) if i == 0 or increments[i - 1] != k]
        assert runs == [(DATA, 0), (TERM, 0), (DATA, 1)], runs
        assert [(v.version, v.reason) for v in _history(cfg, env.ds, database)] == [
            (0, Reason.FIRST),
            (1, Reason.ROW_LOSS),
        ]
        assert max(o.ums_id for o in out if o.kind == DATA and o.version == 0) < version.since
        assert min(o.ums_id for o in out if o.kind == DATA and o.version == 1) > version.since
        pulled = [o for o in out if o.kind == INITIAL]
        assert pulled and {(o.version, o.ums_id) for o in pulled} == {(1, int(pull.UmsId))}
        assert int(pull.UmsId) > version.since

        # without the reset these keys would come back: last tuple older than the pull, not at the source
        with writer.cursor() as cur:
            cur.execute("SELECT id FROM t")
            live = {row[0] for row in cur.fetchall()}
        last: dict[int, tuple[tuple[int, int], str]] = {}
        for o in out:
            if o.kind in (DATA, INITIAL) and (
                int(o.tuple_[4]) not in last or (o.ums_id, int(o.uid)) > last[int(o.tuple_[4])][0]
            ):
                last[int(o.tuple_[4])] = ((o.ums_id, int(o.uid)), o.op)
        stale = [k for k, (order, op) in last.items() if op not in ("d", "b") and k not in live]
        assert stale and all(k < 1000 and last[k][0][0] < version.since for k in stale), stale

        # one request, from the appender, named by the DDL's position
        requests = [r for r in _records(cfg, ctrl) if r.key == b"FULL_DATA_INDEPENDENT_PULL_REQ"]
        assert len(requests) == 1, requests
        message = json.loads(requests[0].value)
        assert (message["from"], message["payload"]["SEQNO"], message["payload"]["TABLE_NAME"]) == (
            "dbus-appender",
            str(version.since),
            "t",
        )

        # the same request again, as a replayed micro-batch writes it: answered again, nothing pulled
        producer = kafka.producer(cfg.endpoints.kafka)
        producer.send(ctrl, key=requests[0].key, value=requests[0].value).get(60)
        producer.close()

        def replies():
            return [
                json.loads(r.value)["payload"]
                for r in _records(cfg, callback)
                if json.loads(r.value)["payload"].get("SEQNO") == str(version.since)
            ]

        def second_reply():
            got = replies()  # the callback topic read once a poll
            return got if len(got) >= 2 else None

        answers = wait_until(second_reply, 300, "the second reply", alive=())
        assert [a["STATUS"] for a in answers] == ["ending", "ending"]
        starts = [r for r in _records(cfg, result) if ("dbus_fullpull", b"start") in (r.headers or [])]
        assert len(starts) == 1, "one pull"

        stages.stop_all()  # free the cores for the checks
        snapshot = tmp_path / "snapshot"
        done = run_dbus(
            cfg.path, "reconcile", "--source", env.ds, "--table", f"{database}.t", "--out", str(snapshot)
        )
        assert done.returncode == 0, done.stdout + done.stderr
        summary = json.loads(done.stdout.strip().splitlines()[-1])
        print(f"reconcile: {summary}")
        assert summary["reset_ums_id"] == int(pull.UmsId)
        checked = run_dbus(
            cfg.path, "verify", "--source", env.ds, "--table", f"{database}.t", "--snapshot", str(snapshot)
        )
        print(checked.stdout)
        assert checked.returncode == 0, checked.stdout + checked.stderr
        assert "equal, 0 differences" in checked.stdout, checked.stdout
    finally:
        workload.stop_flag.set()
        cleanup_fullpull(FullPullEnv(env, writer, stages))
