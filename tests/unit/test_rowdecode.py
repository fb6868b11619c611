"""binlog.rows on raw records captured once from MariaDB 10.11 (no server needed).

The three records below are ``rawevent.encode`` of what ``extractor.capture.raw_rows`` built from the
binlog of (binlog_row_metadata=FULL, checksums on, session time zone +00:00)::

    CREATE TABLE orders (id INT UNSIGNED NOT NULL, region CHAR(2) NOT NULL, note VARCHAR(20),
      amount DECIMAL(10,2), at DATETIME(3), ts TIMESTAMP(6) NULL, tags SET('a','b','c'), flag BIT(4),
      PRIMARY KEY (region, id));
    INSERT INTO orders VALUES (1, 'eu', 'héllo 😀', 12.50, '2024-01-02 03:04:05.678',
      '2024-01-02 03:04:05.000001', 'c,a', b'1010'), (4294967295, 'us', NULL, NULL, NULL, NULL, '', NULL);
    UPDATE orders SET amount = -0.01, tags = 'b' WHERE id = 1;
    DELETE FROM orders WHERE region = 'us';
"""

from __future__ import annotations

import struct
from dataclasses import replace
from datetime import UTC, datetime
from decimal import Decimal
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from records import DELETE, INSERT, UPDATE, sealed

from binlog import rawevent
from binlog import rows as rowdecode
from binlog.rawevent import RawEvent, RawHeader
from binlog.rows import DecodedRows, RowDecodeError, RowImage, decode_rows
from dbuslib.errors import DbusError
from ums.types import ColumnSpec, UmsType, ums_type_for

ROW_1 = {
    "id": 1,
    "region": "eu",
    "note": "héllo 😀",
    "amount": Decimal("12.50"),
    "at": datetime(2024, 1, 2, 3, 4, 5, 678000),  # noqa: DTZ001 - DATETIME is a naive wall clock
    "ts": datetime(2024, 1, 2, 3, 4, 5, 1, tzinfo=UTC),
    "tags": {"a", "c"},
    "flag": 0b1010,
}
ROW_MAX = {
    "id": 4294967295,
    "region": "us",
    "note": None,
    "amount": None,
    "at": None,
    "ts": None,
    "tags": set(),
    "flag": None,
}
COLUMNS = (
    ColumnSpec("id", "int unsigned", False),
    ColumnSpec("region", "char(2)", False),
    ColumnSpec("note", "varchar(20)", True),
    ColumnSpec("amount", "decimal(10,2)", True),
    ColumnSpec("at", "datetime(3)", True),
    ColumnSpec("ts", "timestamp(6)", True),
    ColumnSpec("tags", "set('a','b','c')", True),
    ColumnSpec("flag", "bit(4)", True),
)


def record(value: bytes) -> RawEvent:
    return rawevent.decode(value)


def with_events(event: RawEvent, table_map: bytes, rows: bytes, **header: object) -> RawEvent:
    return replace(
        event, header=replace(event.header, tm_len=len(table_map), **header), body=table_map + rows
    )


def without_crc(event: RawEvent) -> RawEvent:
    """The same record as a server with binlog_checksum=NONE would give it."""
    tm, rows = event.table_map_bytes(), event.rows_event_bytes()
    return with_events(event, sealed(tm[:-4], crc=False), sealed(rows[:-4], crc=False), crc=False)


# ---------------------------------------------------------------- decoding


@pytest.mark.parametrize(
    ("value", "op", "rows"),
    [
        (INSERT, "i", (RowImage(None, ROW_1), RowImage(None, ROW_MAX))),
        (UPDATE, "u", (RowImage(ROW_1, {**ROW_1, "amount": Decimal("-0.01"), "tags": {"b"}}),)),
        (DELETE, "d", (RowImage(ROW_MAX, None),)),
    ],
)
def test_captured_records_decode_to_the_rows_written(value, op, rows):
    assert decode_rows(record(value)) == DecodedRows(
        "dbus_unit_rowdecode", "orders", op, COLUMNS, ("region", "id"), rows
    )


