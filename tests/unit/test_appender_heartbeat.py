"""Heartbeats in the appender: packet parsing, conversion to data_increment_heartbeat, counting, dead letters.

Heartbeat records (tests/unit/appender_cases.py) are made from a captured one (``HEARTBEAT_ONE`` of
tests/unit/test_dispatcher_routing.py, heartbeat table ``dbus_unit_dispatcher.db_heartbeat_monitor``)
with other rows in its rows event; data records are the captured ``dbus_unit_rowdecode.orders`` ones of
tests/unit/test_rowdecode.py.
"""

from __future__ import annotations

import json

import pytest
from appender_cases import BASE, DATA, HB_SCHEMA, HB_TABLE, NOW, beat_row, heartbeat, packet
from records import CREATE_TABLE, HEARTBEAT_DELETE, INSERT, UPDATE

from appender.convert import ConvertSettings
from appender.heartbeat import UNKNOWN_TABLE, Beat, bad_point
from appender.process import InRecord, Outputs, PartitionProcessor
from binlog.heartbeat import (
    BAD_HEARTBEAT,
    BadHeartbeat,
    HeartbeatTable,
    Packet,
    heartbeat_of,
    owner,
    parse_packet,
)
from dbuslib.deadletter import DeadLetter
from dbuslib.metastore import Reason, Version
from ums import from_json, ums_id

TOPIC = f"demo.{DATA}"


def processor(stored=None, known=None):
    stored = stored if stored is not None else {}
    return PartitionProcessor(
        settings=ConvertSettings("demo"),
        outputs=Outputs(result_topic=lambda s, t: f"demo.{s}.result", dead_letter_topic="demo.dlq"),
        history=lambda s, t: list(stored.get((s, t), [])),
        persist=lambda s, t, v: stored.setdefault((s, t), []).append(v) or v,
        heartbeat=HeartbeatTable(HB_SCHEMA, HB_TABLE, lambda schema: f"demo.{schema}"),
        known_table=known,
        clock=lambda: NOW,
    ), stored


def run(p, *values, topic=TOPIC):
    return [o for i, v in enumerate(values) for o in p.process(InRecord(topic, 0, i, b"k", v))]


def letters(out):
    return [DeadLetter.from_json(o.value) for o in out if o.topic == "demo.dlq"]


# ---------------------------------------------------------------- packets and rows (pure)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            '{"node":"/n","time":1795356395000,"type":"checkpoint","txTime":1795356394000}',
            Packet(1795356395000, 1795356394000, "checkpoint", "/n"),
        ),
        ('{"time":5}', Packet(5, 5)),  # txTime defaults to time
        (b'{"time":5,"txTime":7}', Packet(5, 7)),
    ],
)
def test_packets_parse(text, expected):
    assert parse_packet(text) == expected


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("garbage", "not JSON"),
        ("", "not JSON"),
        ("[1, 2]", "JSON list"),
        ('{"txTime": 5}', "no 'time'"),
        ('{"time": -1}', "'time' is not epoch"),
        ('{"time": "5"}', "'time' is not epoch"),
        ('{"time": true}', "'time' is not epoch"),
        ('{"time": 5, "txTime": 1.5}', "'txTime' is not epoch"),
        (None, "NoneType"),
    ],
)
def test_garbage_packets_are_bad_heartbeats(text, fragment):
    with pytest.raises(BadHeartbeat, match=fragment) as e:
        parse_packet(text)
    assert e.value.code == BAD_HEARTBEAT


@pytest.mark.parametrize(
    "image",
    [
        {"DS_NAME": "demo", "SCHEMA_NAME": "", "TABLE_NAME": "orders", "PACKET": '{"time": 1}'},
        {"DS_NAME": "demo", "SCHEMA_NAME": "shop", "TABLE_NAME": None, "PACKET": '{"time": 1}'},
        {"DS_NAME": "", "SCHEMA_NAME": "shop", "TABLE_NAME": "orders", "PACKET": '{"time": 1}'},
        {"DS_NAME": "demo", "SCHEMA_NAME": "shop", "TABLE_NAME": " ", "PACKET": '{"time": 1}'},
    ],
)
def test_rows_with_empty_names_are_bad_heartbeats(image):
    with pytest.raises(BadHeartbeat) as e:
        heartbeat_of(image)
    assert e.value.code == BAD_HEARTBEAT


