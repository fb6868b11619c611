"""Real-time mode's avro record path: ``dbus.jvm.ConfluentAvro`` (through ``dbus.jvm.RowFormatMain``) writes,
byte for byte, what ``ums.formats.formatter("avro", options, schema_ids)`` writes for the same row changes
(Confluent wire format key and value, headers, tombstones), from the description appender/rowshape_avro.py
builds with the ids the formatter registered, or leaves the record to the sidecar (null):

- every change of tests/golden/cdc/every_type.sql (tests/unit/every_type_changes.py) under several options;
- every captured raw record of tests/golden/records/, decoded by the JVM as ``AppendUdf`` does, against the
  appender's per-row path (the JVM's lines -> ``rendered_messages`` -> ``from_message`` -> the formatter);
- random values of every supported type (hypothesis), where the JVM must be exact or decline;
- random values of any JSON type in any column (what the decoder never writes), where the JVM must never
  write what Python refuses.
"""

from __future__ import annotations

import base64
from dataclasses import replace
from datetime import date
from pathlib import Path

import every_type_changes
import jvm_jar
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from rowformat_jvm import as_event, ask, event_request, events_of

from appender.convert import ConvertSettings, rendered_messages
from appender.rowshape import describer, table_shape
from appender.rowshape_avro import describe
from binlog.rawevent import decode
from binlog.rows import table_of
from ums import Namespace
from ums.build import field_for
from ums.formats import FormatOptions, SchemaRefused, formatter
from ums.formats.connect import scaled_text
from ums.ids import ums_id
from ums.message import UmsField
from ums.rowchange import Position, RowChange, TableShape, from_message
from ums.scalars import float32_repr
from ums.types import ColumnSpec, UmsType

pytestmark = pytest.mark.jvm

REPO = Path(__file__).resolve().parents[2]
RECORD_FILES = sorted((REPO / "tests" / "golden" / "records").glob("*.hex"))
TOPIC = "demo.golden.t"
OPTIONS = [
    FormatOptions(),
    FormatOptions(tombstones=False, propagate_source_types=False),
    FormatOptions(
        decimal_handling_mode="string",
        bigint_unsigned_handling_mode="precise",
        binary_handling_mode="hex",
        time_precision_mode="connect",
    ),
    FormatOptions(decimal_handling_mode="double", binary_handling_mode="base64-url-safe"),
    FormatOptions(binary_handling_mode="base64", bigint_unsigned_handling_mode="precise"),
]
_IDS: dict[tuple[str, str], int] = {}


def schema_ids(subject: str, text: str) -> int:
    """A registry's ids: one per (subject, schema text), as a real one gives them."""
    return _IDS.setdefault((subject, text), 100 + len(_IDS))


def refused(subject: str, text: str) -> int:
    msg = f"subject {subject}: incompatible"
    raise SchemaRefused(msg)


@pytest.fixture(scope="module")
def jar() -> Path:
    return jvm_jar.build()


def description(shape: TableShape, options: FormatOptions, ids=schema_ids) -> list[bytes | None] | None:
    where = (1, 2**63 - 1, TOPIC, "h.", "|demo.wh_placeholder", 10**9)
    return describe(shape, formatter("avro", options, ids), where)  # type: ignore[arg-type]


def python_records(changes: list[RowChange], options: FormatOptions) -> list:
    fmt = formatter("avro", options, schema_ids)
    return [(r.key, r.value, tuple(r.headers)) for c in changes for r in fmt.records(TOPIC, c)]


def _key_changes(event: list[RowChange]) -> bool:
    keys = event[0].table.primary_key
    if event[0].op != "u" or not keys:
        return False
    at = [event[0].table.fields.index(next(f for f in event[0].table.fields if f.name == k)) for k in keys]
    return any([c.before[i] for i in at] != [c.after[i] for i in at] for c in event)  # type: ignore[index]


