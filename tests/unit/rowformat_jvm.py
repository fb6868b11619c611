"""Talking to the JVM's test drivers and what the per-row format tests share (not a test module: tests
import from here; test_jvm_rowformats, test_jvm_canal, test_jvm_avro, test_jvm_sidecar).

``frames`` runs a driver class (``dbus.jvm.RowFormatMain``, ``dbus.jvm.TextMain``) over sidecar frames.
``ask`` sends ``RowFormatMain`` requests (``event_request``: one rows event's lines and a description) and
reads each answer: the records the JVM wrote, or None when it leaves the event to the sidecar.
``events_of`` groups row changes into the binlog events they came from, numbered as the appender numbers
an event's tuples. The checks each format's test runs with its own ``description`` (the JVM's table
description, or None) and ``python_records`` (what the Python formatter writes for an event's changes):
``every_type_events_written``, ``captured_answers`` (the golden raw records), ``exact_or_declined``
(random events, from ``tables_and_events``).
"""

from __future__ import annotations

import base64
import io
import json
import subprocess
from collections.abc import Callable, Iterable
from dataclasses import replace
from datetime import date
from pathlib import Path

import every_type_changes
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st

from appender.convert import ConvertSettings, rendered_messages
from appender.rowshape import table_shape
from binlog.rawevent import decode
from binlog.rows import table_of
from dbuslib import sidecar
from ums import Namespace
from ums.build import field_for
from ums.formats import FormatOptions
from ums.formats.connect import scaled_text
from ums.ids import ums_id, ums_uid
from ums.rowchange import Position, RowChange, TableShape, from_message
from ums.scalars import float32_repr
from ums.types import ColumnSpec

REPO = Path(__file__).resolve().parents[2]
RECORD_FILES = sorted((REPO / "tests" / "golden" / "records").glob("*.hex"))
TOPIC = "demo.golden.t"
# a description's (version, max offset, topic, header prefix, namespace suffix, max bytes) in these tests
WHERE = (1, 2**63 - 1, TOPIC, "h.", "|demo.wh_placeholder", 10**9)
CONVERT = ConvertSettings("demo", before_update_image=True, max_tuples=10**9, max_bytes=10**12)

Describe = Callable[[TableShape, FormatOptions], list[bytes | None] | None]
PythonRecords = Callable[[list[RowChange], FormatOptions], list]
Answer = tuple[bytes | None, list | None]

_LINE_OPS = {"c": "i", "u": "u", "d": "d"}


def frames(jar: Path, main: str, requests: list[list[bytes | None]]) -> io.BytesIO:
    """The answer frames of the jar's driver class ``main`` to ``requests``, as one stream."""
    data = b"".join(sidecar.encode(r) for r in requests)
    out = subprocess.run(
        ["java", "-cp", str(jar), main], input=data, capture_output=True, check=True, timeout=300
    ).stdout
    return io.BytesIO(out)


def ask(jar: Path, requests: list[list[bytes | None]]) -> list[Answer]:
    """Each request's (lines, records or None): records as (key, value, headers)."""
    stream = frames(jar, "dbus.jvm.RowFormatMain", requests)
    answers: list[Answer] = []
    for _ in requests:
        fields: list = sidecar.read_frame(stream)  # type: ignore[assignment]
        assert fields is not None
        lines, rest = fields[0], fields[1:]
        if rest == [None]:
            answers.append((lines, None))
            continue
        n, i, recs = int(rest[0]), 1, []
        for _ in range(n):
            key, value, hn = rest[i], rest[i + 1], int(rest[i + 2])
            i += 3
            headers = tuple((rest[i + 2 * j].decode(), rest[i + 2 * j + 1]) for j in range(hn))
            i += 2 * hn
            recs.append((key, value, headers))
        answers.append((lines, recs))
    assert sidecar.read_frame(stream) is None
    return answers


def line(values) -> bytes:
    """The JVM decoder's line of UMS wire values (json.dumps of each, joined by ',')."""
    return ",".join(json.dumps(v, ensure_ascii=False) for v in values).encode()


