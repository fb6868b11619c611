"""dbusclient.metrics: the lag per partition, the points of one flush (line protocol, field types), and
when ClientMetrics flushes (a clock given, points into a list)."""

from __future__ import annotations

import pytest
from kafka.structs import TopicPartition

from dbusclient.checkpoint import Bootstrap, Checkpoint, Mode, PartitionPosition, TablePull
from dbusclient.metrics import (
    MEASUREMENT,
    ClientMetrics,
    Report,
    WindowTally,
    lag_records,
    points,
)

T = "demo.shop.result"
AT_MS = 1714557600000


@pytest.mark.parametrize(
    ("end", "offsets", "lag"),
    [
        ({(T, 0): 2434}, {(T, 0): 1234}, {(T, 0): 1200}),
        ({(T, 0): 10, (T, 1): 7}, {(T, 1): 7}, {(T, 1): 0}),  # partition 0: no offset yet, not known
        ({(T, 0): 10}, {(T, 0): 12}, {(T, 0): 0}),  # end read before the last window: never below 0
        ({}, {(T, 0): 5}, {}),
        (
            {TopicPartition(T, 2): 50},
            Checkpoint(partitions=(PartitionPosition(T, 2, 45),)).offsets(),
            {(T, 2): 5},
        ),
    ],
)
def test_lag_is_end_offset_minus_checkpointed_offset(end, offsets, lag):
    assert lag_records(end, offsets) == lag


PULLS = (
    TablePull("demo", "shop", "orders", 1704164645123, 1030000012000000, 420001, False),
    TablePull("demo", "shop", "items", 1704164645124, 1030000012000001, 7, True),
)


def _lines(report: Report) -> list[str]:
    return [p.to_line_protocol() for p in points("demo", "orders-replica", report, AT_MS)]


def test_one_flush_writes_the_client_point_then_partitions_pulls_and_codes():
    tally = WindowTally(12, 60000, 59870, 100, 30, 4.25)
    report = Report(
        tally,
        10.0,
        {(T, 0): 1200, (T, 1): 3},
        Mode.BOOTSTRAP_SNAPSHOT,
        PULLS,
        {"CLIENT_SINK_FAILED": 2, "CLIENT_BAD_ROW": 1},
    )
    assert _lines(report) == [
        f"dbus_client,client=orders-replica,ds=demo applied=59870i,applied_per_s=5987,bootstrap_rows=420008i,"
        f'busy_s=4.25,duplicates=100i,errors=3i,lag_records=1203i,mode="BOOTSTRAP_SNAPSHOT",pulls=2i,'
        f"pulls_ended=1i,rows_per_s=6000,rows_read=60000i,stale=30i,windows=12i {AT_MS}",
        f"dbus_client_lag,client=orders-replica,ds=demo,partition=0,topic={T} lag_records=1200i {AT_MS}",
        f"dbus_client_lag,client=orders-replica,ds=demo,partition=1,topic={T} lag_records=3i {AT_MS}",
        "dbus_client_bootstrap,client=orders-replica,ds=demo,id=1704164645123,schema=shop,table=orders "
        f"ended=0i,rows=420001i {AT_MS}",
        "dbus_client_bootstrap,client=orders-replica,ds=demo,id=1704164645124,schema=shop,table=items "
        f"ended=1i,rows=7i {AT_MS}",
        f"dbus_client_error,client=orders-replica,code=CLIENT_BAD_ROW,ds=demo count=1i {AT_MS}",
        f"dbus_client_error,client=orders-replica,code=CLIENT_SINK_FAILED,ds=demo count=2i {AT_MS}",
    ]


def test_an_idle_online_client_writes_zeros_with_the_same_field_types():
    [line] = _lines(Report(WindowTally(), 0.0))
    assert line == (
        "dbus_client,client=orders-replica,ds=demo applied=0i,applied_per_s=0,bootstrap_rows=0i,busy_s=0,"
        f'duplicates=0i,errors=0i,mode="ONLINE",pulls=0i,pulls_ended=0i,rows_per_s=0,rows_read=0i,stale=0i,'
        f"windows=0i {AT_MS}"
    )  # no lag_records: not known yet


class Sink:
    def __init__(self):
        self.points, self.flushed = [], 0

    def put(self, point):
        self.points.append(point.to_line_protocol())

    def flush(self, timeout_s=5.0):
        self.flushed += 1
        return True


class Clock:
    def __init__(self):
        self.t = 100.0

    def __call__(self):
        return self.t


def test_client_metrics_sums_windows_and_flushes_at_most_every_interval():
    sink, clock = Sink(), Clock()
    m = ClientMetrics("demo", "orders-replica", sink, interval_s=10.0, clock=clock, wall=lambda: AT_MS / 1000)
    m.window(500, 490, 10, 0, 0.2)
    clock.t += 4
    m.window(0, 0, 0, 0, 0.0)  # an empty poll
    m.error("CLIENT_SINK_FAILED")
    assert not m.due() and m.flush_if_due() == 0 and sink.points == []
    m.checkpoint(Checkpoint(Mode.BOOTSTRAP_SNAPSHOT, (PartitionPosition(T, 0, 40),), Bootstrap(PULLS[:1])))
    clock.t += 6
    m.window(1500, 1500, 0, 5, 0.6)
    assert m.due()
    m.lag({TopicPartition(T, 0): 100}, {(T, 0): 40})
    assert m.flush_if_due() == 4  # client, one partition, one pull, one code
    main = sink.points[0]
    assert main.startswith(f"{MEASUREMENT},client=orders-replica,ds=demo ")
    for field in (
        "windows=3i",
        "rows_read=2000i",
        "applied=1990i",
        "stale=5i",
        "rows_per_s=200,",
        "lag_records=60i",
        'mode="BOOTSTRAP_SNAPSHOT"',
        "bootstrap_rows=420001i",
        "errors=1i",
    ):
        assert field in main, (field, main)

    clock.t += 1
    assert not m.due()
    m.checkpoint(Checkpoint(Mode.ONLINE, (PartitionPosition(T, 0, 100),)))
    m.close()  # what is left, counted anew; the lag is kept until the next lag()
    assert sink.flushed == 1 and len(sink.points) == 6
    last = sink.points[4]
    assert (
        "windows=0i" in last and "rows_per_s=0," in last and "errors=0i" in last and 'mode="ONLINE"' in last
    )
    assert sink.points[5].startswith("dbus_client_lag,")


def test_a_client_needs_a_source_and_a_name():
    with pytest.raises(ValueError, match="must not be empty"):
        ClientMetrics("demo", "", Sink())
