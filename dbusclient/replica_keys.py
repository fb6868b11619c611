"""The key columns of a replica table: every source key held exactly, or the table refused by name.

A replica table's key is its primary key, so the target compares its values with the key column's
collation. Two keys the source holds apart must stay apart in the replica: under a PAD SPACE collation
(MariaDB's ``utf8mb4_bin`` among them) ``'k1'``, ``'k1 '`` and ``'k1  '`` are one key, under a
case-insensitive one ``'k1'`` and ``'K1'``. Whatever the source's collation, the keys it holds are
distinct strings, so a replica key column compares strings **exactly**: on MariaDB the source column's
character set with its binary NO PAD collation (``utf8mb4_nopad_bin``; MySQL 8: ``utf8mb4_0900_bin``),
on PostgreSQL ``TEXT COLLATE "C"`` (deterministic: equal only when the bytes are). A source whose own
collation merges keys (``'k1'`` = ``'K1'``) never holds both, so an exact replica holds what it holds.

The length comes from the source's declaration (``SourceColumn``: ``varchar(300)`` -> ``VARCHAR(300)``,
``varbinary(16)`` -> ``VARBINARY(16)``). A primary key has a size limit (InnoDB 3,072 bytes,
PostgreSQL's B-tree 2,704 bytes a row: its 8-byte header, each column with its own header and aligned to
8, measured at 673 4-byte characters alone), counted at the largest size of every column of the key: a key
that cannot fit is refused (``KeyRefused``, ``CLIENT_SINK_KEY``) naming the replica and the column,
before any row is written. A string key with no declaration takes the bytes the rest of the key leaves.
One derivation, as JSON::

    {"replica": "orders", "key": ["code", "n"], "dialect": "mariadb",
     "declared": {"code": {"column_type": "varchar(300)", "charset": "utf8mb4",
                           "collation": "utf8mb4_general_ci"}}}
    -> code VARCHAR(300) CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin, n INTEGER  (1,204 bytes)
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import mysql as mysql_dialect
from sqlalchemy.dialects import postgresql as pg_dialect

from dbuslib.errors import ConfigError
from ums.types import BadColumnTypeError, UmsType, parse_column_type, set_members

MARIADB_KEY_BYTES = 3072  # InnoDB's longest index key (DYNAMIC rows)
POSTGRESQL_KEY_BYTES = 2704  # the longest B-tree (version 4) index row, its 8-byte header included
_PG_ROW_HEADER = 8  # an index row's header; each column of it aligned to 8 bytes at most (counted so)
# bytes a character takes at most, in MariaDB's own character set (the replica keeps it) and in UTF-8
# (PostgreSQL's); a character set not listed is kept as utf8mb4
MARIADB_MAXLEN = {"ascii": 1, "latin1": 1, "utf8mb3": 3, "utf8": 3, "utf8mb4": 4, "ucs2": 2, "utf16": 4}
UTF8_MAXLEN = {"ascii": 1, "latin1": 2, "utf8mb3": 3, "utf8": 3, "utf8mb4": 4, "ucs2": 3, "utf16": 4}
# characters of the types the appender renders as strings with a known longest form
_RENDERED = {"time": 17, "inet4": 15, "inet6": 39, "uuid": 36}
# longest text and blob of each base type, in bytes (a character takes at least one)
_LONGEST = {
    "tinytext": 255,
    "text": 65_535,
    "mediumtext": 16_777_215,
    "longtext": 4_294_967_295,
    "json": 4_294_967_295,
    "tinyblob": 255,
    "blob": 65_535,
    "mediumblob": 16_777_215,
    "longblob": 4_294_967_295,
}
# bytes of the other key types in the index (MariaDB, PostgreSQL aligned to 8), as ``sink_sql.sql_type``
# makes them
_FIXED = {
    UmsType.INT: (4, 8),
    UmsType.LONG: (9, 16),  # DECIMAL(20,0), NUMERIC(20,0)
    UmsType.FLOAT: (4, 8),
    UmsType.DOUBLE: (8, 8),
    UmsType.BOOLEAN: (1, 8),
    UmsType.DATE: (3, 8),
    UmsType.DATETIME: (8, 8),
    UmsType.DECIMAL: (30, 48),  # DECIMAL(65,30); PostgreSQL's NUMERIC of 65 digits
}
_STRINGS = frozenset({UmsType.STRING, UmsType.RAW, UmsType.JSONOBJECT})
_DIGITS = re.compile(r"\s*(\d+)\s*$")


class KeyRefused(ConfigError):
    """A replica key the target cannot hold exactly: a key column (or the columns of a composite key
    together) longer than the target's longest primary key, or a key column of an unknown declared
    type; names the replica table, the column and the sizes. Nothing was written."""

    code = "CLIENT_SINK_KEY"


@dataclass(frozen=True)
class SourceColumn:
    """A key column as the source declares it (``information_schema.COLUMNS``)::

    {"name": "code", "column_type": "varchar(300)", "charset": "utf8mb4", "collation": "utf8mb4_general_ci"}
    """

    name: str
    column_type: str
    charset: str | None = None
    collation: str | None = None


@dataclass(frozen=True)
class _Part:
    """One key column's replica form: length in characters (strings) or bytes (binary), None when not
    declared; the bytes it takes at most in the target's index (None: not known yet)."""

    column: str
    ums: UmsType
    length: int | None
    charset: str
    size: int | None
    what: str  # the declaration, for messages


