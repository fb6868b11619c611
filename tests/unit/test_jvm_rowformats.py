"""Real-time mode's per-row record path: ``dbus.jvm.DebeziumJson`` (through ``dbus.jvm.RowFormatMain``)
writes, byte for byte, what ``ums.formats.formatter("debezium-json", options)`` writes for the same row
changes (key, value, headers, tombstones, primary-key changes), from the description appender/rowshape.py
builds, or leaves the record to the sidecar (null):

- every change of tests/golden/cdc/every_type.sql (tests/unit/every_type_changes.py) under several options;
- every captured raw record of tests/golden/records/, decoded by the JVM as ``AppendUdf`` does, against the
  appender's per-row path (the JVM's lines -> ``rendered_messages`` -> ``from_message`` -> the formatter);
- random values of every supported type (hypothesis), where the JVM must be exact or decline.
"""

from __future__ import annotations

import base64
import io
import json
import subprocess
from dataclasses import replace
from datetime import date
from pathlib import Path

import every_type_changes
import jvm_jar
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from appender.convert import ConvertSettings, rendered_messages
from appender.rowshape import describe, table_shape
from binlog.rawevent import decode
from binlog.rows import table_of
from dbuslib import sidecar
from ums import Namespace
from ums.build import field_for
from ums.formats import FormatOptions, formatter
from ums.formats.connect import scaled_text
from ums.ids import ums_id, ums_uid
from ums.rowchange import Position, RowChange, TableShape, from_message
from ums.scalars import float32_repr
from ums.types import ColumnSpec

pytestmark = pytest.mark.jvm

REPO = Path(__file__).resolve().parents[2]
RECORD_FILES = sorted((REPO / "tests" / "golden" / "records").glob("*.hex"))
TOPIC = "demo.golden.t"
OPTIONS = [
    FormatOptions(),
    FormatOptions(schemas=False, tombstones=False, propagate_source_types=False),
    FormatOptions(
        decimal_handling_mode="string",
        bigint_unsigned_handling_mode="precise",
        binary_handling_mode="hex",
        time_precision_mode="connect",
    ),
    FormatOptions(binary_handling_mode="base64-url-safe"),
    FormatOptions(binary_handling_mode="base64", bigint_unsigned_handling_mode="precise"),
]
_LINE_OPS = {"c": "i", "u": "u", "d": "d"}


@pytest.fixture(scope="module")
def jar() -> Path:
    return jvm_jar.build()


def description(shape: TableShape, options: FormatOptions) -> list[bytes | None] | None:
    plan = formatter("debezium-json", options).plan(shape)  # type: ignore[attr-defined]
    where = (1, 2**63 - 1, TOPIC, "h.", "|demo.wh_placeholder", 10**9)
    return describe(shape, options, plan.key_prefix, plan.value_prefix, where)


def ask(jar: Path, requests: list[list[bytes | None]]) -> list[tuple[bytes | None, list | None]]:
    """Each request's (lines, records or None): records as (key, value, headers)."""
    data = b"".join(sidecar.encode(r) for r in requests)
    out = subprocess.run(
        ["java", "-cp", str(jar), "dbus.jvm.RowFormatMain"],
        input=data,
        capture_output=True,
        check=True,
        timeout=300,
    ).stdout
    stream = io.BytesIO(out)
    answers: list[tuple[bytes | None, list | None]] = []
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


def python_records(changes: list[RowChange], options: FormatOptions) -> list:
    fmt = formatter("debezium-json", options)
    return [(r.key, r.value, tuple(r.headers)) for c in changes for r in fmt.records(TOPIC, c)]


def events_of(changes: list[RowChange]) -> list[list[RowChange]]:
    out: list[list[RowChange]] = []
    for c in changes:
        if out and out[-1][0].at.ums_id == c.at.ums_id and out[-1][0].op == c.op:
            out[-1].append(c)
        else:
            out.append([c])
    return [as_event(e) for e in out]


