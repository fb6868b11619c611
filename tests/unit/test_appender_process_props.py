"""The appender's record handler is total: any record gives output or one dead letter, never an exception.

Inputs are arbitrary bytes, null values and keys, real captured records cut anywhere or with bytes flipped,
records with random header JSON, wrong versions and chunk members, and the JVM's rendered text swapped for
junk. Only an endpoint that stays unreachable (a retriable DbusError) may leave ``process``.
"""

import json
import struct
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from appender.convert import ConvertSettings
from appender.process import RECORD_FAILED, InRecord, Outputs, PartitionProcessor
from binlog import rawevent
from binlog.heartbeat import HeartbeatTable
from dbuslib.config import MaskRule
from dbuslib.deadletter import DeadLetter
from dbuslib.errors import EndpointError
from ums.masking import compile_rules

RECORDS_DIR = Path(__file__).resolve().parents[1] / "golden" / "records"


def _record(name: str) -> bytes:
    text = (RECORDS_DIR / name).read_text()
    return bytes.fromhex("".join(line for line in text.splitlines() if not line.startswith("#")))


INSERT, UPDATE, DELETE = (
    _record(f"{n}.hex") for n in ("14_orders_insert", "15_orders_update", "16_orders_delete")
)

REAL = (INSERT, UPDATE, DELETE)
DLQ = "demo.dlq"


def processor(mask: bool = False, history=None) -> PartitionProcessor:
    stored: dict = {}
    plan = compile_rules({"dbus_unit_rowdecode.orders": {"note": MaskRule(type="default")}}) if mask else None
    return PartitionProcessor(
        settings=ConvertSettings("demo"),
        outputs=Outputs(result_topic=lambda s, t: f"demo.{s}.{t}.result", dead_letter_topic=DLQ),
        history=history or (lambda s, t: list(stored.get((s, t), []))),
        persist=lambda s, t, v: stored.setdefault((s, t), []).append(v) or v,
        mask_plan=plan,
        heartbeat=HeartbeatTable("dbus", "db_heartbeat_monitor", lambda schema: f"demo.{schema}"),
    )


def header_json() -> st.SearchStrategy:
    scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=20))
    values = st.recursive(
        scalars,
        lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=8), c, max_size=3),
        max_leaves=8,
    )
    keys = st.sampled_from(
        [
            "kind",
            "file",
            "pos",
            "next_pos",
            "ts",
            "schema",
            "table",
            "event_type",
            "crc",
            "tm_len",
            "sql",
            "ddl",
            "chunk",
            "gtid",
        ]
    )
    kinds = st.sampled_from(["rows", "ddl", "other"])
    return st.builds(
        lambda base, kind: {**base, "kind": kind}, st.dictionaries(keys, values, max_size=14), kinds
    )


def with_header(header: dict, body: bytes) -> bytes:
    text = json.dumps(header).encode()
    return b"DBR\x01" + struct.pack(">I", len(text)) + text + body


@st.composite
def damaged_real(draw) -> bytes:
    value = bytearray(draw(st.sampled_from(REAL)))
    how = draw(st.sampled_from(["cut", "flip", "header", "version", "chunk"]))
    if how == "cut":
        return bytes(value[: draw(st.integers(0, len(value) - 1))])
    if how == "flip":
        for _ in range(draw(st.integers(1, 8))):
            i = draw(st.integers(0, len(value) - 1))
            value[i] = draw(st.integers(0, 255))
        return bytes(value)
    event = rawevent.decode(bytes(value))
    if how == "version":
        return bytes(value[:3]) + bytes([draw(st.integers(0, 255))]) + bytes(value[4:])
    if how == "chunk":
        return with_header(
            {**event.header, "chunk": draw(st.lists(st.integers(-2, 5), max_size=3))}, event.body
        )
    return with_header({**event.header, **draw(header_json())}, event.body)


# A masked table's record whose header names another schema (one byte flipped): the header is not to be
# trusted about whose rows the body holds (hypothesis found it).
DAMAGED_SCHEMA = INSERT.replace(b'"schema":"dbus_unit_rowdecode"', b'"schema":" bus_unit_rowdecode"')

