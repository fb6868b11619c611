"""ums.formats.connect and ums.formats.debezium: Debezium's MySQL envelope as JsonConverter writes it;
golden files; decode_debezium round trips.

Golden files (tests/golden/formats/debezium-json/): ``key.schema.json`` and ``value.schema.json``, the
Connect schemas of the ``cdc_types`` table (every record's ``schema``), and ``<operation>.json``: the
records of every row change of tests/golden/cdc/every_type.sql, each ``{"key": <key payload>, "headers":
{...}, "value": <envelope payload, or null for a tombstone>}``. Rewrite them with ``DBUS_GOLDEN_WRITE=1``
and read the diff before committing.
"""

import base64
import json
import os
from dataclasses import replace
from datetime import date
from decimal import Context, Decimal
from pathlib import Path

import pytest
from debezium_cases import RANDOM_SHAPE, VALUES, ZERO, key_changed, read_back
from every_type_changes import SHAPE, changes, pulled, rows
from hypothesis import given, settings
from hypothesis import strategies as st

from ums.formats import UMS_ID_HEADER, UMS_UID_HEADER, UMS_VERSION_HEADER, FormatOptions, decode, formatter
from ums.formats.connect import connect_table, scaled_text, unscaled_bytes
from ums.formats.debezium import NEW_KEY_HEADER, OLD_KEY_HEADER, DebeziumJson, decode_debezium
from ums.message import UmsField
from ums.rowchange import RowChange, TableShape
from ums.types import ColumnSpec, UmsType

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "formats" / "debezium-json"
WRITE = os.environ.get("DBUS_GOLDEN_WRITE") == "1"
FORMAT = DebeziumJson(FormatOptions())
TOPIC = "demo.golden.cdc_types"


def _by_operation() -> dict[str, list[RowChange]]:
    every = changes()
    return {
        "insert": [c for c in every if c.op == "c"],
        "update": [c for c in every if c.op == "u" and not key_changed(c)],
        "delete": [c for c in every if c.op == "d"],
        "key_change": [c for c in every if key_changed(c)],
        "update_without_before": [replace(c, before=None) for c in every if c.op == "u"][:1],
        "full_pull": pulled(),
    }


def _record_doc(record) -> dict:
    return {
        "key": None if record.key is None else json.loads(record.key)["payload"],
        "headers": {k: v.decode("ascii") for k, v in record.headers},
        "value": None if record.value is None else json.loads(record.value)["payload"],
    }


def _write_or_read(path: Path, doc) -> object:
    if WRITE:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return json.loads(path.read_text(encoding="utf-8"))


def test_golden_schemas():
    table = connect_table(SHAPE, FormatOptions())
    assert _write_or_read(GOLDEN / "key.schema.json", table.key_schema) == table.key_schema
    assert _write_or_read(GOLDEN / "value.schema.json", table.envelope_schema) == table.envelope_schema


@pytest.mark.parametrize("operation", sorted(_by_operation()))
def test_golden_file(operation):
    records = [r for c in _by_operation()[operation] for r in FORMAT.records(TOPIC, c)]
    docs = [_record_doc(r) for r in records]
    assert _write_or_read(GOLDEN / f"{operation}.json", docs) == docs
    table = connect_table(SHAPE, FormatOptions())
    for record in records:  # every record carries the schemas, as JsonConverter with schemas.enable
        assert json.loads(record.key)["schema"] == table.key_schema
        if record.value is not None:
            assert json.loads(record.value)["schema"] == table.envelope_schema


def _records_back(fmt, change):
    return [decode_debezium(r.key, r.value, r.headers) for r in fmt.records(TOPIC, change)]


def test_every_change_reads_back_exactly():
    for change in [*changes(), *pulled()]:
        back = _records_back(FORMAT, change)
        if key_changed(change):
            assert [b and b.op for b in back] == ["d", None, "c"]
            assert back[0] == replace(read_back(change), op="d", after=None)
            assert back[2] == replace(read_back(change), op="c", before=None)
        elif change.op == "d":
            assert back == [read_back(change), None]
        else:
            assert back == [read_back(change)]


