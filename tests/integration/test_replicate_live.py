"""``dbus replicate`` on the whole real path: replicas bootstrapped under live writes, through kills.

A table of REPLICATE_LIVE_ROWS rows (default 20,000; issue #17's acceptance runs 1,000,000) is filled
before the extractor starts, so only a full pull has those rows. The extractor, dispatcher, appender and
full puller run as deployed while a writer inserts, updates and deletes rows of that table the whole time.
Two replicas start from nothing, each bootstrapping by itself (a full pull it requests):

- one in MariaDB, one ``dbus replicate`` process, killed with ``kill -9`` three times (twice during the
  bootstrap when the table is big enough to give the time, once online) and restarted each time; the
  appender is killed with ``kill -9`` once too, and restarted;
- one in PostgreSQL, kept by two ``dbus replicate`` processes in one consumer group whose session is
  10 s (``endpoints.kafka.client``; kafka-python's default is 45 s); the one that owns the table's
  partition is killed with ``kill -9`` and not restarted: the partition moves to the other when the dead
  member's session expires.

Each replica table has a trigger that fails any update moving a row to an older ``(ums_id_, ums_uid_)``:
a replica that went backwards for a key would have stopped its replicate. Once the writer stops and the
last change reached both replicas, ``dbus verify --replica`` finds 0 differences in each.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
from fullpull_env import FullPullEnv, cleanup_fullpull, run_dbus, wait_for_row
from helpers import wait_until
from live_workload import Workload, filled
from pipeline_env import kafka_client_config, make_pipeline_env
from replica_env import (
    ReplicateProcess,
    checkpoint_mode,
    checkpoint_partitions,
    forward_only,
    fresh_database,
    scalar,
)

from cli.stages import Stages
from dbusclient.decode import TableRef
from dbusclient.sink_sql import SqlSink
from dbuslib import kafka, mysql
from fullpuller import catalog
from ums.build import field_for, user_columns

pytestmark = pytest.mark.integration
ROWS = int(os.environ.get("REPLICATE_LIVE_ROWS", "20000"))
TIMEOUT = 120 + ROWS / 1000  # seconds for a bootstrap: the pull and the replica's writes


def prepare(url: str, ds: str, database: str, source, name: str) -> None:
    """The replica table made ahead, as the replicate would make it, to put the trigger on it first."""
    db = mysql.connect(source.mysql, database)
    try:
        info = catalog.table_info(db, database, "live")
    finally:
        db.close()
    assert info is not None
    fields = tuple(field_for(info.columns[i]) for i in user_columns(info.columns))
    sink = SqlSink(url, {f"{database}.live": ("id",)}, checkpoint_name=name)
    try:
        sink.ensure_table(TableRef(ds, database, "live"), 0, fields)
    finally:
        sink.engine.dispose()
    forward_only(url, "live")


def count(url: str) -> int:
    return int(scalar(url, "SELECT COUNT(*) FROM live") or 0)


def verify_equal(cfg_path: Path, ds: str, table: str, url: str) -> None:
    out = run_dbus(cfg_path, "verify", "--source", ds, "--table", table, "--replica", url)
    print(out.stdout)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "equal, 0 differences" in out.stdout, out.stdout


def delete_all_records(cfg, topic: str) -> dict[str, int]:
    """What retention does to a topic, now: every record up to the end offsets is deleted."""
    from kafka import TopicPartition

    ends = kafka.end_offsets(cfg.endpoints.kafka, [topic])
    client = kafka.admin(cfg.endpoints.kafka)
    try:
        client.delete_records({TopicPartition(tp.topic, tp.partition): end for tp, end in ends.items()})
    finally:
        client.close()
    return {f"{tp.topic}/{tp.partition}": end for tp, end in ends.items()}


@pytest.mark.timeout(600 + ROWS // 400)
def test_replicas_bootstrap_under_live_writes_and_kills_and_verify_equal(tmp_path: Path, source):
    database, writer = filled(source, ROWS)  # before the extractor starts: only a pull has these rows
    env = make_pipeline_env(tmp_path, database)
    stages = Stages(env.cfg, env.ds, tmp_path / "stage-logs")
    workload = Workload(source, database, ROWS + 1, pause_s=0.005)
    procs: list[ReplicateProcess] = []
    table = f"{database}.live"
    try:
        with fresh_database("mariadb") as maria, fresh_database("postgresql") as pg:
            prepare(maria, env.ds, database, source, "maria")
            prepare(pg, env.ds, database, source, "pg-1")
            for stage in ("extractor", "dispatcher", "appender", "fullpuller"):
                stages.start(stage)
            stages.wait_ready("extractor", "dispatcher", "appender", "fullpuller")
            workload.start()
            wait_until(lambda: workload.total() >= 100, 60, "the workload's first 100 writes")

            def replicate(url: str, name: str, *more: str, cfg_path: Path = env.cfg_path) -> ReplicateProcess:
                args = ("--source", env.ds, "--tables", table, "--to", url, "--name", name, *more)
                proc = ReplicateProcess(cfg_path, tmp_path / f"replicate-{name}.log", *args)
                procs.append(proc)
                return proc.start()

            def alive() -> None:
                stages.check_alive()
                for p in procs:
                    p.check_alive()

            m = replicate(maria, "maria")
            # the group's members: a dead one's partition moves after a 10 s session, not kafka-python's 45 s
            group_cfg = kafka_client_config(
                env, tmp_path / "dbus-pg-group.yaml", session_timeout_ms=10_000, heartbeat_interval_ms=3_000
            )
            pg1 = replicate(pg, "pg-1", "--group", f"{database}-pg", cfg_path=group_cfg)
            pg2 = replicate(pg, "pg-2", "--group", f"{database}-pg", cfg_path=group_cfg)

            def progressed(url: str, rows: int) -> bool:
                alive()
                return count(url) >= rows

            # kill -9 of the MariaDB replicate: twice while it bootstraps, once online; the appender once
            for i, share in enumerate((0.2, 0.6)):
                wait_until(
                    lambda s=share: progressed(maria, int(ROWS * s)), TIMEOUT, f"{share:.0%} of the rows"
                )
                mode = checkpoint_mode(maria, "maria")
                print(f"kill {i + 1} of the MariaDB replicate at {count(maria)} rows, {mode}")
                m.kill()
                if i == 0:
                    stages.stop("appender", signal.SIGKILL)
                    stages.start("appender")
                m.start()
            stages.wait_ready("appender")
            wait_until(
                lambda: alive() or checkpoint_mode(maria, "maria") == "ONLINE", TIMEOUT, "MariaDB online"
            )
            before = workload.total()
            wait_until(lambda: workload.total() >= before + 100, 60, "100 writes online")
            m.kill()
            print(f"kill 3 of the MariaDB replicate, online, at {count(maria)} rows")
            m.start()

            # the PostgreSQL group: the member that reads the table's partition is killed, for good
            wait_until(lambda: progressed(pg, ROWS // 2), TIMEOUT, "half of the rows in PostgreSQL")
            owners = [p for p, name in ((pg1, "pg-1"), (pg2, "pg-2")) if checkpoint_partitions(pg, name)]
            assert owners, "neither member of the group has a partition in its checkpoint"
            owners[0].kill()
            print(f"killed the PostgreSQL group member {owners[0].args[-3]} at {count(pg)} rows")
            before = workload.total()
            wait_until(lambda: workload.total() >= before + 300, 60, "300 writes after the member's kill")

            workload.stop_flag.set()
            workload.join(30)
            assert workload.error is None, workload.error
            print(f"workload: {workload.counts}")
            with writer.cursor() as cur:  # the last change: once a replica has it, it has all before it
                cur.execute("UPDATE live SET note = 'drain-marker' WHERE id = (SELECT MIN(id) FROM live)")
            for url in (maria, pg):
                wait_until(
                    lambda u=url: (
                        alive() or scalar(u, "SELECT COUNT(*) FROM live WHERE note = 'drain-marker'")
                    ),
                    TIMEOUT,
                    f"the drain marker in {url.split('://')[0]}",
                )
            for p in procs:
                if not p.down:
                    assert p.stop() == 0, p.output()[-3000:]
            for url in (maria, pg):
                verify_equal(env.cfg_path, env.ds, table, url)

            # changes the stopped MariaDB replica never read, then retention deletes them (and all before):
            # on its restart it finds its offset gone, bootstraps by itself (a new pull) and converges
            topic = env.cfg.source(env.ds).topics.name("result", env.ds, database, "live")
            with writer.cursor() as cur:
                cur.execute("DELETE FROM live WHERE id = (SELECT MAX(id) FROM live)")
                late = workload.next_id + 1
                cur.execute(f"INSERT INTO live VALUES ({late}, 'late', 1.5, 'new', 'x', NOW(3), 0.5)")
                cur.execute("UPDATE live SET note = 'after-retention' WHERE id = (SELECT MIN(id) FROM live)")
            wait_for_row(env.cfg, topic, "after-retention", 120)
            print(f"retention: {topic} deleted up to {delete_all_records(env.cfg, topic)}")
            m.start()
            wait_until(
                lambda: (
                    alive()
                    or (
                        checkpoint_mode(maria, "maria") == "ONLINE"
                        and scalar(maria, "SELECT COUNT(*) FROM live WHERE note = 'after-retention'")
                    )
                ),
                TIMEOUT,
                "the MariaDB replica bootstrapped again, online",
            )
            assert m.stop() == 0, m.output()[-3000:]
            last_run = m.output().split("---- start")[-1]
            assert "is gone" in last_run and "full pull" in last_run, last_run[-3000:]
            verify_equal(env.cfg_path, env.ds, table, maria)

            # verify can fail: a change the PostgreSQL replica (stopped) never saw
            with writer.cursor() as cur:
                cur.execute("UPDATE live SET note = 'after' WHERE id = (SELECT MAX(id) FROM live)")
            out = run_dbus(env.cfg_path, "verify", "--source", env.ds, "--table", table, "--replica", pg)
            assert out.returncode == 1, out.stdout + out.stderr
            assert "1 different" in out.stdout, out.stdout
    finally:
        workload.stop_flag.set()
        for p in procs:
            if p.proc is not None and p.proc.poll() is None:
                p.kill()
        cleanup_fullpull(FullPullEnv(env, writer, stages))
