"""The reference decoder (binlog/rows.py) on the captured records of tests/golden/records/ (see its README):
what the values become in UMS, and how damaged records and ``types`` headers are refused."""

from __future__ import annotations

import struct
import zlib
from dataclasses import replace
from pathlib import Path

import pytest

from binlog import rawevent
from binlog import rows as rowdecode
from binlog.rows import RowDecodeError
from ums.values import encode_column

RECORD_FILES = sorted((Path(__file__).resolve().parents[1] / "golden" / "records").glob("*.hex"))


def _read(path: Path) -> bytes:
    return bytes.fromhex("".join(line for line in path.read_text().splitlines() if not line.startswith("#")))


EVENTS = {p.stem: rawevent.decode(_read(p)) for p in RECORD_FILES}
NARROW_INSERT = EVENTS["08_narrow_insert"]
INET_RECORDS = [EVENTS[n] for n in ("11_inet_insert", "12_inet_update", "13_inet_delete")]


def ums_images(event) -> list[tuple]:
    """Each image's values in UMS wire form (``encode_column``), an update's before and after alternating."""
    d = rowdecode.decode_rows(event)
    images = [i for r in d.rows for i in (r.before, r.after) if i is not None]
    return [tuple(encode_column(c, image[c.name]) for c in d.columns) for image in images]


@pytest.mark.parametrize("name", sorted(EVENTS))
def test_every_record_decodes_and_encodes(name):
    d = rowdecode.decode_rows(EVENTS[name])
    assert (d.schema, d.table) == (EVENTS[name].header.schema, EVENTS[name].header.table)
    assert len(ums_images(EVENTS[name])) == len(d.rows) * (2 if d.op == "u" else 1)


def test_covers_inserts_updates_deletes_nulls_and_zero_dates():
    ops = {(e.header.table, rowdecode.decode_rows(e).op) for e in EVENTS.values()}
    assert ops == {(t, op) for t in ("every_type", "narrow", "inet", "orders") for op in "iud"}
    narrow = ums_images(NARROW_INSERT)
    assert narrow[3][4] == "2024-00-15 01:02:03.500" and narrow[3][9] == "0000-00-00"
    assert narrow[1][3:] == (None,) * 7
    assert narrow[0][7] == "café" and narrow[0][3] == "-1234567890.12"


def _rows_event_cut(event: rawevent.RawEvent, cut: int) -> rawevent.RawEvent:
    """The record with ``cut`` bytes taken off the end of its rows event, size and checksum fixed."""
    rows = event.rows_event_bytes()[:-4]
    rows = rows[: len(rows) - cut]
    rows = rows[:9] + struct.pack("<I", len(rows) + 4) + rows[13:]
    rows += struct.pack("<I", zlib.crc32(rows))
    return replace(event, body=event.table_map_bytes() + rows)


@pytest.mark.parametrize("cut", [1, 3])
def test_a_cut_body_raises_naming_the_table(cut):
    with pytest.raises(RowDecodeError, match="narrow"):
        rowdecode.decode_rows(_rows_event_cut(NARROW_INSERT, cut))


def test_a_bad_checksum_raises():
    body = bytearray(NARROW_INSERT.body)
    body[-10] ^= 0xFF
    with pytest.raises(RowDecodeError, match="checksum"):
        rowdecode.decode_rows(replace(NARROW_INSERT, body=bytes(body)))


INET_AFTER = [  # SELECT of the inserted rows: INET4/INET6/UUID as text, BINARY(n) as Base64
    (
        1,
        "1.2.3.4",
        "2001:db8::ff00:42:8329",
        "123e4567-e89b-12d3-a456-426655440000",
        "ABEiM0RVZneImaq7zN3u/w==",
        "AQIDBA==",
    ),
    (2, "0.0.0.0", "::", "00000000-0000-0000-0000-000000000000", "AAAAAAAAAAAAAAAAAAAAAA==", "AAAAAA=="),
    (
        3,
        "255.255.255.255",
        "::ffff:1.2.3.4",
        "ffffffff-ffff-ffff-ffff-ffffffffffff",
        "/wAAAAAAAAAAAAAAAAAAAA==",
        "/wAAAA==",
    ),
    (4, None, None, None, None, None),
    (5, "10.0.0.0", "::1.2.3.4", "6ccd780c-baba-1026-9564-5b8c656024db", None, None),
    (6, "0.0.0.1", "1:0:1::", "f47ac10b-58cc-4372-a567-0e02b2c3d479", None, None),
]


def test_inet_and_uuid_columns_are_text_as_select_prints_them():
    insert, update, delete = INET_RECORDS
    columns = rowdecode.decode_rows(insert).columns
    assert [c.column_type for c in columns] == ["int", "inet4", "inet6", "uuid", "binary(16)", "binary(4)"]
    assert [c.ums_type.value for c in columns] == ["int", "string", "string", "string", "binary", "binary"]
    assert ums_images(insert) == INET_AFTER
    assert ums_images(update)[1][1:4] == ("192.168.0.1", "fe80::1", "00000000-0000-0000-0000-000000000001")
    assert ums_images(delete) == [INET_AFTER[2]]


def test_without_types_in_the_header_inet_and_uuid_stay_bytes():
    insert = INET_RECORDS[0]
    bare = replace(insert, header=replace(insert.header, types=None))
    decoded = rowdecode.decode_rows(bare)
    assert [c.column_type for c in decoded.columns][1:4] == ["binary(4)", "binary(16)", "binary(16)"]
    assert decoded.rows[0].after["a"] == b"\x01\x02\x03\x04"


@pytest.mark.parametrize(
    "types", [{"d": "inet4"}, {"e": "inet6"}, {"id": "uuid"}, {"f": "uuid"}, {"a": "json"}]
)
def test_a_type_that_does_not_fit_the_binlog_column_changes_nothing(types):
    insert = INET_RECORDS[0]
    bare = rowdecode.decode_rows(replace(insert, header=replace(insert.header, types={})))
    other = rowdecode.decode_rows(replace(insert, header=replace(insert.header, types=types)))
    assert other == bare


@pytest.mark.parametrize("types", [["a"], "inet4", {"a": 4}])
def test_a_malformed_types_header_is_undecodable(types):
    insert = INET_RECORDS[0]
    with pytest.raises(RowDecodeError, match="types"):
        rowdecode.decode_rows(replace(insert, header=replace(insert.header, types=types)))
