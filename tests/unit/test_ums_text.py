"""ums.text: message text written around rendered rows equals ``ums.to_json`` of the reference path
(binlog/rows.py + ums.values.encode_column, ``appender.convert.to_ums``), byte for byte, for the captured
records of tests/golden/records/."""

from __future__ import annotations

from pathlib import Path

import pytest

from appender.convert import ConvertSettings, rendered_messages, to_ums
from binlog import rawevent
from binlog.rows import decode_rows, table_of
from ums import Namespace, to_json, ums_id, ums_ts_ms
from ums.encoding import dumps_compact
from ums.text import event_messages, message_prefix, messages, tuple_texts
from ums.values import encode_column

RECORDS_DIR = Path(__file__).resolve().parents[1] / "golden" / "records"
RECORDS = [
    bytes.fromhex("".join(line for line in p.read_text().splitlines() if not line.startswith("#")))
    for p in sorted(RECORDS_DIR.glob("*.hex"))
]


def rendered_lines(event) -> list[bytes]:
    """What the JVM decoder writes (tests/unit/test_jvm_rows.py holds it to this): per row image the
    ``encode_column`` JSON of every column, joined by ``,``; an update's before and after alternate."""
    d = decode_rows(event)
    images = [i for r in d.rows for i in (r.before, r.after) if i is not None]
    return [
        ",".join(dumps_compact(encode_column(c, im[c.name])) for c in d.columns).encode() for im in images
    ]


def ids(event, timezone="UTC"):
    from zoneinfo import ZoneInfo

    h = event.header
    return ums_id(h["file"], h["pos"]), ums_ts_ms(h["ts"] * 1000, ZoneInfo(timezone))


@pytest.mark.parametrize("before_image", [False, True])
@pytest.mark.parametrize(("max_tuples", "max_bytes"), [(500, 1_000_000), (2, 1_000_000), (500, 300), (1, 1)])
@pytest.mark.parametrize("index", range(len(RECORDS)))
def test_text_path_equals_the_reference_path(index, before_image, max_tuples, max_bytes):
    event = rawevent.decode(RECORDS[index])
    settings = ConvertSettings(
        ds="demo",
        timezone="Asia/Shanghai",
        before_update_image=before_image,
        max_tuples=max_tuples,
        max_bytes=max_bytes,
    )
    expected = [to_json(m).encode() for m in to_ums(event.header, decode_rows(event), 3, settings)]

    shape = table_of(event)
    ns = Namespace("mysql", "demo", shape.schema, shape.table, 3)
    uid, ts = ids(event, settings.timezone)
    tuples = tuple_texts(uid, ts, shape.op, rendered_lines(event), before_image)
    assert messages(message_prefix(ns, shape.columns), tuples, max_tuples, max_bytes) == expected


@pytest.mark.parametrize("before_image", [False, True])
@pytest.mark.parametrize(("max_tuples", "max_bytes"), [(500, 1_000_000), (2, 1_000_000), (500, 300), (1, 1)])
@pytest.mark.parametrize("index", range(len(RECORDS)))
def test_rendered_values_equal_the_reference_path(index, before_image, max_tuples, max_bytes):
    """The masked/Avro path: the JVM's lines parsed back into values give the reference messages."""
    event = rawevent.decode(RECORDS[index])
    settings = ConvertSettings(
        ds="demo", before_update_image=before_image, max_tuples=max_tuples, max_bytes=max_bytes
    )
    expected = to_ums(event.header, decode_rows(event), 1, settings)
    got = rendered_messages(event.header, table_of(event), rendered_lines(event), 1, settings)
    assert [to_json(m) for m in got] == [to_json(m) for m in expected]
    assert got == expected


def test_table_of_names_the_table_without_decoding_rows():
    event = rawevent.decode(RECORDS[0])
    shape = table_of(event)
    assert (shape.schema, shape.table, shape.rows) == (event.header.schema, event.header.table, ())
    assert shape.columns == decode_rows(event).columns and shape.op == decode_rows(event).op


@pytest.mark.parametrize("before_image", [False, True])
@pytest.mark.parametrize(
    ("max_tuples", "max_bytes"),
    [(500, 1_000_000), (2, 1_000_000), (3, 1_000_000), (500, 300), (1, 1), (500, 2000)],
)
@pytest.mark.parametrize("index", range(len(RECORDS)))
def test_one_join_per_event_gives_the_same_messages(index, before_image, max_tuples, max_bytes):
    event = rawevent.decode(RECORDS[index])
    shape = table_of(event)
    prefix = message_prefix(Namespace("mysql", "demo", shape.schema, shape.table, 0), shape.columns)
    lines = rendered_lines(event)
    uid, ts = ids(event)
    expected = messages(prefix, tuple_texts(uid, ts, shape.op, lines, before_image), max_tuples, max_bytes)
    got = event_messages(prefix, uid, ts, shape.op, lines, before_image, max_tuples, max_bytes)
    assert got == expected


def test_one_join_per_event_for_many_rows():
    uid, ts = "70000000004242", "2026-11-22 14:14:04.000"
    lines = [f'{i},"r{i}"'.encode() for i in range(1234)]
    for max_tuples in (500, 1234, 2000):
        expected = messages(b"P[", tuple_texts(uid, ts, "i", lines, False), max_tuples, 10**9)
        assert event_messages(b"P[", uid, ts, "i", lines, False, max_tuples, 10**9) == expected