@pytest.mark.parametrize(
    ("ds", "schema", "mine"),
    [
        ("demo", "shop", True),
        ("other", "shop", False),
        ("demo", "crm", False),
        (None, "shop", True),
        ("demo", "", True),  # empty names are ours to dead-letter
    ],
)
def test_a_row_belongs_to_this_source_and_this_topic(ds, schema, mine):
    hb = HeartbeatTable(HB_SCHEMA, HB_TABLE, lambda s: f"demo.{s}")
    assert owner({"DS_NAME": ds, "SCHEMA_NAME": schema}, "demo", "demo.shop", hb) is mine


def test_a_beat_is_a_dbus_heartbeat_point_at_the_packet_time():
    beat = Beat("demo", "shop", "orders", 812.5, 17, 1795356395000, 1795356394000)
    assert beat.to_point().to_line_protocol() == (
        "dbus_heartbeat,ds=demo,schema=shop,table=orders latency_ms=812.5,packet_ms=1795356395000i,rows=17i,"
        "tx_ms=1795356394000i 1795356395000"
    )
    assert bad_point("demo", BAD_HEARTBEAT, 2, 5).to_line_protocol() == (
        "dbus_heartbeat_bad,ds=demo,reason=APPENDER_BAD_HEARTBEAT count=2i 5"
    )


# ---------------------------------------------------------------- the processor


def test_a_heartbeat_follows_its_tables_data_on_the_result_topic():
    p, stored = processor()
    out = run(p, INSERT, UPDATE, heartbeat(beat_row(time_ms=NOW - 1500, tx_ms=NOW - 2000)))
    assert {o.topic for o in out} == {f"demo.{DATA}.result"}
    assert {o.key for o in out} == {f"{DATA}.orders".encode()}  # one key: one partition, in order
    hb = from_json(out[-1].value)
    assert hb.protocol.value == "data_increment_heartbeat"
    assert str(hb.schema.namespace) == f"mysql.demo.{DATA}.orders.0.0.0"
    assert [f.name for f in hb.schema.fields] == ["ums_id_", "ums_ts_"]
    header = BASE.header
    assert hb.payload == ((ums_id(header.file, 25208496), "2026-11-22 14:55:30.000"),)
    assert (
        dict(out[-1].headers)["ums_key"]
        == (
            f"data_increment_heartbeat.mysql.demo.{DATA}.orders.0.0.0.{NOW - 1500}|{NOW - 2000}|ok|demo"
            ".wh_placeholder"
        ).encode()
    )
    assert p.beats == [Beat("demo", DATA, "orders", 1500.0, 3, NOW - 1500, NOW - 2000)]  # 2 inserts, 1 update
    assert (HB_SCHEMA, HB_TABLE) not in stored  # the heartbeat table gets no versions


def test_rows_count_from_the_previous_heartbeat_and_per_table():
    p, _ = processor()
    run(
        p,
        INSERT,
        heartbeat(beat_row()),
        heartbeat(beat_row(), beat_row("customers")),
        UPDATE,
        heartbeat(beat_row()),
    )
    assert [(b.table, b.rows) for b in p.beats] == [
        ("orders", 2),
        ("orders", 0),
        ("customers", 0),
        ("orders", 1),
    ]


def test_the_counter_is_shared_through_counts():
    counts = {}
    first, _ = processor()
    first.counts = counts
    run(first, INSERT)
    second, _ = processor()
    second.counts = counts  # the next task of the same worker
    run(second, heartbeat(beat_row()))
    assert [b.rows for b in second.beats] == [2] and counts == {}


def test_the_namespace_is_the_version_valid_at_the_heartbeat():
    at = int(ums_id(BASE.header.file, 25208496))
    versions = [
        Version(0, 1, (), Reason.FIRST),
        Version(1, at - 10, (), Reason.COLUMNS),
        Version(2, at + 10, (), Reason.COLUMNS),
    ]
    p, _ = processor({(DATA, "orders"): versions})
    out = run(p, heartbeat(beat_row()))
    assert str(from_json(out[0].value).schema.namespace).endswith(".orders.1.0.0")


def test_rows_rendered_by_the_jvm_do_not_matter_for_heartbeats():
    p, _ = processor()
    out = list(p.process(InRecord(TOPIC, 0, 0, b"k", heartbeat(beat_row())), rendered=b'1,"demo"'))
    assert [from_json(o.value).protocol.value for o in out] == ["data_increment_heartbeat"]