def key_types(
    replica: str,
    key: Sequence[str],
    types: Mapping[str, UmsType],
    dialect: str,
    declared: Mapping[str, SourceColumn] | None = None,
) -> dict[str, sa.types.TypeEngine[Any]]:
    """The replica column type of each key column (``key``, with UMS ``types``) on ``dialect``
    (``mariadb``, ``mysql`` for MySQL 8, ``postgresql``), from the source's ``declared`` columns;
    ``KeyRefused`` naming ``replica`` and the column when the key cannot be held (module docstring)."""
    return {p.column: _sql(p, dialect) for p in _parts(replica, key, types, dialect, declared)}


def key_lengths(
    replica: str,
    key: Sequence[str],
    types: Mapping[str, UmsType],
    dialect: str,
    declared: Mapping[str, SourceColumn] | None = None,
) -> tuple[int | None, ...]:
    """Per key column, the longest value the replica's key takes (characters of a string, bytes of a
    binary; None: a number or date, or a PostgreSQL string without declaration): a longer key (a record
    no source could write) is refused by the sink rather than cut or failing the window's statement."""
    return tuple(p.length for p in _parts(replica, key, types, dialect, declared))


def _parts(
    replica: str,
    key: Sequence[str],
    types: Mapping[str, UmsType],
    dialect: str,
    declared: Mapping[str, SourceColumn] | None,
) -> list[_Part]:
    pg = dialect == "postgresql"
    if not pg and dialect not in ("mariadb", "mysql"):
        msg = f"dialect {dialect!r}: the SQL sink knows mysql/mariadb and postgresql"
        raise KeyRefused(msg)
    declared = declared or {}
    parts = [_part(replica, c, types[c], declared.get(c), pg, dialect == "mysql") for c in key]
    limit = POSTGRESQL_KEY_BYTES if pg else MARIADB_KEY_BYTES
    known = sum(p.size for p in parts if p.size is not None) + (_PG_ROW_HEADER if pg else 0)
    unknown = [p for p in parts if p.size is None]
    if unknown and not pg:  # what the rest of the key leaves, shared
        share = (limit - known) // len(unknown)
        parts = [p if p.size is not None else _fill(p, share) for p in parts]
        known = sum(p.size or 0 for p in parts)  # MariaDB: no header
    widest = max(parts, key=lambda p: p.size or 0)
    if known > limit or (widest.length is not None and widest.length < 1):
        target = "PostgreSQL" if pg else "MariaDB"
        rest = known - (widest.size or 0)
        together = (
            f" and the rest of the key{' (with the index row header)' if pg else ''} {rest}" if rest else ""
        )
        msg = (
            f"replica {replica}: key column {widest.column!r} ({widest.what}) takes up to {widest.size} "
            f"bytes{together}; a {target} primary key holds at most {limit} bytes, so some keys of the "
            "source could not be held exactly. Replicate this table with another key (--key) or to "
            "another target"
        )
        raise KeyRefused(msg)
    return parts


