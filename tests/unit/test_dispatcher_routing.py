"""dispatcher.routing: which topic(s) a first-level record goes to (no server needed).

The heartbeat records below are ``rawevent.encode`` of what the extractor wrote (MariaDB 10.11,
binlog_row_metadata=FULL, checksums on) for a heartbeat table in database ``dbus_unit_dispatcher``::

    CREATE TABLE db_heartbeat_monitor (ID bigint auto_increment PRIMARY KEY, DS_NAME varchar(64),
      SCHEMA_NAME varchar(64), TABLE_NAME varchar(64), PACKET varchar(256), CREATE_TIME datetime,
      UPDATE_TIME datetime);
    INSERT ... VALUES ('demo','shop','orders','{"node":...}',...);                     -- HEARTBEAT_ONE
    INSERT ... VALUES ('demo','shop','customers',...), ('demo','crm','leads',...),
                      ('demo','shop','orders',...);                                      -- HEARTBEAT_THREE
    DELETE FROM db_heartbeat_monitor WHERE ID < 2;                                       -- HEARTBEAT_DELETE
"""

from __future__ import annotations

import pickle
from dataclasses import replace

import pytest
from records import CREATE_TABLE, HB_DB, HEARTBEAT_DELETE, HEARTBEAT_ONE, HEARTBEAT_THREE, rows_record

from binlog import rawevent
from binlog.rawevent import RawEvent
from dbuslib.config import Source
from dbuslib.deadletter import TABLE_MASKED, UNATTRIBUTED, UNVERIFIED
from dispatcher import job
from dispatcher.routing import (
    BAD_RECORD,
    BAD_TOPIC,
    CHUNKED_HEARTBEAT,
    HEARTBEAT_WITHOUT_SCHEMA,
    UNDECODABLE_HEARTBEAT,
    UNEXPECTED,
    Route,
    Router,
    route,
)

ROUTER = Router(
    ds="demo",
    schema_template="{ds}.{schema}",
    dead_letter="demo.dlq",
    heartbeat_schema=HB_DB,
    heartbeat_table="db_heartbeat_monitor",
)
DLQ = "demo.dlq"


def ddl_record(schema: str = "shop") -> bytes:
    h = {
        "kind": "ddl",
        "source": "demo",
        "file": "mariadb-bin.000001",
        "pos": 4,
        "next_pos": 90,
        "ts": 1,
        "schema": schema,
        "table": "",
        "sql": "CREATE TABLE t (id int)",
        "ddl": "CREATE",
    }
    return rawevent.encode(RawEvent(header=h))


def topics(routes: tuple[Route, ...]) -> list[str]:
    return [r.topic for r in routes]


def codes(routes: tuple[Route, ...]) -> list[str | None]:
    return [r.code for r in routes]


@pytest.mark.parametrize(
    ("value", "topic"),
    [
        (rows_record("shop", "orders"), "demo.shop"),
        (rows_record("crm", "leads"), "demo.crm"),
        (ddl_record("shop"), "demo.shop"),
        (rows_record(HB_DB, "other_table"), f"demo.{HB_DB}"),
        (HEARTBEAT_DELETE, f"demo.{HB_DB}"),  # the heartbeat's purge is no heartbeat
        (CREATE_TABLE, f"demo.{HB_DB}"),  # nor is DDL of the heartbeat table
        (rows_record("shöp", "orders"), "demo.sh_x00f6p"),  # escaped: dbuslib.topics.escape
        (ddl_record("shop$prod"), "demo.shop_x0024prod"),
        (rows_record("é" * 40), "demo." + "_x00e9" * 40),
    ],
)
def test_ordinary_records_go_to_their_schema_topic(value, topic):
    assert route(ROUTER, value) == (Route(topic),)


def test_the_schema_template_is_honoured():
    router = replace(ROUTER, schema_template="cdc-{ds}-{schema}-{schema}")
    assert topics(route(router, rows_record("shop"))) == ["cdc-demo-shop-shop"]
    assert router.schema_topic_parts() == ["cdc-demo-", "-", ""]


def test_a_heartbeat_goes_to_the_topic_of_the_schema_it_monitors():
    assert route(ROUTER, HEARTBEAT_ONE) == (Route("demo.shop"),)


def test_a_multi_row_heartbeat_fans_out_to_each_distinct_schema_in_row_order():
    assert route(ROUTER, HEARTBEAT_THREE) == (Route("demo.shop"), Route("demo.crm"))


