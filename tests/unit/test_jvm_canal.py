"""Real-time mode's canal-json record path: ``dbus.jvm.CanalJson`` (through ``dbus.jvm.RowFormatMain``)
writes, byte for byte, what ``ums.formats.formatter("canal-json", options)`` writes for the same row
changes (key, value, headers, tombstones, primary-key changes, widened sqlTypes), from the description
appender/rowshape_canal.py builds, or leaves the record to the sidecar (null):

- every change of tests/golden/cdc/every_type.sql (tests/unit/every_type_changes.py), with and without
  tombstones: the JVM writes every one of them;
- every captured raw record of tests/golden/records/, decoded by the JVM as ``AppendUdf`` does, against the
  appender's per-row path (the JVM's lines -> ``rendered_messages`` -> ``from_message`` -> the formatter);
- random values of every column kind (hypothesis), some of a type the column does not have: the JVM must
  be exact or decline, and decline whatever Python refuses.
"""

from __future__ import annotations

import base64
import json
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
from appender.rowshape_canal import describe
from binlog.rawevent import decode
from binlog.rows import table_of
from ums import Namespace
from ums.build import field_for
from ums.formats import FormatOptions, formatter
from ums.formats.canal import java_text
from ums.ids import ums_id
from ums.message import UmsField
from ums.rowchange import Position, RowChange, TableShape, from_message
from ums.scalars import float32_repr
from ums.types import ColumnSpec, UmsType

pytestmark = pytest.mark.jvm

REPO = Path(__file__).resolve().parents[2]
RECORD_FILES = sorted((REPO / "tests" / "golden" / "records").glob("*.hex"))
TOPIC = "demo.golden.t"
OPTIONS = [FormatOptions(), FormatOptions(tombstones=False)]


@pytest.fixture(scope="module")
def jar() -> Path:
    return jvm_jar.build()


def description(shape: TableShape, options: FormatOptions) -> list[bytes | None] | None:
    where = (1, 2**63 - 1, TOPIC, "h.", "|demo.wh_placeholder", 10**9)
    return describe(shape, formatter("canal-json", options), where)


def python_records(changes: list[RowChange], options: FormatOptions) -> list:
    fmt = formatter("canal-json", options)
    return [(r.key, r.value, tuple(r.headers)) for c in changes for r in fmt.records(TOPIC, c)]


def test_the_sidecar_describes_canal_json_tables_with_this_module():
    assert describer("canal-json") is describe


@pytest.mark.parametrize("options", OPTIONS, ids=["tombstones", "no-tombstones"])
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


def test_captured_records_are_the_appenders_per_row_path(jar):
    options = FormatOptions()
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
        assert desc is not None, path.name
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
    assert written == len(expected), f"{written} of {len(expected)} written by the JVM"


def test_a_masked_table_keeps_the_sidecar():
    column = ColumnSpec("name", "varchar(20)", True)
    masked = TableShape("demo", "s", "t", 1, (column,), (UmsField("name", UmsType.STRING, True, True),), ())
    assert description(masked, FormatOptions()) is None
    plain = TableShape("demo", "s", "t", 1, (column,), (field_for(column),), ())
    assert description(plain, FormatOptions()) is not None


@pytest.mark.parametrize(
    "token", ["0.0", "-0.0", "1.1", "100.0", "0.001", "0.0009765625", "1e-05", "1.5e+20", "123456789.0",
              "9999999.999999998", "10000000.0", "-2.2250738585072014e-308", "1.7976931348623157e+308",
              "5e-324", "0.30000000000000004", "1234567.0", "1e+16"],
)  # fmt: skip
def test_the_jvm_writes_a_float_as_java_text_does(jar, token):
    shape = TableShape(
        "demo", "s", "t", 1, (ColumnSpec("f", "double"),), (field_for(ColumnSpec("f", "double")),), ()
    )
    at = Position(int(ums_id("mysql-bin.000001", 4)), 0, "mysql-bin.000001", 4, 0, None, None)
    change = RowChange(shape, "c", None, (float(token),), at, "0")
    ((_, got),) = ask(jar, [event_request(as_event([change]), description(shape, FormatOptions()))])
    assert got is not None
    assert json.loads(got[0][1])["data"][0]["f"] == java_text(float(token))


# ---------------------------------------------------------------- random values


def _float32(x: float) -> float:
    return float(float32_repr(x))


def _text(d: date) -> str:
    return d.isoformat()


