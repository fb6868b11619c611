"""Real-time mode's record path: the sidecar frames (dbuslib/sidecar.py) and the JVM's UMS text (binlog/jvm).

- Frames: any fields survive encode/decode; arbitrary bytes decode to fields or ``ProtocolError``, never
  anything else; ``serve`` answers ``ok`` + the handler's fields, ``error`` + why when the handler raises,
  stops cleanly at the end of stdin and with 2 on a broken frame.
- ``dbus.jvm.UmsText`` (through ``dbus.jvm.TextMain``) writes, byte for byte, what ``ums.text.event_messages``
  writes for the same prefix, ids, op, lines, before-image setting and limits, over seeded random cases
  (the cut by count and by bytes included); its ``ums_ts_`` and ``ums_id_`` are ``ums.timefmt.ums_ts_ms``'s
  and ``ums.ids.ums_id``'s, or it leaves the record to Python (null / -1) where Python would refuse it.
"""

from __future__ import annotations

import io
import random
from zoneinfo import ZoneInfo

import jvm_jar
import pytest
from hypothesis import given
from hypothesis import strategies as st
from rowformat_jvm import frames

from dbuslib import sidecar
from ums.errors import UmsError
from ums.ids import ums_id
from ums.text import event_messages
from ums.timefmt import ums_ts_ms

FIELDS = st.lists(st.none() | st.binary(max_size=300), max_size=20)


@given(FIELDS)
def test_fields_survive_a_frame(fields):
    frame = sidecar.encode(fields)
    assert sidecar.read_frame(io.BytesIO(frame)) == fields
    assert sidecar.decode(frame[4:]) == fields


@given(st.binary(max_size=400))
def test_arbitrary_bytes_are_fields_or_a_protocol_error(data):
    try:
        fields = sidecar.read_frame(io.BytesIO(data))
    except sidecar.ProtocolError:
        return
    assert fields is None or all(f is None or isinstance(f, bytes) for f in fields)


def test_serve_answers_each_request_and_stops_at_the_end_of_input():
    def handler(fields):
        if fields[0] == b"boom":
            raise RuntimeError("the meta store is gone")
        return [b"echo", *fields[1:], None]

    stdin = io.BytesIO(sidecar.encode([b"a", b"x"]) + sidecar.encode([b"boom"]) + sidecar.encode([b"b"]))
    stdout = io.BytesIO()
    assert sidecar.serve(handler, stdin, stdout) == 0
    out = io.BytesIO(stdout.getvalue())
    assert sidecar.read_frame(out) == [b"ok", b"echo", b"x", None]
    error = sidecar.read_frame(out)
    assert error[0] == b"error" and b"RuntimeError: the meta store is gone" in error[1]
    assert sidecar.read_frame(out) == [b"ok", b"echo", None]
    assert sidecar.read_frame(out) is None


def test_serve_stops_on_a_broken_frame():
    stdin = io.BytesIO(sidecar.encode([b"a"]) + b"\x00\x00\x00\x09\x00\x05")
    stdout = io.BytesIO()
    assert sidecar.serve(lambda f: [], stdin, stdout) == 2
    assert sidecar.read_frame(io.BytesIO(stdout.getvalue())) == [b"ok"]


# ---------------------------------------------------------------- the JVM's text


@pytest.fixture(scope="module")
def text_main():
    return jvm_jar.build()


def ask(jar, requests: list[list[bytes | None]]) -> list[list[bytes | None] | None]:
    stream = frames(jar, "dbus.jvm.TextMain", requests)
    answers = [sidecar.read_frame(stream) for _ in requests]
    assert sidecar.read_frame(stream) is None
    return answers


def _line(rng: random.Random) -> bytes:
    """A JVM line: column texts joined by ',' (no newline inside: JSON escapes it)."""
    parts = [
        rng.choice(
            [
                b"1",
                b"null",
                b'"alice"',
                b'"12.50"',
                b'"\xc3\xa9t\xc3\xa9 \\n"',
                b"-42",
                b'"' + b"x" * 300 + b'"',
            ]
        )
        for _ in range(rng.randint(1, 6))
    ]
    return b",".join(parts)


@pytest.mark.jvm
def test_jvm_message_texts_are_pythons(text_main):
    rng = random.Random(14)
    cases, requests = [], []
    for _ in range(400):
        op = rng.choice("iud")
        images = rng.randint(0, 40) * (2 if op == "u" else 1)
        lines = [_line(rng) for _ in range(images)]
        before = rng.random() < 0.4
        max_tuples = rng.choice([1, 2, 3, 7, 500])
        max_bytes = rng.choice([150, 400, 1000, 4096, 1_000_000])
        uid = rng.choice(["1030000012345678", "10000000000004", "20000000001234567"])
        ts = "2026-11-24 10:00:00.000"
        prefix = b'{"protocol":{"type":"data_increment_data","version":"1.3"},"schema":{},"payload":['
        cases.append((prefix, uid, ts, op, lines, before, max_tuples, max_bytes))
        requests.append(
            [
                b"text",
                prefix,
                uid.encode(),
                ts.encode(),
                op.encode(),
                b"\n".join(lines),
                b"1" if before else b"0",
                str(max_tuples).encode(),
                str(max_bytes).encode(),
            ]
        )
    for case, got in zip(cases, ask(text_main, requests), strict=True):
        prefix, uid, ts, op, lines, before, max_tuples, max_bytes = case
        assert got == event_messages(prefix, uid, ts, op, lines, before, max_tuples, max_bytes), case[1:4]


@pytest.mark.jvm
def test_jvm_timestamps_and_ids_are_pythons(text_main):
    rng = random.Random(7)
    zones = ["UTC", "Asia/Shanghai", "America/New_York", "Europe/London", "Australia/Lord_Howe"]
    stamps = [(rng.randrange(0, 4_102_444_800) * 1000, rng.choice(zones)) for _ in range(300)]
    files = [
        "mariadb-bin.000001",
        "mysql-bin.000103",
        "b.999999",
        "b.922337",
        "b.922338",
        "noext",
        "x.",
        "x.12a",
        "a.b.000007",
        "x.1234567",
    ]
    positions = [0, 4, 123456789, 9_999_999_999_999, 10_000_000_000_000]
    ids = [(f, p) for f in files for p in positions]
    answers = ask(
        text_main,
        [[b"ts", str(ms).encode(), z.encode()] for ms, z in stamps]
        + [[b"id", f.encode(), str(p).encode()] for f, p in ids],
    )
    for (ms, zone), got in zip(stamps, answers[: len(stamps)], strict=True):
        assert got == [ums_ts_ms(ms, ZoneInfo(zone)).encode()], (ms, zone)
    for (f, p), got in zip(ids, answers[len(stamps) :], strict=True):
        try:
            want = ums_id(f, p)
        except UmsError:
            want = "-1"
        jvm = got[0].decode()
        # -1: Python is asked, and gives the record its own answer (a number of over 6 digits included)
        assert jvm == want or (jvm == "-1" and len(f.rsplit(".", 1)[-1]) > 6), (f, p)
