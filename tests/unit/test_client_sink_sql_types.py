"""dbusclient.sink_sql without a database: the UMS type -> replica column type mapping per dialect, and
the statements it builds (the never-backwards guard's order on MariaDB, the WHERE of PostgreSQL's)."""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from sqlalchemy.dialects import mysql, postgresql

from dbusclient.sink_sql import SinkSchemaError, _older_gone, _upsert, sql_type
from ums.types import UmsType

DIALECTS = {"mysql": mysql.dialect(), "postgresql": postgresql.dialect()}

EXPECTED = {
    # ums type: (MariaDB, MariaDB key column, PostgreSQL)
    UmsType.INT: ("INTEGER", "INTEGER", "INTEGER"),
    UmsType.LONG: ("NUMERIC(20, 0)", "NUMERIC(20, 0)", "NUMERIC(20, 0)"),
    UmsType.FLOAT: ("FLOAT", "FLOAT", "REAL"),
    UmsType.DOUBLE: ("DOUBLE", "DOUBLE", "DOUBLE PRECISION"),
    UmsType.BOOLEAN: ("BOOL", "BOOL", "BOOLEAN"),
    UmsType.DATE: ("DATE", "DATE", "DATE"),
    UmsType.DATETIME: ("DATETIME(6)", "DATETIME(6)", "TIMESTAMP(6) WITHOUT TIME ZONE"),
    UmsType.DECIMAL: ("DECIMAL(65, 30)", "DECIMAL(65, 30)", "NUMERIC"),
    UmsType.STRING: ("LONGTEXT", "VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin", "TEXT"),
    UmsType.RAW: ("LONGTEXT", "VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin", "TEXT"),
    UmsType.JSONOBJECT: ("LONGTEXT", "VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin", "TEXT"),
    UmsType.BINARY: ("LONGBLOB", "VARBINARY(255)", "BYTEA"),
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
    assert compiled(sql_type(ums, "postgresql", key=True), "postgresql") == pg


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