WRONG = st.sampled_from(["x", "12", "-0", "1e3", 1, -7, 1.5, True, False, "", "a,b", "AA", "AA=", "Zm9v"])
MEMBERS = "enum('small','medium','large','','l''x','ü \"q\"')"
SET_MEMBERS = "set('red','green','blue','r\\\\b','ü')"
TYPES: dict[str, st.SearchStrategy] = {
    "int(11)": st.integers(-(2**31), 2**31 - 1),
    "tinyint(4)": st.integers(-128, 127),
    "tinyint(3) unsigned": st.integers(0, 255),
    "smallint(5) unsigned": st.integers(0, 65535),
    "mediumint(8) unsigned": st.integers(0, 2**24 - 1),
    "int(10) unsigned": st.integers(0, 2**32 - 1).map(str),
    "bigint(20)": st.integers(-(2**63), 2**63 - 1).map(str),
    "bigint(20) unsigned": st.integers(0, 2**64 - 1).map(str),
    "decimal(65,30)": st.decimals(-(10**35), 10**35, places=30).map(str),
    "float": st.floats(width=32, allow_nan=False, allow_infinity=False).map(_float32),
    "double": st.floats(allow_nan=False, allow_infinity=False),
    "bit(1)": st.integers(0, 1),
    "bit(64)": st.integers(0, 2**64 - 1).map(str),
    "date": st.dates().map(_text),
    "datetime(6)": st.datetimes().map(lambda d: d.isoformat(" ")),
    "time(3)": st.sampled_from(["-838:59:58.999", "00:00:00.000", "12:00:00.500"]),
    "year(4)": st.sampled_from([0, 1901, 2024, 2155]),
    "varchar(20)": st.text(st.characters(codec="utf-8"), max_size=12),
    "longtext": st.sampled_from(['{"a": [1, 2]}', "[]", 'x\ny\u2028"\\\x7f\x00']),
    "varbinary(16)": st.binary(max_size=16).map(lambda b: base64.b64encode(b).decode()),
    "geometry": st.binary(max_size=25).map(lambda b: base64.b64encode(b).decode()),
    MEMBERS: st.sampled_from(["small", "large", "", "l'x", 'ü "q"', "other"]),
    SET_MEMBERS: st.sampled_from(
        ["", "red", "blue,red", "red,green,blue", "red,red", "r\\b,ü", "red,,blue", "x"]
    ),
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
    shape = TableShape("demo", "gölden", "t-1", 3, columns, tuple(field_for(c) for c in columns), key)

    def value(c: ColumnSpec):
        if c.nullable and draw(st.integers(0, 5)) == 0:
            return None
        return draw(WRONG) if draw(st.integers(0, 30)) == 0 else draw(TYPES[c.column_type])

    def row():
        return tuple(value(c) for c in columns)

    op = draw(st.sampled_from("cud"))
    pos = draw(st.integers(4, 10**9))
    file = "mysql-bin.000042"
    ts_ms = draw(st.integers(0, 4 * 10**12))
    gtid = draw(st.sampled_from([None, "", "0-1-42", "3E11FA47-71CA-11E1-9E33-C80AA9429562:23"]))
    at = Position(int(ums_id(file, pos)), ts_ms, file, pos, 0, None, gtid)
    changes = []
    for _ in range(draw(st.integers(1, 3))):
        before = row() if op != "c" else None
        after = row() if op != "d" else None
        if op == "u" and draw(st.booleans()):
            after = (before[0], *after[1:])  # the key kept (else it changes, mostly)
        changes.append(RowChange(shape, op, before, after, at, "0"))
    return as_event(changes), draw(st.sampled_from(OPTIONS))


# no shrinking: each example runs a JVM, and the message names the first differing bytes
@settings(
    max_examples=40,
    deadline=None,
    phases=[Phase.explicit, Phase.reuse, Phase.generate],
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(st.lists(tables_and_events(), min_size=25, max_size=25))
def test_random_values_are_exact_or_left_to_the_sidecar(jar, cases):
    requests = [event_request(changes, description(changes[0].table, options)) for changes, options in cases]
    for (changes, options), (_, got) in zip(cases, ask(jar, requests), strict=True):
        try:
            want = python_records(changes, options)
        except (ValueError, OverflowError, TypeError):
            want = None  # Python dead-letters the record: the JVM must leave it to the sidecar
        if got is not None:
            assert got == want, _first_difference(got, want, changes)


def _first_difference(got: list, want: list | None, changes: list[RowChange]) -> str:
    types = [c.column_type for c in changes[0].table.columns]
    if want is None:
        return f"the JVM wrote a change Python refuses: {types} {changes}"
    for g, w in zip(got, want, strict=False):
        for a, b in zip(g, w, strict=True):
            if a != b:
                a_, b_ = repr(a), repr(b)
                i = next((k for k in range(min(len(a_), len(b_))) if a_[k] != b_[k]), 0)
                at = max(0, i - 200)
                return f"{types}:\n JVM {a_[at : i + 80]}\n Py  {b_[at : i + 80]}"
    return f"{types}: {len(got)} records, Python {len(want)}"
