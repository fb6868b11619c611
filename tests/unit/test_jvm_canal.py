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

import jvm_jar
import pytest
from hypothesis import given
from hypothesis import strategies as st
from rowformat_jvm import (
    TOPIC,
    WHERE,
    as_event,
    ask,
    captured_answers,
    event_request,
    every_type_events_written,
    exact_or_declined,
    float32,
    jvm_examples,
    records_of,
    tables_and_events,
)

from appender.rowshape import describer
from appender.rowshape_canal import describe
from ums.build import field_for
from ums.formats import FormatOptions, formatter
from ums.formats.canal import java_text
from ums.ids import ums_id
from ums.message import UmsField
from ums.rowchange import Position, RowChange, TableShape
from ums.types import ColumnSpec, UmsType

pytestmark = pytest.mark.jvm

OPTIONS = [FormatOptions(), FormatOptions(tombstones=False)]


@pytest.fixture(scope="module")
def jar() -> Path:
    return jvm_jar.build()


def description(shape: TableShape, options: FormatOptions) -> list[bytes | None] | None:
    return describe(shape, formatter("canal-json", options), WHERE)


def python_records(changes: list[RowChange], options: FormatOptions) -> list:
    return records_of(formatter("canal-json", options), TOPIC, changes)


def test_the_sidecar_describes_canal_json_tables_with_this_module():
    assert describer("canal-json") is describe


@pytest.mark.parametrize("options", OPTIONS, ids=["tombstones", "no-tombstones"])
def test_every_type_changes_are_the_formatters(jar, options):
    every_type_events_written(jar, description, python_records, options)


def test_captured_records_are_the_appenders_per_row_path(jar):
    written, described = captured_answers(jar, description, python_records, FormatOptions(), every=True)
    assert written == described, f"{written} of {described} written by the JVM"


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


def _text(d: date) -> str:
    return d.isoformat()


GTIDS = st.sampled_from([None, "", "0-1-42", "3E11FA47-71CA-11E1-9E33-C80AA9429562:23"])
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
    "float": st.floats(width=32, allow_nan=False, allow_infinity=False).map(float32),
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


@jvm_examples(40)
@given(
    st.lists(
        tables_and_events(TYPES, OPTIONS, schema="gölden", server_ids=st.none(), gtids=GTIDS, wrong=WRONG),
        min_size=25,
        max_size=25,
    )
)
def test_random_values_are_exact_or_left_to_the_sidecar(jar, cases):
    exact_or_declined(jar, cases, description, python_records, every=True)
