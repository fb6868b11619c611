"""kill -9 of the Spark stages mid-workload (issue #4 acceptance), black box over real processes.

The extractor runs; a writer changes three tables (inserts, updates, deletes) the whole time; the
dispatcher and the appender run as ``spark-submit`` processes, each in its own process group. The
dispatcher's group (Python driver, JVM, Python workers) is killed with SIGKILL while records flow, then
restarted; later the appender's. Once the writer stops and the stages have caught up, the result topic is
checked against the binlog itself:

- every row change of the binlog is in the output (table, op, values), and nothing else is;
- a ``ums_uid_`` seen more than once (a micro-batch written again after a kill, as at-least-once allows)
  carries byte-identical content each time;
- the number of distinct ``ums_uid_`` is the number of row changes.

The duplicate count is printed (run with ``-s``).
"""

from __future__ import annotations

import random
import time
from collections import Counter, defaultdict
from pathlib import Path

import pytest
from helpers import wait_until
from pipeline_env import (
    UmsTail,
    Writer,
    binlog_changes,
    cleanup_pipeline,
    create_tables,
    make_pipeline_env,
    pipeline_parts,
    read_records,
    read_ums,
    run_dispatcher_now,
    start_pipeline,
)

from binlog import rawevent
from dbuslib import kafka
from dbuslib import spark as dspark

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("trigger", [pytest.param("microbatch", marks=pytest.mark.long), "realtime"])
def test_kill_9_dispatcher_and_appender_loses_nothing(writer_db, tmp_path, kafka_up, trigger):
    db, name = writer_db
    # real-time batches of 5 s: kills land across their ends
    env, dispatcher, appender, result, dlq = pipeline_parts(
        tmp_path, name, partitions=2, trigger=trigger, checkpoint_s=5
    )
    src = env.cfg.source(env.ds)
    writer = Writer(db, minimum=3000)
    t0 = time.monotonic()
    tail = None
    try:
        create_tables(db)
        writer.start()  # from the env's saved position: the extractor reads what is written while it starts
        start_pipeline(env, dispatcher, appender)
        tail = UmsTail(kafka_up, result)

        def uids() -> int:
            return len(tail.poll().uids)

        # Both stages are up and the output grows: then crash the dispatcher mid-stream.
        first = wait_until(uids, 150, "first UMS output", alive=(dispatcher, appender))
        at = first + random.randint(20, 200)  # a random point of the stream, counted in rows out
        wait_until(lambda: uids() >= at, 120, f"{at} uids out", alive=(dispatcher, appender))
        dispatcher.kill()
        killed_at = uids()
        print(
            f"\n{time.monotonic() - t0:.0f}s: dispatcher killed ({killed_at} uids out, "
            f"{writer.changes} changes written)"
        )
        written = writer.changes  # the workload goes on while no dispatcher runs
        wait_until(lambda: writer.changes >= written + 100, 60, "100 changes written meanwhile")
        routed = src.topics.name("schema", env.ds, name)  # what the dispatcher writes

        def routed_end() -> int:
            return sum(kafka.end_offsets(kafka_up, [routed]).values())

        at_restart = routed_end()
        dispatcher.start()
        # The new dispatcher routes records; then crash the appender while it writes (the output grows).
        wait_until(
            lambda: routed_end() > at_restart,
            120,
            f"the restarted dispatcher routes records (to {routed})",
            interval=0.5,
            alive=(dispatcher, appender),
        )
        before = uids()
        wait_until(
            lambda: uids() > before, 120, "the appender writes", interval=0.2, alive=(dispatcher, appender)
        )
        appender.kill()
        print(
            f"{time.monotonic() - t0:.0f}s: appender killed ({uids()} uids out, "
            f"{writer.changes} changes written)"
        )
        assert writer.is_alive() and writer.error is None, "the kills must happen while the workload runs"
        appender.start()
        written = writer.changes  # and goes on while the appender starts again
        wait_until(lambda: writer.changes >= written + 250, 60, "250 changes written meanwhile")
        writer.stop.set()
        writer.join(120)
        assert writer.error is None, writer.error
        truth = binlog_changes(env, name)
        assert len(truth) == writer.changes >= 3000
        wait_until(
            lambda: uids() >= len(truth),
            180,
            f"{len(truth)} changes in {result}",
            interval=1,
            alive=(dispatcher, appender),
        )
        print(f"{time.monotonic() - t0:.0f}s: caught up")
        for s in (dispatcher, appender):
            s.check_alive()

        out = [o for o in read_ums(kafka_up, result) if o.kind == "data_increment_data"]
        by_uid = defaultdict(set)
        for o in out:
            by_uid[o.uid].add((o.namespace, o.fields, o.tuple_))
        differing = {u: v for u, v in by_uid.items() if len(v) > 1}
        assert not differing, f"{len(differing)} uids with other content: {next(iter(differing.items()))}"
        duplicates = len(out) - len(by_uid)
        once = [o for o in {o.uid: o for o in out}.values()]
        want, got = Counter(c.content() for c in truth), Counter(o.content() for o in once)
        missing, extra = want - got, got - want
        assert not missing, f"{sum(missing.values())} of {len(truth)} changes missing: {list(missing)[:3]}"
        assert not extra, f"{sum(extra.values())} output tuples that are no source change: {list(extra)[:3]}"
        assert len(by_uid) == len(truth)
        assert read_records(kafka_up, dlq) == [], "no dead letters"
        print(
            f"kill -9 dispatcher x1, appender x1: {len(truth)} row changes, {len(out)} tuples out; "
            f"duplicates: {duplicates} tuples written more than once; {time.monotonic() - t0:.0f}s"
        )
    finally:
        writer.stop.set()
        if tail is not None:
            tail.close()
        cleanup_pipeline(env, [dispatcher, appender])


