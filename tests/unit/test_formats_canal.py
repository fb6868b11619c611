"""ums.formats.canal: Canal's flat message, one per row change; golden files; decode_canal round trips.

Golden files (tests/golden/formats/canal-json/<operation>.jsonl): one line per record, ``{"key": ...,
"headers": {...}, "value": <the flat message, or null for a tombstone>}``; each record's value bytes are the
line's ``value`` written compactly. Rewrite them with ``DBUS_GOLDEN_WRITE=1`` and read them before
committing.
"""

import json
import os
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import pytest
from every_type_changes import SHAPE, changes, pulled, rows
from hypothesis import given
from hypothesis import strategies as st

from ums.build import field_for
from ums.errors import BadValueError
from ums.formats import UMS_ID_HEADER, UMS_UID_HEADER, FormatOptions, Record, decode, formatter
from ums.formats.canal import CanalJson, decode_canal, java_text
from ums.message import UmsField
from ums.rowchange import Position, RowChange, TableShape
from ums.scalars import float32_repr
from ums.types import ColumnSpec, UmsType
from ums.values import encode_column

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "formats" / "canal-json"
WRITE = os.environ.get("DBUS_GOLDEN_WRITE") == "1"
FORMAT = CanalJson(FormatOptions())


def _by_operation() -> dict[str, list[RowChange]]:
    every = changes()
    return {
        "insert": [c for c in every if c.op == "c"],
        "update": [c for c in every if c.op == "u" and not c.key_changed],
        "delete": [c for c in every if c.op == "d"],
        "key_change": [c for c in every if c.key_changed],
        "update_without_before": [
            replace(c, before=None) for c in every if c.op == "u" and not c.key_changed
        ][:1],
        "full_pull": pulled(),
    }


def _lines(records: list[Record]) -> list[str]:
    return [
        json.dumps(
            {
                "key": None if r.key is None else r.key.decode(),
                "headers": {k: v.decode("ascii") for k, v in r.headers},
                "value": None if r.value is None else json.loads(r.value),
            },
            ensure_ascii=False,
        )
        for r in records
    ]


@pytest.mark.parametrize("operation", sorted(_by_operation()))
def test_golden_file(operation):
    records = [r for c in _by_operation()[operation] for r in FORMAT.records("demo.golden.cdc_types", c)]
    path = GOLDEN / f"{operation}.jsonl"
    if WRITE:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("\n".join(_lines(records)) + "\n", encoding="utf-8")
    expected = path.read_text(encoding="utf-8").split("\n")[:-1]  # not splitlines: a BLOB's text has U+0085
    assert _lines(records) == expected
    for record, line in zip(records, expected, strict=True):  # the bytes are the golden value, compact
        value = json.loads(line)["value"]
        assert record.value == (
            None if value is None else json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()
        )


def test_every_change_reads_back_exactly():
    for change in changes() + pulled() + rows(100):
        records = FORMAT.records("t", change)
        decoded = [decode_canal(r.key, r.value, r.headers) for r in records]
        if change.key_changed:  # a DELETE of the old key, its tombstone, an INSERT of the new one
            assert [d.op if d else None for d in decoded] == ["d", None, "c"]
            assert decoded[0] is not None and decoded[0].before == change.before
            assert decoded[2] is not None and decoded[2].after == change.after
            continue
        if change.op == "d":
            assert decoded[1] is None and records[1].key == records[0].key and records[1].value is None
        got = decoded[0]
        assert got is not None
        assert (got.op, got.before, got.after, got.ums_uid) == (
            change.op,
            change.before,
            change.after,
            change.ums_uid,
        )
        for value, expected in zip(
            got.after or got.before or (), change.after or change.before or (), strict=True
        ):
            assert type(value) is type(expected)
        assert got.at == replace(change.at, file="", server_id=None)
        assert got.table == replace(
            SHAPE,
            columns=tuple(replace(c, nullable=c.name != "id") for c in SHAPE.columns),
            fields=tuple(replace(f, nullable=f.name != "id") for f in SHAPE.fields),
        )


def test_one_record_per_row_keyed_by_the_primary_key_with_the_ums_ids():
    insert = changes()[0]
    (record,) = FORMAT.records("t", insert)
    assert record.key == b'{"id":1}'
    headers = dict(record.headers)
    assert headers[UMS_ID_HEADER] == str(insert.at.ums_id).encode()
    assert headers[UMS_UID_HEADER] == insert.ums_uid.encode()
    assert headers["ums_version"] == b"1" and headers["ums_ds"] == b"demo"
    message = json.loads(record.value or b"")
    assert message["type"] == "INSERT" and message["id"] == insert.at.ums_id and message["isDdl"] is False
    assert message["es"] == message["ts"] == insert.at.ts_ms and message["old"] is None
    assert message["pkNames"] == ["id"] and len(message["data"]) == 1
    assert all(v is None or isinstance(v, str) for v in message["data"][0].values())