def test_decimal_keeps_the_column_scale():
    after = decode_rows(record(UPDATE)).rows[0].after
    assert str(after["amount"]) == "-0.01"
    assert str(decode_rows(record(INSERT)).rows[0].after["amount"]) == "12.50"


def test_primary_key_follows_key_order_not_column_order():
    assert decode_rows(record(INSERT)).primary_key == ("region", "id")


def test_column_types_map_to_ums_types():
    types = {c.name: ums_type_for(c.column_type) for c in decode_rows(record(INSERT)).columns}
    assert types == {
        "id": UmsType.LONG,
        "region": UmsType.STRING,
        "note": UmsType.STRING,
        "amount": UmsType.DECIMAL,
        "at": UmsType.DATETIME,
        "ts": UmsType.DATETIME,
        "tags": UmsType.STRING,
        "flag": UmsType.INT,
    }


def test_records_without_checksums_decode_the_same():
    for value in (INSERT, UPDATE, DELETE):
        assert decode_rows(without_crc(record(value))) == decode_rows(record(value))


def test_a_table_map_is_parsed_once_per_file_and_body(monkeypatch):
    rowdecode._TABLES.clear()
    calls = []
    parse = rowdecode._parse_table_map
    monkeypatch.setattr(rowdecode, "_parse_table_map", lambda *a: calls.append(1) or parse(*a))
    for value in (INSERT, UPDATE, DELETE):  # three transactions: the table maps differ only in their header
        decode_rows(record(value))
    assert len(calls) == 1
    decode_rows(replace(record(INSERT), header=replace(record(INSERT).header, file="mariadb-bin.000008")))
    assert len(calls) == 2


def test_columns_left_out_of_a_minimal_row_image_are_left_out_of_the_row():
    event = record(DELETE)  # as binlog_row_image=MINIMAL would log it without 'note' (column 2)
    rows = event.rows_event_bytes()
    start = rows.index(bytes.fromhex("08ffbcffffffff"))
    minimal = rows[:start] + bytes.fromhex("08fb5cffffffff") + rows[start + 7 :]
    decoded = decode_rows(with_events(event, event.table_map_bytes(), sealed(minimal)))
    assert decoded.rows == (RowImage({k: v for k, v in ROW_MAX.items() if k != "note"}, None),)


# A MySQL 8 table ``app.docs (id INT NOT NULL PRIMARY KEY, doc JSON)``, built by hand: binary JSON,
# v2 rows event, no checksums, a MySQL GTID.
MYSQL_TABLE_MAP = (
    b"\x42\x00\x00\x00\x00\x00\x01\x00"
    + b"\x03app\x00"
    + b"\x04docs\x00"
    + b"\x02"
    + b"\x03\xf5"
    + b"\x01\x04"
    + b"\x02"  # columns: INT, JSON (4-byte length); doc nullable
    + b"\x01\x01\x00"
    + b"\x04\x07\x02id\x03doc"
    + b"\x08\x01\x00"  # signedness, names, primary key
)
JSON_OBJECT = b"\x00" + bytes.fromhex("010016000b000100020c006b02000a00050100040100")
JSON_STRING = b"\x0c\x04" + "😀".encode()
MYSQL_ROWS = (
    b"\x42\x00\x00\x00\x00\x00\x01\x00"
    + b"\x02\x00"
    + b"\x02"
    + b"\x03"
    + b"\x00"
    + struct.pack("<i", 7)
    + struct.pack("<I", len(JSON_OBJECT))
    + JSON_OBJECT
    + b"\x00"
    + struct.pack("<i", 8)
    + struct.pack("<I", len(JSON_STRING))
    + JSON_STRING
    + b"\x02"
    + struct.pack("<i", 9)
)


def mysql_event(type_code: int, body: bytes) -> bytes:
    return struct.pack("<IBIIIH", 1700000000, type_code, 1, 19 + len(body), 0, 0) + body


