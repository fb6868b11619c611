"""kill -9 of the log processor and a restart of rsyslog, mid-stream, on the real stack (issue 16, acceptance
3; docs/logs.md, Crashes and restarts): no line is lost, and every copy of a line carries the same
``ums_uid_`` and values as its first.

The whole path runs as it is deployed: the demo's writer (cli/demolog.py) appends lines live to a file that
an rsyslogd of the test's own watches (the stack's script, shipped_logs.py), rsyslog ships each line as one
record to the raw topic, and the log processor (``dbus submit logprocessor``, started as the demo starts it)
structures them with the demo's rules into ``app_orders``, ``http_access`` and the unknown bucket. While
lines are written all along: the processor is killed with ``kill -9`` (its whole process group: driver and
JVM) and started again, then rsyslogd is restarted (``stack.sh restart rsyslog``, down 2 s).

What it proves, per line written (``req=<run>-<n>``):
- it is in exactly one place, its own kind's table or the unknown bucket, and no dead letter: none lost,
  none misplaced;
- every raw record that shipped it (rsyslog delivers at least once: a line may be shipped twice, as two
  records) is in that place: a table row whose ``ums_uid_`` is that record's coordinates (partition, offset,
  row 0), or the record itself in the unknown topic;
- every copy of a table row (the processor replays the batch it was killed in: at least once) has the same
  ``ums_uid_`` and the same values, ``ums_ts_`` included, as the first copy; and the values are the line's
  (``order_id``, ``path``).

The rsyslogd is a private one, so the test is not ``exclusive``: it restarts no server other tests use.
"""

from __future__ import annotations

import json
import math
import signal
import threading
import uuid

import pytest
from helpers import wait_until
from kafka import TopicPartition
from shipped_logs import shipped_log_source

from cli import demolog
from cli.stages import Stages, processes_naming
from dbuslib import kafka
from dbuslib.config import DbusConfig

pytestmark = pytest.mark.integration
RATE = 200  # lines/s written, all along


@pytest.fixture
def shipped(tmp_path, cfg, kafka_up):  # kafka_up: fails at once when Kafka is down
    with shipped_log_source(tmp_path, cfg, "la") as source:
        yield source


def _uid_coordinates(uid: str) -> tuple[int, int, int]:
    """``ums_uid_`` = (partition * 10^13 + offset) * 10^6 + row index (docs/logs.md, UMS for log tables)."""
    record, row = divmod(int(uid), 10**6)
    partition, offset = divmod(record, 10**13)
    return partition, offset, row


def _kill_9_as_a_batch_lands(stages: Stages, cfg: DbusConfig, ds: str) -> None:
    """``kill -9`` of the processor (its process group) as soon as a batch's output shows in the result
    topic: most likely before its progress is in the checkpoint (the processor writes its offset and
    commit logs every second, asynchronously: ``processor.async_progress``), so the restart gives that
    batch again."""
    result = demolog.topics_of(cfg, ds)[demolog.TABLES[0]]
    consumer = kafka.consumer(cfg.endpoints.kafka, enable_auto_commit=False, group_id=None)
    try:
        parts = [TopicPartition(result, p) for p in sorted(consumer.partitions_for_topic(result) or ())]
        before = sum(consumer.end_offsets(parts).values())
        wait_until(
            lambda: sum(consumer.end_offsets(parts).values()) > before,
            60,
            "a batch in the result topic",
            alive=[stages],
            interval=0.005,
        )
        stages.stop("logprocessor", sig=signal.SIGKILL)
    finally:
        consumer.close()


class Placed:
    """The lines of run ``run`` placed so far (the request ids per kind, as ``demolog.Arrived.ids``), each
    look reading only what came since the end offsets of the one before: a wait over a stream of 200
    lines/s does not read the topics whole again and again."""

    def __init__(self, cfg: DbusConfig, ds: str, run: str) -> None:
        self.cfg, self.ds, self.run = cfg, ds, run
        self.topics = list(dict.fromkeys(demolog.topics_of(cfg, ds).values()))
        self.consumer = kafka.consumer(cfg.endpoints.kafka, enable_auto_commit=False, group_id=None)
        self.since: dict[TopicPartition, int] = {}
        self.ids = demolog.Arrived().ids

    def look(self) -> None:
        parts = [
            TopicPartition(t, p) for t in self.topics for p in self.consumer.partitions_for_topic(t) or ()
        ]
        ends = self.consumer.end_offsets(parts) if parts else {}
        # demolog.arrived reads to the ends of its own moment, past these: the next look reads those
        # records again, and the sets of ids keep each once
        got = demolog.arrived(self.cfg, self.ds, self.since, self.run)
        for kind, ids in got.ids.items():
            self.ids[kind] |= ids
        self.since = ends

    def count(self) -> int:
        self.look()
        return sum(map(len, self.ids.values()))

    def complete(self, written: demolog.Written) -> bool:
        self.look()
        return all(self.ids[k] >= written.ids[k] for k in written.ids)

    def close(self) -> None:
        self.consumer.close()


