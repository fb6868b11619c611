"""The monitor's queries, points, and its check loop against fakes of ZooKeeper, InfluxDB and channels."""

import json

import pytest
from heartbeat_fakes import Clock, FakeChannel, FakeDlq, FakeZk, at

from binlog.heartbeat import MEASUREMENT
from dbuslib import seriesread
from dbuslib.config import load_config
from heartbeat import monitor as hbm
from heartbeat.incidents import Alert, Notification, Observation

T0 = 1_700_000_000_000


def test_the_query_takes_the_last_latency_of_each_table_of_the_source():
    def last_points_query(ds: str, lookback_s: float) -> str:  # what the monitor asks (last_heartbeats)
        return seriesread.last_points_query(
            ds, lookback_s, seriesread.Newest(MEASUREMENT, "latency_ms", ("schema", "table"))
        )

    assert last_points_query("demo", 86400) == (
        'SELECT last("latency_ms") FROM "dbus_heartbeat" WHERE "ds" = \'demo\' AND time > now() - 86400s '
        'GROUP BY "schema", "table"'
    )
    assert "'it\\'s'" in last_points_query("it's", 1)


def test_influxql_series_become_records():
    series = [
        {
            "name": "dbus_heartbeat",
            "tags": {"schema": "shop", "table": "orders"},
            "columns": ["time", "last"],
            "values": [[1700, 12.5]],
        }
    ]
    assert hbm.records_of(series) == [{"schema": "shop", "table": "orders", "_time": 1700, "_value": 12.5}]


def test_observations_take_the_newest_point_per_table():
    records = [
        {"schema": "shop", "table": "orders", "_time": at(T0), "_value": 1500.0},
        {"schema": "shop", "table": "orders", "_time": at(T0 + 1000), "_value": 2500.0},  # another series
        {"schema": "shop", "table": "orders", "_time": at(T0 - 1000), "_value": 9.0},
        {"schema": "crm", "table": "other", "_time": at(T0), "_value": 1.0},  # not monitored
    ]
    assert hbm.observations(records, [("shop", "orders"), ("shop", "quiet")]) == [
        Observation("shop", "orders", T0 + 1000, 2.5),
        Observation("shop", "quiet", None, None),
    ]


def test_alert_point():
    a = Alert("demo", "shop", "orders", "stale", T0, None, 610.0, None, "m")
    p = hbm.alert_point(Notification("alert", a, T0))
    assert p.to_line_protocol() == (
        f'dbus_alert,ds=demo,kind=stale,schema=shop,table=orders age_s=610,state="open" {T0 * 1_000_000}'
    )


@pytest.fixture
def env(monkeypatch):
    points: list[dict] = []
    written: list = []
    monkeypatch.setattr(
        hbm.influx,
        "influxql",
        lambda ep, q: [
            {
                "tags": {"schema": p["schema"], "table": p["table"]},
                "values": [[hbm._ms(p["_time"]), p["_value"]]],
            }
            for p in points
        ],
    )
    monkeypatch.setattr(
        hbm.influx, "write", lambda ep, pts: written.extend(p.to_line_protocol() for p in pts)
    )
    cfg = load_config()
    zk, clock = FakeZk(), Clock(T0)

    def make(*chans, dlq=None):
        return hbm.Monitor(
            cfg,
            "demo",
            client=zk,
            chans=list(chans),
            clock=clock,
            list_tables=lambda: [("shop", "orders")],
            dlq=dlq or FakeDlq(),
        )

    return make, zk, clock, points, written


def test_one_alert_retried_until_delivered_then_one_recovery(env):
    make, zk, clock, points, written = env
    hook = FakeChannel("webhook", failures=1)
    mon = make(hook)
    assert mon.check() == []
    clock.ms += 601_000
    assert [(n.event, n.alert.key) for n in mon.check()] == [("alert", "shop.orders.stale")]
    node = "/DBus/HeartBeat/demo/alerts/shop.orders.stale"
    assert hook.sent == [] and json.loads(zk.nodes[node])["notified_ms"] is None
    clock.ms += 30_000
    assert mon.check() == []  # still stale: no new alert, but the failed one is sent again
    assert hook.sent == [("alert", "shop.orders.stale")]
    assert json.loads(zk.nodes[node])["notified_ms"] == clock.ms
    points.append({"schema": "shop", "table": "orders", "_time": at(clock.ms), "_value": 800.0})
    clock.ms += 30_000
    assert [(n.event, n.alert.key) for n in mon.check()] == [("recovery", "shop.orders.stale")]
    assert hook.sent[-1] == ("recovery", "shop.orders.stale") and node not in zk.nodes
    assert [line.split(" ")[1].split(",")[-1] for line in written] == ['state="open"', 'state="recovered"']


