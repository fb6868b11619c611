"""dbuslib.stagemetrics: a query's progress -> a dbus_stage point; the listener never blocks or raises."""

from __future__ import annotations

import json
import threading
import types

import pytest

from dbuslib import stagemetrics
from dbuslib.config import InfluxEndpoint
from dbuslib.stagemetrics import PointWriter, idle_point, lag_records, stage_point, work_ms

# The shape of StreamingQueryProgress.json of the appender's Kafka -> Kafka query (Spark 4.2).
PROGRESS = {
    "id": "5d0b6a50-4a0e-4a4c-9d43-3b0a2f7d8f11",
    "runId": "0c3d9a8e-1f7b-4b59-8f0e-2a6e1c1d0b22",
    "name": "appender_demo",
    "timestamp": "2026-01-02T03:04:05.678Z",
    "batchId": 12,
    "batchDuration": 485,
    "numInputRows": 20000,
    "inputRowsPerSecond": 39000.1,
    "processedRowsPerSecond": 41234.5,
    "durationMs": {
        "addBatch": 410,
        "getBatch": 0,
        "latestOffset": 3,
        "queryPlanning": 12,
        "triggerExecution": 485,
        "walCommit": 30,
    },
    "stateOperators": [],
    "sources": [
        {
            "description": "KafkaV2[Subscribe[demo.shop]]",
            "startOffset": {"demo.shop": {"0": 100}},
            "endOffset": {"demo.shop": {"0": 20100}},
            "latestOffset": {"demo.shop": {"0": 21300}},
            "numInputRows": 20000,
            "inputRowsPerSecond": 39000.1,
            "processedRowsPerSecond": 41234.5,
            "metrics": {
                "avgOffsetsBehindLatest": "1200.0",
                "maxOffsetsBehindLatest": "1200",
                "minOffsetsBehindLatest": "1200",
            },
        },
        {
            "description": "KafkaV2[Subscribe[demo.crm]]",
            "numInputRows": 0,
            "metrics": {"maxOffsetsBehindLatest": "34"},
        },
    ],
    "sink": {
        "description": "org.apache.spark.sql.kafka010.KafkaSourceProvider$KafkaTable@1",
        "numOutputRows": -1,
    },
}


def test_a_progress_becomes_a_dbus_stage_point():
    assert stage_point(PROGRESS, "demo", "appender").to_line_protocol() == (
        "dbus_stage,ds=demo,stage=appender batch_ms=485,checkpoint_ms=0,input_rows=20000i,lag_records=1234i,"
        "rows_per_s=41234.5,waiting=0i 1767323045678"
    )


def test_a_real_time_batch_reports_its_pause_not_its_checkpoint_interval():
    """A real-time batch streams for its whole interval inside addBatch: batch_ms is the rest (Spark 4.2's
    durationMs of a 30 s appender batch, as its log showed it)."""
    durations = {
        "addBatch": 31532,
        "commitOffsets": 142,
        "getBatch": 56,
        "latestOffset": 1882,
        "queryPlanning": 1393,
        "triggerExecution": 35409,
        "walCommit": 311,
    }
    line = stage_point({**PROGRESS, "durationMs": durations}, "demo", "appender", checkpoint_ms=30000)
    assert "batch_ms=3877," in line.to_line_protocol() and "checkpoint_ms=30000," in line.to_line_protocol()
    assert work_ms(durations, realtime=False) == 35409.0
    assert work_ms({"triggerExecution": 5}, realtime=True) == 5.0
    assert work_ms({"triggerExecution": 5, "addBatch": 9}, realtime=True) == 0.0


def test_a_query_waiting_for_resources_says_so():
    line = idle_point(None, "demo", "appender", waiting=True).to_line_protocol()
    assert "waiting=1i" in line and "input_rows=0i" in line