records = st.one_of(
    st.none(),
    st.binary(max_size=300),
    st.builds(with_header, header_json(), st.binary(max_size=200)),
    damaged_real(),
    st.sampled_from(REAL),
)
keys = st.one_of(st.none(), st.binary(max_size=40), st.just(b"dbus_unit_rowdecode.orders"))
rendered = st.one_of(st.none(), st.binary(max_size=200))


def check(out, rec: InRecord) -> None:
    letters = [DeadLetter.from_json(o.value) for o in out if o.topic == DLQ]
    for letter in letters:  # pointing at the original
        assert (letter.topic, letter.partition, letter.offset) == (rec.topic, rec.partition, rec.offset)
        assert letter.code and letter.stage == "appender"
    if any(d.code.startswith("RAW_") or d.code == RECORD_FAILED for d in letters):
        assert (
            len(out) == 1
        )  # a record that failed gives its dead letter alone (a bad heartbeat row does not)
    for o in out:
        assert isinstance(o.value, bytes) and isinstance(o.key, bytes) and o.topic


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(st.lists(st.tuples(records, keys, rendered), min_size=1, max_size=6), st.booleans())
def test_every_record_gives_output_or_one_dead_letter_never_an_exception(batch, mask):
    p = processor(mask)
    for offset, (value, key, text) in enumerate(batch):
        rec = InRecord("demo.dbus_unit_rowdecode", 0, offset, key, value)
        check(list(p.process(rec, text)), rec)


@settings(max_examples=200, deadline=None)
@given(st.one_of(st.none(), st.binary(max_size=100), damaged_real()))
@example(value=DAMAGED_SCHEMA)
def test_masked_sources_never_put_record_bytes_in_a_dead_letter_they_cannot_attribute(value):
    p = processor(mask=True)
    for out in p.process(InRecord("demo.x", 0, 7, None, value)):
        if out.topic == DLQ:
            letter = DeadLetter.from_json(out.value)
            assert letter.value is None and letter.withheld


def test_a_null_value_is_a_dead_letter_and_the_next_record_still_converts():
    p = processor()
    out = list(p.process(InRecord("demo.s", 0, 0, None, None))) + list(
        p.process(InRecord("demo.s", 0, 1, b"k", INSERT))
    )
    letter = DeadLetter.from_json(out[0].value)
    assert (letter.code, letter.offset, letter.value) == ("RAW_BAD_RECORD", 0, None)
    assert "null value" in letter.error
    assert out[1].topic == "demo.dbus_unit_rowdecode.orders.result"


def test_a_forged_table_name_that_disagrees_with_the_table_map_is_a_dead_letter():
    event = rawevent.decode(INSERT)
    forged = rawevent.encode(rawevent.RawEvent({**event.header, "table": "t.dot"}, event.body, event.key))
    out = list(processor().process(InRecord("demo.s", 0, 0, b"dbus_unit_rowdecode.t.dot", forged)))
    assert [DeadLetter.from_json(o.value).code for o in out] == ["RAW_UNDECODABLE"]


def test_an_unforeseen_error_is_a_dead_letter_naming_it():
    def broken(schema, table):
        msg = "boom"
        raise KeyError(msg)

    out = list(processor(history=broken).process(InRecord("demo.s", 0, 3, b"k", INSERT)))
    letter = DeadLetter.from_json(out[0].value)
    assert (letter.code, letter.offset) == (RECORD_FAILED, 3) and "KeyError" in letter.error


def test_an_unreachable_meta_store_stops_the_task_instead_of_dead_lettering_everything():
    def down(schema, table):
        msg = "meta store 127.0.0.1:13306: gone"
        raise EndpointError(msg)

    with pytest.raises(EndpointError):
        list(processor(history=down).process(InRecord("demo.s", 0, 0, b"k", INSERT)))


def test_a_lost_meta_store_connection_is_not_taken_for_a_bad_record():
    import pymysql

    def lost(schema, table):
        raise pymysql.err.OperationalError(2013, "Lost connection to server during query")

    with pytest.raises(pymysql.err.OperationalError):
        list(processor(history=lost).process(InRecord("demo.s", 0, 0, b"k", INSERT)))