def event_request(changes: list[RowChange], desc: list) -> list[bytes | None]:
    """A ``lines`` request: the event's row images as the decoder's lines, then the description."""
    first = changes[0]
    lines = []
    for c in changes:
        if c.op == "u":
            lines.append(line(c.before))
        lines.append(line(c.after if c.op != "d" else c.before))
    at = first.at
    return [
        b"lines",
        str(at.ums_id).encode(),
        str(at.ts_ms).encode(),
        at.file.encode(),
        str(at.pos).encode(),
        None if at.server_id is None else str(at.server_id).encode(),
        None if at.gtid is None else at.gtid.encode(),
        _LINE_OPS[first.op].encode(),
        b"\n".join(lines),
        *desc,
    ]


def as_event(changes: list[RowChange]) -> list[RowChange]:
    """The changes renumbered as the appender numbers one event's tuples: an update's before image is a
    tuple, so its row is 2k + 1."""
    step = 2 if changes[0].op == "u" else 1
    out = []
    for k, c in enumerate(changes):
        t = k * step + step - 1
        out.append(replace(c, at=replace(c.at, row=t), ums_uid=ums_uid(c.at.ums_id, t)))
    return out


def events_of(changes: list[RowChange]) -> list[list[RowChange]]:
    """Consecutive changes of one position and operation as one event's."""
    out: list[list[RowChange]] = []
    for c in changes:
        if out and out[-1][0].at.ums_id == c.at.ums_id and out[-1][0].op == c.op:
            out[-1].append(c)
        else:
            out.append([c])
    return [as_event(e) for e in out]


def records_of(fmt, topic: str, changes: Iterable[RowChange]) -> list:
    """What a ``ums.formats`` Format writes for ``changes``, as (key, value, headers) like ``ask``'s."""
    return [(r.key, r.value, tuple(r.headers)) for c in changes for r in fmt.records(topic, c)]


# ---------------------------------------------------------------- the checks each format runs


def every_type_events_written(
    jar: Path, description: Describe, python_records: PythonRecords, options: FormatOptions
) -> list[list[RowChange]]:
    """Every event of tests/golden/cdc/every_type.sql written by the JVM as Python writes it; the events."""
    events = events_of(every_type_changes.changes())
    desc = description(events[0][0].table, options)
    assert desc is not None
    answers = ask(jar, [event_request(e, desc) for e in events])
    written = 0
    for event, (_, got) in zip(events, answers, strict=True):
        if got is None:
            continue
        written += 1
        assert got == python_records(event, options), event[0].at
    assert written == len(events), f"{len(events) - written} of {len(events)} events left to the sidecar"
    return events


def raw_record(path: Path) -> bytes:
    """A golden raw record's bytes (its hex lines, comments left out)."""
    return bytes.fromhex("".join(x for x in path.read_text().splitlines() if not x.startswith("#")))


def captured_answers(
    jar: Path, description: Describe, python_records: PythonRecords, options: FormatOptions, *, every: bool
) -> tuple[int, int]:
    """Each golden raw rows record the JVM decodes and writes itself, against the appender's per-row path
    (its lines -> ``rendered_messages`` -> ``from_message`` -> the formatter): (written, described).
    ``every``: every table must have a description (else one without is left out)."""
    requests, expected = [], []
    for path in RECORD_FILES:
        value = raw_record(path)
        event = decode(value, None)
        if event.kind != "rows":
            continue
        shape = table_of(event)
        ns = Namespace("mysql", "demo", shape.schema, shape.table, 1)
        desc = description(table_shape(shape, ns, CONVERT), options)
        assert desc is not None or not every, path.name
        if desc is None:
            continue
        requests.append([b"raw", value, *desc])
        expected.append((path.name, event, shape))
    written = 0
    for (name, event, shape), (lines, got) in zip(expected, ask(jar, requests), strict=True):
        if got is None:
            continue
        assert lines is not None, name
        h = event.header
        assert h.file is not None and h.ts is not None, name
        messages = rendered_messages(h, shape, lines.split(b"\n"), 1, CONVERT)
        sid = h.server_id if isinstance(h.server_id, int) else None
        changes = [
            c
            for m in messages
            for c in from_message(
                m,
                shape.columns,
                tuple(shape.primary_key),
                file=h.file,
                ts_ms=h.ts * 1000,
                server_id=sid,
                gtid=h.gtid,
            )
        ]
        assert got == python_records(changes, options), name
        written += 1
    return written, len(expected)


