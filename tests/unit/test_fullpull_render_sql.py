"""fullpuller.render's SQL text and the Python splice of FLOAT columns (MariaDB itself: integration test)."""

from __future__ import annotations

import pytest

from fullpuller.catalog import TableInfo
from fullpuller.render import fragment_sql, python_columns, select_sql, tuple_sql, tuple_text
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
