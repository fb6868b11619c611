"""fullpuller.render's SQL text and the Python splice of FLOAT columns (MariaDB itself: integration test)."""

from __future__ import annotations

import pytest

from fullpuller.catalog import TableInfo
from fullpuller.render import (
    GROUP_ROWS,
    fragment_sql,
    group_column,
    group_rows_sql,
    grouped_sql,
    python_columns,
    select_sql,
    split_group,
    tuple_sql,
    tuple_text,
)
from ums.types import ColumnSpec


@pytest.mark.parametrize(
    ("column_type", "sql"),
    [
        ("int(11)", "COALESCE(CAST(`c` AS CHAR), 'null')"),
        ("year(4)", "COALESCE(CAST(CAST(`c` AS UNSIGNED) AS CHAR), 'null')"),
        ("bigint(20)", "COALESCE(CONCAT('\"', CAST(`c` AS CHAR), '\"'), 'null')"),
        ("double", "COALESCE(CAST(`c` AS CHAR), 'null')"),
        (
            "varbinary(3)",
            "COALESCE(IF(LENGTH(`c`) > 65536, '\"\\0\"', "
            "CONCAT('\"', REPLACE(TO_BASE64(`c`), '\\n', ''), '\"')), 'null')",
        ),
        ("varchar(3)", "COALESCE(JSON_QUOTE(CAST(`c` AS CHAR CHARACTER SET utf8mb4)), 'null')"),
        ("json", "COALESCE(JSON_QUOTE(JSON_COMPACT(`c`)), 'null')"),
    ],
)
def test_fragment_per_ums_type(column_type, sql):
    assert fragment_sql(ColumnSpec("c", column_type)) == sql


def test_names_are_quoted():
    assert "`a``b`" in fragment_sql(ColumnSpec("a`b", "int"))


COLS = (ColumnSpec("id", "int"), ColumnSpec("f", "float"), ColumnSpec("g", "float"), ColumnSpec("s", "text"))


def test_select_without_float_is_one_text_column():
    info = TableInfo("s", "t", COLS[:1], ("id",), (), ())
    assert select_sql(info, "`id` < 5", "x > 1") == (
        f"SELECT {tuple_sql(COLS[:1])} AS t FROM `s`.`t` WHERE (`id` < 5) AND (x > 1)"
    )


def test_select_with_floats_alternates_text_and_raw_values():
    sql = select_sql(TableInfo("s", "t", COLS, ("id",), (), ()), "1 = 1")
    assert python_columns(COLS) == ("f", "g")
    assert ", CAST(`f` AS DOUBLE) AS t1, '' AS t2, CAST(`g` AS DOUBLE) AS t3, CONCAT_WS" in sql


@pytest.mark.parametrize(
    ("row", "text"),
    [
        (('1,"x"',), '1,"x"'),
        (("1", 1.100000023841858, "", None, '"s"'), '1,1.1,null,"s"'),
        (("", 3.4028234663852886e38, ""), "3.4028235e+38"),
        (("1", "-3.1415927410125732", "2", b"0.10000000149011612", ""), "1,-3.1415927,2,0.1"),
    ],
)
def test_tuple_text_splices_floats_in_shortest_float32_form(row, text):
    assert tuple_text(row) == text


def _info(*cols: ColumnSpec) -> TableInfo:
    return TableInfo("s", "t", cols, ("id",), (), ())


ID = ColumnSpec("id", "bigint(20)", nullable=False)


@pytest.mark.parametrize(
    ("columns", "split", "grouped"),
    [
        ((ID, ColumnSpec("s", "varchar(64)"), ColumnSpec("d", "decimal(12,2)")), ("id",), "id"),
        ((ID, ColumnSpec("e", "enum('new','paid')"), ColumnSpec("t", "datetime(3)")), ("id",), "id"),
        ((ID, ColumnSpec("s", "varchar(64)")), ("id", "s"), None),  # composite split
        ((ColumnSpec("id", "bigint(20)"), ColumnSpec("s", "varchar(64)")), ("id",), None),  # nullable
        ((ID, ColumnSpec("s", "varchar(64)")), ("s",), None),  # a string split
        ((ID, ColumnSpec("x", "text")), ("id",), None),  # unbounded text
        ((ID, ColumnSpec("j", "json")), ("id",), None),
        ((ID, ColumnSpec("f", "float")), ("id",), None),  # FLOAT is spliced in Python
        ((ID, ColumnSpec("b", "varbinary(8)")), ("id",), None),  # binary may come raw
        ((ID, ColumnSpec("s", "varchar(6000)")), ("id",), None),  # over MAX_GROUPED_TEXT
        ((ID,), ("missing",), None),
    ],
)
def test_a_shard_is_read_in_groups_only_by_a_not_null_integer_split_and_short_rows(columns, split, grouped):
    assert group_column(_info(*columns), split) == grouped


def test_grouped_sql_joins_a_range_of_the_split_column_and_counts_it():
    info = _info(ID, ColumnSpec("s", "varchar(3)"))
    sql = grouped_sql(info, "id", "`id` < 5", "x > 1")
    assert sql == (
        f"SELECT GROUP_CONCAT({tuple_sql(info.columns)} SEPARATOR '\\n') AS g, `id` DIV {GROUP_ROWS} AS k,"
        f" COUNT(*) AS n FROM `s`.`t` WHERE (`id` < 5) AND (x > 1) GROUP BY `id` DIV {GROUP_ROWS}"
    )
    rows = select_sql(info, "`id` < 5", "x > 1")
    assert group_rows_sql(rows, "id", -3) == f"{rows} AND (`id` DIV {GROUP_ROWS} = -3)"


@pytest.mark.parametrize(
    ("g", "n", "limit", "texts"),
    [
        (b'1,"a"\n2,null', 2, 100, [b'1,"a"', b"2,null"]),
        (b"7", 1, 100, [b"7"]),
        (None, 2, 100, None),  # NULL: nothing joined, or a server that gave up
        (b'1,"a"\n2,nu', 2, 10, None),  # cut at group_concat_max_len (10 bytes)
        (b'1,"a"\n2,null', 3, 100, None),  # fewer texts than rows
    ],
)
def test_a_group_cut_short_is_told_from_a_whole_one(g, n, limit, texts):
    assert split_group(g, n, limit) == texts
