"""dbus status: render(snapshot) and the pure folding of Flux records, ZooKeeper alert nodes and the
dead-letter series."""

import argparse
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cli.status import add_parsers, cli, render
from heartbeat.incidents import Alert
from heartbeat.monitor import AlertStore, unreadable_alert
from status.readers import (
    ClientStatus,
    DeadLetterCount,
    ExtractorStatus,
    FullPullStatus,
    Snapshot,
    StageLive,
    StageRate,
    TableHeartbeat,
    clients,
    dead_letter_query,
    dead_letters,
    heartbeats,
    last_points,
    stage_rates,
)

NOW = 1714557600.0  # 2024-05-01 10:00:00 UTC


def _t(age_s: float) -> int:
    """The epoch-ms time of a point ``age_s`` old (InfluxQL answers with ``epoch=ms``)."""
    return int(round((NOW - age_s) * 1000))


def _full() -> Snapshot:
    return Snapshot(
        source="demo",
        taken_at=NOW,
        window_s=600,
        extractor=ExtractorStatus(
            leader="db1:4242",
            epoch=7,
            committed_file="mariadb-bin.000003",
            committed_pos=1234,
            committed_gtid="0-1-42",
            behind_bytes=4096,
            position_lag_s=0.8,
            lag_s=1.25,
            metrics_age_s=4.0,
        ),
        stages=(
            StageRate("extractor", 812.0, None, None, 4.0),
            StageRate("dispatcher", 640.5, 12, 210.0, 2.0),
            StageRate("appender"),
        ),
        heartbeats=(
            TableHeartbeat("shop", "orders", 1234.5, 120, 32.0),
            TableHeartbeat("shop", "customers", 900.0, 0, 700.0),
        ),
        fullpulls=(
            FullPullStatus(
                1704164645123,
                "shop",
                "orders",
                "pulling",
                412000,
                1000000,
                4,
                10,
                51234.0,
                "[############------------------]  41% 412000/1000000 rows  4/10 shards",
            ),
        ),
        alerts=(
            Alert(
                "demo",
                "shop",
                "customers",
                "stale",
                1714556900000,
                None,
                700.0,
                None,
                "no heartbeat for 700 s",
            ),
        ),
    )


def test_render_shows_every_figure():
    screen = render(_full())
    for expected in [
        "source demo at 2024-05-01 10:00:00 UTC",
        "leader     db1:4242",
        "epoch      7",
        "committed  mariadb-bin.000003:1234 gtid 0-1-42, 4,096 bytes behind the server",
        "lag        1.2 s (metrics 4 s ago)",
        "extractor     812.0           -          -   4 s ago  (records/s)",
        "dispatcher    640.5          12        210   2 s ago",
        "appender   no data in the last 10 minutes",
        "shop.orders       1.234 s        120   32 s ago",
        "shop.customers    0.900 s          0   12 min ago",
        "1704164645123  shop.orders",
        "41% 412000/1000000 rows",
        "shop.customers stale since 2024-05-01 09:48:20 UTC (age 700.0 s): no heartbeat for 700 s",
    ]:
        assert expected in screen, f"{expected!r} not in\n{screen}"
    assert "could not read" not in screen


def test_render_of_an_idle_source_says_so():
    idle = tuple(StageRate(s) for s in ("extractor", "dispatcher"))
    screen = render(Snapshot("demo", NOW, 300, stages=idle))
    assert "leader     none (no extractor runs)" in screen
    assert "committed  none committed yet" in screen
    assert "lag        unknown" in screen
    assert screen.count("no data in the last 5 minutes") == 2
    assert "heartbeats     none in the last day" in screen
    assert "full pulls     none running" in screen
    assert "open alerts    none" in screen


def test_an_extractor_with_nothing_behind_has_no_lag_however_old_its_last_event():
    idle = ExtractorStatus(committed_file="f", committed_pos=4, behind_bytes=0, position_lag_s=600, lag_s=37)
    screen = render(Snapshot("demo", NOW, 600, extractor=idle))
    assert "lag        0.0 s (caught up: nothing on the server past the committed position)" in screen


