"""dbusclient.sink_sql without a database: the UMS type -> replica column type mapping per dialect, and
the statements it builds (the never-backwards guard's order on MariaDB, the WHERE of PostgreSQL's), the
literals of the MariaDB path."""

from __future__ import annotations

from decimal import Decimal

import pytest
import sqlalchemy as sa
from hypothesis import given, settings
from hypothesis import strategies as st
from pymysql.converters import escape_item, escape_string
from sqlalchemy.dialects import mysql, postgresql

from dbusclient.sink_sql import (
    SinkSchemaError,
    _older_gone,
    _quick_literal,
    _quote_escaped,
    _upsert,
    sql_type,
)
from ums.decode import decode_value
from ums.errors import UmsError
from ums.types import UmsType

DIALECTS = {"mysql": mysql.dialect(), "postgresql": postgresql.dialect()}

KEY_TEXT = "VARCHAR(768) CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin"  # exact: no PAD SPACE, no case
EXPECTED = {
    # ums type: (MariaDB, MariaDB key column without a source declaration, PostgreSQL)
    UmsType.INT: ("INTEGER", "INTEGER", "INTEGER"),
    UmsType.LONG: ("NUMERIC(20, 0)", "NUMERIC(20, 0)", "NUMERIC(20, 0)"),
    UmsType.FLOAT: ("FLOAT", "FLOAT", "REAL"),
    UmsType.DOUBLE: ("DOUBLE", "DOUBLE", "DOUBLE PRECISION"),
    UmsType.BOOLEAN: ("BOOL", "BOOL", "BOOLEAN"),
    UmsType.DATE: ("DATE", "DATE", "DATE"),
    UmsType.DATETIME: ("DATETIME(6)", "DATETIME(6)", "TIMESTAMP(6) WITHOUT TIME ZONE"),
    UmsType.DECIMAL: ("DECIMAL(65, 30)", "DECIMAL(65, 30)", "NUMERIC"),
    UmsType.STRING: ("LONGTEXT", KEY_TEXT, "TEXT"),
    UmsType.RAW: ("LONGTEXT", KEY_TEXT, "TEXT"),
    UmsType.JSONOBJECT: ("LONGTEXT", KEY_TEXT, "TEXT"),
    UmsType.BINARY: ("LONGBLOB", "VARBINARY(3072)", "BYTEA"),
}


def compiled(t: sa.types.TypeEngine, dialect: str) -> str:
    return t.compile(dialect=DIALECTS[dialect])


def test_every_ums_type_has_a_column_type():
    assert set(EXPECTED) == set(UmsType)


@pytest.mark.parametrize("ums", list(UmsType), ids=lambda t: t.value)
def test_column_type_per_dialect(ums):
    maria, maria_key, pg = EXPECTED[ums]
    assert compiled(sql_type(ums, "mariadb"), "mysql") == maria
    assert compiled(sql_type(ums, "mysql", key=True), "mysql") == maria_key
    assert compiled(sql_type(ums, "postgresql"), "postgresql") == pg
    pg_key = 'TEXT COLLATE "C"' if pg == "TEXT" else pg
    assert compiled(sql_type(ums, "postgresql", key=True), "postgresql") == pg_key


def test_an_unknown_dialect_is_refused_by_name():
    with pytest.raises(SinkSchemaError, match="dialect 'sqlite'"):
        sql_type(UmsType.INT, "sqlite")


def table() -> sa.Table:
    return sa.Table(
        "orders",
        sa.MetaData(),
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("name", sa.Text),
        sa.Column("ums_id_", sa.BigInteger),
        sa.Column("ums_uid_", sa.Numeric(40, 0)),
    )


def test_mariadb_upsert_updates_the_data_before_the_position():
    """MariaDB runs ON DUPLICATE KEY UPDATE assignments in order, each seeing the ones before: the guard
    must still compare the old position when the data columns are assigned."""
    sql = str(_upsert("mysql", table(), ("id",), ("name",), guarded=True).compile(dialect=DIALECTS["mysql"]))
    tail = sql.split("ON DUPLICATE KEY UPDATE")[1]
    assert tail.index(" name = ") < tail.index("ums_uid_ = ") < tail.index("ums_id_ = ")
    assert tail.count("(orders.ums_id_, orders.ums_uid_) < (VALUES(ums_id_), VALUES(ums_uid_))") == 3