def exact_or_declined(
    jar: Path,
    cases: list[tuple[list[RowChange], FormatOptions]],
    description: Describe,
    python_records: PythonRecords,
    refusals: tuple[type[BaseException], ...] = (ValueError, OverflowError, TypeError),
    *,
    every: bool = False,
) -> None:
    """Each random event the JVM writes is what Python writes; what Python refuses (``refusals``: it
    dead-letters the record), the JVM must leave to the sidecar. An event whose table has no description
    is left out (``every``: none may lack one)."""
    requests, kept = [], []
    for changes, options in cases:
        desc = description(changes[0].table, options)
        assert desc is not None or not every, [c.column_type for c in changes[0].table.columns]
        if desc is None:
            continue
        requests.append(event_request(changes, desc))
        kept.append((changes, options))
    for (changes, options), (_, got) in zip(kept, ask(jar, requests), strict=True):
        try:
            want = python_records(changes, options)
        except refusals:
            want = None
        if got is not None:
            assert got == want, first_difference(got, want, changes, options)


def first_difference(got: list, want: list | None, changes: list[RowChange], options: FormatOptions) -> str:
    """Where the JVM's records first differ from Python's, for an assertion's message."""
    types = [c.column_type for c in changes[0].table.columns]
    if want is None:
        return f"the JVM wrote a change Python refuses: {types} {changes} {options}"
    for g, w in zip(got, want, strict=False):
        for a, b in zip(g, w, strict=True):
            if a != b:
                a_, b_ = repr(a), repr(b)
                i = next((k for k in range(min(len(a_), len(b_))) if a_[k] != b_[k]), 0)
                at = max(0, i - 200)
                return f"{types} {options}:\n JVM {a_[at : i + 80]}\n Py  {b_[at : i + 80]}"
    return f"{types}: {len(got)} records, Python {len(want)}"


# ---------------------------------------------------------------- random values


def jvm_examples(n: int):
    """Hypothesis settings for tests whose every example runs a JVM: no shrinking (the message names the
    first differing bytes), no deadline."""
    return settings(
        max_examples=n,
        deadline=None,
        phases=[Phase.explicit, Phase.reuse, Phase.generate],
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )


def _text_of(d: date) -> str:
    return d.isoformat()


DATES = st.one_of(
    st.dates(min_value=date(1, 1, 1), max_value=date(9999, 12, 31)).map(_text_of),
    st.sampled_from(["0000-00-00", "2024-00-15", "2024-02-30", "2023-02-29", "2024-13-01", "0000-01-01"]),
)
CLOCK = st.tuples(st.integers(0, 23), st.integers(0, 59), st.integers(0, 59))


def datetime_texts(fsp: int) -> st.SearchStrategy[str]:
    """MariaDB's DATETIME(fsp) texts, the zero one and invalid dates included."""
    frac = st.integers(0, 10**fsp - 1).map(lambda f: f".{f:0{fsp}d}" if fsp else "")
    return st.one_of(
        st.tuples(DATES, CLOCK, frac).map(
            lambda x: f"{x[0]} {x[1][0]:02d}:{x[1][1]:02d}:{x[1][2]:02d}{x[2]}"
        ),
        st.just("0000-00-00 00:00:00" + ("." + "0" * fsp if fsp else "")),
    )


def time_texts(fsp: int) -> st.SearchStrategy[str]:
    """MariaDB's TIME(fsp) texts, negative ones and up to 838 hours."""
    return st.tuples(
        st.booleans(),
        st.integers(0, 838),
        st.integers(0, 59),
        st.integers(0, 59),
        st.integers(0, 10**fsp - 1),
    ).map(
        lambda x: (
            f"{'-' if x[0] else ''}{x[1]:02d}:{x[2]:02d}:{x[3]:02d}" + (f".{x[4]:0{fsp}d}" if fsp else "")
        )
    )


def float32(x: float) -> float:
    """``x`` as a FLOAT column's value reads back (its shortest float32 text)."""
    return float(float32_repr(x))