def test_render_falls_back_to_the_position_lag_and_lists_errors():
    snap = Snapshot(
        "demo",
        NOW,
        600,
        extractor=ExtractorStatus(position_lag_s=3.5),
        errors=("dbus_stage: ENDPOINT_UNREACHABLE: no answer",),
    )
    screen = render(snap)
    assert "lag        3.5 s since the committed transaction (no metrics)" in screen
    assert screen.endswith("could not read:\n  dbus_stage: ENDPOINT_UNREACHABLE: no answer")


def test_snapshot_json_round_trips_the_figures():
    obj = json.loads(_full().to_json())
    assert obj["extractor"]["committed_pos"] == 1234
    assert [s["stage"] for s in obj["stages"]] == ["extractor", "dispatcher", "appender"]
    assert obj["heartbeats"][0] == {
        "schema": "shop",
        "table": "orders",
        "latency_ms": 1234.5,
        "rows": 120,
        "age_s": 32.0,
    }
    assert obj["alerts"][0]["kind"] == "stale"


def _series(columns, *rows, **tags):
    return {
        "name": "m",
        "tags": tags,
        "columns": ["time", "last", *columns],
        "values": [list(r) for r in rows],
    }


def test_last_points_names_the_last_column_and_keeps_the_newest_series():
    series = [
        _series(["rows"], [_t(5), 12.5, 3], schema="shop", table="orders"),
        _series(["rows"], [_t(50), 99.0, None], schema="shop", table="items"),
        _series(["rows"], [_t(10), 7.0, None], schema="shop", table="items"),
    ]
    points = last_points(series, "latency_ms", ("schema", "table"))
    assert points[("shop", "orders")] == {"_time": _t(5), "latency_ms": 12.5, "rows": 3}
    assert points[("shop", "items")] == {"_time": _t(10), "latency_ms": 7.0, "rows": None}
    assert last_points(
        [{"name": "m", "columns": ["time", "last", "lag_s"], "values": [[_t(4), 812.0, 1.0]]}],
        "records_per_s",
        (),
    ) == {(): {"_time": _t(4), "records_per_s": 812.0, "lag_s": 1.0}}


def test_heartbeats_are_sorted_with_ages():
    points = last_points(
        [
            _series(["rows"], [_t(30), 5.0, 4], schema="s", table="b"),
            _series(["rows"], [_t(3), 6.0, None], schema="s", table="a"),
        ],
        "latency_ms",
        ("schema", "table"),
    )
    assert heartbeats(points, NOW) == (
        TableHeartbeat("s", "a", 6.0, None, 3.0),
        TableHeartbeat("s", "b", 5.0, 4, 30.0),
    )


def test_stage_rates_cover_every_stage_in_pipeline_order():
    ext = {"_time": _t(4), "records_per_s": 812.0, "lag_s": 1.0}
    stages = {("appender",): {"_time": _t(2), "rows_per_s": 500.0, "lag_records": 7, "batch_ms": 120}}
    assert stage_rates(ext, stages, NOW) == (
        StageRate("extractor", 812.0, None, None, 4.0),
        StageRate("dispatcher"),
        StageRate("appender", 500.0, 7, 120.0, 2.0),
    )


class NodesZk:
    """exists/get/get_children over a dict of nodes; ``writes`` counts any call that would write."""

    def __init__(self, nodes: dict[str, bytes]):
        self.nodes, self.writes = nodes, 0

    def exists(self, path):
        return path in self.nodes or any(p.startswith(path + "/") for p in self.nodes)

    def get(self, path):
        from kazoo.exceptions import NoNodeError

        if path not in self.nodes:
            raise NoNodeError
        return self.nodes[path], None

    def get_children(self, path):
        from kazoo.exceptions import NoNodeError

        if not self.exists(path):
            raise NoNodeError
        return sorted({p[len(path) + 1 :].split("/")[0] for p in self.nodes if p.startswith(path + "/")})

    def ensure_path(self, path):
        self.writes += 1


