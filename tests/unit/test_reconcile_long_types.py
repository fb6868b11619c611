"""A snapshot's UMS ``long`` column: Spark's long (Parquet int64) when its source column is signed (or a
narrower unsigned integer), decimal(20,0) when it reaches past 2^63-1 (BIGINT UNSIGNED, BIT(64)) or its
source type is not known (docs/reconcile.md#the-snapshot)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fullpuller.reconcile import OutColumn, fits_int64, output_columns, with_column_types
from ums.types import UmsType, ums_type_for

INT64_MAX = 2**63 - 1
# the greatest value of each MySQL integer type, signed and unsigned: the oracle, written out by hand
BITS = {"tinyint": 8, "smallint": 16, "mediumint": 24, "int": 32, "integer": 32, "bigint": 64}


def greatest(base: str, unsigned: bool) -> int:
    return 2 ** BITS[base] - 1 if unsigned else 2 ** (BITS[base] - 1) - 1


@given(
    st.sampled_from(sorted(BITS)),
    st.booleans(),
    st.one_of(st.none(), st.integers(1, 255)),
    st.booleans(),
    st.sampled_from(["", " zerofill"]),
)
def test_an_integer_column_fits_int64_exactly_when_its_greatest_value_does(base, unsigned, width, upper, zf):
    column_type = f"{base.upper() if upper else base}{'' if width is None else f'({width})'}"
    column_type += (" unsigned" if unsigned else "") + zf
    assert fits_int64(column_type) == (
        greatest(base, unsigned or bool(zf)) <= INT64_MAX
    )  # ZEROFILL: unsigned


@given(st.integers(1, 64))
def test_a_bit_column_fits_int64_up_to_63_bits(width):
    assert fits_int64(f"bit({width})") == (2**width - 1 <= INT64_MAX)


@pytest.mark.parametrize(
    ("column_type", "spark_type"),
    [
        ("bigint(20)", "bigint"),
        ("bigint", "bigint"),
        ("int(10) unsigned", "bigint"),  # a UMS long too: 2^32-1 fits
        ("bit(63)", "bigint"),
        ("bigint(20) unsigned", "decimal(20,0)"),
        ("serial", "decimal(20,0)"),  # BIGINT UNSIGNED NOT NULL AUTO_INCREMENT
        ("bit(64)", "decimal(20,0)"),
        ("varchar(20)", "decimal(20,0)"),  # a column masked to a long: its values' range is not known
        ("not a type(", "decimal(20,0)"),
        (None, "decimal(20,0)"),  # no source type: the type every long fits
    ],
)
def test_a_long_column_by_its_source_type(column_type, spark_type):
    assert OutColumn("c", "long", column_type=column_type).spark_type == spark_type


def test_every_mysql_type_that_is_a_ums_long_is_decided_by_its_sign_and_width():
    longs = ["bigint", "bigint unsigned", "int unsigned", "integer unsigned", "bit(32)", "bit(64)", "serial"]
    assert all(ums_type_for(t) is UmsType.LONG for t in longs)
    assert [fits_int64(t) for t in longs] == [True, False, True, True, True, False, False]


def test_source_types_join_the_columns_by_name_case_insensitively_and_only_longs_change():
    columns = output_columns(
        [
            [
                {"name": "id", "type": "long", "encoded": False},
                {"name": "Balance", "type": "long", "encoded": False},
                {"name": "n", "type": "int", "encoded": False},
                {"name": "added_later", "type": "long", "encoded": False},
            ]
        ]
    )
    typed = with_column_types(
        columns, {"id": "bigint(20) unsigned", "balance": "bigint(20)", "n": "int(11) unsigned"}
    )
    assert [(c.name, c.column_type, c.spark_type) for c in typed] == [
        ("id", "bigint(20) unsigned", "decimal(20,0)"),
        ("Balance", "bigint(20)", "bigint"),
        ("n", "int(11) unsigned", "int"),
        ("added_later", None, "decimal(20,0)"),
    ]