def test_heartbeats_of_another_heartbeat_schema_are_ordinary_records():
    router = replace(ROUTER, heartbeat_schema="dbus")
    assert route(router, HEARTBEAT_THREE) == (Route(f"demo.{HB_DB}"),)


def test_every_chunk_of_an_event_gets_the_route_of_its_header():
    event = replace(rawevent.decode(rows_record()), body=b"x" * 5000)
    chunks = rawevent.split(event, 1000)
    assert len(chunks) > 2
    assert {route(ROUTER, rawevent.encode(c)) for c in chunks} == {(Route("demo.shop"),)}


def test_a_chunked_heartbeat_is_dead_lettered_whole():
    event = rawevent.decode(HEARTBEAT_THREE)
    chunks = rawevent.split(event, 400)
    assert len(chunks) > 1
    for c in chunks:
        (r,) = route(ROUTER, rawevent.encode(c))
        assert (r.topic, r.code) == (DLQ, CHUNKED_HEARTBEAT)


def _flip_body_byte(value: bytes) -> bytes:
    return value[:-30] + bytes([value[-30] ^ 0xFF]) + value[-29:]


@pytest.mark.parametrize(
    ("value", "code", "fragment"),
    [
        (None, BAD_RECORD, "null value"),
        (b"", BAD_RECORD, "shorter than"),
        (b"garbage that is no raw event", BAD_RECORD, "bad magic"),
        (b"DBR\x02\x00\x00\x00\x02{}", BAD_RECORD, "version 2"),
        (b"DBR\x01\x00\x00\x01\x00{}", BAD_RECORD, "truncated"),
        (b"DBR\x01\x00\x00\x00\x05{nope", BAD_RECORD, "not JSON"),
        (rawevent.encode(RawEvent(header={"kind": "rows", "schema": "shop"})), BAD_RECORD, "lacks"),
        (rawevent.encode(RawEvent(header={"kind": "insert", "schema": "shop"})), BAD_RECORD, "kind"),
        (ddl_record(""), BAD_TOPIC, "empty schema"),
        (rows_record("s" * 250), BAD_TOPIC, "more than 249"),
        (rows_record("é" * 41), BAD_TOPIC, "251 characters, more than 249"),
        (_flip_body_byte(HEARTBEAT_ONE), UNDECODABLE_HEARTBEAT, "db_heartbeat_monitor"),
        (rows_record(HB_DB, "db_heartbeat_monitor"), UNDECODABLE_HEARTBEAT, "db_heartbeat_monitor"),
    ],
)
def test_malformed_records_go_to_the_dead_letter_topic_with_a_code(value, code, fragment):
    (r,) = route(ROUTER, value)
    assert (r.topic, r.code, r.withheld) == (DLQ, code, "")
    assert fragment in r.error


def test_a_heartbeat_without_schema_name_is_dead_lettered(monkeypatch):
    from binlog import rows as rowdecode

    real = rowdecode.decode_rows

    def without_schema(event):
        d = real(event)
        return replace(d, rows=tuple(replace(r, after={**r.after, "SCHEMA_NAME": None}) for r in d.rows))

    monkeypatch.setattr(rowdecode, "decode_rows", without_schema)
    assert codes(route(ROUTER, HEARTBEAT_ONE)) == [HEARTBEAT_WITHOUT_SCHEMA]


def test_a_heartbeat_naming_a_schema_that_makes_no_topic_is_dead_lettered():
    router = replace(ROUTER, schema_template="{ds}.{schema}" + "x" * 245)
    assert codes(route(router, HEARTBEAT_THREE)) == [BAD_TOPIC, BAD_TOPIC]


def test_router_comes_from_the_source_config_and_pickles():
    src = Source.model_validate({"mysql": {"host": "h", "user": "u", "password": "p", "server_id": 1}})
    router = Router.for_source("demo", src)
    assert router == Router("demo", "{ds}.{schema}", "demo.dlq", "dbus", "db_heartbeat_monitor")
    assert pickle.loads(pickle.dumps(router)) == router


def test_router_knows_the_masked_tables_of_the_source():
    src = Source.model_validate(
        {
            "mysql": {"host": "h", "user": "u", "password": "p", "server_id": 1},
            "masking": {"shop.customers": {"phone": {"type": "default"}}, "crm.*": {}},
        }
    )
    router = Router.for_source("demo", src)
    assert (router.mask_tables, router.masks_any) == (("shop.customers",), True)
    assert router.table_masked("shop", "customers") and not router.table_masked("crm", "leads")