def test_the_sidecar_describes_avro_tables_with_this_module():
    assert describer("avro") is describe


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
    assert any(map(_key_changes, events)), "a primary-key change among them"


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
        desc = description(table_shape(shape, ns, convert), options)
        if desc is None:
            continue
        requests.append([b"raw", value, *desc])
        expected.append((path.name, event, shape))
    written = 0
    for (name, event, shape), (lines, got) in zip(expected, ask(jar, requests), strict=True):
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
    assert written >= len(expected) - 2 > 0, f"{written} of {len(expected)} written by the JVM"


def test_no_description_for_a_masked_table_a_geometry_or_a_refused_schema():
    column = ColumnSpec("name", "varchar(20)", True)
    masked = TableShape("demo", "s", "t", 1, (column,), (UmsField("name", UmsType.STRING, True, True),), ())
    assert description(masked, FormatOptions()) is None
    geometry = ColumnSpec("g", "geometry", True)
    assert (
        description(TableShape("demo", "s", "t", 1, (geometry,), (field_for(geometry),), ()), FormatOptions())
        is None
    )
    plain = TableShape("demo", "s", "t", 1, (column,), (field_for(column),), ())
    assert description(plain, FormatOptions()) is not None
    assert description(plain, FormatOptions(), refused) is None


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
    "double": st.floats(allow_nan=False, allow_infinity=False) | st.sampled_from([0, -0.0, 5, 1e-07, 1e300]),
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
    "time(6)": _time(6),
    "year(4)": st.sampled_from([0, 1901, 2024, 2155]),
    "varchar(20)": st.text(st.characters(codec="utf-8"), max_size=12),
    "varbinary(16)": st.binary(max_size=16).map(lambda b: base64.b64encode(b).decode()),
    "enum('small','medium','large')": st.sampled_from(["small", "medium", "large", ""]),
    "set('red','green','blue')": st.sampled_from(["", "red", "red,blue"]),
    "json": st.sampled_from(['{"a": [1, 2]}', "[]", 'x\ny\u2028"\\', "\U0001f600\t/"]),
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
        except (ValueError, OverflowError, TypeError, AttributeError):
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
                i = next((k for k in range(min(len(a), len(b))) if a[k] != b[k]), 0) if a and b else 0
                return f"{types} {options}:\n JVM {a!r}\n Py  {b!r}\n first difference at byte {i}"
    return f"{types}: {len(got)} records, Python {len(want)}"


# a value of any JSON type in any column: what the decoder would never write, which the JVM must write as
# Python does or leave to the sidecar (never write what Python refuses)
WILD = st.one_of(
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.booleans(),
    st.text(st.characters(codec="utf-8"), max_size=6),
    st.sampled_from(
        ["1", "-0", "01", "1.50", "-.5", "1e5", "+1", " 1", "QUJD", "QQ", "QR==", "-1", "2024-01-01",
         "18446744073709551616", "2024-1-01", "20240101", "2024-01-01 00:00:00", "2024-01-01T00:00:00",
         "24:00:00", "12:00:00", "-838:59:59.000001", "\x01\u2028\U0001f600", "caf\u00e9"]
    ),
)  # fmt: skip


@st.composite
def wild_events(draw):
    changes, options = draw(tables_and_events())
    columns = changes[0].table.columns

    def wild(values):
        if values is None:
            return None
        return tuple(draw(WILD) if draw(st.integers(0, 2)) == 0 else v for v in values)

    wilder = [replace(c, before=wild(c.before), after=wild(c.after)) for c in changes]
    assert len(columns) == len(wilder[0].table.columns)
    return wilder, options


@settings(
    max_examples=25,
    deadline=None,
    phases=[Phase.explicit, Phase.reuse, Phase.generate],
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(st.lists(wild_events(), min_size=20, max_size=20))
def test_values_of_another_type_are_exact_or_left_to_the_sidecar(jar, cases):
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
        except Exception:  # whatever Python refuses, the JVM must leave to the sidecar
            want = None
        if got is not None:
            assert got == want, _first_difference(got, want, changes, options)