def test_a_restarted_monitor_neither_repeats_nor_forgets(env):
    make, zk, clock, points, _ = env
    first = FakeChannel("webhook")
    make(first).check()
    clock.ms += 601_000
    make(first).check()  # a monitor started at T0 would alert; this one started now: not yet
    assert first.sent == []
    mon = make(first)
    clock.ms += 601_000
    mon.check()
    assert first.sent == [("alert", "shop.orders.stale")]
    again = FakeChannel("webhook")
    restarted = make(again)
    clock.ms += 30_000
    assert restarted.check() == [] and again.sent == []  # no repeat
    points.append({"schema": "shop", "table": "orders", "_time": at(clock.ms), "_value": 10.0})
    restarted.check()
    assert again.sent == [("recovery", "shop.orders.stale")]  # not forgotten


def test_an_undelivered_alert_is_sent_by_the_next_monitor(env):
    make, zk, clock, _, _ = env
    down = FakeChannel("webhook", failures=99)
    mon = make(down)
    clock.ms += 601_000
    mon.check()
    up = FakeChannel("webhook")
    make(up).check()
    assert up.sent == [("alert", "shop.orders.stale")]


def test_two_monitors_notify_once(env):
    make, zk, clock, _, _ = env
    a, b = FakeChannel("webhook"), FakeChannel("webhook")
    ma, mb = make(a), make(b)
    clock.ms += 601_000
    ma.check()
    mb.check()
    assert a.sent + b.sent == [("alert", "shop.orders.stale")]


def test_influx_down_skips_the_check(env, monkeypatch):
    make, *_ = env

    def boom(ep, q):
        msg = "the time-series server at http://x did not answer an InfluxQL query: refused"
        raise hbm.EndpointError(msg)

    monkeypatch.setattr(hbm.influx, "influxql", boom)
    with pytest.raises(hbm.EndpointError, match="did not answer"):
        make(FakeChannel("webhook")).check()


def _letter(stage="appender", code="RAW_UNDECODABLE", offset=42):
    from heartbeat.deadletters import Letter

    return Letter(stage, code, "shop", "orders", "demo.shop", 0, offset, 0, offset, T0)


def test_dead_letters_are_written_committed_alerted_once_and_cleared(env):
    make, zk, clock, points, written = env
    points.append({"schema": "shop", "table": "orders", "_time": at(clock.ms), "_value": 10.0})
    hook, dlq = FakeChannel("webhook"), FakeDlq()
    mon = make(hook, dlq=dlq)
    dlq.pending = [_letter(), _letter(offset=43)]
    key = "appender.RAW_UNDECODABLE.dead_letter"
    assert [(n.event, n.alert.key) for n in mon.check()] == [("alert", key)]
    assert [w.split(",")[0] for w in written] == ["dbus_dead_letter", "dbus_alert"]
    assert "count=2i" in written[0] and "offset=43i" in written[0] and dlq.commits == 1
    dlq.pending = [_letter(offset=44)]
    clock.ms += 30_000
    assert mon.check() == []  # more letters: no repeat, the node follows
    node = json.loads(zk.nodes["/DBus/HeartBeat/demo/alerts/appender.RAW_UNDECODABLE.dead_letter"])
    assert (node["count"], node["offset"], node["notified_ms"]) == (3, 44, T0)
    points.append({"schema": "shop", "table": "orders", "_time": at(clock.ms + 600_000), "_value": 10.0})
    clock.ms += 600_000
    assert [(n.event, n.alert.key) for n in mon.check()] == [("recovery", key)]
    assert hook.sent == [
        ("alert", "appender.RAW_UNDECODABLE.dead_letter"),
        ("recovery", "appender.RAW_UNDECODABLE.dead_letter"),
    ]


def test_dead_letters_not_stored_are_read_again_and_the_heartbeats_still_checked(env, monkeypatch):
    make, zk, clock, points, written = env
    dlq = FakeDlq()
    mon = make(FakeChannel("webhook"), dlq=dlq)

    def refused(ep, pts):
        msg = "the time-series server at http://x does not answer /ping"
        raise hbm.EndpointError(msg)

    monkeypatch.setattr(hbm.influx, "write", refused)
    dlq.pending = [_letter()]
    clock.ms += 601_000
    assert [n.alert.key for n in mon.check()] == ["shop.orders.stale"]  # the heartbeat verdict goes on
    assert (dlq.rewinds, dlq.commits) == (1, 0)
    assert list(zk.nodes) == ["/DBus/HeartBeat/demo/alerts/shop.orders.stale"]


@pytest.mark.parametrize("failure", [hbm.KafkaError("broker down"), RuntimeError("a client bug")])
def test_a_failing_dead_letter_reader_never_stops_the_monitor(env, failure):
    make, zk, clock, points, _ = env
    dlq = FakeDlq()
    dlq.failure = failure
    mon = make(FakeChannel("webhook"), dlq=dlq)
    clock.ms += 601_000
    assert [n.alert.key for n in mon.check()] == ["shop.orders.stale"]