def test_postgresql_upsert_is_guarded_by_where():
    sql = str(
        _upsert("postgresql", table(), ("id",), ("name",), guarded=True).compile(
            dialect=DIALECTS["postgresql"]
        )
    )
    assert "ON CONFLICT (id) DO UPDATE SET name = excluded.name" in sql
    assert sql.endswith("WHERE (orders.ums_id_, orders.ums_uid_) < (excluded.ums_id_, excluded.ums_uid_)")


def test_clean_up_delete_joins_the_other_table():
    t = table()
    o = sa.Table(
        "orders__tombstones", sa.MetaData(), *[sa.Column(c.name, c.type) for c in t.c if c.name != "name"]
    )
    sql = str(_older_gone(t, o, ("id",), [(1,), (2,)]).compile(dialect=DIALECTS["postgresql"]))
    assert sql.startswith(
        "DELETE FROM orders USING orders__tombstones WHERE orders.id = orders__tombstones.id"
    )
    assert (
        "(orders.ums_id_, orders.ums_uid_) < (orders__tombstones.ums_id_, orders__tombstones.ums_uid_)" in sql
    )


# ---------------------------------------------------------------- the MariaDB path's literals

WIRE = {
    UmsType.LONG: st.integers(-(2**63), 2**64 - 1).map(str),
    UmsType.INT: st.integers(-(2**31), 2**31 - 1) | st.integers(),
    UmsType.DECIMAL: st.decimals(allow_nan=False, allow_infinity=False, places=4).map(
        lambda d: format(d, "f")
    ),
    UmsType.STRING: st.text(max_size=12),
    UmsType.RAW: st.text(max_size=12),
    UmsType.DATETIME: st.datetimes().map(lambda d: f"{d:%Y-%m-%d %H:%M:%S.%f}")
    | st.datetimes().map(lambda d: f"{d:%Y-%m-%d %H:%M:%S.%f}"[:-3])
    | st.sampled_from(["0000-00-00 00:00:00", "2024-02-30 00:00:00", "2024-01-02 03:04:05"]),
    UmsType.DATE: st.dates().map(lambda d: f"{d:%Y-%m-%d}") | st.sampled_from(["0000-00-00", "2023-02-29"]),
    UmsType.DOUBLE: st.floats(allow_nan=False, allow_infinity=False) | st.integers(-(2**53), 2**53),
    UmsType.FLOAT: st.floats(allow_nan=False, allow_infinity=False),
    UmsType.BOOLEAN: st.booleans(),
}


@settings(max_examples=400, deadline=None)
@given(st.sampled_from(sorted(WIRE, key=lambda t: t.value)).flatmap(lambda t: st.tuples(st.just(t), WIRE[t])))
def test_a_quick_literal_is_the_literal_of_the_decoded_value(type_and_value):
    """``_quick_literal`` writes the usual wire forms as they are; what it writes means the value that
    decode_value gives (pymysql's literal of it), and what it leaves (None) is decoded and escaped."""
    t, value = type_and_value
    literal = _quick_literal(t, value, lambda s: "'" + escape_string(s) + "'")
    if literal is None:
        return
    try:
        decoded = decode_value(t, value)
    except UmsError:
        pytest.fail(f"{t.value} {value!r}: written as {literal}, but it does not decode")
    if isinstance(decoded, str) and t in (UmsType.DATE, UmsType.DATETIME):
        pytest.fail(f"a zero date {value!r} is NULL in the replica, not {literal}")
    if t in (UmsType.DATE, UmsType.DATETIME):
        assert literal == f"'{value}'"
        assert type(decoded).fromisoformat(literal[1:-1]) == decoded
    elif t is UmsType.DECIMAL:
        assert Decimal(literal) == decoded
    else:
        assert literal == escape_item(decoded, "utf8mb4")


@settings(max_examples=400, deadline=None)
@given(st.text() | st.text(alphabet="\x00\n\r\x1a\"'\\ a\u00e9\u4e2d"))
def test_a_quoted_string_is_what_pymysql_escapes(text):
    assert _quote_escaped(text) == "'" + escape_string(text) + "'"
