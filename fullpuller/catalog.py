"""What the full puller knows about a source table, read once from information_schema.

>>> table_info(db, "shop", "orders")  # doctest: +SKIP
TableInfo(schema='shop', table='orders', columns=(ColumnSpec(name='id', column_type='int(11)', ...), ...),
          primary_key=('id',), unique_keys=(('email',),), indexes=(('customer_id', 'created'),), ...)
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import pymysql

from dbuslib.config import MysqlConnection
from ums.types import ColumnSpec

_COLUMNS_SQL = (
    "SELECT COLUMN_NAME, COLUMN_TYPE, IS_NULLABLE, CHARACTER_SET_NAME, COLLATION_NAME"
    " FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s ORDER BY ORDINAL_POSITION"
)
_INDEXES_SQL = (
    "SELECT INDEX_NAME, NON_UNIQUE, COLUMN_NAME FROM information_schema.STATISTICS"
    " WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s"
    " ORDER BY INDEX_NAME = 'PRIMARY' DESC, INDEX_NAME, SEQ_IN_INDEX"
)


@dataclass(frozen=True)
class TableInfo:
    """A table's columns and keys.

    JSON example: ``{"schema": "shop", "table": "orders", "columns": [...], "primary_key": ["id"],
    "unique_keys": [["email"]], "indexes": [["customer_id", "created"]],
    "collations": [["email", "utf8mb4", "utf8mb4_general_ci"]]}``

    ``collations`` (column, character set, collation) covers the character columns only; the splitter
    needs it to write string bounds as exact literals.
    """

    schema: str
    table: str
    columns: tuple[ColumnSpec, ...]
    primary_key: tuple[str, ...]
    unique_keys: tuple[tuple[str, ...], ...]
    indexes: tuple[tuple[str, ...], ...]
    collations: tuple[tuple[str, str, str], ...] = ()

    def column(self, name: str) -> ColumnSpec | None:
        """The column called ``name`` (case-insensitive, as MariaDB compares column names), or None."""
        wanted = name.lower()
        return next((c for c in self.columns if c.name.lower() == wanted), None)

    def collation(self, name: str) -> tuple[str, str] | None:
        """(character set, collation) of a character column, None for other columns."""
        return next(((cs, coll) for col, cs, coll in self.collations if col == name), None)


def primary_keys(
    conn: MysqlConnection, tables: Iterable[tuple[str, str]]
) -> dict[tuple[str, str], tuple[str, ...] | None]:
    """The primary key of each ``(schema, table)`` on the source, in key order, over one connection:
    None when the table does not exist, ``()`` when it has no primary key. Each caller names its own
    option for a key given by hand (``dbus reconcile --primary-key``, ``dbus replicate --key``)."""
    from dbuslib import mysql

    db = mysql.connect(conn)
    try:
        keys: dict[tuple[str, str], tuple[str, ...] | None] = {}
        for schema, table in tables:
            info = table_info(db, schema, table)
            keys[(schema, table)] = None if info is None else info.primary_key
        return keys
    finally:
        db.close()


def table_info(db: pymysql.Connection, schema: str, table: str) -> TableInfo | None:
    """Read ``schema.table`` from information_schema; None when there is no such table."""
    with db.cursor() as cur:
        cur.execute(_COLUMNS_SQL, (schema, table))
        column_rows = cur.fetchall()
        cur.execute(_INDEXES_SQL, (schema, table))
        index_rows = cur.fetchall()
    if not column_rows:
        return None
    columns = tuple(ColumnSpec(name, ctype, nullable == "YES") for name, ctype, nullable, _, _ in column_rows)
    collations = tuple((name, cs, coll) for name, _, _, cs, coll in column_rows if cs and coll)
    primary, unique, other = _group_indexes(index_rows)
    return TableInfo(schema, table, columns, primary, unique, other, collations)


def _group_indexes(rows) -> tuple[tuple[str, ...], tuple[tuple[str, ...], ...], tuple[tuple[str, ...], ...]]:
    """STATISTICS rows (index, non_unique, column) -> primary key, unique keys, other indexes."""
    by_name: dict[str, tuple[bool, list[str]]] = {}
    for index, non_unique, column in rows:
        by_name.setdefault(index, (not int(non_unique), []))[1].append(column)
    primary = tuple(by_name.pop("PRIMARY", (True, []))[1])
    unique = tuple(tuple(cols) for is_unique, cols in by_name.values() if is_unique)
    other = tuple(tuple(cols) for is_unique, cols in by_name.values() if not is_unique)
    return primary, unique, other