@pytest.mark.parametrize("options", OPTIONS, ids=range(len(OPTIONS)))
def test_every_type_changes_are_the_formatters(jar, options):
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


def _raw(path: Path) -> bytes:
    return bytes.fromhex("".join(x for x in path.read_text().splitlines() if not x.startswith("#")))


@pytest.mark.parametrize("options", OPTIONS[:3], ids=range(3))
def test_captured_records_are_the_appenders_per_row_path(jar, options):
    convert = ConvertSettings("demo", before_update_image=True, max_tuples=10**9, max_bytes=10**12)
    requests, expected = [], []
    for path in RECORD_FILES:
        value = _raw(path)
        event = decode(value, None)
        if event.kind != "rows":
            continue
        shape = table_of(event)
        ns = Namespace("mysql", "demo", shape.schema, shape.table, 1)
        table = table_shape(shape, ns, convert)
        desc = description(table, options)
        if desc is None:
            continue
        requests.append([b"raw", value, *desc])
        expected.append((path.name, event, shape))
    answers = ask(jar, requests)
    written = 0
    for (name, event, shape), (lines, got) in zip(expected, answers, strict=True):
        if got is None:
            continue
        h = event.header
        messages = rendered_messages(h, shape, lines.split(b"\n"), 1, convert)
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
    assert written >= len(expected) - 2, f"{written} of {len(expected)} written by the JVM"


# ---------------------------------------------------------------- random values


def _text_of(d: date) -> str:
    return d.isoformat()


DATES = st.one_of(
    st.dates(min_value=date(1, 1, 1), max_value=date(9999, 12, 31)).map(_text_of),
    st.sampled_from(["0000-00-00", "2024-00-15", "2024-02-30", "2023-02-29", "2024-13-01", "0000-01-01"]),
)
CLOCK = st.tuples(st.integers(0, 23), st.integers(0, 59), st.integers(0, 59))


def _datetime(fsp: int) -> st.SearchStrategy[str]:
    frac = st.integers(0, 10**fsp - 1).map(lambda f: f".{f:0{fsp}d}" if fsp else "")
    return st.one_of(
        st.tuples(DATES, CLOCK, frac).map(
            lambda x: f"{x[0]} {x[1][0]:02d}:{x[1][1]:02d}:{x[1][2]:02d}{x[2]}"
        ),
        st.just("0000-00-00 00:00:00" + ("." + "0" * fsp if fsp else "")),
    )


def _time(fsp: int) -> st.SearchStrategy[str]:
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


def _float32(x: float) -> float:
    return float(float32_repr(x))


TYPES: dict[str, st.SearchStrategy] = {
    "int(11)": st.integers(-(2**31), 2**31 - 1),
    "tinyint(4)": st.integers(-128, 127),
    "smallint(5) unsigned": st.integers(0, 65535),
    "int(10) unsigned": st.integers(0, 2**32 - 1).map(str),
    "bigint(20)": st.integers(-(2**63), 2**63 - 1).map(str),
    "bigint(20) unsigned": st.integers(0, 2**64 - 1).map(str),
    "decimal(10,2)": st.integers(-(10**10) + 1, 10**10 - 1).map(lambda n: scaled_text(n, 2)),
    "decimal(65,30)": st.integers(-(10**65) + 1, 10**65 - 1).map(lambda n: scaled_text(n, 30)),
    "decimal(5,0)": st.integers(-99999, 99999).map(str),
    "float": st.floats(width=32, allow_nan=False, allow_infinity=False).map(_float32),
    "double": st.floats(allow_nan=False, allow_infinity=False),
    "bit(1)": st.integers(0, 1),
    "bit(12)": st.integers(0, 4095),
    "bit(64)": st.integers(0, 2**64 - 1).map(str),
    "date": DATES,
    "datetime": _datetime(0),
    "datetime(3)": _datetime(3),
    "datetime(6)": _datetime(6),
    "timestamp": _datetime(0),
    "timestamp(3)": _datetime(3),
    "time": _time(0),
    "time(3)": _time(3),
    "year(4)": st.sampled_from([0, 1901, 2024, 2155]),
    "varchar(20)": st.text(st.characters(codec="utf-8"), max_size=12),
    "varbinary(16)": st.binary(max_size=16).map(lambda b: base64.b64encode(b).decode()),
    "enum('small','medium','large')": st.sampled_from(["small", "medium", "large", ""]),
    "set('red','green','blue')": st.sampled_from(["", "red", "red,blue"]),
    "longtext": st.sampled_from(['{"a": [1, 2]}', "[]", 'x\ny\u2028"\\']),
    "inet6": st.sampled_from(["::", "2001:db8::ff00:42:8329"]),
}


