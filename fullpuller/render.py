"""Render rows to UMS tuple JSON text inside MariaDB, so the full pull does almost no per-row Python work.

``select_sql`` returns one text column ``t`` per row; ``'[' + t + ']'`` is the row's UMS tuple as
``ums.values`` would write it (spec 1.9)::

    SELECT CONCAT_WS(',', COALESCE(CAST(`id` AS CHAR), 'null'), COALESCE(JSON_QUOTE(...), 'null')) AS t ...
    -> '42,"héllo"'

Each UMS type's SQL (``fragment_sql``), checked against ``ums.values`` on MariaDB 10.11:

| UMS type   | SQL                                        | why                                           |
|------------|--------------------------------------------|-----------------------------------------------|
| int        | the number; BIT, YEAR ``CAST(.. AS UNSIGNED)`` | YEAR 0 prints ``0000`` otherwise          |
| long       | ``"`` + number + ``"``                     |                                               |
| double     | ``CAST(d AS CHAR)``                        | MariaDB prints the shortest round-trip repr   |
| decimal    | ``"`` + ``CAST(d AS CHAR)`` + ``"``        | the scale is kept (``0.50``)                  |
| date(time) | ``"`` + ``CAST(d AS CHAR)`` + ``"``        | fsp digits as declared; zero dates as stored  |
| string     | ``JSON_QUOTE(CAST(s AS CHAR CHARACTER SET utf8mb4))`` | TIME, ENUM, SET print as MySQL does;|
|            |                                            | INET4/INET6/UUID as SELECT (the binlog decoders|
|            |                                            | give the same text, docs/raw-events.md)       |
| binary     | ``"`` + ``TO_BASE64`` without its newlines + ``"`` | TO_BASE64 breaks lines every 76 chars; |
|            | above ``BIG_BINARY`` bytes: raw, see below |                                               |
| jsonobject | ``JSON_QUOTE(JSON_COMPACT(j))``            | ``ums.values`` writes compact JSON text        |
| float      | rendered in Python, see ``python_columns`` | MariaDB prints FLOAT with 6 digits only        |

FLOAT is the one exception: ``CAST(f AS CHAR)`` keeps 6 significant digits (``3.40282e38``) and no SQL
expression gives the shortest repr of a 32-bit float exactly. Tables with FLOAT columns therefore select
the exact value (``CAST(f AS DOUBLE)``) next to the text, and ``tuple_text`` splices
``float32_repr(value)`` in; for every other table a row is just ``(t,)``.

A BINARY/BLOB value longer than ``BIG_BINARY`` bytes is not Base64-encoded by MariaDB: its ``REPLACE`` is
quadratic in the number of line breaks (1 MB took 0.4 s, 4 MB 6.8 s on 10.11; a 30 MB LONGBLOB held a full
pull for many minutes). Its text is ``"\\0"`` (a NUL, which no other JSON text holds: JSON_QUOTE escapes
it), and the value itself comes raw in a column appended after the text (one per binary column, in column
order, NULL when the value is short); ``splice_binaries`` puts the Base64 in. ``binary_columns`` says how
many such trailing columns a row of ``select_sql`` has.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence

from fullpuller.catalog import TableInfo
from fullpuller.split import kind_of, quote_name
from ums.scalars import float32_repr
from ums.types import ColumnSpec, UmsType, parse_column_type

SESSION_SQL: tuple[str, ...] = (
    "SET NAMES utf8mb4",
    "SET time_zone = '+00:00'",  # UMS datetimes are UTC: TIMESTAMP values print in UTC
)

_UTF8 = "CHARACTER SET utf8mb4"
BIG_BINARY = 65_536  # bytes: a longer BINARY/BLOB value is Base64-encoded in Python (see the module doc)


def _quoted(expr: str) -> str:
    return f"CONCAT('\"', {expr}, '\"')"


def _value_sql(col: ColumnSpec) -> str:
    """The non-NULL value's JSON text; NULL when the value is NULL."""
    name = quote_name(col.name)
    base = parse_column_type(col.column_type).base
    number = f"CAST({name} AS UNSIGNED)" if base in ("bit", "year") else name  # YEAR 0 prints 0000
    kind = col.ums_type
    if kind in (UmsType.INT, UmsType.BOOLEAN):
        return f"CAST({number} AS CHAR)"
    if kind is UmsType.LONG:
        return _quoted(f"CAST({number} AS CHAR)")
    if kind is UmsType.DOUBLE:
        return f"CAST({name} AS CHAR)"
    if kind is UmsType.FLOAT:  # valid JSON, but not float32_repr: see python_columns
        return f"CAST(CAST({name} AS DOUBLE) AS CHAR)"
    if kind in (UmsType.DECIMAL, UmsType.DATE, UmsType.DATETIME):
        return _quoted(f"CAST({name} AS CHAR)")
    if kind is UmsType.BINARY:
        small = _quoted(f"REPLACE(TO_BASE64({name}), '\\n', '')")
        return f"IF(LENGTH({name}) > {BIG_BINARY}, '\"\\0\"', {small})"
    if kind is UmsType.JSONOBJECT:
        return f"JSON_QUOTE(JSON_COMPACT({name}))"
    return f"JSON_QUOTE(CAST({name} AS CHAR {_UTF8}))"


