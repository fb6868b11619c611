"""dispatcher.routing.route and the UDF body dispatcher.job._python_routes are total (hypothesis).

Whatever a record of ``<ds>`` holds (arbitrary bytes, a null value or key, a valid raw record cut
anywhere, a random JSON header, another version), the dispatcher gets routes, never an exception; every
route is a legal topic or the dead-letter topic with a known code, and a dead letter of a record that may
hold a masked column never carries its bytes.
"""

from __future__ import annotations

import json
import struct
from dataclasses import replace

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from records import HB_DB, HEARTBEAT_ONE, HEARTBEAT_THREE, rows_record

from binlog import rawevent
from binlog.rawevent import RawEvent
from dbuslib.deadletter import TABLE_MASKED, UNATTRIBUTED, UNVERIFIED
from dbuslib.topics import topic_problem
from dispatcher import job
from dispatcher.routing import BAD_RECORD, CODES, UNEXPECTED, Route, Router, route

ROUTER = Router(
    ds="demo",
    schema_template="{ds}.{schema}",
    dead_letter="demo.dlq",
    heartbeat_schema=HB_DB,
    heartbeat_table="db_heartbeat_monitor",
)
MASKED = replace(ROUTER, mask_tables=("shop.customers",), masks_any=True)
SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

names = st.text(min_size=0, max_size=80)
keys = st.one_of(st.none(), st.binary(max_size=60), names.map(str.encode))
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
header_keys = st.sampled_from(
    [
        "kind",
        "schema",
        "table",
        "file",
        "pos",
        "next_pos",
        "ts",
        "event_type",
        "crc",
        "tm_len",
        "chunk",
        "sql",
        "ddl",
        "gtid",
    ]
)
headers = st.dictionaries(
    header_keys, json_values | st.sampled_from(["rows", "ddl", "shop", "customers"]), max_size=10
)
valid = st.sampled_from(
    [
        HEARTBEAT_ONE,
        HEARTBEAT_THREE,
        rows_record("shop", "customers"),
        rows_record("shöp", "orders"),
        rows_record(HB_DB, "db_heartbeat_monitor"),
    ]
)


@st.composite
def records(draw) -> bytes | None:
    """A value of ``<ds>`` as production meets it: any bytes, null, a valid record cut or flipped, a
    random header, another version."""
    kind = draw(st.sampled_from(["bytes", "null", "cut", "flip", "header", "version"]))
    if kind == "bytes":
        return draw(st.binary(max_size=300))
    if kind == "null":
        return None
    value = draw(valid)
    if kind == "cut":
        return value[: draw(st.integers(0, len(value) - 1))]
    if kind == "flip":
        i = draw(st.integers(0, len(value) - 1))
        return value[:i] + bytes([value[i] ^ draw(st.integers(1, 255))]) + value[i + 1 :]
    if kind == "header":
        header = draw(headers)
        text = json.dumps(header).encode() if draw(st.booleans()) else draw(st.binary(max_size=80))
        return struct.pack(">3sBI", b"DBR", 1, len(text)) + text + draw(st.binary(max_size=200))
    return value[:3] + bytes([draw(st.integers(0, 255).filter(lambda v: v != 1))]) + value[4:]


def _check(routes: tuple[Route, ...], router: Router) -> None:
    assert routes and all(isinstance(r, Route) for r in routes)
    for r in routes:
        if r.dead:
            assert r.topic == router.dead_letter and r.code in CODES and isinstance(r.error, str)
        else:
            assert topic_problem(r.topic) is None and r.withheld == ""


@SETTINGS
@given(value=records(), key=keys)
def test_route_returns_routes_for_any_record_and_never_raises(value, key):
    for router in (ROUTER, MASKED):
        _check(route(router, value, key), router)


@SETTINGS
@given(value=st.one_of(st.none(), st.binary(max_size=200)), key=keys)
def test_arbitrary_bytes_and_nulls_are_bad_records(value, key):
    (r,) = route(ROUTER, value, key)
    assert (r.topic, r.code) == ("demo.dlq", BAD_RECORD)


@SETTINGS
@given(value=records(), key=keys)
def test_the_udf_body_never_raises_and_creates_each_target(value, key):
    made: list[str] = []
    out = job._python_routes(MASKED, made.append, None, value, key)
    assert out and made == [t for t, *_ in out]
    for topic, code, _error, withheld, key_text in out:
        assert (code is None) == (topic != "demo.dlq")
        assert code is None or key_text == (None if key is None else key.decode("utf-8", "replace"))
        assert withheld in (None, TABLE_MASKED, UNATTRIBUTED, UNVERIFIED)
        if code in (BAD_RECORD, UNEXPECTED):  # did not decode: in a masking source never carried
            assert withheld is not None


@SETTINGS
@given(cut=st.integers(0, 400), key=st.sampled_from([b"shop.customers", None, b"\xff.customers"]))
def test_a_damaged_record_of_a_masked_table_is_always_withheld(cut, key):
    value = rows_record("shop", "customers", tm_len=9)
    value = value[: min(cut, len(value) - 1)]
    for r in route(MASKED, value, key):
        assert r.topic != "demo.dlq" or r.withheld, r


@SETTINGS
@given(schema=names.filter(bool), table=names.filter(bool))
def test_any_schema_name_gets_a_legal_topic_or_a_dead_letter(schema, table):
    value = rawevent.encode(
        RawEvent(
            header={
                "kind": "rows",
                "file": "f.1",
                "pos": 4,
                "next_pos": 9,
                "ts": 1,
                "schema": schema,
                "table": table,
                "event_type": 30,
                "crc": True,
                "tm_len": 2,
            },
            body=b"tm-rows",
        )
    )
    (r,) = route(ROUTER, value, f"{schema}.{table}".encode())
    assert r.dead == (len(ROUTER.schema_topic(schema)) > 249)