def rows_record(schema: str, table: str, seq: int) -> bytes:
    h = {
        "kind": "rows",
        "source": "t",
        "server_id": 1,
        "file": "mariadb-bin.000001",
        "pos": seq,
        "next_pos": seq + 1,
        "ts": 1795356395,
        "schema": schema,
        "table": table,
        "event_type": 30,
        "crc": True,
        "tm_len": 3,
    }
    return rawevent.encode(rawevent.RawEvent(header=h, body=b"rows" + seq.to_bytes(4, "big")))


def test_restart_after_a_kill_mid_batch_keeps_running(spark, writer_db, tmp_path, kafka_up):
    """The checkpoint a kill -9 leaves between the offset log and the commit log, made deterministic: the
    last commit is removed. The restart must re-send that batch (at least once) and go on. Spark 4.1.1
    died here (SPARK-55271: NullPointerException in KafkaMicroBatchStream.metrics); 4.2.0 has the fix."""
    _, name = writer_db
    env = make_pipeline_env(tmp_path, name, partitions=1)
    try:
        producer = kafka.producer(env.cfg.endpoints.kafka)
        for i in range(20):
            producer.send(env.topic, key=f"{name}.t".encode(), value=rows_record(name, "t", i))
        producer.flush()
        producer.close()
        run_dispatcher_now(env)
        commits = Path(dspark.checkpoint(env.cfg, "dispatcher", env.ds)) / "commits"
        last = max(int(p.name) for p in commits.iterdir() if p.name.isdigit())
        (commits / str(last)).unlink()
        (commits / f".{last}.crc").unlink(missing_ok=True)
        from dispatcher import main as dispatcher_main

        code = dispatcher_main.main(["--config", str(env.cfg_path), "--source", env.ds, "--available-now"])
        assert code == 0, "the restarted dispatcher died re-running the uncommitted batch"
        schema_topic = env.cfg.source(env.ds).topics.name("schema", env.ds, name)
        assert len(read_records(kafka_up, schema_topic)) == 40, "the uncommitted batch is sent again"
    finally:
        cleanup_pipeline(env)