def test_decode_dispatches_by_format_name():
    change = changes()[0]
    record = formatter("debezium-json", FormatOptions()).records(TOPIC, change)[0]
    assert decode("debezium-json", record.key, record.value, record.headers) == change


def test_debezium_value_forms():
    """The Connect values of the MAX row as Debezium writes them (docs/formats.md's table)."""
    after = json.loads(FORMAT.records(TOPIC, changes()[0])[0].value)["payload"]["after"]
    assert (
        after["ti"] == 127 and after["tiu"] == 255 and after["iu"] == 4294967295 and after["bi"] == 2**63 - 1
    )
    assert after["biu"] == -1  # bigint.unsigned.handling.mode long wraps above 2^63-1, as Debezium does
    assert base64.b64decode(after["d2"]) == unscaled_bytes(9999999999)
    assert after["b1"] is True and base64.b64decode(after["b64"]) == b"\xff" * 8
    assert after["dt"] == (date(9999, 12, 31) - date(1970, 1, 1)).days
    assert after["dtm"] == (date(9999, 12, 31) - date(1970, 1, 1)).days * 86_400_000 + 86_399_000
    assert after["dtm6"] == after["dtm"] * 1000 + 999999
    assert after["ts"] == "2038-01-19T03:14:07Z" and after["ts3"] == "2038-01-19T03:14:07.999Z"
    assert after["tm"] == 3020399000000 and after["yr"] == 2155
    assert after["bn"] == "AQIDBA==" and after["st"] == "red,blue"
    odd = json.loads(FORMAT.records(TOPIC, changes()[2])[0].value)["payload"]["after"]
    assert odd["b64"] == base64.b64encode(b"\x05" + bytes(7)).decode()  # BIT(n): little-endian, n/8 bytes
    assert odd["tm3"] == -1000 and all(odd[n] is None for n in ZERO)


def test_records_keys_headers_and_source():
    change = changes()[4]  # an UPDATE with its before image
    (record,) = FORMAT.records(TOPIC, change)
    assert json.loads(record.key) == {
        "schema": connect_table(SHAPE, FormatOptions()).key_schema,
        "payload": {"id": 1},
    }
    headers = dict(record.headers)
    assert headers[UMS_ID_HEADER] == str(change.at.ums_id).encode()
    assert headers[UMS_UID_HEADER] == change.ums_uid.encode() and headers[UMS_VERSION_HEADER] == b"1"
    payload = json.loads(record.value)["payload"]
    assert payload["op"] == "u" and payload["before"]["d2"] != payload["after"]["d2"]
    source = payload["source"]
    assert (source["name"], source["db"], source["table"]) == ("demo", "golden", "cdc_types")
    assert (source["file"], source["pos"], source["row"], source["server_id"]) == (
        "mysql-bin.000001",
        change.at.pos,
        0,
        1,
    )
    assert source["snapshot"] == "false" and payload["transaction"] is None


def test_key_change_is_a_delete_its_tombstone_and_a_create():
    change = next(c for c in changes() if key_changed(c))
    delete, tombstone, create = FORMAT.records(TOPIC, change)
    assert json.loads(delete.key)["payload"] == {"id": 1} and json.loads(create.key)["payload"] == {"id": 10}
    assert tombstone.key == delete.key and tombstone.value is None
    assert dict(delete.headers)[NEW_KEY_HEADER] == b'{"id":10}'
    assert dict(create.headers)[OLD_KEY_HEADER] == b'{"id":1}'


def test_tombstones_can_be_off():
    fmt = DebeziumJson(FormatOptions(tombstones=False))
    delete = next(c for c in changes() if c.op == "d")
    assert [r.value is None for r in fmt.records(TOPIC, delete)] == [False]


def test_without_schemas_the_bare_payloads():
    fmt = DebeziumJson(FormatOptions(schemas=False))
    (record,) = fmt.records(TOPIC, changes()[0])
    assert json.loads(record.key) == {"id": 1} and json.loads(record.value)["op"] == "c"
    with pytest.raises(ValueError, match="no schema"):
        decode_debezium(record.key, record.value, record.headers)


