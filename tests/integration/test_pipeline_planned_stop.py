"""A planned stop of a real-time stage replays nothing (issue #32, docs/realtime.md, Stopping).

The extractor runs; a writer changes three tables the whole time; the dispatcher and the appender run in
real-time mode with 30 s batches (#32's case; the default is 300 s), each as ``spark-submit`` in its own
process group. Four planned stops land in the middle of a batch while records flow, each followed by a
restart: SIGTERM to the dispatcher's Python driver alone, to the appender's whole process group (driver,
JVM, workers: what ``dbus`` and systemd's ``KillMode=control-group`` send), to the dispatcher's group, to
the appender's driver alone. Each stage exits 0 and says its running batch committed. Once the writer
stops and the stages caught up, every row change of the binlog is in the result topic exactly once: no
``ums_uid_`` twice (a stop that interrupted a batch would have the restart write that batch again). Then,
once a batch committed every raw record, the dispatcher's stop ends at once: its running batch read
nothing.
"""

from __future__ import annotations

import os
import signal
import time
from collections import Counter

import pytest
from helpers import wait_until
from pipeline_env import (
    COMMITTED,
    TABLES,
    UmsTail,
    Writer,
    binlog_changes,
    cleanup_pipeline,
    create_tables,
    pipeline_parts,
    planned_stop,
    read_records,
    read_ums,
    start_pipeline,
)

from dbuslib import kafka
from dbuslib import spark as dspark

pytestmark = pytest.mark.integration

IDLE = "stopping with nothing read in its running batch"


def assert_each_change_once(endpoint, result: str, dlq: str, truth, no_letters: str) -> None:
    """Every row change of ``truth`` (the binlog's) in ``result`` exactly once, nothing else, and no dead
    letter (``no_letters``: what the failure says)."""
    out = [o for o in read_ums(endpoint, result) if o.kind == "data_increment_data"]
    twice = [u for u, n in Counter(o.uid for o in out).items() if n > 1]
    assert not twice, f"{len(twice)} of {len(out)} row changes written more than once: {twice[:5]}"
    want, got = Counter(c.content() for c in truth), Counter(o.content() for o in out)
    assert want == got, f"missing {sum((want - got).values())}, extra {sum((got - want).values())}"
    assert read_records(endpoint, dlq) == [], no_letters


def test_planned_stops_of_real_time_stages_replay_nothing(writer_db, tmp_path, kafka_up):
    db, name = writer_db
    env, dispatcher, appender, result, dlq = pipeline_parts(
        tmp_path, name, partitions=2, trigger="realtime", checkpoint_s=30
    )
    writer = Writer(db, minimum=1500)
    t0 = time.monotonic()
    tail = None
    try:
        create_tables(db)
        start_pipeline(env, dispatcher, appender)
        writer.start()
        tail = UmsTail(kafka_up, result)

        def uids() -> int:
            return len(tail.poll().uids)

        wait_until(uids, 150, "first UMS output", alive=(dispatcher, appender))
        stops = [(dispatcher, "driver"), (appender, "group"), (dispatcher, "group"), (appender, "driver")]
        for stage, how in stops:
            before = uids()  # records flow through both stages: the stop lands inside a running batch
            wait_until(lambda b=before: uids() > b + 20, 120, "rows flowing", alive=(dispatcher, appender))
            started = time.monotonic()
            log = planned_stop(stage, how)
            took = time.monotonic() - started
            print(f"\n{time.monotonic() - t0:.0f}s: {stage.name} ({how}) stopped in {took:.1f}s")
            assert COMMITTED in log, f"{stage.name} ({how}) did not finish its batch:\n{stage.tail()}"
            stage.start()
        writer.stop.set()
        writer.join(120)
        assert writer.error is None, writer.error
        truth = binlog_changes(env, name)
        assert len(truth) == writer.changes
        wait_until(lambda: uids() >= len(truth), 180, f"{len(truth)} changes in {result}", interval=4,
                   alive=(dispatcher, appender))  # fmt: skip

        # idle: once a batch committed everything, the next reads nothing, and a stop ends at once
        checkpoint = dspark.checkpoint(env.cfg, "dispatcher", env.ds)

        def idle() -> bool:
            now = kafka.end_offsets(env.cfg.endpoints.kafka, [env.topic])
            ends = {(tp.topic, tp.partition): o for tp, o in now.items()}
            return dspark.nothing_since(dspark.running_batch_start(checkpoint), ends)

        wait_until(idle, 120, "a dispatcher batch that committed every raw record", alive=(dispatcher,))
        os.kill(dispatcher.driver_pid(), signal.SIGTERM)  # the driver checks (a group's JVM hook waits)
        code = dispatcher.proc.wait(120)
        assert code == 0, f"dispatcher (idle) exited {code}:\n{dispatcher.tail()}"
        assert IDLE in dispatcher.log.read_text(errors="replace"), f"dispatcher (idle):\n{dispatcher.tail()}"

        assert_each_change_once(kafka_up, result, dlq, truth, "no dead letters")
        print(f"4 planned stops: {len(truth)} row changes, each once; {time.monotonic() - t0:.0f}s")
    finally:
        writer.stop.set()
        if tail is not None:
            tail.close()
        cleanup_pipeline(env, [dispatcher, appender])


def test_a_planned_stop_ends_an_hour_long_batch_whose_partitions_are_idle(writer_db, tmp_path, kafka_up):
    """Real-time batches of an hour: once the writer stopped, every input partition is idle and each
    reader waits on it until the batch's end. A planned stop writes a marker into each partition its
    query reads (``dbus.spark.wake_readers``), so each reader gets a record and ends: the batch commits and
    the stage exits within the test's wait, not in an hour. The restarted stages replay nothing, and the
    markers reach no output (every stage skips them: ``without_stop_markers``)."""
    db, name = writer_db
    env, dispatcher, appender, result, dlq = pipeline_parts(
        tmp_path, name, partitions=2, trigger="realtime", checkpoint_s=3600
    )
    tail = None
    try:
        create_tables(db)
        start_pipeline(env, dispatcher, appender)
        tail = UmsTail(kafka_up, result)
        for round_ in range(2):
            if round_ == 0:
                writer = Writer(db, minimum=200)
                writer.start()
                writer.stop.set()
                writer.join(120)
                assert writer.error is None, writer.error
            else:  # the restarted stages: more changes, which arrive after anything a restart replays
                with db.cursor() as cur:
                    for t in TABLES:
                        cur.execute(f"UPDATE {t} SET v = v + 1")
                db.commit()
            truth = binlog_changes(env, name)
            wait_until(lambda t=truth: len(tail.poll().uids) >= len(t), 180, f"{len(truth)} changes",
                       interval=2, alive=(dispatcher, appender))  # fmt: skip
            for stage, how in ((appender, "group"), (dispatcher, "driver")):
                said = stage.log.read_text(errors="replace").count(COMMITTED)
                log = planned_stop(stage, how)
                assert log.count(COMMITTED) > said, f"{stage.name} ({how}) did not commit:\n{stage.tail()}"
            if round_ == 0:
                dispatcher.start()
                appender.start()
        assert_each_change_once(kafka_up, result, dlq, truth, "no dead letters: the markers were skipped")
        markers = [r for r in read_records(kafka_up, env.topic) if r[2] == dspark.STOP_MARKER_KEY]
        assert markers and all(r[3] for r in markers), "the dispatcher's stops wrote markers naming their run"
    finally:
        if tail is not None:
            tail.close()
        cleanup_pipeline(env, [dispatcher, appender])