@st.composite
def tables_and_events(draw):
    types = draw(st.lists(st.sampled_from(sorted(TYPES)), min_size=1, max_size=8))
    nullable = draw(st.lists(st.booleans(), min_size=len(types), max_size=len(types)))
    columns = tuple(
        ColumnSpec(f"c{i}" if i else "id", t, n and i > 0)
        for i, (t, n) in enumerate(zip(types, nullable, strict=True))
    )
    key = ("id",) if draw(st.booleans()) else ()
    shape = TableShape("demo", "golden", "t-1", 3, columns, tuple(field_for(c) for c in columns), key)

    def row():
        return tuple(
            None if c.nullable and draw(st.integers(0, 5)) == 0 else draw(TYPES[c.column_type])
            for c in columns
        )

    op = draw(st.sampled_from("cud"))
    rows = draw(st.integers(1, 3))
    pos = draw(st.integers(4, 10**9))
    file = "mysql-bin.000042"
    ts_ms = draw(st.integers(0, 4 * 10**12))
    server_id = draw(st.none() | st.integers(0, 2**32 - 1))
    at = Position(int(ums_id(file, pos)), ts_ms, file, pos, 0, server_id, draw(st.none() | st.just("0-1-42")))
    changes = []
    for _ in range(rows):
        before = row() if op != "c" else None
        after = row() if op != "d" else None
        if op == "u" and draw(st.booleans()):
            after = (before[0], *after[1:])
        changes.append(RowChange(shape, op, before, after, at, "0"))
    options = draw(st.sampled_from(OPTIONS))
    return as_event(changes), options


# no shrinking: each example runs a JVM, and the message names the first differing bytes
@settings(
    max_examples=40,
    deadline=None,
    phases=[Phase.explicit, Phase.reuse, Phase.generate],
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(st.lists(tables_and_events(), min_size=20, max_size=20))
def test_random_values_are_exact_or_left_to_the_sidecar(jar, cases):
    requests, kept = [], []
    for changes, options in cases:
        desc = description(changes[0].table, options)
        if desc is None:
            continue
        requests.append(event_request(changes, desc))
        kept.append((changes, options))
    for (changes, options), (_, got) in zip(kept, ask(jar, requests), strict=True):
        try:
            want = python_records(changes, options)
        except (ValueError, OverflowError, TypeError):
            want = None  # Python dead-letters the record: the JVM must leave it to the sidecar
        if got is not None:
            assert got == want, _first_difference(got, want, changes, options)


def _first_difference(got: list, want: list | None, changes: list[RowChange], options: FormatOptions) -> str:
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


def test_a_description_is_none_for_what_the_jvm_does_not_convert():
    geometry = ColumnSpec("g", "geometry", True)
    shape = TableShape("demo", "s", "t", 1, (geometry,), (field_for(geometry),), ())
    assert description(shape, FormatOptions()) is None
    dec = ColumnSpec("d", "decimal(10,2)", True)
    shape = TableShape("demo", "s", "t", 1, (dec,), (field_for(dec),), ())
    assert description(shape, FormatOptions(decimal_handling_mode="double")) is None
    assert description(shape, FormatOptions()) is not None