def test_a_table_without_a_key_has_a_null_key_and_reads_back():
    shape = replace(SHAPE, primary_key=())
    change = replace(changes()[0], table=shape)
    (record,) = FORMAT.records(TOPIC, change)
    assert record.key is None
    assert decode_debezium(record.key, record.value, record.headers) == change
    delete = replace(next(c for c in changes() if c.op == "d"), table=shape)
    assert [r.key for r in FORMAT.records(TOPIC, delete)] == [None, None]


def test_masked_fields_are_optional_strings_and_read_back():
    fields = tuple(
        replace(f, type=UmsType.STRING, encoded=True) if f.name in ("vc", "i") else f for f in SHAPE.fields
    )
    shape = replace(SHAPE, fields=fields)
    change = changes()[0]
    after = tuple("masked" if f.encoded else v for f, v in zip(fields, change.after, strict=True))
    change = replace(change, table=shape, after=after)
    (record,) = FORMAT.records(TOPIC, change)
    schema = json.loads(record.value)["schema"]["fields"][1]["fields"]
    vc = next(f for f in schema if f["field"] == "vc")
    assert (
        vc["type"] == "string"
        and vc["optional"] is True
        and vc["parameters"]["__dbus.field.type"] == "string"
    )
    assert decode_debezium(record.key, record.value, record.headers) == change


def test_an_int_masked_field_keeps_its_type():
    fields = tuple(replace(f, encoded=True) if f.name == "i" else f for f in SHAPE.fields)
    change = replace(changes()[0], table=replace(SHAPE, fields=fields))
    (record,) = FORMAT.records(TOPIC, change)
    assert json.loads(record.value)["payload"]["after"]["i"] == "2147483647"
    assert decode_debezium(record.key, record.value, record.headers) == change


@pytest.mark.parametrize(
    "options",
    [
        FormatOptions(decimal_handling_mode="string"),
        FormatOptions(bigint_unsigned_handling_mode="precise"),
        FormatOptions(binary_handling_mode="hex"),
        FormatOptions(binary_handling_mode="base64"),
        FormatOptions(binary_handling_mode="base64-url-safe"),
    ],
)
def test_exact_options_read_back(options):
    fmt = DebeziumJson(options)
    for change in changes()[:4]:
        assert _records_back(fmt, change) == [read_back(change)]


def test_precise_bigint_unsigned_is_a_decimal():
    fmt = DebeziumJson(FormatOptions(bigint_unsigned_handling_mode="precise"))
    record = fmt.records(TOPIC, changes()[0])[0]
    after = json.loads(record.value)["payload"]["after"]
    assert base64.b64decode(after["biu"]) == unscaled_bytes(2**64 - 1)


def test_connect_time_mode_uses_connects_logical_types():
    fmt = DebeziumJson(FormatOptions(time_precision_mode="connect"))
    record = fmt.records(TOPIC, changes()[0])[0]
    fields = {f["field"]: f for f in json.loads(record.value)["schema"]["fields"][1]["fields"]}
    assert fields["dt"]["name"] == "org.apache.kafka.connect.data.Date"
    assert fields["dtm6"]["name"] == "org.apache.kafka.connect.data.Timestamp"
    assert fields["tm"]["name"] == "org.apache.kafka.connect.data.Time"
    assert (
        json.loads(record.value)["payload"]["after"]["tm"] is None
    )  # 838:59:59: Connect's Time is within a day
    odd = json.loads(fmt.records(TOPIC, changes()[4])[0].value)["payload"]["after"]
    assert odd["tm3"] is None and odd["dtm"] == 253402300799000
    columns = (ColumnSpec("id", "int(11)", False), ColumnSpec("t", "time(3)"))
    shape = TableShape(
        "demo",
        "x",
        "times",
        1,
        columns,
        tuple(UmsField(c.name, c.ums_type, c.nullable) for c in columns),
        ("id",),
    )
    change = replace(changes()[0], table=shape, after=(1, "12:34:56.789"))
    (record,) = fmt.records(TOPIC, change)
    assert json.loads(record.value)["payload"]["after"]["t"] == 45_296_789
    assert decode_debezium(record.key, record.value, record.headers) == change


def test_unreadable_records_name_the_problem():
    with pytest.raises(ValueError, match="not JSON"):
        decode_debezium(None, b"{", ())
    with pytest.raises(ValueError, match="missing or bad field"):
        decode_debezium(None, b'{"schema": {}, "payload": {}}', ())


