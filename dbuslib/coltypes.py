"""Column types the binlog cannot tell, read from the source's catalog for the raw record's ``types``.

MariaDB writes INET4 as BINARY(4) and INET6 and UUID as BINARY(16) in the table map: the type code,
metadata, charset (binary) and every optional metadata field are the same as for a plain BINARY(n)
(binlog_row_metadata=FULL carries no data type name). SELECT prints them as text, so a decoder must know.
The extractor asks ``information_schema.COLUMNS`` once per table shape and puts the answer in each rows
record's header, ``"types": {"addr": "inet6", "id": "uuid"}``; the decoders (binlog.rows and
the JVM decoder) read it. Only tables with a BINARY(4)/BINARY(16) column are asked
about; a DDL record of the table forgets the answer, so the next rows event asks again.

    >>> candidates([("addr", 254, "binary", 16), ("note", 15, "utf8mb4", 80)])
    (('addr', 16),)
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from dbuslib.errors import EndpointError

# information_schema DATA_TYPE -> the BINARY(n) length MariaDB stores it in
STORED_AS: dict[str, int] = {"inet4": 4, "inet6": 16, "uuid": 16}
_STRING = 254  # MYSQL_TYPE_STRING: CHAR/BINARY in a table map
_SQL = (
    "SELECT COLUMN_NAME, DATA_TYPE FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = %s"
    " AND TABLE_NAME = %s AND DATA_TYPE IN ('inet4', 'inet6', 'uuid')"
)

Lookup = Callable[[str, str], Sequence[tuple[str, str]]]  # (schema, table) -> (column, data type) rows


def candidates(columns: Iterable[tuple[str, int, str | None, int]]) -> tuple[tuple[str, int], ...]:
    """(name, length) of the columns that may be INET4/INET6/UUID: binlog BINARY(4) or BINARY(16).
    ``columns`` are (name, binlog type code, charset name, max length) in table order."""
    lengths = set(STORED_AS.values())
    return tuple(
        (name, length)
        for name, code, charset, length in columns
        if code == _STRING and charset == "binary" and length in lengths
    )


def types_of(found: Sequence[tuple[str, int]], catalog: Sequence[tuple[str, str]]) -> dict[str, str]:
    """The header's ``types``: each candidate the catalog names as a type stored in its length."""
    by_name = {name: str(kind).lower() for name, kind in catalog}
    return {
        name: by_name[name]
        for name, length in found
        if name in by_name and STORED_AS.get(by_name[name]) == length
    }


def library_columns(table_map: Any) -> list[tuple[str, int, str | None, int]]:
    """(name, type code, charset, max length) of a python-mysql-replication TableMapEvent's columns."""
    return [
        (c.name, c.type, getattr(c, "character_set_name", None), getattr(c, "max_length", 0) or 0)
        for c in table_map.columns
    ]


class TypeCache:
    """``types`` per table shape: asks ``lookup`` only for tables with candidate columns, once per
    (schema, table, candidates), until ``forget`` (a DDL of the table, or of its schema with ``*``)."""

    def __init__(self, lookup: Lookup) -> None:
        self._lookup = lookup
        self._known: dict[tuple[str, str, tuple[tuple[str, int], ...]], dict[str, str]] = {}

    def types(
        self, schema: str, table: str, columns: Iterable[tuple[str, int, str | None, int]]
    ) -> dict[str, str]:
        found = candidates(columns)
        if not found:
            return {}
        key = (schema, table, found)
        if key not in self._known:
            self._known[key] = types_of(found, self._lookup(schema, table))
        return self._known[key]

    def close(self) -> None:
        """Close the lookup's connection, if it has one."""
        close = getattr(self._lookup, "close", None)
        if close is not None:
            close()

    def forget(self, schema: str, table: str) -> None:
        for key in [k for k in self._known if k[0] == schema and table in ("*", k[1])]:
            del self._known[key]


class CatalogLookup:
    """A ``Lookup`` over pymysql connections made by ``connect``: one kept open, made again once when the
    server dropped it (a second failure is an ``EndpointError``, retriable); ``close`` closes it."""

    def __init__(self, connect: Callable[[], Any]) -> None:
        self._connect = connect
        self._db: Any = None

    def __call__(self, schema: str, table: str) -> list[tuple[str, str]]:
        for attempt in (1, 2):
            if self._db is None:
                self._db = self._connect()
            try:
                with self._db.cursor() as cur:
                    cur.execute(_SQL, (schema, table))
                    return [(str(n), str(t)) for n, t in cur.fetchall()]
            except Exception as e:
                self.close()
                if attempt == 2:
                    msg = f"information_schema.COLUMNS of {schema}.{table} (INET4/INET6/UUID types): {e}"
                    raise EndpointError(msg) from e
        return []

    def close(self) -> None:
        db, self._db = self._db, None
        if db is not None:
            try:
                db.close()
            except Exception:
                pass


def catalog_lookup(connect: Callable[[], Any]) -> CatalogLookup:
    """``CatalogLookup(connect)``."""
    return CatalogLookup(connect)
