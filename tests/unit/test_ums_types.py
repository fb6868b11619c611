"""MySQL/MariaDB COLUMN_TYPE -> UMS type, fsp and SET members."""

import pytest

from ums.errors import BadColumnTypeError
from ums.types import ColumnSpec, UmsType, fsp_for, parse_column_type, set_members, ums_type_for

S, INT, L = UmsType.STRING, UmsType.INT, UmsType.LONG
B, D = UmsType.BINARY, UmsType.DECIMAL


@pytest.mark.parametrize(
    ("column_type", "expected"),
    [
        ("tinyint(4)", INT),
        ("tinyint(3) unsigned", INT),
        ("tinyint(1)", INT),
        ("smallint(6)", INT),
        ("smallint(5) unsigned", INT),
        ("mediumint(9)", INT),
        ("mediumint(8) unsigned zerofill", INT),
        ("int(11)", INT),
        ("INT(11)", INT),
        ("int", INT),
        ("int(11) unsigned", L),
        ("int unsigned", L),
        ("bigint(20)", L),
        ("bigint(20) unsigned", L),
        ("bigint unsigned zerofill", L),
        ("year(4)", INT),
        ("year", INT),
        ("bit(1)", INT),
        ("bit", INT),
        ("bit(31)", INT),
        ("bit(32)", L),
        ("bit(64)", L),
        ("float", UmsType.FLOAT),
        ("float(7,3) unsigned", UmsType.FLOAT),
        ("double", UmsType.DOUBLE),
        ("double(10,2)", UmsType.DOUBLE),
        ("real", UmsType.DOUBLE),
        ("decimal(65,30)", D),
        ("decimal(10,0) unsigned", D),
        ("numeric(5,2)", D),
        ("date", UmsType.DATE),
        ("datetime", UmsType.DATETIME),
        ("datetime(6)", UmsType.DATETIME),
        ("timestamp(3)", UmsType.DATETIME),
        ("time", S),
        ("time(3)", S),
        ("char(10)", S),
        ("varchar(255)", S),
        ("tinytext", S),
        ("text", S),
        ("mediumtext", S),
        ("longtext", S),
        ("enum('a','b')", S),
        ("set('x','y')", S),
        ("enum('a)b','c')", S),
        ("json", UmsType.JSONOBJECT),
        ("binary(16)", B),
        ("varbinary(255)", B),
        ("tinyblob", B),
        ("blob", B),
        ("mediumblob", B),
        ("longblob", B),
        ("geometry", B),
        ("point", B),
        ("multipolygon", B),
        ("geomcollection", B),
        ("vector(3)", B),
        ("inet6", S),
        ("uuid", S),
        ("some_future_type", S),
    ],
)
def test_column_type_maps_to_ums_type(column_type, expected):
    assert ums_type_for(column_type) is expected


@pytest.mark.parametrize(
    ("column_type", "expected"),
    [
        ("datetime", 0),
        ("datetime(6)", 6),
        ("timestamp(3)", 3),
        ("time(1)", 1),
        ("time", 0),
        ("date", None),
        ("int(11)", None),
        ("varchar(6)", None),
    ],
)
def test_fsp_comes_from_temporal_column_types_only(column_type, expected):
    assert fsp_for(column_type) == expected


@pytest.mark.parametrize(
    ("column_type", "expected"),
    [
        ("set('x','y')", ("x", "y")),
        ("enum('a','b','c')", ("a", "b", "c")),
        ("set('it''s','a,b','')", ("it's", "a,b", "")),
        ("varchar(10)", ()),
    ],
)
def test_set_members_in_definition_order(column_type, expected):
    assert set_members(column_type) == expected


def test_parse_keeps_arguments_and_unsigned_flag():
    parsed = parse_column_type("DECIMAL(10,2) UNSIGNED ZEROFILL")
    assert (parsed.base, parsed.args, parsed.unsigned) == ("decimal", "10,2", True)


@pytest.mark.parametrize(
    ("function", "column_type"),
    [
        (ums_type_for, ""),
        (ums_type_for, "(11)"),
        (ums_type_for, "int(11"),
        (ums_type_for, "bit(x)"),
        (ums_type_for, "int(11) 42"),
        (fsp_for, "datetime(6,1)"),
        (fsp_for, "time(٣)"),
    ],
)
def test_unparseable_column_types_raise_naming_them(function, column_type):
    with pytest.raises(BadColumnTypeError, match="column type") as info:
        function(column_type)
    assert info.value.code == "UMS_BAD_COLUMN_TYPE"


def test_column_spec_exposes_type_fsp_and_members():
    spec = ColumnSpec("tags", "set('b','a')", nullable=False)
    assert (spec.ums_type, spec.fsp, spec.members) == (S, None, ("b", "a"))
    assert ColumnSpec("at", "datetime(3)").fsp == 3