def test_geometry_is_debeziums_struct_and_reads_back():
    wkb = bytes.fromhex("0101000000000000000000f03f0000000000000040")  # POINT(1 2)
    columns = (ColumnSpec("id", "int(11)", False), ColumnSpec("g", "geometry"), ColumnSpec("p", "point"))
    fields = (
        UmsField("id", UmsType.INT, False),
        UmsField("g", UmsType.BINARY, True),
        UmsField("p", UmsType.BINARY, True),
    )
    shape = TableShape("demo", "geo", "places", 3, columns, fields, ("id",))
    value = base64.b64encode((4326).to_bytes(4, "little") + wkb).decode()
    change = replace(changes()[0], table=shape, after=(1, value, value))
    (record,) = FORMAT.records("demo.geo.places", change)
    after = json.loads(record.value)["payload"]["after"]
    assert after["g"] == {"wkb": base64.b64encode(wkb).decode(), "srid": 4326}
    assert (after["p"]["x"], after["p"]["y"], after["p"]["srid"]) == (1.0, 2.0, 4326)
    assert decode_debezium(record.key, record.value, record.headers) == change


# --- hypothesis: random values per type read back exactly ---------------------------------------------


@settings(max_examples=60, deadline=None)
@given(st.tuples(*[st.one_of(st.none(), s) for s in VALUES.values()]), st.sampled_from(["c", "u", "d", "r"]))
def test_random_values_read_back_exactly(values, op):
    values = (values[0] if values[0] is not None else 0, *values[1:])
    change = replace(changes()[0], table=RANDOM_SHAPE, op=op, before=values if op in ("u", "d") else None,
                     after=None if op == "d" else values)  # fmt: skip
    assert _records_back(FORMAT, change)[0] == change


@given(st.integers(-(10**70), 10**70), st.integers(0, 30))
def test_decimal_bytes_are_javas_big_integer(number, scale):
    raw = unscaled_bytes(number)
    assert int.from_bytes(raw, "big", signed=True) == number
    assert len(raw) == (number.bit_length() if number >= 0 else (~number).bit_length()) // 8 + 1
    assert Decimal(scaled_text(number, scale)) == Decimal(number).scaleb(-scale, Context(prec=100))


def test_one_hundred_rows_share_one_schema_build():
    fmt = DebeziumJson(FormatOptions())
    for change in rows(100):
        fmt.records(TOPIC, change)
    assert len(fmt._plans) == 1


def test_without_propagated_types_the_columns_are_inferred():
    """A record without the source-type parameters (Debezium's default) still reads back: the column types
    come from the Connect types (int16 -> smallint(6)...), values exact but for the documented losses."""
    fmt = DebeziumJson(FormatOptions(propagate_source_types=False))
    for change in [*changes(), *pulled()]:
        for record in fmt.records(TOPIC, change):
            decode_debezium(record.key, record.value, record.headers)
    (record,) = fmt.records(TOPIC, changes()[0])
    back = decode_debezium(record.key, record.value, record.headers)
    types = {c.name: c.column_type for c in back.table.columns}
    assert (types["ti"], types["iu"], types["d2"], types["dtm6"]) == (
        "smallint(6)",
        "bigint(20)",
        "decimal(10,2)",
        "datetime(6)",
    )
    values = dict(zip(types, back.after, strict=True))
    assert values["d2"] == "99999999.99" and values["biu"] == "-1"  # BIGINT UNSIGNED: wrapped, as documented


def test_other_json_layouts_and_versions_read_back():
    """A record written by another JSON writer (payload first, spaces) reads back the same; the table's
    version comes from each record's ums_version header."""
    change = changes()[4]
    (record,) = FORMAT.records(TOPIC, change)
    doc = json.loads(record.value)
    rewritten = json.dumps({"payload": doc["payload"], "schema": doc["schema"]}, indent=1).encode()
    assert decode_debezium(record.key, rewritten, record.headers) == change
    headers = tuple((k, b"7" if k == UMS_VERSION_HEADER else v) for k, v in record.headers)
    assert decode_debezium(record.key, record.value, headers).table.version == 7
    assert decode_debezium(record.key, record.value, record.headers) == change