BASE = "/DBus/HeartBeat/demo/alerts"
GOOD = (
    b'{"ds":"demo","schema":"shop","table":"order.items","kind":"latency","since_ms":5,"notified_ms":null,'
    b'"age_s":null,"latency_s":400.5,"message":"slow"}'
)


@pytest.mark.parametrize(
    ("data", "name", "expected"),
    [
        (
            GOOD,
            "shop.order.items.latency",
            Alert("demo", "shop", "order.items", "latency", 5, None, None, 400.5, "slow"),
        ),
        (b"", "shop.orders.stale", unreadable_alert("shop.orders.stale")),
        (b"not json", "shop.orders.stale", unreadable_alert("shop.orders.stale")),
        (b'{"schema":"shop"}', "shop.orders.stale", unreadable_alert("shop.orders.stale")),
    ],
)
def test_the_alert_reader_shows_a_bad_node_as_unreadable_and_never_writes(data, name, expected):
    zk = NodesZk({f"{BASE}/{name}": data})
    assert AlertStore(zk, BASE).read() == [expected] and zk.writes == 0
    assert expected.message == "slow" or expected.message == f"unreadable alert node {name!r}"


def test_no_alert_node_reads_as_no_alerts_without_creating_it():
    zk = NodesZk({})
    assert AlertStore(zk, BASE).read() == [] and zk.writes == 0


def test_status_command_is_registered_with_its_options():
    p = argparse.ArgumentParser()
    p.add_argument("--config", default="conf/dbus.yaml")
    add_parsers(p.add_subparsers(dest="command"))
    args = p.parse_args(["status", "--source", "demo", "--json", "--window", "0.5"])
    assert (args.handler, args.source, args.json, args.window) == (cli, "demo", True, 0.5)
    assert (
        render(Snapshot("demo", NOW, 30, stages=(StageRate("appender"),))).count(
            "no data in the last 0.5 minutes"
        )
        == 1
    )


# ---------------------------------------------------------------------------------- dead letters

DL_NOW = 1_700_000_000.0
COLUMNS = ["time", "count", "topic", "partition", "offset", "dlq_partition", "dlq_offset", "newest_ms"]


def series(stage, code, schema, table, count, offset, newest_s):
    tags = {"stage": stage, "code": code, "schema": schema, "table": table}
    return {
        "name": "dbus_dead_letter",
        "tags": tags,
        "columns": COLUMNS,
        "values": [
            [0, count, "demo.shop" if schema else "", 0, offset, 1, offset + 100, int(newest_s * 1000)]
        ],
    }


def test_counts_are_summed_over_tables_and_the_newest_coordinates_kept():
    got = dead_letters(
        [
            series("appender", "RAW_UNDECODABLE", "shop", "orders", 2, 42, DL_NOW - 60),
            series("appender", "RAW_UNDECODABLE", "shop", "items", 3, 7, DL_NOW - 30),
            series("dispatcher", "RAW_BAD_RECORD", "", "", 1, -1, DL_NOW - 600),
        ],
        DL_NOW,
        "demo.dlq",
    )
    assert got == (
        DeadLetterCount(
            "appender", "RAW_UNDECODABLE", 5, "shop.items", "demo.shop", 0, 7, "demo.dlq", 1, 107, 30.0
        ),
        DeadLetterCount("dispatcher", "RAW_BAD_RECORD", 1, "", "", 0, -1, "demo.dlq", 1, 99, 600.0),
    )


def test_letters_of_the_same_millisecond_keep_the_later_one_in_the_dead_letter_topic():
    """Two tables' newest letters written in one millisecond: the one further on in the topic is the newest,
    whichever series InfluxDB answers first (the monitor's order, heartbeat/deadletters.py)."""
    a = series("unknown", "DLQ_UNREADABLE", "", "", 1, 1, DL_NOW - 5)
    b = series("unknown", "DLQ_UNREADABLE", "shop", "orders", 1, 2, DL_NOW - 5)
    for answer in ([a, b], [b, a]):
        (got,) = dead_letters(answer, DL_NOW, "demo.dlq")
        assert (got.count, got.origin, got.dlq_offset) == (2, "shop.orders", 102)