MASKED = replace(ROUTER, mask_tables=("shop.customers", "shöp*.*"), masks_any=True)


@pytest.mark.parametrize(
    ("value", "key", "withheld"),
    [
        (b"garbage", b"shop.customers", UNVERIFIED),  # did not decode: whatever table the key names
        (b"garbage", b"shop.orders", UNVERIFIED),  # an unmasked one too: the key may be wrong
        (b"garbage", None, UNATTRIBUTED),  # no key: which table it is cannot be told
        (b"garbage", b"\xff\xfe", UNATTRIBUTED),  # nor from a key that is not UTF-8
        (b"garbage", b"nodot", UNATTRIBUTED),
        (None, b"shop.customers", UNVERIFIED),
        (b"DBR\x01\x00\x00\x01\x00{}", "shöp.t.dot", UNVERIFIED),  # truncated
        (rows_record("shop", "customers", tm_len="x"), None, UNVERIFIED),  # a header that parses names it
        (ddl_record("s" * 250), b"s.t", ""),  # decoded: a bad topic of an unmasked table
        (rows_record("shöp" * 60, "t"), None, TABLE_MASKED),  # decoded: the header's table (a bad topic)
    ],
)
def test_dead_letters_withhold_the_value_where_masked_columns_could_leak(value, key, withheld):
    (r,) = route(MASKED, value, key)
    assert (r.topic, r.withheld) == (DLQ, withheld)
    assert (route(ROUTER, value, key)[0].withheld) == ""  # a source that masks nothing withholds nothing


def test_an_unexpected_error_becomes_a_dead_letter(monkeypatch):
    from dispatcher import routing

    def broken(*_):
        msg = "boom"
        raise IndexError(msg)

    monkeypatch.setattr(routing, "is_heartbeat", broken)
    (r,) = route(MASKED, rows_record("shop", "customers"), b"shop.customers")
    assert (r.topic, r.code, r.withheld) == (DLQ, UNEXPECTED, UNVERIFIED)
    assert "IndexError" in r.error and "boom" not in r.error  # a message might quote a masked value
    (r,) = route(ROUTER, rows_record("shop", "customers"), b"shop.customers")
    assert (r.code, r.withheld) == (UNEXPECTED, "") and "IndexError" in r.error and "boom" in r.error


def test_the_udf_body_returns_routes_with_the_key_text_of_dead_letters():
    made = []
    out = job._python_routes(MASKED, made.append, None, None, b"shop.customers")
    assert out == [(DLQ, BAD_RECORD, out[0][2], UNVERIFIED, "shop.customers")]
    assert job._python_routes(MASKED, made.append, "demo.shop", None, b"shop.orders") == [
        ("demo.shop", None, None, None, None)
    ]
    assert made == [DLQ, "demo.shop"]


class _Refused(Exception):
    errno = 17
    retriable = False


class _Down(Exception):
    errno = 7
    retriable = True


def _failing(topic_error: type[Exception]):
    def ensure(topic: str) -> None:
        if topic != DLQ:
            msg = f"could not create {topic}"
            raise RuntimeError(msg) from topic_error("InvalidTopicException")

    return ensure


def test_a_topic_kafka_refuses_to_create_turns_the_record_into_a_dead_letter():
    value = rows_record("shop", "customers")
    (r,) = job._python_routes(MASKED, _failing(_Refused), None, value, b"shop.customers")
    assert (r[0], r[1], r[3]) == (DLQ, BAD_TOPIC, TABLE_MASKED) and "demo.shop" in r[2]


def test_an_unreachable_kafka_still_fails_the_query():
    with pytest.raises(RuntimeError, match="could not create"):
        job._python_routes(MASKED, _failing(_Down), None, rows_record("shop", "orders"), b"shop.orders")


def test_a_dead_letter_too_large_to_copy_is_withheld_with_its_size():
    from dbuslib.deadletter import MAX_VALUE_BYTES

    big = b"g" * (MAX_VALUE_BYTES + 1)
    ((topic, code, _, withheld, key),) = job._python_routes(ROUTER, lambda t: None, None, big, b"x.y")
    assert (topic, code, key) == (DLQ, BAD_RECORD, "x.y")
    assert withheld and str(MAX_VALUE_BYTES + 1) in withheld