def _part(replica: str, column: str, ums: UmsType, src: SourceColumn | None, pg: bool, mysql8: bool) -> _Part:
    if ums not in _STRINGS and ums is not UmsType.BINARY:
        maria, post = _FIXED[ums]
        return _Part(column, ums, None, "", post if pg else maria, ums.value)
    charset = (src.charset or "utf8mb4").lower() if src is not None else "utf8mb4"
    if mysql8 or charset not in MARIADB_MAXLEN:
        charset = "utf8mb4"
    length = None if src is None else _declared_length(replica, src)
    what = src.column_type if src is not None else f"{ums.value}, length not declared"
    if ums is UmsType.BINARY:
        per = 1
    else:
        per = UTF8_MAXLEN.get(charset, 4) if pg else MARIADB_MAXLEN[charset]
    if length is None:
        return _Part(column, ums, None, charset, 0 if pg else None, what)
    if pg:  # a varlena: its 4-byte header, aligned to 8
        return _Part(column, ums, length, charset, -(-(length * per + 4) // 8) * 8, what)
    return _Part(column, ums, length, charset, length * per, what)


def _fill(p: _Part, share: int) -> _Part:
    """An undeclared string (or binary) column: as long as ``share`` bytes allow."""
    per = 1 if p.ums is UmsType.BINARY else MARIADB_MAXLEN[p.charset]
    length = share // per
    return _Part(p.column, p.ums, length, p.charset, length * per, p.what)


def _declared_length(replica: str, src: SourceColumn) -> int:
    """The longest value of a string (characters) or binary (bytes) source column."""
    try:
        parsed = parse_column_type(src.column_type)
    except BadColumnTypeError as e:
        msg = f"replica {replica}: key column {src.name!r}: {e}"
        raise KeyRefused(msg) from None
    base = parsed.base
    if base in ("char", "varchar", "binary", "varbinary"):
        digits = _DIGITS.match(parsed.args)
        return int(digits.group(1)) if digits else 1  # CHAR and BINARY without a length hold one
    if base in _LONGEST:
        return _LONGEST[base]
    if base in _RENDERED:
        return _RENDERED[base]
    if base == "enum":
        return max((len(m) for m in set_members(src.column_type)), default=0)
    if base == "set":
        members = set_members(src.column_type)
        return sum(len(m) for m in members) + max(len(members) - 1, 0)
    msg = (
        f"replica {replica}: key column {src.name!r} is {src.column_type}, a type whose longest value "
        "the SQL sink does not know: give another key (--key)"
    )
    raise KeyRefused(msg)


def _sql(p: _Part, dialect: str) -> sa.types.TypeEngine[Any]:
    from dbusclient.sink_sql import sql_type  # the other columns' types: one home

    if p.ums not in _STRINGS and p.ums is not UmsType.BINARY:
        return sql_type(p.ums, dialect, key=True)
    if dialect == "postgresql":
        return pg_dialect.BYTEA() if p.ums is UmsType.BINARY else pg_dialect.TEXT(collation="C")
    if p.ums is UmsType.BINARY:
        return mysql_dialect.VARBINARY(p.length)
    collation = "utf8mb4_0900_bin" if dialect == "mysql" else f"{p.charset}_nopad_bin"
    return mysql_dialect.VARCHAR(p.length, charset=p.charset, collation=collation)