def test_mysql_binary_json_decodes_to_python_values():
    tm, rows = mysql_event(19, MYSQL_TABLE_MAP), mysql_event(30, MYSQL_ROWS)
    header = RawHeader(
        kind="rows",
        file="binlog.000001",
        pos=4,
        next_pos=100,
        ts=1700000000,
        gtid="3e11fa47-71ca-11e1-9e33-c80aa9429562:23",
        schema="app",
        table="docs",
        event_type=30,
        crc=False,
        tm_len=len(tm),
    )
    decoded = decode_rows(RawEvent(header, tm + rows))
    assert decoded.columns == (ColumnSpec("id", "int", False), ColumnSpec("doc", "json", True))
    assert ums_type_for(decoded.columns[1].column_type) is UmsType.JSONOBJECT
    assert decoded.primary_key == ("id",)
    assert [r.after for r in decoded.rows] == [
        {"id": 7, "doc": {"k": [1, True]}},
        {"id": 8, "doc": "😀"},
        {"id": 9, "doc": None},
    ]


@pytest.mark.parametrize(
    ("header", "flavor"),
    [
        ({"flavor": "mysql", "gtid": "0-1-2", "event_type": 23}, "mysql"),
        ({"gtid": "0-1-2", "event_type": 30}, "mariadb"),
        ({"gtid": "3e11fa47-71ca-11e1-9e33-c80aa9429562:23", "event_type": 23}, "mysql"),
        ({"gtid": "", "event_type": 23}, "mariadb"),
        ({"gtid": "", "event_type": 30}, "mysql"),
    ],
)
def test_server_flavor_comes_from_the_header_gtid_or_event_version(header, flavor):
    assert rowdecode._flavor(RawHeader(kind="rows", **header)) == flavor


# ---------------------------------------------------------------- value readers


DIG2BYTES = (0, 1, 1, 2, 2, 3, 3, 4, 4, 4)


def mysql_decimal(unscaled: int, precision: int, scale: int) -> bytes:
    """MySQL's ``decimal2bin`` of ``unscaled * 10**-scale``: the reference the reader is checked against."""
    text = str(abs(unscaled)).rjust(precision, "0")
    whole, frac = text[: precision - scale], text[precision - scale :]
    lead, tail = len(whole) % 9, len(frac) % 9
    parts = [int(whole[:lead]).to_bytes(DIG2BYTES[lead], "big")] if lead else []
    parts += [int(whole[i : i + 9]).to_bytes(4, "big") for i in range(lead, len(whole), 9)]
    parts += [int(frac[i : i + 9]).to_bytes(4, "big") for i in range(0, len(frac) - tail, 9)]
    parts += [int(frac[len(frac) - tail :]).to_bytes(DIG2BYTES[tail], "big")] if tail else []
    packed = bytearray(b"".join(parts))
    if unscaled < 0:
        packed = bytearray(b ^ 0xFF for b in packed)
    packed[0] ^= 0x80
    return bytes(packed)


@st.composite
def decimals(draw):
    precision = draw(st.integers(1, 65))
    scale = draw(st.integers(0, min(precision, 30)))
    return draw(st.integers(-(10**precision) + 1, 10**precision - 1)), precision, scale


@given(decimals())
@settings(max_examples=500)
def test_decimal_reader_reads_mysql_packed_decimals(case):
    unscaled, precision, scale = case
    read = rowdecode._decimal_reader(SimpleNamespace(precision=precision, decimals=scale))
    decoded = read(rowdecode._Packet(mysql_decimal(unscaled, precision, scale)))
    sign, digits, exponent = decoded.as_tuple()
    assert (-1 if sign else 1) * int("".join(map(str, digits))) == unscaled
    assert exponent == -scale


def test_every_type_with_a_column_type_has_a_reader():
    assert set(rowdecode._TYPE_TEXT) == set(rowdecode._READERS)


# ---------------------------------------------------------------- errors


def assert_undecodable(event: RawEvent, fragment: str) -> None:
    with pytest.raises(RowDecodeError) as err:
        decode_rows(event)
    assert err.value.code == "RAW_UNDECODABLE"
    assert "dbus_unit_rowdecode.orders at mariadb-bin.000007:" in str(err.value)
    assert fragment in str(err.value)
    assert err.value.event is event


def test_truncated_body_is_undecodable():
    event = record(INSERT)
    assert_undecodable(replace(event, body=event.body[:-5]), "header says 83 bytes but the record holds 78")


