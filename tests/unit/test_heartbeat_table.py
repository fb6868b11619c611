import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from binlog import heartbeat as hbt
from binlog.rawevent import RawHeader
from dbuslib.config import Capture, HeartbeatSettings, Source
from heartbeat.writer import MonitoredTables, heartbeat_rows, meta_store_database, purge_sql

NAMES = st.text(
    alphabet=st.characters(whitelist_categories=("Ll", "Lu", "Nd"), whitelist_characters="_-$"),
    min_size=1,
    max_size=40,
)


def test_packet_is_the_original_compact_json_in_key_order():
    text = hbt.build_packet("demo", "shop", "orders", 1714564800123, 1714564800100)
    assert text == (
        '{"node":"/DBus/HeartBeat/Monitor/demo/shop/orders/0","time":1714564800123,'
        '"type":"checkpoint","txTime":1714564800100}'
    )


@given(ds=NAMES, schema=NAMES, table=NAMES, time_ms=st.integers(0, 2**53), tx_ms=st.integers(0, 2**53))
def test_packet_parses_back(ds, schema, table, time_ms, tx_ms):
    p = hbt.parse_packet(hbt.build_packet(ds, schema, table, time_ms, tx_ms))
    assert p == hbt.Packet(time_ms, tx_ms, "checkpoint", hbt.node(ds, schema, table))


def test_packet_over_256_characters_is_refused():
    with pytest.raises(ValueError, match="PACKET holds 256"):
        hbt.build_packet("d" * 64, "s" * 64, "t" * 64, 1, 1)


GOOD = {"node": "/DBus/HeartBeat/Monitor/demo/shop/orders/0", "time": 5, "type": "checkpoint", "txTime": 4}


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ("not json", "not JSON"),
        ("[1, 2]", "not an object"),
        (json.dumps({k: v for k, v in GOOD.items() if k != "time"}), "'time'"),
        (json.dumps({**GOOD, "time": "5"}), "'time'"),
        (json.dumps({**GOOD, "time": True}), "'time'"),
        (json.dumps({**GOOD, "time": -1}), "'time'"),
        (json.dumps({**GOOD, "txTime": 4.5}), "'txTime'"),
        (json.dumps({**GOOD, "txTime": None}), "'txTime'"),
        (b"\xff\xfe", "not JSON"),
        (None, "NoneType"),
        ("1" * 5000, "not JSON"),  # past Python's int digit limit: a plain ValueError, no .msg
        ("[" * 100_000, "not JSON"),  # RecursionError
    ],
)
def test_garbage_packet_names_the_field(text, field):
    with pytest.raises(hbt.BadHeartbeat, match=field) as e:
        hbt.parse_packet(text)
    assert e.value.code == "APPENDER_BAD_HEARTBEAT"
    assert isinstance(e.value, ValueError)


@pytest.mark.parametrize(
    ("doc", "packet"),
    [
        (GOOD, hbt.Packet(5, 4, "checkpoint", GOOD["node"])),
        ({"time": 5}, hbt.Packet(5, 5)),  # the lenient rule: node and type optional, txTime = time
        ({**GOOD, "type": "heartbeat"}, hbt.Packet(5, 4, "heartbeat", GOOD["node"])),
        ({**GOOD, "node": 7, "type": None}, hbt.Packet(5, 4)),  # not strings: as if absent
        ({**GOOD, "node": "/Other/path", "extra": 1}, hbt.Packet(5, 4, "checkpoint", "/Other/path")),
    ],
)
def test_packet_node_and_type_are_optional(doc, packet):
    assert hbt.parse_packet(json.dumps(doc)) == packet


def test_ddl_has_the_original_columns_and_configured_names():
    ddl = hbt.create_table_sql(HeartbeatSettings(schema="hb", table="beats"))
    assert ddl.startswith("CREATE TABLE IF NOT EXISTS `hb`.`beats` (")
    for column in (
        "`ID` bigint NOT NULL AUTO_INCREMENT",
        "`DS_NAME` varchar(64)",
        "`SCHEMA_NAME` varchar(64)",
        "`TABLE_NAME` varchar(64)",
        "`PACKET` varchar(256)",
        "`CREATE_TIME` datetime",
        "`UPDATE_TIME` datetime",
        "PRIMARY KEY (`ID`)",
    ):
        assert column in ddl
    assert hbt.create_database_sql(HeartbeatSettings(schema="a`b")) == "CREATE DATABASE IF NOT EXISTS `a``b`"