@given(
    st.lists(
        st.tuples(
            st.sampled_from(["appender", "dispatcher"]),
            st.sampled_from(["A", "B"]),
            st.sampled_from(["orders", "items", ""]),
            st.integers(0, 1000),
            st.integers(0, 10_000),
        ),
        max_size=12,
    )
)
def test_fold_keeps_every_count(rows):
    got = dead_letters(
        [series(s, c, "shop" if t else "", t, n, 1, DL_NOW - age) for s, c, t, n, age in rows],
        DL_NOW,
        "demo.dlq",
    )
    assert sum(d.count for d in got) == sum(n for *_, n, _ in rows)
    assert [(d.stage, d.code) for d in got] == sorted({(s, c) for s, c, _, n, _ in rows if n})


def test_the_screen_and_the_json_show_the_dead_letters():
    d = DeadLetterCount(
        "appender", "RAW_UNDECODABLE", 1234, "shop.orders", "demo.shop", 0, 42, "demo.dlq", 0, 17, 95.0
    )
    snap = Snapshot("demo", DL_NOW, 600, dead_letters=(d,))
    screen = render(snap)
    assert (
        "dead letters   stage     code               count   newest (last hour)\n"
        "               appender  RAW_UNDECODABLE    1,234   "
        "demo.shop partition 0 offset 42 (shop.orders), "
        "in demo.dlq partition 0 offset 17, 95 s ago"
    ) in screen
    assert json.loads(snap.to_json())["dead_letters"] == [
        {
            "stage": "appender",
            "code": "RAW_UNDECODABLE",
            "count": 1234,
            "origin": "shop.orders",
            "topic": "demo.shop",
            "partition": 0,
            "offset": 42,
            "dlq_topic": "demo.dlq",
            "dlq_partition": 0,
            "dlq_offset": 17,
            "age_s": 95.0,
        }
    ]
    assert "dead letters   none in the last 60 minutes" in render(Snapshot("demo", DL_NOW, 600))


def test_the_query_is_bounded_and_quotes_the_source():
    q = dead_letter_query("it's", 3600)
    assert "\"ds\" = 'it\\'s'" in q and "time > now() - 3600s" in q and q.startswith('SELECT sum("count")')


def test_render_of_a_stage_waiting_for_resources_says_so():
    stages = (
        StageRate("dispatcher", 0.0, 0, 0.0, 3.0, waiting=True),
        StageRate("appender", 10.0, 0, 5.0, 3.0),
    )
    screen = render(Snapshot("demo", NOW, 300, stages=stages))
    assert "dispatcher waiting for resources: the cluster runs fewer of its tasks than it needs" in screen
    assert screen.count("waiting for resources") == 1


def test_clients_come_from_the_newest_dbus_client_points_sorted_by_name():
    points = last_points(
        [
            _series(
                ["lag_records", "mode", "pulls", "pulls_ended", "bootstrap_rows", "applied_per_s", "errors"],
                [_t(3), 6000.0, 1200, "BOOTSTRAP_SNAPSHOT", 2, 1, 420001, 5987.0, 0],
                client="orders-replica",
            ),
            _series(
                ["lag_records", "mode", "pulls", "pulls_ended", "bootstrap_rows", "applied_per_s", "errors"],
                [_t(40), 0.0, None, "ONLINE", 0, 0, 0, 0.0, 0],
                client="audit",
            ),
        ],
        "rows_per_s",
        ("client",),
    )
    assert clients(points, NOW) == (
        ClientStatus("audit", 0.0, 0.0, None, "ONLINE", 0, 0, 0, 40.0),
        ClientStatus("orders-replica", 6000.0, 5987.0, 1200, "BOOTSTRAP_SNAPSHOT", 2, 1, 420001, 3.0),
    )


