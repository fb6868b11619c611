"""The fast path's message text equals the Python path's, byte for byte, for the real records."""

from __future__ import annotations

import pytest
from test_fastdecode import RECORDS

from appender.convert import ConvertSettings, to_ums_fast
from appender.textpath import message_prefix, messages, tuple_texts
from binlog import rawevent
from binlog.fastdecode import decode_fast, table_of
from ums import Namespace, to_json
from ums.encoding import dumps_compact


def rendered_lines(event) -> list[bytes]:
    """What the JVM decoder writes (tests/unit/test_jvm_rows.py holds it to this)."""
    r = decode_fast(event, ums=True)
    images = (
        r.after
        if r.op == "i"
        else r.before
        if r.op == "d"
        else [x for p in zip(r.before, r.after, strict=False) for x in p]
    )
    return [",".join(dumps_compact(v) for v in row).encode() for row in images]


@pytest.mark.parametrize("before_image", [False, True])
@pytest.mark.parametrize(("max_tuples", "max_bytes"), [(500, 1_000_000), (2, 1_000_000), (500, 300), (1, 1)])
@pytest.mark.parametrize("index", range(len(RECORDS)))
def test_text_path_equals_the_python_path(index, before_image, max_tuples, max_bytes):
    event = rawevent.decode(RECORDS[index])
    settings = ConvertSettings(
        ds="demo",
        timezone="Asia/Shanghai",
        before_update_image=before_image,
        max_tuples=max_tuples,
        max_bytes=max_bytes,
    )
    rows = decode_fast(event, ums=True)
    expected = [to_json(m).encode() for m in to_ums_fast(event.header, rows, 3, settings)]

    shape = table_of(event)
    ns = Namespace("mysql", "demo", shape.schema, shape.table, 3)
    tuples = tuple_texts(event.header, rows.op, rendered_lines(event), settings.timezone, before_image)
    got = messages(message_prefix(ns, shape.columns), tuples, max_tuples, max_bytes)
    assert got == expected


def test_table_of_names_the_table_without_decoding_rows():
    event = rawevent.decode(RECORDS[0])
    shape = table_of(event)
    assert (shape.schema, shape.table) == (event.header["schema"], event.header["table"])
    assert shape.columns == decode_fast(event).columns


@pytest.mark.parametrize("before_image", [False, True])
@pytest.mark.parametrize(
    ("max_tuples", "max_bytes"),
    [(500, 1_000_000), (2, 1_000_000), (3, 1_000_000), (500, 300), (1, 1), (500, 2000)],
)
@pytest.mark.parametrize("index", range(len(RECORDS)))
def test_one_join_per_event_gives_the_same_messages(index, before_image, max_tuples, max_bytes):
    from appender.textpath import event_messages

    event = rawevent.decode(RECORDS[index])
    shape = table_of(event)
    prefix = message_prefix(Namespace("mysql", "demo", shape.schema, shape.table, 0), shape.columns)
    op = decode_fast(event).op
    lines = rendered_lines(event)
    expected = messages(
        prefix, tuple_texts(event.header, op, lines, "UTC", before_image), max_tuples, max_bytes
    )
    assert (
        event_messages(prefix, event.header, op, lines, "UTC", before_image, max_tuples, max_bytes)
        == expected
    )


def test_one_join_per_event_for_many_rows():
    from appender.textpath import event_messages

    header = {"file": "mariadb-bin.000007", "pos": 4242, "ts": 1795355830}
    lines = [f'{i},"r{i}"'.encode() for i in range(1234)]
    for max_tuples in (500, 1234, 2000):
        expected = messages(b"P[", tuple_texts(header, "i", lines, "UTC", False), max_tuples, 10**9)
        assert event_messages(b"P[", header, "i", lines, "UTC", False, max_tuples, 10**9) == expected
