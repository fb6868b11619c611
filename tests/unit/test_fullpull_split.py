"""fullpuller.split's pure planning: split column choice, ranges, and their SQL."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fullpuller.catalog import TableInfo
from fullpuller.split import (
    KeyRange,
    Literal,
    SplitError,
    boundary_ranges,
    choose_split,
    in_range,
    integer_ranges,
    literal,
    plan,
    range_sql,
    shard_count,
    shards_for,
)
from ums.types import ColumnSpec

COLS = (
    ColumnSpec("id", "int(11)", False),
    ColumnSpec("email", "varchar(40)", True),
    ColumnSpec("code", "char(4)", False),
    ColumnSpec("n", "int(11)", True),
    ColumnSpec("g", "point", True),
)


def table(pk=(), unique=(), indexes=()) -> TableInfo:
    return TableInfo("s", "t", COLS, pk, unique, indexes)


@pytest.mark.parametrize(
    ("info", "requested", "expected"),
    [
        (table(pk=("id",)), None, (("id",), "primary", None)),
        (table(pk=("id",)), "EMAIL, n", (("email", "n"), "request", None)),
        (table(unique=(("email",), ("code",))), None, (("code",), "unique", None)),  # NOT NULL first
        (table(unique=(("email",),)), None, (("email",), "unique", None)),
        (table(indexes=(("n", "code"),)), None, (("n",), "index", None)),
        (table(pk=("g",), indexes=(("g",), ("code",))), None, (("code",), "index", None)),  # POINT: skipped
    ],
)
def test_choose_split_takes_request_then_primary_then_unique_then_index(info, requested, expected):
    assert choose_split(info, requested) == expected


def test_no_key_means_one_shard_with_a_warning():
    columns, source, warning = choose_split(table(), None)
    assert (columns, source) == ((), "none") and "s.t" in warning


@pytest.mark.parametrize("requested", ["nope", "id,nope", "g", "id,id"])
def test_bad_split_column_is_refused(requested):
    with pytest.raises(SplitError) as err:
        choose_split(table(pk=("id",)), requested)
    assert err.value.code == "FULLPULL_BAD_SPLIT_COL"


@pytest.mark.parametrize("size", [0, -2, 1.5, True, "10"])
def test_bad_shard_size_is_a_bad_request(size):
    with pytest.raises(SplitError) as err:
        plan(None, table(pk=("id",)), shard_size=size)
    assert err.value.code == "FULLPULL_BAD_REQUEST"


@pytest.mark.parametrize(("count", "size", "shards"), [(0, 10, 1), (10, 10, 1), (11, 10, 2), (10**6, -1, 1)])
def test_shard_count_is_ceil_count_over_size(count, size, shards):
    assert shard_count(count, size) == shards


def exactly_once(keys, ranges) -> bool:
    return all(sum(in_range(k, r) for r in ranges) == 1 for k in keys)


@given(st.integers(-(2**63), 2**64 - 1), st.integers(0, 2**64), st.integers(1, 60), st.data())
def test_integer_ranges_put_every_key_in_exactly_one_range(lo, span, shards, data):
    hi = lo + span
    keys = data.draw(st.lists(st.integers(lo, hi), max_size=30)) + [lo, hi, lo - 1, hi + 1]
    ranges = integer_ranges(lo, hi, shards)
    assert 1 <= len(ranges) <= shards
    assert exactly_once([(k,) for k in keys], ranges)


@given(st.integers(0, 10**6), st.integers(1, 20))
def test_integer_ranges_are_equal_width(lo, shards):
    ranges = integer_ranges(lo, lo + 999, shards)
    uppers = [r.upper[0] for r in ranges[:-1]]
    assert len({b - a for a, b in zip([lo, *uppers], uppers, strict=False)}) <= 1


KEYS = st.tuples(st.integers(-5, 5), st.text("ab", max_size=3))


@given(
    st.lists(KEYS, max_size=60),
    st.integers(1, 10),
    st.lists(st.one_of(KEYS, st.tuples(st.none(), st.text())), max_size=10),
)
def test_boundary_ranges_put_every_key_in_exactly_one_range(keys, size, others):
    ordered = sorted(keys)
    ranges = boundary_ranges(ordered[::size])
    with_nulls = [*ranges, KeyRange(nulls=True)]
    assert exactly_once(ordered + others, with_nulls)
    assert len(ranges) <= max(1, -(-len(keys) // size))


def test_boundary_ranges_drop_duplicate_cuts():
    assert boundary_ranges([(1,), (1,), (2,), (2,)]) == [KeyRange(None, (2,)), KeyRange((2,), None)]


L = Literal


@pytest.mark.parametrize(
    ("key_range", "nullable", "sql"),
    [
        (KeyRange(None, (L("5", "5"),)), False, "`a` < 5"),
        (KeyRange((L("5", "5"),), (L("9", "9"),)), True, "`a` IS NOT NULL AND `a` >= 5 AND `a` < 9"),
        (KeyRange(nulls=True), True, "`a` IS NULL"),
        (KeyRange(), False, "1 = 1"),
    ],
)
def test_range_sql_single_column(key_range, nullable, sql):
    assert range_sql(["`a`"], key_range, nullable) == sql


def test_range_sql_composite_is_expanded_for_the_index():
    key = (L("1", "1"), L("'x'", "x"), L("2", "2"))
    assert range_sql(["`a`", "`b`", "`c`"], KeyRange(key, None), False) == (
        "(`a` > 1 OR (`a` = 1 AND `b` > 'x') OR (`a` = 1 AND `b` = 'x' AND `c` >= 2))"
    )
    assert range_sql(["`a`", "`b`"], KeyRange(None, key[:2]), False) == "(`a` < 1 OR (`a` = 1 AND `b` < 'x'))"
    assert range_sql(["`a`", "`b`"], KeyRange(nulls=True), True) == "(`a` IS NULL OR `b` IS NULL)"


def test_shards_are_numbered_with_readable_bounds_and_a_null_shard():
    ranges = [KeyRange(None, (L("5", "5"),)), KeyRange((L("5", "5"),), None)]
    shards = shards_for(["`a`"], ranges, nullable=True)
    assert [(s.index, s.where, s.lower, s.upper) for s in shards] == [
        (0, "`a` IS NOT NULL AND `a` < 5", None, "5"),
        (1, "`a` IS NOT NULL AND `a` >= 5", "5", None),
        (2, "`a` IS NULL", "NULL", "NULL"),
    ]
    assert [s.where for s in shards_for(["`a`"], [KeyRange()], nullable=True)] == ["1 = 1"]


@pytest.mark.parametrize(
    ("column", "value", "sql"),
    [
        (ColumnSpec("a", "bigint(20) unsigned"), 2**64 - 1, "18446744073709551615"),
        (ColumnSpec("a", "decimal(10,2)"), "-1.50", "-1.50"),
        (ColumnSpec("a", "double"), 1e16, "1e+16"),
        (ColumnSpec("a", "datetime(6)"), "2024-01-02 03:04:05.000001", "'2024-01-02 03:04:05.000001'"),
        (ColumnSpec("a", "time"), "-838:59:59", "'-838:59:59'"),
        (ColumnSpec("a", "varbinary(4)"), b"\x00'", "X'0027'"),
    ],
)
def test_literals_hold_only_the_value(column, value, sql):
    assert literal(column, value).sql == sql


def test_string_literal_is_hex_with_charset_and_collation():
    lit = literal(ColumnSpec("a", "varchar(9)"), "é'".encode(), ("utf8mb4", "utf8mb4_general_ci"))
    assert (lit.sql, lit.text) == ("_utf8mb4 X'c3a927' COLLATE utf8mb4_general_ci", "é'")


@pytest.mark.parametrize(
    ("column", "value"),
    [
        (ColumnSpec("a", "datetime"), "2024-01-01' OR '1"),
        (ColumnSpec("a", "decimal(5,1)"), "1; DROP"),
        (ColumnSpec("a", "int"), "1"),
        (ColumnSpec("a", "int"), True),
        (ColumnSpec("a", "point"), b"x"),
    ],
)
def test_literals_refuse_anything_but_a_plain_value(column, value):
    with pytest.raises(SplitError):
        literal(column, value)


def test_string_literal_refuses_a_strange_collation_name():
    with pytest.raises(SplitError):
        literal(ColumnSpec("a", "varchar(9)"), b"x", ("utf8mb4", "x COLLATE y; --"))