def test_a_garbage_packet_is_dead_lettered_and_the_stream_goes_on():
    p, _ = processor()
    out = run(p, heartbeat(("demo", DATA, "orders", "not json {")), INSERT, heartbeat(beat_row()))
    [letter] = letters(out)
    assert letter.code == BAD_HEARTBEAT and letter.stage == "appender" and letter.offset == 0
    assert "PACKET is not JSON" in letter.error and "row 0" in letter.error
    assert letter.value is not None  # a heartbeat holds no column values: nothing to withhold
    assert [o.topic for o in out][1:] == [f"demo.{DATA}.result"] * 2
    assert p.bad == {BAD_HEARTBEAT: 1} and [b.rows for b in p.beats] == [2]


def test_a_table_never_seen_and_unknown_at_the_source_is_dead_lettered():
    asked = []
    p, _ = processor(known=lambda s, t: asked.append((s, t)) or t == "quiet")
    out = run(p, heartbeat(beat_row("nosuch"), beat_row("quiet")))
    assert [d.code for d in letters(out)] == [UNKNOWN_TABLE]
    assert "nosuch" in letters(out)[0].error
    assert str(from_json(out[1].value).schema.namespace).endswith(".quiet.0.0.0")  # quiet: version 0
    assert asked == [(DATA, "nosuch"), (DATA, "quiet")] and p.bad == {UNKNOWN_TABLE: 1}


def test_a_table_with_versions_is_known_without_asking():
    p, _ = processor({(DATA, "orders"): [Version(0, 1, (), Reason.FIRST)]}, known=lambda s, t: False)
    assert not letters(run(p, heartbeat(beat_row())))


def test_a_multi_row_insert_keeps_the_rows_of_this_topic_and_this_source():
    p, _ = processor()
    out = run(
        p,
        heartbeat(
            beat_row("a"),
            ("demo", "crm", "leads", packet()),
            ("other", DATA, "b", packet()),
            ("demo", DATA, "", packet()),
            beat_row("c", time_ms=NOW - 10),
        ),
    )
    assert [(o.topic, json.loads(o.value).get("code")) for o in out] == [
        (f"demo.{DATA}.result", None),
        ("demo.dlq", BAD_HEARTBEAT),
        (f"demo.{DATA}.result", None),
    ]
    assert "TABLE_NAME is empty" in letters(out)[0].error
    assert [(b.table, b.latency_ms) for b in p.beats] == [("a", 1500.0), ("c", 10.0)]


def test_purge_updates_and_ddl_of_the_heartbeat_table_give_nothing():
    p, stored = processor()
    assert run(p, HEARTBEAT_DELETE, CREATE_TABLE) == [] and stored == {} and p.beats == []


def test_without_a_heartbeat_table_its_rows_are_ordinary_data():
    p, _ = processor()
    p.heartbeat = None
    out = run(p, heartbeat(beat_row()))
    assert from_json(out[0].value).protocol.value == "data_increment_data"


def test_masking_rules_of_the_monitored_table_leave_heartbeats_alone():
    from dbuslib.config import MaskRule
    from ums.masking import compile_rules

    p, _ = processor()
    p.mask_plan = compile_rules({f"{DATA}.orders": {"note": MaskRule(type="sha256", salt="s")}})
    out = run(p, heartbeat(beat_row()))
    assert from_json(out[0].value).protocol.value == "data_increment_heartbeat"


def test_avro_output_encodes_heartbeats_with_their_schema_header():
    from appender.output import SCHEMA_HEADER, MessageEncoder, SchemaCache, decode

    class Store:
        rows: dict = {}

        def add_avro_schema(self, namespace, fp, text):
            self.rows[fp] = type("S", (), {"schema_json": text})()

        def avro_schema(self, fp):
            return self.rows.get(fp)

    store = Store()
    p, _ = processor()
    p.encoder = MessageEncoder("avro", store)
    [rec] = run(p, heartbeat(beat_row()))
    assert SCHEMA_HEADER in dict(rec.headers) and dict(rec.headers)["ums_key"].startswith(b"data_increment_h")
    assert decode(rec.value, rec.headers, SchemaCache(store)).protocol.value == "data_increment_heartbeat"
