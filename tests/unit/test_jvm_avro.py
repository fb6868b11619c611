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

from dataclasses import replace
from pathlib import Path

import jvm_jar
import pytest
from hypothesis import given
from hypothesis import strategies as st
from rowformat_jvm import (
    DEBEZIUM_TYPES,
    TOPIC,
    WHERE,
    captured_answers,
    every_type_events_written,
    exact_or_declined,
    jvm_examples,
    records_of,
    tables_and_events,
    time_texts,
)

from appender.rowshape import describer
from appender.rowshape_avro import describe
from ums.build import field_for
from ums.formats import FormatOptions, SchemaRefused, formatter
from ums.message import UmsField
from ums.rowchange import RowChange, TableShape
from ums.types import ColumnSpec, UmsType

pytestmark = pytest.mark.jvm

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
    return describe(shape, formatter("avro", options, ids), WHERE)  # type: ignore[arg-type]


def python_records(changes: list[RowChange], options: FormatOptions) -> list:
    return records_of(formatter("avro", options, schema_ids), TOPIC, changes)


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
    events = every_type_events_written(jar, description, python_records, options)
    assert any(map(_key_changes, events)), "a primary-key change among them"


@pytest.mark.parametrize("options", OPTIONS[:3], ids=range(3))
def test_captured_records_are_the_appenders_per_row_path(jar, options):
    written, described = captured_answers(jar, description, python_records, options, every=False)
    assert written >= described - 2 > 0, f"{written} of {described} written by the JVM"


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


TYPES: dict[str, st.SearchStrategy] = {
    **{t: v for t, v in DEBEZIUM_TYPES.items() if t != "longtext"},
    "double": st.floats(allow_nan=False, allow_infinity=False) | st.sampled_from([0, -0.0, 5, 1e-07, 1e300]),
    "time(6)": time_texts(6),
    "json": st.sampled_from(['{"a": [1, 2]}', "[]", 'x\ny\u2028"\\', "\U0001f600\t/"]),
}


@jvm_examples(40)
@given(st.lists(tables_and_events(TYPES, OPTIONS), min_size=20, max_size=20))
def test_random_values_are_exact_or_left_to_the_sidecar(jar, cases):
    refusals = (ValueError, OverflowError, TypeError, AttributeError)
    exact_or_declined(jar, cases, description, python_records, refusals)


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
    changes, options = draw(tables_and_events(TYPES, OPTIONS))
    columns = changes[0].table.columns

    def wild(values):
        if values is None:
            return None
        return tuple(draw(WILD) if draw(st.integers(0, 2)) == 0 else v for v in values)

    wilder = [replace(c, before=wild(c.before), after=wild(c.after)) for c in changes]
    assert len(columns) == len(wilder[0].table.columns)
    return wilder, options


@jvm_examples(25)
@given(st.lists(wild_events(), min_size=20, max_size=20))
def test_values_of_another_type_are_exact_or_left_to_the_sidecar(jar, cases):
    # whatever Python refuses, the JVM must leave to the sidecar
    exact_or_declined(jar, cases, description, python_records, (Exception,))