def test_insert_has_one_values_group_per_row():
    sql = hbt.insert_sql(HeartbeatSettings(), 3)
    assert sql.startswith(
        "INSERT INTO `dbus`.`db_heartbeat_monitor` (DS_NAME, SCHEMA_NAME, TABLE_NAME, PACKET,"
    )
    assert sql.count("(%s, %s, %s, %s, NOW(), NOW())") == 3
    with pytest.raises(ValueError):
        hbt.insert_sql(HeartbeatSettings(), 0)


def test_purge_keeps_the_newest_10000():
    assert purge_sql(HeartbeatSettings()) == "DELETE FROM `dbus`.`db_heartbeat_monitor` WHERE ID < %s - 10000"


def test_rows_carry_source_table_and_packet():
    rows = heartbeat_rows("demo", [("shop", "orders"), ("crm", "users")], 2000, 1000)
    assert [r[:3] for r in rows] == [("demo", "shop", "orders"), ("demo", "crm", "users")]
    assert hbt.parse_packet(rows[1][3]).node == "/DBus/HeartBeat/Monitor/demo/crm/users/0"


def _source(include, exclude=(), **hb):
    return Source(
        mysql={"host": "h", "user": "u", "password": "p", "server_id": 1},
        capture=Capture(include=include, exclude=exclude),
        heartbeat=HeartbeatSettings(**hb),
    )


@pytest.mark.parametrize(
    ("include", "exclude", "meta_db", "tables", "monitored"),
    [
        (
            ("shop.*", "dbus.db_heartbeat_monitor"),
            ("shop.tmp_*",),
            "dbus",
            [("shop", "orders"), ("shop", "tmp_x"), ("dbus", "db_heartbeat_monitor"), ("crm", "users")],
            [("shop", "orders")],
        ),
        (
            ("*.*",),
            (),
            "meta",
            [
                ("meta", "t_table_version"),
                ("mysql", "user"),
                ("sys", "x"),
                ("a", "b"),
                ("dbus", "db_heartbeat_monitor"),
                ("dbus", "other"),
            ],
            [("a", "b"), ("dbus", "other")],
        ),
        (("*.*",), ("a.*",), None, [("a", "b"), ("c", "d"), ("c", "d")], [("c", "d")]),
    ],
)
def test_monitored_tables_are_captured_ones_less_heartbeat_and_meta_store(
    include, exclude, meta_db, tables, monitored
):
    assert MonitoredTables(_source(include, exclude), meta_db).select(tables) == monitored


def test_configured_heartbeat_table_is_not_monitored():
    m = MonitoredTables(_source(("x.*",), schema="x", table="hb"))
    assert m.select([("x", "hb"), ("x", "t")]) == [("x", "t")]


@pytest.mark.parametrize(
    ("url", "db"),
    [
        ("mysql+pymysql://dbus:dbus@127.0.0.1:13306/dbus", "dbus"),
        ("sqlite:///tmp/meta.db", "tmp/meta.db"),
        ("mysql+pymysql://u:p@h:1", None),
    ],
)
def test_meta_store_database_from_url(url, db):
    assert meta_store_database(url) == db


HB = hbt.HeartbeatTable("dbus", "db_heartbeat_monitor", lambda schema: f"demo.{schema}")


@pytest.mark.parametrize(
    ("kind", "schema", "table", "event_type", "holds", "inserted"),
    [
        ("rows", "dbus", "db_heartbeat_monitor", 30, True, True),  # WRITE_ROWS_EVENT_V2 (MySQL)
        ("rows", "dbus", "db_heartbeat_monitor", 23, True, True),  # WRITE_ROWS_EVENT_V1 (MariaDB)
        ("rows", "dbus", "db_heartbeat_monitor", 25, True, False),  # the writer's purge (a delete)
        ("rows", "dbus", "db_heartbeat_monitor", 31, True, False),  # an update
        ("ddl", "dbus", "db_heartbeat_monitor", None, True, False),
        ("rows", "dbus", "other", 30, False, False),
        ("rows", "shop", "db_heartbeat_monitor", 30, False, False),
    ],
)
def test_a_heartbeat_insert_is_an_insert_into_the_heartbeat_table(
    kind, schema, table, event_type, holds, inserted
):
    header = RawHeader(kind=kind, schema=schema, table=table, event_type=event_type)
    assert (HB.holds(header), HB.inserted(header)) == (holds, inserted)