@pytest.mark.parametrize("delta", [-1, 1, 40])
def test_wrong_tm_len_is_undecodable(delta):
    event = record(UPDATE)
    bad = replace(event, header=replace(event.header, tm_len=event.header.tm_len + delta))
    assert_undecodable(bad, "table map")


def test_garbage_body_is_undecodable():
    event = record(DELETE)
    assert_undecodable(replace(event, body=bytes(range(256)) * 2), "table map")


def test_flipped_byte_fails_the_checksum():
    event = record(INSERT)
    body = bytearray(event.body)
    body[-10] ^= 0x01
    assert_undecodable(replace(event, body=bytes(body)), "rows event fails its CRC32 checksum")


def test_rows_cut_short_inside_a_row_are_undecodable():
    event = record(INSERT)  # checksum and size made right: only the row parser can notice
    rows = sealed(event.rows_event_bytes()[:-9] + event.rows_event_bytes()[-4:])
    assert_undecodable(with_events(event, event.table_map_bytes(), rows), "passes the event's end")


def test_a_row_running_into_the_checksum_is_undecodable():
    event = record(DELETE)  # one more byte: a null bitmap whose row's INT would be read from the CRC32
    rows = event.rows_event_bytes()
    assert_undecodable(
        with_events(event, event.table_map_bytes(), sealed(rows[:-4] + b"\xfe" + rows[-4:])),
        "rows event: 2 rows took 24 bytes of a 20-byte body",
    )


def test_table_map_without_column_names_asks_for_full_metadata():
    event = record(INSERT)
    tm = event.table_map_bytes()
    minimal = sealed(tm[: tm.index(b"\x01\x01\x80")] + tm[-4:])  # cut at the first optional-metadata field
    rowdecode._TABLES.clear()
    assert_undecodable(with_events(event, minimal, event.rows_event_bytes()), "binlog_row_metadata=FULL")


def test_rows_of_another_table_id_are_undecodable():
    event = record(INSERT)
    rows = bytearray(event.rows_event_bytes())
    rows[19] ^= 0x01  # first byte of the rows event's table id
    assert_undecodable(with_events(event, event.table_map_bytes(), sealed(bytes(rows))), "table id")


def test_header_naming_another_table_is_undecodable():
    event = record(INSERT)
    other = replace(event, header=replace(event.header, table="customers"))
    with pytest.raises(RowDecodeError, match="the table map describes dbus_unit_rowdecode.orders"):
        decode_rows(other)


@pytest.mark.parametrize("header", [{"chunk": (0, 2)}, {"kind": "ddl"}, {"event_type": 39}])
def test_records_that_are_not_whole_rows_events_are_refused(header):
    event = record(INSERT)
    assert_undecodable(replace(event, header=replace(event.header, **header)), "")


@given(st.binary(max_size=600), st.integers(0, 600))
@settings(max_examples=300)
def test_random_bodies_raise_row_decode_error(body, tm_len):
    event = replace(record(INSERT), body=body)
    event = replace(event, header=replace(event.header, tm_len=tm_len))
    with pytest.raises(RowDecodeError):
        decode_rows(event)


@given(st.integers(1, 300), st.integers(0, 255))
def test_any_single_byte_change_is_caught(offset, xor):
    event = record(UPDATE)
    body = bytearray(event.body)
    index = len(body) - offset
    body[index] ^= xor or 0xFF
    with pytest.raises(RowDecodeError):
        decode_rows(replace(event, body=bytes(body)))


# ---------------------------------------------------------------- MariaDB INET4 / INET6 / UUID text
# The texts MariaDB 10.11's SELECT printed for these bytes (CAST(x'...' AS INET6) and a UUID column);
# tests/integration/test_rowdecode_types.py holds random values to the server as well.