def fragment_sql(col: ColumnSpec) -> str:
    """SQL expression giving the column's UMS JSON value text: ``42``, ``"abc"``, or ``null``."""
    return f"COALESCE({_value_sql(col)}, 'null')"


def tuple_sql(columns: Sequence[ColumnSpec]) -> str:
    """The fragments joined by ``,`` in column order (no brackets): one SQL expression."""
    return "CONCAT_WS(','," + ",".join(fragment_sql(c) for c in columns) + ")"


def python_columns(columns: Sequence[ColumnSpec]) -> tuple[str, ...]:
    """Columns rendered in Python by ``tuple_text`` (FLOAT: MariaDB cannot print a float32's shortest
    repr)."""
    return tuple(c.name for c in columns if c.ums_type is UmsType.FLOAT)


def binary_columns(columns: Sequence[ColumnSpec]) -> int:
    """How many raw binary columns end a row of ``select_sql`` (one per BINARY/BLOB column)."""
    return sum(1 for c in columns if c.ums_type is UmsType.BINARY)


def splice_binaries(text: bytes, raws: Sequence[bytes | None]) -> bytes:
    """A row's tuple text with the Base64 of its long binary values (``raws``: the trailing columns, None
    for a short value) in place of their ``"\\0"`` texts, in column order."""
    big = [r for r in raws if r is not None]
    if not big:
        return text
    parts = text.split(b"\0")
    if len(parts) != len(big) + 1:
        msg = f"tuple text holds {len(parts) - 1} binary placeholder(s) for {len(big)} long value(s)"
        raise ValueError(msg)
    out = [parts[0]]
    for raw, part in zip(big, parts[1:], strict=True):
        out += [base64.b64encode(raw), part]
    return b"".join(out)


def _segments(columns: Sequence[ColumnSpec]) -> list[str]:
    """``t, raw, text, raw, text...``: SQL-rendered runs of columns around each FLOAT column's raw value."""
    exprs: list[str] = []
    run: list[ColumnSpec] = []
    for col in columns:
        if col.ums_type is UmsType.FLOAT:
            exprs += [tuple_sql(run) if run else "''", f"CAST({quote_name(col.name)} AS DOUBLE)"]
            run = []
        else:
            run.append(col)
    return [*exprs, tuple_sql(run) if run else "''"]


def select_sql(info: TableInfo, shard_where: str, where: str | None = None) -> str:
    """``SELECT <tuple_sql> AS t FROM `schema`.`table` WHERE (shard_where) [AND (where)]``.

    With FLOAT columns the row also holds their raw values (see ``_segments``): always read rows
    through ``tuple_text``. With binary columns the row ends with their long values (``binary_columns``,
    ``splice_binaries``).
    """
    segments = _segments(info.columns)
    exprs = [f"{segments[0]} AS t", *(f"{e} AS t{i}" for i, e in enumerate(segments[1:], 1))]
    exprs += [
        f"IF(LENGTH({quote_name(c.name)}) > {BIG_BINARY}, {quote_name(c.name)}, NULL) AS b{i}"
        for i, c in enumerate(c for c in info.columns if c.ums_type is UmsType.BINARY)
    ]
    return f"SELECT {', '.join(exprs)}{_from(info, shard_where, where)}"


def _from(info: TableInfo, shard_where: str, where: str | None) -> str:
    """`` FROM `schema`.`table` WHERE (shard_where) [AND (where)]``."""
    condition = f"({shard_where})" + (f" AND ({where})" if where and where.strip() else "")
    return f" FROM {quote_name(info.schema)}.{quote_name(info.table)} WHERE {condition}"


