"""The per-row encoders (ums.formats) write, byte for byte, what their straightforward reference forms
(tests/unit/formats_reference.py) write: every golden change and pulled row with every option, a masked
table, a keyless one, and random values of every column type (hypothesis)."""

import re
from dataclasses import replace

import pytest
from debezium_cases import RANDOM_SHAPE, VALUES
from every_type_changes import SHAPE, changes, pulled, rows
from formats_reference import AvroRowsReference, CanalJsonReference, DebeziumJsonReference
from hypothesis import given, settings
from hypothesis import strategies as st

from ums.formats import FormatOptions, formatter
from ums.message import UmsField
from ums.rowchange import Position, RowChange
from ums.types import UmsType

TOPIC = "demo.golden.cdc_types"
OPTIONS = [
    FormatOptions(),
    FormatOptions(tombstones=False, schemas=False),
    FormatOptions(decimal_handling_mode="string", time_precision_mode="connect"),
    FormatOptions(decimal_handling_mode="double", bigint_unsigned_handling_mode="precise"),
    FormatOptions(binary_handling_mode="hex", propagate_source_types=False),
    FormatOptions(binary_handling_mode="base64-url-safe"),
]


class _Ids:
    def __init__(self) -> None:
        self.ids: dict[tuple[str, str], int] = {}

    def __call__(self, subject: str, text: str) -> int:
        return self.ids.setdefault((subject, text), len(self.ids) + 1)


def _pair(name: str, options: FormatOptions):
    ids = _Ids()
    if name == "debezium-json":
        return formatter(name, options), DebeziumJsonReference(options)
    if name == "avro":
        return formatter(name, options, ids), AvroRowsReference(options, ids)
    return formatter(name, options), CanalJsonReference(options)


def _same(name: str, options: FormatOptions, batch: list[RowChange]) -> None:
    fast, reference = _pair(name, options)
    for change in batch:
        assert fast.records(TOPIC, change) == reference.records(TOPIC, change), (name, change.op, change.at)


def _masked(change: RowChange) -> RowChange:
    fields = list(change.table.fields)
    fields[25] = UmsField(fields[25].name, UmsType.STRING, True, True)  # ch: masked to a digest
    fields[7] = UmsField(fields[7].name, UmsType.INT, True, True)  # i: masked, keeps its type
    return replace(change, table=replace(change.table, fields=tuple(fields)))


def _keyless(change: RowChange) -> RowChange:
    return replace(change, table=replace(change.table, primary_key=()))


@pytest.mark.parametrize("name", ["debezium-json", "canal-json", "avro"])
@pytest.mark.parametrize("options", OPTIONS, ids=range(len(OPTIONS)))
def test_every_golden_change_equals_the_reference(name, options):
    every = [*changes(), *pulled(), *rows(3)]
    _same(name, options, every)
    _same(name, options, [_keyless(c) for c in every])
    _same(name, options, [_masked(c) for c in every])


def test_the_golden_shape_is_the_one_of_every_type():
    assert changes()[0].table == SHAPE


_AT = Position(30000000001234, 1_700_000_000_123, "mysql-bin.000003", 1234, 2, 7, "0-1-42")


@settings(max_examples=60, deadline=None)
@given(
    st.tuples(*[st.one_of(st.none(), s) for s in VALUES.values()]),
    st.tuples(*[st.one_of(st.none(), s) for s in VALUES.values()]),
    st.sampled_from(["c", "u", "d", "r"]),
    st.sampled_from(range(len(OPTIONS))),
    st.booleans(),
)
def test_random_values_equal_the_reference(first, second, op, option, same_key):
    if same_key:
        second = (first[0], *second[1:])
    before, after = {"c": (None, first), "r": (None, first), "u": (first, second), "d": (first, None)}[op]
    at = replace(_AT, snapshot="true") if op == "r" else _AT
    change = RowChange(RANDOM_SHAPE, op, before, after, at, "30000000001234000002")
    for name in ("debezium-json", "canal-json", "avro"):
        fast, reference = _pair(name, OPTIONS[option])
        try:
            expected = reference.records(TOPIC, change)
        except (
            ValueError,
            TypeError,
            OverflowError,
        ) as err:  # a value the format refuses: so must the fast one
            with pytest.raises(type(err)):
                fast.records(TOPIC, change)
            continue
        assert fast.records(TOPIC, change) == expected, name


@pytest.mark.parametrize("bad", [{25: 7}, {1: "x"}, {1: "x", 25: 7}, {25: 7, 30: 8}])
def test_a_bad_value_is_named_as_the_reference_names_it(bad):
    change = changes()[0]
    after = tuple(bad.get(i, v) for i, v in enumerate(change.after))
    change = replace(change, after=after)
    fast, reference = _pair("canal-json", FormatOptions())
    with pytest.raises(ValueError) as expected:
        reference.records(TOPIC, change)
    with pytest.raises(type(expected.value), match=re.escape(str(expected.value))):
        fast.records(TOPIC, change)
