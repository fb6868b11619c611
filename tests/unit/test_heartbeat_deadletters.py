import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dbuslib.deadletter import DeadLetter
from heartbeat.deadletters import (
    KIND,
    UNREADABLE,
    Letter,
    Rules,
    Tally,
    evaluate,
    fold,
    parse,
    points,
)
from heartbeat.incidents import Alert, Observation, Thresholds
from heartbeat.incidents import evaluate as evaluate_tables

T0 = 1_700_000_000_000
RULES = Rules(threshold=0, quiet_s=600, interval_s=30)
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=8), kids, max_size=5),
    max_leaves=20,
)
LETTER_KEYS = st.sampled_from(["code", "reason", "stage", "topic", "partition", "offset", "key", "error"])


def letter(
    stage="appender", code="RAW_UNDECODABLE", schema="shop", table="orders", offset=42, dlq_offset=0, at_ms=T0
) -> Letter:
    return Letter(stage, code, schema, table, "demo.shop", 0, offset, 0, dlq_offset, at_ms)


def _valid(x: Letter) -> None:
    for name in (x.stage, x.code):
        assert name and len(name) <= 64 and all(c.isascii() and (c.isalnum() or c in "_-") for c in name)
    assert (x.schema is None) == (x.table is None)
    assert isinstance(x.partition, int) and isinstance(x.offset, int) and isinstance(x.topic, str)


@given(st.one_of(st.none(), st.binary(max_size=300)), st.one_of(st.none(), st.binary(max_size=40)))
def test_any_bytes_become_a_letter_never_an_exception(value, key):
    _valid(parse(value, key, dlq_partition=1, dlq_offset=7, at_ms=T0))


@given(
    st.dictionaries(LETTER_KEYS | st.text(max_size=8), JSON, max_size=8), st.one_of(st.none(), st.binary())
)
def test_any_json_object_becomes_a_letter(doc, key):
    x = parse(json.dumps(doc).encode(), key)
    _valid(x)
    if x.code != UNREADABLE:
        assert doc.get("code", doc.get("reason")) not in (None, "")


@pytest.mark.parametrize(
    "value",
    [
        b"",
        b"garbage",
        b"[1, 2]",
        b'"text"',
        b"1" * 5000,
        b"[" * 100_000,
        b"\xff\xfe",
        None,
        b'{"code": null, "stage": "appender"}',
        b'{"code": 7}',
    ],
)
def test_unreadable_records_count_as_dlq_unreadable_at_their_own_coordinates(value):
    x = parse(value, b"shop.orders", dlq_partition=2, dlq_offset=9, at_ms=T0)
    assert (x.code, x.topic, x.partition, x.offset) == (UNREADABLE, "", -1, -1)
    assert (x.dlq_partition, x.dlq_offset, x.at_ms) == (2, 9, T0)
    assert x.stage == ("appender" if value and b"appender" in value else "unknown")
    assert (x.schema, x.table) == ("shop", "orders")


def test_the_contract_shape_reads_stage_code_table_and_coordinates():
    dl = DeadLetter(
        "RAW_UNDECODABLE", "shop.orders at f:1: bad", "demo.shop", 3, 42, b"shop.orders", b"x", "appender"
    )
    x = parse(dl.to_json().encode(), b"ignored", dlq_partition=0, dlq_offset=5, at_ms=T0)
    assert x == Letter("appender", "RAW_UNDECODABLE", "shop", "orders", "demo.shop", 3, 42, 0, 5, T0)


def test_the_dispatchers_reason_shape_counts_as_the_dispatcher():
    doc = {
        "reason": "RAW_BAD_RECORD",
        "error": "bad magic",
        "topic": "demo",
        "partition": 0,
        "offset": 7,
        "key": None,
        "value_base64": "Z2FyYmFnZQ==",
    }
    x = parse(json.dumps(doc).encode(), None)
    assert (x.stage, x.code, x.schema, x.topic, x.offset) == ("dispatcher", "RAW_BAD_RECORD", None, "demo", 7)


def test_names_that_could_escape_a_node_or_tag_are_rewritten():
    x = parse(json.dumps({"code": "../../x y", "stage": "a/b" * 50, "key": "no table"}).encode(), None)
    assert (x.code, x.stage, x.schema) == ("______x_y", ("a_b" * 50)[:64], None)


@given(
    st.lists(
        st.tuples(
            st.sampled_from(["appender", "dispatcher"]),
            st.sampled_from(["A", "B"]),
            st.sampled_from([None, "orders"]),
            st.integers(0, 10**6),
        ),
        max_size=40,
    )
)
def test_fold_counts_every_letter_once_and_keeps_the_newest(rows):
    letters = [
        Letter(s, c, None if t is None else "shop", t, "demo", 0, i, 0, i, at)
        for i, (s, c, t, at) in enumerate(rows)
    ]
    tallies = fold(letters)
    assert sum(t.count for t in tallies.values()) == len(letters)
    for (s, c, _, t), tally in tallies.items():
        mine = [x for x in letters if (x.stage, x.code, x.table) == (s, c, t)]
        assert tally.count == len(mine)
        assert tally.newest == max(mine, key=lambda x: (x.at_ms, x.dlq_offset))


