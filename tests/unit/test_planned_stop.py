"""A planned stop of a real-time query (dbuslib/spark.py: stop_query, running_batch_start): where its
running batch started, read from the checkpoint files Spark writes, and which way the stop goes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dbuslib import spark
from dbuslib.config import KafkaEndpoint

# as Spark 4.2 writes them (tests/integration/test_pipeline_planned_stop.py's checkpoints)
INITIAL = '\0v1\n{"ds":{"0":0,"1":0}}'
METADATA = (
    '{"batchWatermarkMs":0,"batchTimestampMs":1796032380410,"conf":{"spark.sql.shuffle.partitions":"4"}}'
)
IDLE = "stopping with nothing read in its running batch"
OFFSETS = f'v1\n{METADATA}\n{{"ds":{{"0":1687,"1":824}}}}'


def checkpoint(
    tmp_path: Path, offsets: dict[int, str], commits: set[int], initial: str | None = INITIAL
) -> str:
    root = tmp_path / "ckpt"
    for d in ("offsets", "commits"):
        (root / d).mkdir(parents=True)
    for n, text in offsets.items():
        (root / "offsets" / str(n)).write_text(text)
        (root / "offsets" / f".{n}.crc").write_bytes(b"x")
    for n in commits:
        (root / "commits" / str(n)).write_text('v1\n{"nextBatchWatermarkMs":0}')
    (root / "sources" / "0").mkdir(parents=True)
    (root / "sources" / "0" / "0").write_text(initial)
    return str(root)


def test_the_offset_log_gives_where_each_partition_ended():
    assert spark.offset_log_ends(OFFSETS) == {("ds", 0): 1687, ("ds", 1): 824}
    assert spark.offset_log_ends(INITIAL) == {("ds", 0): 0, ("ds", 1): 0}
    two = f'v1\n{METADATA}\n{{"a":{{"0":5}}}}\n{{"b":{{"2":7}}}}'
    assert spark.offset_log_ends(two) == {("a", 0): 5, ("b", 2): 7}


@pytest.mark.parametrize("text", ["", "not a log", 'v1\n{"batchTimestampMs":1}\n12', 'v1\n{"t":5}'])
def test_an_offset_log_of_another_source_tells_nothing(text):
    assert spark.offset_log_ends(text) is None


def test_the_running_batch_starts_where_the_last_committed_one_ended(tmp_path):
    root = checkpoint(tmp_path, {0: INITIAL.replace("\0", ""), 1: OFFSETS}, {0, 1})
    assert spark.running_batch_start(root) == {("ds", 0): 1687, ("ds", 1): 824}
    assert spark.running_batch_start("file:" + root) == {("ds", 0): 1687, ("ds", 1): 824}


def test_before_any_commit_the_first_batch_starts_at_the_initial_offsets(tmp_path):
    assert spark.running_batch_start(checkpoint(tmp_path, {}, set())) == {("ds", 0): 0, ("ds", 1): 0}


def test_before_the_first_batch_is_planned_nothing_was_read(tmp_path):
    root = tmp_path / "ckpt"
    (root / "offsets").mkdir(parents=True)
    (root / "commits").mkdir()
    assert spark.running_batch_start(str(root)) == {}
    assert spark.nothing_since({}, {("ds", 0): 5}) is True


def test_a_batch_ended_but_not_committed_or_a_remote_checkpoint_tells_nothing(tmp_path):
    assert spark.running_batch_start(checkpoint(tmp_path, {0: OFFSETS}, set())) is None
    assert spark.running_batch_start("hdfs://nn/dbus/ckpt") is None
    assert spark.running_batch_start(str(tmp_path / "missing")) is None


@given(
    st.dictionaries(st.tuples(st.sampled_from("ab"), st.integers(0, 3)), st.integers(0, 100), min_size=1),
    st.integers(-5, 5),
)
def test_nothing_since_holds_exactly_when_no_partition_grew(start, delta):
    now = {tp: off + delta for tp, off in start.items()}
    assert spark.nothing_since(start, now) == (delta <= 0)
    assert spark.nothing_since(start, {}) is True  # partitions gone or empty: nothing to read
    assert spark.nothing_since(None, now) is False


class FakeCls:
    def __init__(self, committed: int) -> None:
        self.committed, self.calls = committed, []

    def begin(self, _jsq):
        self.calls.append("begin")
        return 3

    def awaitCommit(self, _jsq, running, wait_ms):
        self.calls.append(("awaitCommit", running, wait_ms))
        return self.committed

    def settled(self):
        self.calls.append("settled")

    def resume(self):
        self.calls.append("resume")


class FakeQuery:
    id, name, _jsq = "q1", "appender_demo", object()

    def __init__(self, calls: list) -> None:
        self.calls = calls

    def stop(self):
        self.calls.append("stop")


def planned(monkeypatch, committed: int, nothing_read: bool) -> tuple[FakeCls, FakeQuery, list[str]]:
    cls = FakeCls(committed)
    endpoint = KafkaEndpoint(bootstrap_servers="127.0.0.1:1")
    monkeypatch.setitem(spark._planned, "q1", spark.PlannedStop(cls, 45_000, endpoint, "/nowhere"))
    monkeypatch.setattr(spark, "_read_nothing", lambda entry: nothing_read)
    said: list[str] = []
    return cls, FakeQuery(cls.calls), said


def test_a_stop_mid_batch_waits_for_its_commit_then_stops(monkeypatch):
    cls, query, said = planned(monkeypatch, committed=3, nothing_read=False)
    assert spark.planned_stop_s(query) == 45.0
    spark.stop_query(query, said.append)
    assert cls.calls == ["begin", ("awaitCommit", 3, 45_000), "settled", "stop", "resume"]
    assert said[-1] == "appender_demo: stopped after batch 3 committed: a restart replays nothing"
    assert spark.planned_stop_s(query) == 0.0  # once


def test_a_stop_whose_batch_did_not_commit_says_it_replays(monkeypatch):
    cls, query, said = planned(monkeypatch, committed=-1, nothing_read=False)
    spark.stop_query(query, said.append)
    assert "settled" not in cls.calls and cls.calls[-2:] == ["stop", "resume"]
    assert said[-1] == "appender_demo: stopped before its running batch committed: a restart replays it"


def test_a_stop_with_nothing_read_since_the_last_commit_stops_at_once(monkeypatch):
    cls, query, said = planned(monkeypatch, committed=3, nothing_read=True)
    spark.stop_query(query, said.append)
    assert cls.calls == ["settled", "stop"]  # the readers are never told to end: no empty batches
    assert said == [
        "appender_demo: stopping with nothing read in its running batch: a restart replays nothing"
    ]


def test_a_micro_batch_query_just_stops():
    calls: list = []
    query = FakeQuery(calls)
    query.id = "not-registered"
    spark.stop_query(query, lambda _: pytest.fail("nothing to say"))
    assert calls == ["stop"]


def test_the_initial_offsets_file_is_json_after_its_version_line():
    assert json.loads(INITIAL.split("\n", 1)[1]) == {"ds": {"0": 0, "1": 0}}


def test_the_readers_are_woken_after_they_are_told_to_end_and_before_the_commit_is_awaited(monkeypatch):
    cls, query, said = planned(monkeypatch, committed=3, nothing_read=False)
    monkeypatch.setattr(spark, "wake_readers", lambda entry, q: cls.calls.append("wake") or 2)
    spark.stop_query(query, said.append)
    assert cls.calls[:3] == ["begin", "wake", ("awaitCommit", 3, 45_000)]


class Progressed:
    name = "dispatcher_demo"

    def __init__(self, progress) -> None:
        self.lastProgress = progress


@pytest.mark.parametrize(
    "end",
    [
        '{"ds":{"0":1687,"1":824},"ds2":{"0":5}}',  # as PySpark hands it: a JSON string
        {"ds": {"0": 1687, "1": 824}, "ds2": {"0": 5}},
    ],
)
def test_the_partitions_to_wake_are_the_last_batch_s(tmp_path, end):
    query = Progressed({"batchId": 4, "sources": [{"endOffset": end}]})
    assert spark.input_partitions(query, "/nowhere") == {("ds", 0), ("ds", 1), ("ds2", 0)}


def test_before_any_batch_ended_the_checkpoint_tells_the_partitions_to_wake(tmp_path):
    assert spark.input_partitions(Progressed(None), checkpoint(tmp_path, {}, set())) == {("ds", 0), ("ds", 1)}
    assert spark.input_partitions(Progressed({"sources": [{"endOffset": "not json"}]}), "/nowhere") == set()


def test_no_partitions_no_markers():
    endpoint = KafkaEndpoint(bootstrap_servers="127.0.0.1:1")  # never asked
    entry = spark.PlannedStop(None, 1000, endpoint, "/nowhere")
    assert spark.wake_readers(entry, Progressed(None)) == 0


def test_the_input_filter_skips_markers_and_a_marker_of_the_task_s_own_run_ends_that_run_s_readers():
    """``without_stop_markers`` hands each marker to ``PlannedStop.Marker`` in the task that read it: one
    whose value is the task's run id (its job group) switches that JVM's real-time clock for that run's
    tasks (an executor's, on a cluster); a marker of another run or without a run id is only skipped."""
    import jvm_jar

    session = jvm_jar.spark_session("planned-stop-markers", spark.PLANNED_STOP)
    cls = session._jvm.dbus.jvm.PlannedStop
    sc = session.sparkContext
    rows = [
        (b"demo.shop.orders", b"{}"),
        (spark.STOP_MARKER_KEY, b"an-earlier-run"),  # left after a stop's committed end: read after a restart
        (spark.STOP_MARKER_KEY, None),  # written before markers named their run
        (None, None),
    ]
    df = session.createDataFrame(rows, "key binary, value binary").coalesce(1)
    cls.resume()
    try:
        sc.setJobGroup("this-run", "a real-time query's run")
        assert [tuple(r) for r in spark.without_stop_markers(df).collect()] == [rows[0], rows[3]]
        assert cls.markedRun() is None, "no marker of this run: the clock is left alone"
        mine = session.createDataFrame([*rows, (spark.STOP_MARKER_KEY, b"this-run")], df.schema).coalesce(1)
        assert [tuple(r) for r in spark.without_stop_markers(mine).collect()] == [rows[0], rows[3]]
        assert cls.markedRun() == "this-run"
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)
        cls.resume()
    assert cls.markedRun() is None
