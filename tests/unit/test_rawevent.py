"""binlog.rawevent: the header is a frozen RawHeader and the wire bytes do not change.

Records are the captured ones of tests/golden/records/ and headers hypothesis builds;
``encode(decode(v)) == v`` for each, whatever members and order they have.
"""

from __future__ import annotations

import json
import struct
from dataclasses import FrozenInstanceError, replace
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from binlog import rawevent
from binlog.rawevent import RawEvent, RawEventError, RawHeader
from dbuslib.errors import DbusError

ROWS = {
    "kind": "rows",
    "source": "demo",
    "server_id": 1,
    "file": "mariadb-bin.000006",
    "pos": 860,
    "next_pos": 938,
    "gtid": "0-1-42",
    "ts": 1795355830,
    "schema": "shop",
    "table": "orders",
    "flavor": "mariadb",
    "event_type": 30,
    "crc": True,
    "tm_len": 3,
}
DDL = {
    "kind": "ddl",
    "source": "demo",
    "server_id": 1,
    "file": "mariadb-bin.000006",
    "pos": 900,
    "next_pos": 990,
    "gtid": "",
    "ts": 1795355830,
    "schema": "shop",
    "table": "orders",
    "ddl": "TRUNCATE",
    "sql": "TRUNCATE orders",
    "removes_rows": True,
    "row_changes": ["TRUNCATE"],
}


def value(header: dict, body: bytes = b"") -> bytes:
    text = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode()
    return b"DBR\x01" + struct.pack(">I", len(text)) + text + body


RECORDS = sorted((Path(__file__).resolve().parents[1] / "golden" / "records").glob("*.hex"))


def _hex(path: Path) -> bytes:
    return bytes.fromhex("".join(line for line in path.read_text().splitlines() if not line.startswith("#")))


def test_the_captured_records_are_there():
    assert len(RECORDS) >= 16


@pytest.mark.parametrize("path", RECORDS, ids=lambda p: p.stem)
def test_captured_records_encode_back_to_the_same_bytes(path):
    record = _hex(path)
    event = rawevent.decode(record)
    assert isinstance(event.header, RawHeader)
    assert rawevent.encode(event) == record


def test_header_members_are_attributes():
    h = rawevent.decode(value(ROWS, b"tm-rows")).header
    assert (h.kind, h.file, h.pos, h.next_pos, h.ts, h.schema, h.table) == (
        "rows",
        "mariadb-bin.000006",
        860,
        938,
        1795355830,
        "shop",
        "orders",
    )
    assert (h.event_type, h.crc, h.tm_len, h.chunk, h.ddl, h.where) == (
        30,
        True,
        3,
        None,
        None,
        "mariadb-bin.000006:860",
    )
    with pytest.raises(FrozenInstanceError):
        h.pos = 1  # type: ignore[misc]


def test_ddl_header_members_are_attributes():
    h = rawevent.decode(value(DDL)).header
    assert (h.ddl, h.sql, h.removes_rows, h.row_changes) == (
        "TRUNCATE",
        "TRUNCATE orders",
        True,
        ["TRUNCATE"],
    )


def test_the_extractors_order_is_the_field_order():
    """A header built from attributes (as extractor.capture does) writes the extractor's key order."""
    for doc in (ROWS, DDL):
        built = RawHeader(**doc)
        assert list(built.to_dict()) == list(doc)
        assert rawevent.encode(RawEvent(built)) == value(doc)


def test_unknown_members_of_a_newer_writer_are_kept_in_place():
    doc = {"kind": "rows", "future": {"a": [1]}, **{k: v for k, v in ROWS.items() if k != "kind"}, "z": None}
    record = value(doc, b"tm-rows")
    event = rawevent.decode(record)
    assert event.header.extra == {"future": {"a": [1]}, "z": None}
    assert rawevent.encode(event) == record


def test_chunks_add_chunk_last_and_reassembly_removes_it():
    event = RawEvent(RawHeader.from_dict(ROWS), b"x" * 3 + b"y" * 2000, "shop.orders")
    chunks = rawevent.split(event, 600)
    assert len(chunks) > 1
    first = json.loads(rawevent.encode(chunks[0])[8:].split(b"}", 1)[0] + b"}")
    assert list(first)[-1] == "chunk" and first["chunk"] == [0, len(chunks)]
    r = rawevent.Reassembler()
    whole = [r.push(rawevent.decode(rawevent.encode(c), "shop.orders")) for c in chunks][-1]
    assert rawevent.encode(whole) == rawevent.encode(event)


@pytest.mark.parametrize(
    "doc",
    [
        {**ROWS, "pos": "860"},
        {**ROWS, "crc": 1},
        {**ROWS, "chunk": [2, 2]},
        {k: v for k, v in ROWS.items() if k != "tm_len"},
        {**DDL, "kind": "insert"},
    ],
)
def test_bad_headers_are_raw_event_errors_and_dbus_errors(doc):
    with pytest.raises(RawEventError) as e:
        rawevent.decode(value(doc, b"tm-rows"))
    assert isinstance(e.value, DbusError) and isinstance(e.value, ValueError)
    assert e.value.code == "RAW_BAD_RECORD"


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=6,
)


@given(extra=st.dictionaries(st.text(max_size=8), JSON, max_size=4), first=st.booleans())
def test_any_valid_header_encodes_back_to_its_bytes(extra, first):
    """Members in any order, unknown ones and known ones of any JSON value: what decodes encodes back."""
    extra = {k: v for k, v in extra.items() if k not in ROWS and k != "chunk"}
    doc = {**extra, **ROWS} if first else {**ROWS, **extra}
    record = value(doc, b"tm-rows")
    try:
        event = rawevent.decode(record)
    except RawEventError:
        return  # a known member of the wrong type
    assert rawevent.encode(event) == record
    assert event.header.to_dict() == doc


def test_mapping_reads_by_wire_name_match_the_attributes():
    h = rawevent.decode(value({**ROWS, "types": {"a": "inet6"}}, b"tm-rows")).header
    assert h["pos"] == h.pos and h.get("types") == {"a": "inet6"} and h.get("chunk") is None
    assert "ddl" not in h and "tm_len" in h
    assert {**h} == h.to_dict()
    assert replace(h, pos=1).to_dict()["pos"] == 1