def test_points_carry_tags_count_and_the_newest_coordinates():
    tallies = fold(
        [
            letter(dlq_offset=1),
            letter(offset=43, dlq_offset=2, at_ms=T0 + 5),
            letter("dispatcher", "RAW_BAD_RECORD", None, None),
        ]
    )
    lines = sorted(p.to_line_protocol() for p in points("demo", tallies, T0 + 1000))
    assert lines == [
        "dbus_dead_letter,code=RAW_BAD_RECORD,ds=demo,stage=dispatcher count=1i,dlq_offset=0i,"
        'dlq_partition=0i,newest_ms=1700000000000i,offset=42i,partition=0i,topic="demo.shop" '
        "1700000001000000000",
        "dbus_dead_letter,code=RAW_UNDECODABLE,ds=demo,schema=shop,stage=appender,table=orders count=2i,"
        'dlq_offset=2i,dlq_partition=0i,newest_ms=1700000000005i,offset=43i,partition=0i,topic="demo.shop" '
        "1700000001000000000",
    ]


# ------------------------------------------------------------------------------------------ incidents


def _run(checks, rules=RULES):
    """checks: [(seconds since the previous check, [letters])] -> (open alerts, notes per check)."""
    alerts: dict[str, Alert] = {}
    now, history = T0, []
    for dt, letters in checks:
        now += dt * 1000
        updated, notes = evaluate("demo", alerts, fold(letters), now, rules, "demo.dlq")
        for a in updated:
            alerts[a.key] = a
        for n in notes:
            if n.event == "alert":
                alerts[n.alert.key] = n.alert
            else:
                del alerts[n.alert.key]
        history.append(notes)
    return alerts, history


def test_one_incident_per_stage_and_code_with_the_newest_coordinates_then_one_recovery():
    a, b = letter(offset=1, dlq_offset=1), letter(table="items", offset=2, dlq_offset=2, at_ms=T0 + 1)
    other = letter("dispatcher", "RAW_BAD_RECORD", None, None, offset=9)
    alerts, history = _run([(30, [a, b, other]), (30, [a]), (30, []), (565, []), (30, [])])
    opened = history[0]
    assert [(n.event, n.alert.key) for n in opened] == [
        ("alert", f"appender.RAW_UNDECODABLE.{KIND}"),
        ("alert", f"dispatcher.RAW_BAD_RECORD.{KIND}"),
    ]
    first = opened[0].alert
    assert (first.count, first.topic, first.partition, first.offset, first.origin) == (
        2,
        "demo.shop",
        0,
        2,
        "shop.items",
    )
    assert "2 dead letter(s) RAW_UNDECODABLE from the appender" in first.message
    assert "demo.shop partition 0 offset 2 (shop.items), in demo.dlq partition 0 offset 2" in first.message
    assert history[1] == [] and history[2] == []  # more letters and a short quiet: no repeat
    # 625 s after its last letter the dispatcher's clears; the appender's (595 s) at the next check
    assert [(n.event, n.alert.key) for n in history[3]] == [("recovery", f"dispatcher.RAW_BAD_RECORD.{KIND}")]
    assert [(n.event, n.alert.key, n.alert.count) for n in history[4]] == [
        ("recovery", f"appender.RAW_UNDECODABLE.{KIND}", 3)
    ]
    assert alerts == {}


def test_a_threshold_above_the_count_opens_nothing():
    _, history = _run([(30, [letter(), letter(dlq_offset=1)])], Rules(2, 600, 30))
    assert history == [[]]
    _, history = _run([(30, [letter(dlq_offset=i) for i in range(3)])], Rules(2, 600, 30))
    assert [n.alert.count for n in history[0]] == [3]


def test_table_evaluation_leaves_dead_letter_incidents_alone():
    dl = Alert("demo", "appender", "X", KIND, T0, None, None, None, "m", count=1, last_ms=T0)
    _, notes = evaluate_tables(
        "demo", {dl.key: dl}, [Observation("shop", "orders", T0, 1.0)], T0 + 1000, T0, Thresholds(600, 300)
    )
    assert notes == []


def test_a_dead_letter_alert_survives_its_zookeeper_json():
    dl = Alert(
        "demo",
        "appender",
        "X",
        KIND,
        T0,
        None,
        None,
        None,
        "m",
        count=3,
        last_ms=T0 + 1,
        topic="demo.shop",
        partition=0,
        offset=42,
        origin="shop.orders",
    )
    assert Alert.from_dict(json.loads(json.dumps(dl.to_dict()))) == dl
    assert Tally(1, letter()).count == 1


RECORD = st.one_of(
    st.none(),
    st.binary(max_size=200),
    st.dictionaries(LETTER_KEYS, JSON, max_size=8).map(lambda d: json.dumps(d).encode()),
)


@given(st.lists(st.tuples(RECORD, st.one_of(st.none(), st.binary(max_size=30))), max_size=30))
def test_any_dlq_records_fold_into_points_and_incidents_without_raising(records):
    letters = [parse(v, k, dlq_partition=0, dlq_offset=i, at_ms=T0 + i) for i, (v, k) in enumerate(records)]
    tallies = fold(letters)
    assert sum(t.count for t in tallies.values()) == len(records)
    assert len(points("demo", tallies, T0)) == len(tallies)
    _, notes = evaluate("demo", {}, tallies, T0, RULES, "demo.dlq")
    assert len(notes) == len({(s, c) for s, c, _, _ in tallies})