def test_kill_9_of_the_processor_and_a_restart_of_rsyslog_lose_no_line(shipped, tmp_path):
    cfg, ds = shipped.cfg, shipped.ds
    demolog.ensure_rules(cfg, ds)
    stages = Stages(cfg, ds, tmp_path / "stage-logs")
    written = demolog.Written(demolog.log_file(cfg, ds), uuid.uuid4().hex[:8])
    stop = threading.Event()
    writer = threading.Thread(target=demolog.append, args=(written, math.inf, RATE, stop), daemon=True)

    def arrived() -> demolog.Arrived:
        return demolog.arrived(cfg, ds, {}, written.run)  # the topics are the test's own: read them whole

    placed = Placed(cfg, ds, written.run)

    def placed_at_least(n: int, what: str) -> None:
        wait_until(lambda: placed.count() >= n, 240, f"{n} lines placed: {what}", alive=[stages])

    stages.start("logprocessor")
    try:
        stages.wait_ready("logprocessor", timeout=300)
        writer.start()
        placed_at_least(1000, "before the kill")  # past the first batches, logged one by one
        _kill_9_as_a_batch_lands(stages, cfg, ds)
        at_kill = written.lines
        stages.start("logprocessor")
        placed_at_least(at_kill + 200, "written after the kill, by the restarted processor")

        before_restart = written.lines
        shipped.rsyslog("restart", down_s=2)
        at_restart = written.lines
        assert at_restart > before_restart, "lines were written while rsyslogd restarted"
        placed_at_least(at_restart + 200, "written after the restart of rsyslog")
        stop.set()
        writer.join()
        wait_until(lambda: placed.complete(written), 240, "every line placed", alive=[stages])
        got = wait_until(lambda: (a := arrived()).complete(written) and a, 60, "every line read whole")
    finally:
        stop.set()
        placed.close()
        stages.stop_all()
    assert processes_naming(str(cfg.path)) == {}
    assert "exiting on signal 15" in shipped.rsyslog_log()

    # every line in exactly one place: its kind's table or the unknown bucket; no dead letter
    assert {k: got.ids[k] for k in written.ids} == written.ids
    assert got.dead_letters == 0
    kind_of = {req: kind for kind, reqs in written.ids.items() for req in reqs}
    assert set(got.copies) == set(kind_of)
    assert set(got.records) == set(kind_of), "a line with no raw record"

    replayed = shipped_twice = 0
    for req, copies in got.copies.items():
        kind, records = kind_of[req], got.records[req]
        assert {k for k, _ in copies} == {kind}, f"{req}: in {sorted({k for k, _ in copies})}, not {kind}"
        shipped_twice += len(records) - 1
        if kind == demolog.UNKNOWN:  # each record that shipped the line, unchanged, and nothing else
            assert {_text(c) for _, c in copies} == {_text(r) for _, _, r in records}, (req, copies, records)
            continue
        first: dict[str, dict] = {}
        for _, row in copies:
            same = first.setdefault(row["ums_uid_"], row)
            assert row == same, f"{req}: a copy differs from the first with its ums_uid_: {row} != {same}"
        replayed += len(copies) - len(first)
        # one uid per raw record of the line, each the record's own coordinates, row 0
        assert sorted(_uid_coordinates(u) for u in first) == sorted((p, o, 0) for p, o, _ in records)
        n = int(req.rsplit("-", 1)[1])
        row = copies[0][1]
        if kind == "app_orders":
            assert str(row["order_id"]) == str(500_000 + n) and row["req_id"] == req, row
        else:
            assert row["path"] == f"/api/orders/{500_000 + n}" and row["req_id"] == req, row
    print(
        f"kill -9 and rsyslog restart: {written.lines} lines ({at_kill} written at the kill, "
        f"{at_restart - before_restart} during the rsyslog restart), {shipped_twice} shipped twice, "
        f"{replayed} table row(s) given twice by the processor, each equal to its first copy"
    )


def _text(record: dict) -> str:
    return json.dumps(record, sort_keys=True)