def test_the_screen_and_the_json_show_the_clients():
    snap = Snapshot(
        "demo",
        NOW,
        600,
        clients=(
            ClientStatus("audit", 0.0, 0.0, None, "ONLINE", 0, 0, 0, 40.0),
            ClientStatus("orders-replica", 6000.0, 5987.0, 1200, "BOOTSTRAP_SNAPSHOT", 2, 1, 420001, 3.0),
        ),
    )
    screen = render(snap)
    for expected in [
        "clients        client             rows/s  lag records       as of   state",
        "               audit                 0.0            -    40 s ago   online",
        "               orders-replica    6,000.0        1,200     3 s ago   bootstrap snapshot: 1/2 pulls "
        "ended, 420,001 rows",
    ]:
        assert expected in screen, f"{expected!r} not in\n{screen}"
    assert json.loads(snap.to_json())["clients"][1] == {
        "client": "orders-replica",
        "rows_per_s": 6000.0,
        "applied_per_s": 5987.0,
        "lag_records": 1200,
        "mode": "BOOTSTRAP_SNAPSHOT",
        "pulls": 2,
        "pulls_ended": 1,
        "bootstrap_rows": 420001,
        "age_s": 3.0,
    }
    assert "clients        none in the last 10 minutes" in render(Snapshot("demo", NOW, 600))


def test_a_real_time_stage_shows_the_pause_between_batches_and_its_interval():
    stages = (StageRate("appender", 900.0, 0, 85.0, 3.0, checkpoint_ms=30000.0),)
    screen = render(Snapshot("demo", NOW, 300, stages=stages))
    assert (
        "appender      900.0           0         85   3 s ago  (real-time, a batch every 30 s: batch ms is "
        "the pause between two)"
    ) in screen


def test_a_stage_whose_process_has_no_point_yet_is_starting():
    lives = (
        StageLive("dispatcher", "running", ("db1:1",), started_at=NOW - 12),
        StageLive("appender", "running", ("db1:2",), started_at=NOW - 3600),
    )
    stages = (
        StageRate("dispatcher", 5.0, 0, 10.0, 40.0),  # a point of the process before (40 s old)
        StageRate("appender"),  # running for an hour without a point: not "starting"
    )
    screen = render(Snapshot("demo", NOW, 600, stages=stages, processes=lives))
    assert "dispatcher starting: running for 12 s, no batch ended yet" in screen
    assert "appender   no data in the last 10 minutes" in screen
    fresh = (StageRate("dispatcher", 5.0, 0, 10.0, 2.0), StageRate("appender"))
    assert "starting" not in render(Snapshot("demo", NOW, 600, stages=fresh, processes=lives))


def test_the_kafka_line_counts_the_source_topics_and_names_the_missing():
    from status.readers import KafkaStatus

    whole = render(Snapshot("demo", NOW, 600, kafka=KafkaStatus("k1:9092", 4)))
    assert "kafka          k1:9092: 4 of 4 topics of the source exist" in whole
    short = render(Snapshot("demo", NOW, 600, kafka=KafkaStatus("k1:9092", 4, ("demo.shop",))))
    assert "kafka          k1:9092: 3 of 4 topics of the source exist; missing: demo.shop" in short
    assert "kafka          not read" in render(Snapshot("demo", NOW, 600))


def test_an_unreachable_kafka_is_an_error_and_exit_1(monkeypatch):
    """Every other part read (fakes), Kafka not: the screen says why and the command exits 1."""
    from dbuslib import kafka
    from dbuslib.config import load_config
    from dbuslib.errors import EndpointError
    from status import readers as status_module

    def unreachable(endpoint, **kw):
        raise EndpointError("Kafka at 127.0.0.1:1 is not reachable: Unable to bootstrap")

    monkeypatch.setattr(kafka, "admin", unreachable)
    collector = status_module._Collector
    monkeypatch.setattr(collector, "zk_parts", lambda self: ((), (), ()))
    monkeypatch.setattr(collector, "newest", lambda self, *a: {})
    monkeypatch.setattr(collector, "_dead_letters", lambda self: ())
    monkeypatch.setattr("extractor.commands.status", lambda cfg, ds: None)
    snap = collector(load_config(), "demo", 600, NOW).snapshot()
    assert snap.errors == (
        "Kafka: ENDPOINT_UNREACHABLE: Kafka at 127.0.0.1:1 is not reachable: Unable to bootstrap",
    )
    assert "could not read:\n  Kafka: ENDPOINT_UNREACHABLE" in render(snap)