# Grouped reads: a shard of a table split by one integer column, whose rows have a bounded text, is read
# as one row per GROUP_ROWS-wide range of that column, MariaDB joining the range's tuple texts with a
# newline (which no tuple text holds: JSON_QUOTE escapes it, numbers and dates have none). The reader
# splits them again: a fetch of 100,000 single rows cost pymysql 0.35 s of Python per shard, the same
# rows in groups 0.04 s (docs/fullpull.md, Performance).
GROUP_ROWS = 500
GROUP_SEPARATOR = b"\n"
GROUP_SESSION_SQL = "SET SESSION group_concat_max_len = GREATEST(4, @@max_allowed_packet - 1024)"
MAX_GROUPED_TEXT = 32_768  # bytes: the longest tuple text a grouped table may have (a group <= 16 MB)
_BOUNDED = frozenset({"int", "bit", "decimal", "temporal", "enum", "string"})


def max_text_bytes(col: ColumnSpec) -> int | None:
    """The longest JSON text ``fragment_sql`` can give the column (and its comma), or None when it has no
    bound (TEXT, BLOB, JSON, FLOAT rendered in Python, types the splitter does not know)."""
    parsed = parse_column_type(col.column_type)
    kind = kind_of(col)
    if kind not in _BOUNDED or col.ums_type in (UmsType.FLOAT, UmsType.BINARY, UmsType.JSONOBJECT):
        return None
    if kind == "string":
        if parsed.base not in ("char", "varchar"):
            return None  # TEXT types: up to 4 GB
        length = int(parsed.args) if parsed.args.isdigit() else None
        return None if length is None else 6 * length + 3  # every character escaped as \uXXXX, quotes
    if kind == "enum":
        return 6 * len(parsed.args) + 3
    return 80  # numbers, bits, dates and times: a DECIMAL(65,30) is 68 characters with its quotes


def group_column(info: TableInfo, split_columns: Sequence[str]) -> str | None:
    """The column a shard of ``info`` split by ``split_columns`` is read grouped by (``grouped_sql``): the
    split column when it is a single NOT NULL integer column and every tuple text is short (a one-column
    row of ``select_sql``: no FLOAT, no BINARY), else None (the shard is read row by row)."""
    if len(split_columns) != 1:
        return None
    col = next((c for c in info.columns if c.name == split_columns[0]), None)
    if col is None or col.nullable or kind_of(col) != "int":  # BIT is a kind of its own
        return None
    widths = [max_text_bytes(c) for c in info.columns]
    if any(w is None for w in widths) or sum(w or 0 for w in widths) > MAX_GROUPED_TEXT:
        return None
    return col.name


def grouped_sql(info: TableInfo, column: str, shard_where: str, where: str | None = None) -> str:
    """``select_sql``'s rows, GROUP_ROWS-wide ranges of ``column`` (``group_column``) at a time:
    ``g`` the range's tuple texts joined by GROUP_SEPARATOR, ``k`` the range (``column DIV GROUP_ROWS``),
    ``n`` its rows. A ``g`` cut at ``group_concat_max_len`` (GROUP_SESSION_SQL) is told by ``n``, and the
    reader reads that range row by row (``group_rows_sql``)."""
    key = f"{quote_name(column)} DIV {GROUP_ROWS}"
    text = f"GROUP_CONCAT({tuple_sql(info.columns)} SEPARATOR '\\n')"
    return f"SELECT {text} AS g, {key} AS k, COUNT(*) AS n{_from(info, shard_where, where)} GROUP BY {key}"


def group_rows_sql(row_sql: str, column: str, k: int) -> str:
    """The rows of range ``k`` of ``grouped_sql``, one by one: the shard's ``select_sql`` and the range."""
    return f"{row_sql} AND ({quote_name(column)} DIV {GROUP_ROWS} = {int(k)})"


def split_group(g: bytes | None, n: int, limit: int) -> list[bytes] | None:
    """The tuple texts of one row of ``grouped_sql``, or None when MariaDB cut the group short (at
    ``limit``, ``group_concat_max_len``) or the texts are not ``n``."""
    if g is None or len(g) >= limit:
        return None
    texts = g.split(GROUP_SEPARATOR)
    return texts if len(texts) == n else None


def tuple_text(row: Sequence) -> str:
    """A row of ``select_sql`` -> the UMS tuple text (no brackets). A row of one column is returned as is.

    The raw FLOAT values may be floats, or str/bytes when the cursor does not convert (``float()`` reads
    them).
    """
    if len(row) == 1:
        return row[0]
    parts = [row[0]]
    for i in range(1, len(row), 2):
        parts += ["null" if row[i] is None else repr(float32_repr(float(row[i]))), row[i + 1]]
    return ",".join(p for p in parts if p)