@pytest.mark.parametrize(
    ("change", "fields"),
    [
        ({"processedRowsPerSecond": None}, "rows_per_s=0,"),  # a float (no i suffix)
        ({"processedRowsPerSecond": float("nan")}, "rows_per_s=0,"),
        ({"durationMs": {}}, "batch_ms=0,"),
        ({"sources": [{"metrics": {}}, {}]}, "lag_records=0i"),
        ({"sources": [{"metrics": {"maxOffsetsBehindLatest": "n/a"}}]}, "lag_records=0i"),
    ],
)
def test_missing_figures_are_zero(change, fields):
    progress = {**PROGRESS, **change}
    progress = {k: v for k, v in progress.items() if v is not None}
    assert fields in stage_point(progress, "demo", "dispatcher").to_line_protocol()


def test_lag_is_summed_over_the_sources():
    assert lag_records(PROGRESS) == 1234 and lag_records({}) == 0


def test_an_idle_trigger_is_a_point_of_zeros():
    line = idle_point("2026-01-02T03:04:05.678Z", "demo", "dispatcher").to_line_protocol()
    assert line == (
        "dbus_stage,ds=demo,stage=dispatcher batch_ms=0,checkpoint_ms=0,input_rows=0i,lag_records=0i,"
        "rows_per_s=0,waiting=0i 1767323045678"
    )  # 0 with no i: a float


class Sink:
    def __init__(self):
        self.points = []

    def put(self, point):
        self.points.append(point)


class FakeQuery:
    def __init__(self):
        self.recentProgress = []


def test_the_watcher_writes_each_batch_once_then_idle_points_and_never_raises(monkeypatch):
    monkeypatch.setattr(stagemetrics, "IDLE_S", 0.0)
    sink, query = Sink(), FakeQuery()
    watcher = stagemetrics.ProgressWatcher(query, "demo", "appender", sink, interval_s=3600)
    query.recentProgress = [PROGRESS, {**PROGRESS, "batchId": PROGRESS.get("batchId", 0) + 1}]
    assert watcher.poll() == 2
    assert watcher.poll() == 0  # nothing new: an idle point
    query.recentProgress = None
    query.recentProgress = type(
        "Broken", (), {"__iter__": lambda self: (_ for _ in ()).throw(RuntimeError())}
    )()
    assert watcher.poll() == 0
    fields = [dict(f.split("=") for f in p.to_line_protocol().split(" ")[1].split(",")) for p in sink.points]
    assert [f["input_rows"] for f in fields] == ["20000i", "20000i", "0i"]
    watcher._stop.set()


def test_progress_objects_are_read_through_their_json():
    obj = types.SimpleNamespace(json=json.dumps(PROGRESS))
    assert stagemetrics.progress_dict(obj) == PROGRESS and stagemetrics.progress_dict(PROGRESS) is PROGRESS


def test_a_dead_server_costs_the_writer_a_log_line_not_the_caller(monkeypatch):
    calls = []

    def failing(endpoint, points):
        calls.append(len(points))
        msg = "connection refused"
        raise OSError(msg)

    monkeypatch.setattr("dbuslib.influx.write", failing)
    writer = PointWriter(InfluxEndpoint(url="http://127.0.0.1:9"))
    writer.put(stage_point(PROGRESS, "demo", "appender"))
    assert writer.flush(5) and writer.failed_writes == 1 and calls == [1]


def test_put_never_blocks_when_the_writer_is_stuck(monkeypatch):
    release = threading.Event()
    monkeypatch.setattr("dbuslib.influx.write", lambda endpoint, points: release.wait(10))
    writer = PointWriter(InfluxEndpoint(url="http://127.0.0.1:9"))
    point = stage_point(PROGRESS, "demo", "appender")
    for _ in range(stagemetrics.QUEUE_SIZE + stagemetrics.WRITE_BATCH + 10):
        writer.put(point)
    assert writer.dropped >= 10
    release.set()
    assert writer.flush(5)


def test_an_unknown_stage_is_refused():
    with pytest.raises(ValueError, match="extractor"):
        stagemetrics.watch(None, InfluxEndpoint(url="http://127.0.0.1:9"), "demo", "extractor")