def test_canal_text_forms():
    data = json.loads(FORMAT.records("t", changes()[0])[0].value or b"")["data"][0]
    sql_type = json.loads(FORMAT.records("t", changes()[0])[0].value or b"")["sqlType"]
    assert data["bn"] == "\x01\x02\x03\x04"  # ISO-8859-1 text of the bytes
    assert data["en"] == "3" and data["st"] == "5"  # ENUM index, SET bit mask ('blue,red')
    assert data["db"] == "1.7976931348623157E308" and data["fl"] == "1.1"
    assert data["b64"] == "18446744073709551615" and data["yr"] == "2155"
    # unsigned values above the signed range: one type wider, as Canal writes them
    assert (sql_type["tiu"], sql_type["iu"], sql_type["biu"]) == (5, -5, 3)
    odd = json.loads(FORMAT.records("t", changes()[2])[0].value or b"")
    assert odd["data"][0]["yr"] == "0000" and odd["data"][0]["en"] == "0" and odd["data"][0]["db"] == "0.0"
    assert odd["sqlType"]["tiu"] == -6


def test_update_old_holds_the_changed_columns_before():
    update = changes()[4]
    message = json.loads(FORMAT.records("t", update)[0].value or b"")
    assert message["type"] == "UPDATE"
    assert message["old"][0]["d2"] == "99999999.99" and message["data"][0]["d2"] == "-99999999.99"
    assert "id" not in message["old"][0] and "ti" not in message["old"][0]


def test_tombstones_can_be_off():
    delete = next(c for c in changes() if c.op == "d")
    assert len(CanalJson(FormatOptions(tombstones=False)).records("t", delete)) == 1
    assert len(FORMAT.records("t", delete)) == 2


def test_a_table_without_a_key_has_no_record_key_and_no_tombstone():
    keyless = replace(SHAPE, primary_key=())
    delete = replace(next(c for c in changes() if c.op == "d"), table=keyless)
    (record,) = FORMAT.records("t", delete)
    assert record.key is None and json.loads(record.value or b"")["pkNames"] is None
    decoded = decode_canal(record.key, record.value, record.headers)
    assert decoded is not None and decoded.table.primary_key == () and decoded.before == delete.before


def test_masked_fields_are_written_by_their_ums_type_and_read_back():
    fields = tuple(
        replace(f, type=UmsType.STRING, encoded=True) if f.name in ("i", "bn") else f for f in SHAPE.fields
    )
    masked = replace(SHAPE, fields=fields)
    change = changes()[0]
    values = tuple(
        "a1b2" if f.name in ("i", "bn") else v for f, v in zip(fields, change.after or (), strict=True)
    )
    change = replace(change, table=masked, after=values)
    (record,) = FORMAT.records("t", change)
    assert dict(record.headers)["ums_encoded"] == b'{"i":"string","bn":"string"}'
    message = json.loads(record.value or b"")
    assert message["data"][0]["i"] == "a1b2" and message["sqlType"]["i"] == 12
    decoded = decode_canal(record.key, record.value, record.headers)
    assert decoded is not None and decoded.after == values
    assert decoded.table.fields[7] == UmsField("i", UmsType.STRING, True, True)


@pytest.mark.parametrize(
    ("value", "error"),
    [
        (b"not json", "not JSON"),
        (b'{"type":"ALTER","isDdl":true}', "only INSERT, UPDATE and DELETE"),
        (b'{"type":"INSERT","isDdl":false,"data":[],"mysqlType":{}}', "a list of one row"),
        (
            b'{"type":"INSERT","isDdl":false,"data":[{"n":"x"}],"mysqlType":{"n":"int(11)"},'
            b'"database":"d","table":"t"}',
            r"data\[0\].n \(int\(11\)\): cannot read 'x'",
        ),
        (
            b'{"type":"INSERT","isDdl":false,"data":[{"e":"9"}],"mysqlType":{"e":"enum(\'a\')"},'
            b'"database":"d","table":"t"}',
            "ENUM index 9",
        ),
    ],
)
def test_unreadable_records_name_the_field(value, error):
    headers = ((UMS_ID_HEADER, b"10000000001200"), (UMS_UID_HEADER, b"10000000001200000000"))
    with pytest.raises(BadValueError, match=error):
        decode_canal(b"{}", value, headers)


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (1.1, "1.1"),
        (100.0, "100.0"),
        (0.001, "0.001"),
        (0.0001, "1.0E-4"),
        (1e7, "1.0E7"),
        (9999999.0, "9999999.0"),
        (-1.5e-10, "-1.5E-10"),
        (1.7976931348623157e308, "1.7976931348623157E308"),
        (0.0, "0.0"),
        (-0.0, "-0.0"),
        (123456789012.0, "1.23456789012E11"),
    ],
)
def test_java_text_is_javas_double_to_string(value, text):
    assert java_text(value) == text


