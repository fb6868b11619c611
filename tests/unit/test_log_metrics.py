"""The log processor's metric contract (logprocessor/metrics.py): the metric strings, their per-batch
aggregate, and the points the driver writes from it."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from dbuslib import stagemetrics
from logprocessor import metrics as m
from logprocessor.metrics import BatchCounts, Beat, Metric, RowsSinceBeat, Tally

AT = 1_767_323_045_678

names = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\t"), max_size=12)
hosts = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)  # a tab in a host still parses
ns = st.integers(-(10**18) + 1, 10**18 - 1)
metric_strings = st.one_of(
    st.builds(m.format_metric, st.sampled_from(m.KINDS), hosts, names, ns),
    st.text(max_size=20),  # anything else: invalid, or (by chance) a metric
    st.none(),
)


@given(st.sampled_from(m.KINDS), hosts, names, ns)
def test_a_formatted_metric_parses_back(kind, host, name, n):
    assert m.parse_metric(m.format_metric(kind, host, name, n)) == Metric(kind, host, name, n)


def test_the_contract_by_example():
    assert m.parse_metric("rows\tvm\tapp_orders\t3") == Metric("rows", "vm", "app_orders", 3)
    assert m.parse_metric("unknown\tvm\t\t1") == Metric("unknown", "vm", "", 1)
    assert m.parse_metric("error\t\tLOG_RECORD_NOT_JSON\t1") == Metric("error", "", "LOG_RECORD_NOT_JSON", 1)
    assert m.parse_metric("heartbeat\tvm\tapp_orders\t-12") == Metric("heartbeat", "vm", "app_orders", -12)
    assert m.parse_metric("rows\ta\tb\tc\t5") == Metric("rows", "a\tb", "c", 5)


def test_what_is_not_a_metric():
    bad = [
        None,
        "",
        "rows",
        "rows\tvm\t3",
        "bytes\tvm\tt\t3",
        "rows\tvm\tt\tx",
        "rows\tvm\tt\t",
        "rows\tvm\tt\t-",
    ]
    bad += ["rows\tvm\tt\t1e3", "rows\tvm\tt\t\u0663", "rows\tvm\tt\t" + "9" * 19, "rows\tvm\tt\t 3"]
    assert [m.parse_metric(b) for b in bad] == [None] * len(bad)


def test_fold_counts_sums_and_keeps_the_largest():
    texts = [
        "rows\tvm\ta\t3",
        "rows\tvm\ta\t9",
        "heartbeat\tvm\ta\t812",
        "heartbeat\tvm\ta\t20",
        None,
        "junk",
    ]
    assert m.fold(texts) == {
        ("rows", "vm", "a"): Tally(2, 12, 9),
        ("heartbeat", "vm", "a"): Tally(2, 832, 812),
        ("invalid", "", ""): Tally(1, 0, 0),
    }
    assert m.counts_json(m.fold(texts)) == (
        '[["heartbeat","vm","a",2,832,812],["invalid","","",1,0,0],["rows","vm","a",2,12,9]]'
    )


@given(st.lists(metric_strings, max_size=40))
def test_the_aggregate_json_reads_back(texts):
    folded = m.fold(texts)
    assert m.parse_counts(m.counts_json(folded)) == folded
    assert sum(t.count for t in folded.values()) == sum(t is not None for t in texts)


@given(st.lists(metric_strings, max_size=20), st.lists(metric_strings, max_size=20))
def test_folding_in_two_parts_and_merging_is_folding_the_whole(a, b):
    assert m.merge(m.fold(a), m.fold(b)) == m.fold(a + b)


@given(st.one_of(st.none(), st.text(max_size=30), st.integers(), st.just('[["rows","h","t",1,2]]')))
def test_parse_counts_never_raises(text):
    assert isinstance(m.parse_counts(text), dict)


def test_parse_counts_skips_odd_entries_and_adds_repeated_keys():
    text = json.dumps(
        [["rows", "h", "t", 1, 2, 2], ["rows", "h", "t", 1, 5, 5], ["rows", 1, "t", 1, 1, 1], 7]
    )
    assert m.parse_counts(text) == {("rows", "h", "t"): Tally(2, 7, 5)}
    assert m.parse_counts('[["rows","h","t",true,1,1]]') == {}


def test_rows_since_the_previous_heartbeat_per_host_and_table():
    state = RowsSinceBeat.empty()
    state, beats = state.step({("rows", "vm", "a"): Tally(2, 10, 7), ("rows", "db1", "a"): Tally(1, 4, 4)})
    assert beats == []
    state, beats = state.step(
        {("rows", "vm", "a"): Tally(1, 5, 5), ("heartbeat", "vm", "a"): Tally(2, 900, 800)}
    )
    assert beats == [Beat("vm", "a", 800, 2, 15)]
    state, beats = state.step(
        {("heartbeat", "vm", "a"): Tally(1, 30, 30), ("heartbeat", "db1", "a"): Tally(1, 9, 9)}
    )
    assert beats == [Beat("db1", "a", 9, 1, 4), Beat("vm", "a", 30, 1, 0)]
    assert state.pending == {}


@given(st.lists(st.lists(metric_strings, max_size=10), max_size=8))
def test_every_row_is_reported_once_by_a_heartbeat_or_still_pending(batches):
    state, reported = RowsSinceBeat.empty(), 0
    for batch in batches:
        state, beats = state.step(m.fold(batch))
        reported += sum(b.rows for b in beats)
    rows = sum(t.total for b in batches for k, t in m.fold(b).items() if k[0] == m.ROWS)
    assert reported + sum(state.pending.values()) == rows


def test_the_points_of_a_batch():
    tallies = m.fold(
        ["rows\tvm\tapp_orders\t3", "unknown\tvm\t\t1", "unknown\tvm\t\t1", "error\t\tLOG_RECORD_NOT_JSON\t1"]
        + ["error\tvm\tLOG_LINE_RULE_ERROR\t1", "heartbeat\tvm\tapp_orders\t812", "oops"]
    )
    lines = [p.to_line_protocol() for p in m.log_points("applog", tallies, AT)]
    assert lines == [
        f"dbus_log,code=LOG_RECORD_NOT_JSON,ds=applog,kind=error count=1i {AT}",
        f"dbus_log,code=LOG_LINE_RULE_ERROR,ds=applog,host=vm,kind=error count=1i {AT}",
        f"dbus_log,ds=applog,kind=invalid count=0i {AT}",
        f"dbus_log,ds=applog,host=vm,kind=rows,table=app_orders count=3i {AT}",
        f"dbus_log,ds=applog,host=vm,kind=unknown count=2i {AT}",
    ]
    beat = m.heartbeat_points("applog", "applog_schema", [Beat("vm", "app_orders", 812, 1, 3)], AT)
    assert [p.to_line_protocol() for p in beat] == [
        "dbus_heartbeat,ds=applog,host=vm,schema=applog_schema,table=app_orders "
        f"beats=1i,latency_ms=812,rows=3i {AT}"
    ]


def progress(batch, counts):
    observed = {} if counts is None else {m.OBSERVATION: {m.FIELD: counts}}
    return {
        "batchId": batch,
        "timestamp": "2026-01-02T03:04:05.678Z",
        "numInputRows": 1,
        "observedMetrics": observed,
    }


def test_batch_counts_from_progress_keep_rows_across_batches(caplog):
    bc = BatchCounts("applog", "applog_schema")
    assert bc.points(progress(0, None), AT) == []
    assert bc.points({"batchId": 1}, AT) == []
    first = bc.points(progress(2, m.counts_json(m.fold(["rows\tvm\ta\t4", "bad"]))), AT)
    assert len(first) == 2 and bc.invalid == 1
    assert "1 metric(s) of a batch do not parse" in caplog.text
    second = bc.points(progress(3, m.counts_json(m.fold(["heartbeat\tvm\ta\t50"]))), AT)
    assert [p.to_line_protocol() for p in second] == [
        f"dbus_heartbeat,ds=applog,host=vm,schema=applog_schema,table=a beats=1i,latency_ms=50,rows=4i {AT}"
    ]
    assert bc.points(progress(4, "not json"), AT) == []


class Sink:
    def __init__(self):
        self.points = []

    def put(self, point):
        self.points.append(point)


class FakeQuery:
    def __init__(self, recent):
        self.recentProgress = recent


def test_the_watcher_writes_the_counts_of_each_batch_in_batch_order():
    bc = BatchCounts("applog", "applog_schema")
    later = progress(6, m.counts_json(m.fold(["heartbeat\tvm\ta\t7"])))
    earlier = progress(5, m.counts_json(m.fold(["rows\tvm\ta\t2"])))
    sink = Sink()
    watcher = stagemetrics.ProgressWatcher(
        FakeQuery([later, earlier]), "applog", "logprocessor", sink, interval_s=3600, more_points=bc.points
    )
    try:
        assert watcher.poll() == 2
    finally:
        watcher._stop.set()
    lines = [p.to_line_protocol() for p in sink.points]
    assert [line.split(",")[0] for line in lines] == [
        "dbus_stage",
        "dbus_log",
        "dbus_stage",
        "dbus_heartbeat",
    ]
    assert "rows=2i" in lines[3] and lines[3].endswith(" 1767323045678")


def test_a_progress_as_pyspark_gives_it_holds_a_row():
    from pyspark.sql import Row

    counts = m.counts_json(m.fold(["rows\tvm\ta\t4"]))
    assert m.observed_counts({"observedMetrics": {m.OBSERVATION: Row(counts=counts)}}) == m.fold(
        ["rows\tvm\ta\t4"]
    )
    assert m.observed_counts({"observedMetrics": {m.OBSERVATION: Row(other=1)}}) is None