# random values of the column types the Debezium formats (debezium-json, avro) write
DEBEZIUM_TYPES: dict[str, st.SearchStrategy] = {
    "int(11)": st.integers(-(2**31), 2**31 - 1),
    "tinyint(4)": st.integers(-128, 127),
    "smallint(5) unsigned": st.integers(0, 65535),
    "int(10) unsigned": st.integers(0, 2**32 - 1).map(str),
    "bigint(20)": st.integers(-(2**63), 2**63 - 1).map(str),
    "bigint(20) unsigned": st.integers(0, 2**64 - 1).map(str),
    "decimal(10,2)": st.integers(-(10**10) + 1, 10**10 - 1).map(lambda n: scaled_text(n, 2)),
    "decimal(65,30)": st.integers(-(10**65) + 1, 10**65 - 1).map(lambda n: scaled_text(n, 30)),
    "decimal(5,0)": st.integers(-99999, 99999).map(str),
    "float": st.floats(width=32, allow_nan=False, allow_infinity=False).map(float32),
    "double": st.floats(allow_nan=False, allow_infinity=False),
    "bit(1)": st.integers(0, 1),
    "bit(12)": st.integers(0, 4095),
    "bit(64)": st.integers(0, 2**64 - 1).map(str),
    "date": DATES,
    "datetime": datetime_texts(0),
    "datetime(3)": datetime_texts(3),
    "datetime(6)": datetime_texts(6),
    "timestamp": datetime_texts(0),
    "timestamp(3)": datetime_texts(3),
    "time": time_texts(0),
    "time(3)": time_texts(3),
    "year(4)": st.sampled_from([0, 1901, 2024, 2155]),
    "varchar(20)": st.text(st.characters(codec="utf-8"), max_size=12),
    "varbinary(16)": st.binary(max_size=16).map(lambda b: base64.b64encode(b).decode()),
    "enum('small','medium','large')": st.sampled_from(["small", "medium", "large", ""]),
    "set('red','green','blue')": st.sampled_from(["", "red", "red,blue"]),
    "longtext": st.sampled_from(['{"a": [1, 2]}', "[]", 'x\ny\u2028"\\']),
    "inet6": st.sampled_from(["::", "2001:db8::ff00:42:8329"]),
}


SERVER_IDS = st.none() | st.integers(0, 2**32 - 1)
GTIDS = st.none() | st.just("0-1-42")


@st.composite
def tables_and_events(
    draw,
    types: dict[str, st.SearchStrategy],
    options: list[FormatOptions],
    *,
    schema: str = "golden",
    server_ids: st.SearchStrategy = SERVER_IDS,
    gtids: st.SearchStrategy = GTIDS,
    wrong: st.SearchStrategy | None = None,
):
    """A random table of ``types``' column types (its first column ``id``, the key or no key) and one event
    of 1 to 3 of its row changes (an update keeping or changing the key), with one of ``options``; one value
    in about 31 drawn from ``wrong`` when given (a type the column does not have)."""
    names = draw(st.lists(st.sampled_from(sorted(types)), min_size=1, max_size=8))
    nullable = draw(st.lists(st.booleans(), min_size=len(names), max_size=len(names)))
    columns = tuple(
        ColumnSpec(f"c{i}" if i else "id", t, n and i > 0)
        for i, (t, n) in enumerate(zip(names, nullable, strict=True))
    )
    key = ("id",) if draw(st.booleans()) else ()
    shape = TableShape("demo", schema, "t-1", 3, columns, tuple(field_for(c) for c in columns), key)

    def value(c: ColumnSpec):
        if c.nullable and draw(st.integers(0, 5)) == 0:
            return None
        if wrong is not None and draw(st.integers(0, 30)) == 0:
            return draw(wrong)
        return draw(types[c.column_type])

    def row():
        return tuple(value(c) for c in columns)

    op = draw(st.sampled_from("cud"))
    rows = draw(st.integers(1, 3))
    pos = draw(st.integers(4, 10**9))
    file = "mysql-bin.000042"
    ts_ms = draw(st.integers(0, 4 * 10**12))
    at = Position(int(ums_id(file, pos)), ts_ms, file, pos, 0, draw(server_ids), draw(gtids))
    changes = []
    for _ in range(rows):
        before = row() if op != "c" else None
        after = row() if op != "d" else None
        if before is not None and after is not None and draw(st.booleans()):
            after = (before[0], *after[1:])  # the key kept (else it changes, mostly)
        changes.append(RowChange(shape, op, before, after, at, "0"))
    return as_event(changes), draw(st.sampled_from(options))
