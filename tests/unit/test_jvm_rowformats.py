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
)

from appender.rowshape import describe
from ums.build import field_for
from ums.formats import FormatOptions, formatter
from ums.rowchange import RowChange, TableShape
from ums.types import ColumnSpec

pytestmark = pytest.mark.jvm

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


@pytest.fixture(scope="module")
def jar() -> Path:
    return jvm_jar.build()


def description(shape: TableShape, options: FormatOptions) -> list[bytes | None] | None:
    plan = formatter("debezium-json", options).plan(shape)  # type: ignore[attr-defined]
    return describe(shape, options, plan.key_prefix, plan.value_prefix, WHERE)


def python_records(changes: list[RowChange], options: FormatOptions) -> list:
    return records_of(formatter("debezium-json", options), TOPIC, changes)


@pytest.mark.parametrize("options", OPTIONS, ids=range(len(OPTIONS)))
def test_every_type_changes_are_the_formatters(jar, options):
    every_type_events_written(jar, description, python_records, options)


@pytest.mark.parametrize("options", OPTIONS[:3], ids=range(3))
def test_captured_records_are_the_appenders_per_row_path(jar, options):
    written, described = captured_answers(jar, description, python_records, options, every=False)
    assert written >= described - 2, f"{written} of {described} written by the JVM"


# ---------------------------------------------------------------- random values


@jvm_examples(40)
@given(st.lists(tables_and_events(DEBEZIUM_TYPES, OPTIONS), min_size=20, max_size=20))
def test_random_values_are_exact_or_left_to_the_sidecar(jar, cases):
    exact_or_declined(jar, cases, description, python_records)


def test_a_description_is_none_for_what_the_jvm_does_not_convert():
    geometry = ColumnSpec("g", "geometry", True)
    shape = TableShape("demo", "s", "t", 1, (geometry,), (field_for(geometry),), ())
    assert description(shape, FormatOptions()) is None
    dec = ColumnSpec("d", "decimal(10,2)", True)
    shape = TableShape("demo", "s", "t", 1, (dec,), (field_for(dec),), ())
    assert description(shape, FormatOptions(decimal_handling_mode="double")) is None
    assert description(shape, FormatOptions()) is not None