@given(st.floats(allow_nan=False, allow_infinity=False))
def test_java_text_reads_back_as_the_same_double(value):
    assert float(java_text(value)) == value


@given(st.floats(width=32, allow_nan=False, allow_infinity=False))
def test_a_float_column_reads_back_as_its_ums_value(value):
    ums = float32_repr(value)
    assert float(java_text(ums)) == ums


PROPERTY_COLUMNS = {
    "int(11)": st.integers(-(2**31), 2**31 - 1),
    "tinyint(3) unsigned": st.integers(0, 255),
    "int(10) unsigned": st.integers(0, 2**32 - 1),
    "bigint(20)": st.integers(-(2**63), 2**63 - 1),
    "bigint(20) unsigned": st.integers(0, 2**64 - 1),
    "decimal(10,2)": st.decimals(-(10**8) + 1, 10**8 - 1, places=2),
    "float": st.floats(width=32, allow_nan=False, allow_infinity=False),
    "double": st.floats(allow_nan=False, allow_infinity=False),
    "bit(1)": st.integers(0, 1),
    "bit(64)": st.integers(0, 2**64 - 1),
    "date": st.dates(),
    "datetime(6)": st.datetimes(),
    "time(3)": st.integers(-838 * 3600_000, 838 * 3600_000).map(lambda ms: timedelta(milliseconds=ms)),
    "year(4)": st.sampled_from([0, 1901, 2000, 2155]),
    "varchar(20)": st.text(st.characters(exclude_categories=("Cs",)), max_size=20),
    "blob": st.binary(max_size=30),
    "enum('small','medium','large')": st.sampled_from(["small", "medium", "large", ""]),
    "set('red','green','blue')": st.sets(st.sampled_from(["red", "green", "blue"])),
}


@st.composite
def tables_and_images(draw):
    types = draw(st.lists(st.sampled_from(sorted(PROPERTY_COLUMNS)), min_size=1, max_size=8))
    columns = (ColumnSpec("k", "int(11)", False),) + tuple(
        ColumnSpec(f"c{i}", t) for i, t in enumerate(types)
    )
    shape = TableShape("ds", "db", "tb", 2, columns, tuple(field_for(c) for c in columns), ("k",))

    def image(key: int) -> tuple:
        values = [draw(st.none() | PROPERTY_COLUMNS[c.column_type]) for c in columns[1:]]
        return tuple(encode_column(c, v) for c, v in zip(columns, [key, *values], strict=True))

    return shape, image(draw(st.integers(0, 9))), image(draw(st.integers(0, 9)))


@given(tables_and_images(), st.sampled_from(["c", "u", "d", "r"]))
def test_any_row_of_any_column_types_reads_back_exactly(table, op):
    shape, first, second = table
    before, after = {"c": (None, first), "r": (None, first), "u": (first, second), "d": (first, None)}[op]
    at = Position(10000000001200, 1, "mysql-bin.000001", 1200, 0, snapshot="true" if op == "r" else "false")
    change = RowChange(shape, op, before, after, at, "10000000001200000000")  # type: ignore[arg-type]
    decoded = [decode_canal(r.key, r.value, r.headers) for r in FORMAT.records("t", change)]
    if change.key_changed:
        assert decoded[0] is not None and decoded[0].before == before
        assert decoded[-1] is not None and decoded[-1].after == after
        return
    got = decoded[0]
    assert got is not None and (got.op, got.before, got.after) == (op, before, after)
    for value, expected in zip(got.after or got.before or (), after or before or (), strict=True):
        assert type(value) is type(expected)


def test_the_package_dispatches_to_canal_json():
    change = changes()[4]
    encoder = formatter("canal-json", FormatOptions())
    assert encoder.name == "canal-json"
    (record,) = encoder.records("t", change)
    assert record == FORMAT.records("t", change)[0]
    got = decode("canal-json", record.key, record.value, record.headers)
    assert got is not None and (got.op, got.before, got.after) == ("u", change.before, change.after)