INET6_SELECTED = [
    ("20010db8000000000000ff0000428329", "2001:db8::ff00:42:8329"),
    ("00000000000000000000000001020304", "::1.2.3.4"),
    ("00000000000000000000ffff01020304", "::ffff:1.2.3.4"),
    ("00000000000000000000000000000001", "::1"),
    ("00000000000000000000000000000000", "::"),
    ("00000000000000000000000000010002", "::0.1.0.2"),
    ("00010000000100000000000000000001", "1:0:1::1"),
    ("00000000000000000000ffff00000001", "::ffff:0.0.0.1"),
    ("0001000000000000000000000000ffff", "1::ffff"),
    ("00000000000000000000000000000002", "::2"),
    ("0000000000000000000000000000ffff", "::ffff"),
    ("00000000000000000000ffff00000000", "::ffff:0.0.0.0"),
    ("000000000000000000000000ffff0000", "::255.255.0.0"),
    ("00000000000000000001ffff01020304", "::1:ffff:102:304"),
    ("abcd0000000000000000000000000000", "abcd::"),
    ("00000000000100000000000000000000", "0:0:1::"),
    ("00000001000000010000000100010000", "::1:0:1:0:1:1:0"),  # a single zero group is compressed too
    ("00010000000100010001000100010001", "1::1:1:1:1:1:1"),
    ("00010001000100010001000100010000", "1:1:1:1:1:1:1::"),
    ("00010000000000010000000000010001", "1::1:0:0:1:1"),  # the first of two longest runs
]


@pytest.mark.parametrize(("hex_value", "text"), INET6_SELECTED)
def test_inet6_text_is_what_mariadb_selects(hex_value, text):
    assert rowdecode.inet6_text(bytes.fromhex(hex_value)) == text


def test_inet4_and_uuid_texts():
    assert rowdecode.inet4_text(b"\x01\x02\x03\x04") == "1.2.3.4"
    assert rowdecode.inet4_text(b"\xff\xff\xff\x00") == "255.255.255.0"
    assert (
        rowdecode.uuid_text(bytes.fromhex("123e4567e89b12d3a456426655440000"))
        == "123e4567-e89b-12d3-a456-426655440000"
    )
    assert rowdecode.uuid_text(bytes(16)) == "00000000-0000-0000-0000-000000000000"


@pytest.mark.parametrize(
    ("func", "size"), [(rowdecode.inet4_text, 4), (rowdecode.inet6_text, 16), (rowdecode.uuid_text, 16)]
)
def test_texts_refuse_values_of_another_length(func, size):
    with pytest.raises(ValueError, match=f"expected {size}"):
        func(bytes(size + 1))


_WORD = st.sampled_from([0, 0, 0, 1, 0xFFFF]) | st.integers(0, 0xFFFF)


@given(st.lists(_WORD, min_size=8, max_size=8))
def test_inet6_text_reads_back_as_the_same_address(words):
    import ipaddress

    value = struct.pack(">8H", *words)
    text = rowdecode.inet6_text(value)
    assert ipaddress.IPv6Address(text).packed == value
    assert text == text.lower() and ":::" not in text and text.count("::") <= 1
    runs = [
        (i, j - i)
        for i in range(8)
        for j in range(i + 1, 9)
        if all(w == 0 for w in words[i:j]) and (i == 0 or words[i - 1]) and (j == 8 or words[j])
    ]
    longest = max(runs, key=lambda r: (r[1], -r[0]), default=None)  # the first longest run
    if longest is None:
        assert "::" not in text and len(text.split(":")) == 8
    elif "." not in text:
        head, tail = text.split("::")
        assert len(head.split(":") if head else []) == longest[0]
        assert len(head.split(":") if head else []) + len(tail.split(":") if tail else []) == 8 - longest[1]
    else:  # the dotted quad: IPv4-compatible or IPv4-mapped
        assert longest[0] == 0 and (longest[1] == 6 or (longest[1] == 5 and words[5] == 0xFFFF))


@given(st.binary(min_size=16, max_size=16))
def test_uuid_text_reads_back_as_the_same_bytes(value):
    import uuid

    text = rowdecode.uuid_text(value)
    assert uuid.UUID(text).bytes == value and text == str(uuid.UUID(bytes=value))


def test_row_decode_error_is_a_dbus_error_and_still_a_value_error():
    with pytest.raises(RowDecodeError) as e:
        decode_rows(replace(record(INSERT), body=b"short"))
    assert isinstance(e.value, DbusError) and isinstance(e.value, ValueError)
    assert (e.value.code, e.value.retriable) == ("RAW_UNDECODABLE", False)
