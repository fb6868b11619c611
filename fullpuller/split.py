"""Split a table into shards for the full pull (spec 3.3), for MariaDB.

The split column is the requested one, else the primary key, else a unique key (NOT NULL first), else the
first column of an index; without any, the table is one shard ``1 = 1``. ``plan`` runs two queries (the
count, then MIN/MAX or the boundary rows) and hands them to pure functions:

- a single integer column is cut into equal-width ranges between MIN and MAX (``integer_ranges``);
- any other key (DECIMAL, strings, dates, binary, composite) is cut at every ``shard_size``-th row of the
  key order, read in one index scan (``boundary_ranges``).

The first shard is open below and the last open above, so a row written after planning is still pulled
once. A nullable split column adds a ``col IS NULL`` shard. Every row is in exactly one shard. Shard
conditions hold only literals made from values the server returned: integers, validated number and
date text, and strings as charset-introduced hex literals with the column's collation.

JSON example of a plan::

    {"columns": ["id"], "source": "primary", "count": 250000,
     "shards": [{"index": 0, "where": "`id` < 100001", "lower": null, "upper": "100001"},
                {"index": 1, "where": "`id` >= 100001 AND `id` < 200001",
                 "lower": "100001", "upper": "200001"},
                {"index": 2, "where": "`id` >= 200001", "lower": "200001", "upper": null}],
     "warning": null}
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from dbuslib.errors import DbusError
from fullpuller.catalog import TableInfo
from ums.types import ColumnSpec, parse_column_type

DEFAULT_SHARD_SIZE = 250000  # rows; a shard is a Spark job, ~0.2 s each (docs/fullpull.md, Performance)
NO_SPLIT = -1
ALL_ROWS = "1 = 1"

_INT = frozenset(
    {"tinyint", "smallint", "mediumint", "int", "integer", "bigint", "year", "bool", "boolean", "serial"}
)
_KINDS = {
    **dict.fromkeys(_INT, "int"),
    "bit": "bit",
    **dict.fromkeys(("decimal", "numeric", "dec", "fixed"), "decimal"),
    **dict.fromkeys(("float", "double", "real"), "float"),
    **dict.fromkeys(("date", "datetime", "timestamp", "time"), "temporal"),
    **dict.fromkeys(("enum", "set"), "enum"),
    **dict.fromkeys(("char", "varchar", "tinytext", "text", "mediumtext", "longtext"), "string"),
    **dict.fromkeys(("binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob"), "binary"),
}
_DECIMAL_TEXT = re.compile(r"^-?[0-9]+(\.[0-9]+)?$")
_FLOAT_TEXT = re.compile(r"^-?[0-9]+(\.[0-9]+)?(e[-+]?[0-9]+)?$")
_TEMPORAL_TEXT = re.compile(r"^-?[0-9]{1,4}[-0-9:. ]*$")
_NAME = re.compile(r"^[A-Za-z0-9_]+$")


class SplitError(DbusError):
    """A full-pull request cannot be split: ``FULLPULL_BAD_SPLIT_COL`` or ``FULLPULL_BAD_REQUEST``."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


@dataclass(frozen=True)
class Shard:
    """One shard: ``{"index": 1, "where": "`id` >= 100001 AND `id` < 200001", "lower": "100001", ...}``."""

    index: int
    where: str
    lower: str | None
    upper: str | None


@dataclass(frozen=True)
class SplitPlan:
    """The split of one table; ``count`` is the rows the request's WHERE selected when planning."""

    columns: tuple[str, ...]
    source: str
    count: int
    shards: tuple[Shard, ...]
    warning: str | None


@dataclass(frozen=True)
class Literal:
    """A key value as SQL (``_utf8mb4 X'6162' COLLATE utf8mb4_general_ci``) and as shown to people
    (``ab``)."""

    sql: str
    text: str


@dataclass(frozen=True)
class KeyRange:
    """Keys ``lower <= key < upper`` (tuple order; None = unbounded), or the keys holding a NULL
    (``nulls``)."""

    lower: tuple[Any, ...] | None = None
    upper: tuple[Any, ...] | None = None
    nulls: bool = False


# ---- pure planning -------------------------------------------------------------------------------------


def choose_split(info: TableInfo, requested: str | None) -> tuple[tuple[str, ...], str, str | None]:
    """(split columns, where they come from, warning) for a table and the request's SPLIT_COL."""
    if requested is not None and requested.strip():
        return _requested(info, requested), "request", None
    if info.primary_key and _splittable(info, info.primary_key):
        return info.primary_key, "primary", None
    uniques = sorted((k for k in info.unique_keys if _splittable(info, k)), key=lambda k: _nullable(info, k))
    if uniques:
        return uniques[0], "unique", None
    firsts = [k[:1] for k in info.indexes if k and _splittable(info, k[:1])]
    if firsts:
        return firsts[0], "index", None
    return (
        (),
        "none",
        f"{info.schema}.{info.table}: no primary key, unique key or index to split on: one shard",
    )


def _requested(info: TableInfo, requested: str) -> tuple[str, ...]:
    names = []
    for name in (n.strip() for n in requested.split(",")):
        column = info.column(name)
        if column is None:
            msg = f"{info.schema}.{info.table}: split column {name!r} is not a column of the table"
            code = "FULLPULL_BAD_SPLIT_COL"
            raise SplitError(code, msg)
        if kind_of(column) is None:
            msg = f"{info.schema}.{info.table}: cannot split on {column.name!r} of type {column.column_type}"
            code = "FULLPULL_BAD_SPLIT_COL"
            raise SplitError(code, msg)
        names.append(column.name)
    if len(set(names)) != len(names):
        msg = f"{info.schema}.{info.table}: split column listed twice in {requested!r}"
        code = "FULLPULL_BAD_SPLIT_COL"
        raise SplitError(code, msg)
    return tuple(names)


def _splittable(info: TableInfo, names: Sequence[str]) -> bool:
    columns = [info.column(n) for n in names]
    return all(c is not None and kind_of(c) is not None for c in columns)


def _nullable(info: TableInfo, names: Sequence[str]) -> bool:
    return any(c.nullable for c in (info.column(n) for n in names) if c is not None)


def kind_of(column: ColumnSpec) -> str | None:
    """How keys of this column are read and written: int, bit, decimal, float, temporal, enum, string,
    binary; None when the splitter does not handle the type (spatial, INET6, UUID, VECTOR...)."""
    return _KINDS.get(parse_column_type(column.column_type).base)


def shard_count(count: int, shard_size: int) -> int:
    """``ceil(count / shard_size)``, at least 1; ``shard_size`` -1 means one shard."""
    if shard_size == NO_SPLIT:
        return 1
    return max(1, math.ceil(count / shard_size))


def integer_ranges(lo: int, hi: int, shards: int) -> list[KeyRange]:
    """Equal-width ranges over ``[lo, hi]`` (IntegerSplitter), the first open below, the last open above."""
    width = max(1, math.ceil((hi - lo + 1) / shards))
    cuts = [(lo + i * width,) for i in range(1, shards) if lo + i * width <= hi]
    return _between(cuts)


def boundary_ranges(boundaries: Sequence[tuple[Any, ...]]) -> list[KeyRange]:
    """Ranges cut at the given keys (the 1st, (n+1)th, (2n+1)th... key in order); the first key starts the
    first range, which is left open below. Duplicates are dropped."""
    cuts: list[tuple[Any, ...]] = []
    for key in boundaries[1:]:
        if key != boundaries[0] and (not cuts or cuts[-1] != key):
            cuts.append(key)
    return _between(cuts)


def _between(cuts: list[tuple[Any, ...]]) -> list[KeyRange]:
    edges: list[tuple[Any, ...] | None] = [None, *cuts, None]
    return [KeyRange(lower, upper) for lower, upper in zip(edges, edges[1:], strict=False)]


def in_range(key: tuple[Any, ...], key_range: KeyRange) -> bool:
    """Python's reading of a range (what ``range_sql`` asks of MariaDB); a None in ``key`` is a NULL."""
    if any(v is None for v in key):
        return key_range.nulls
    if key_range.nulls:
        return False
    return (key_range.lower is None or key >= key_range.lower) and (
        key_range.upper is None or key < key_range.upper
    )


def range_sql(columns: Sequence[str], key_range: KeyRange, nullable: bool) -> str:
    """SQL for a range over SQL column expressions; bounds hold ``Literal``s.

    >>> range_sql(["`a`", "`b`"], KeyRange(lower=(Literal("1", "1"), Literal("2", "2"))), False)
    '(`a` > 1 OR (`a` = 1 AND `b` >= 2))'
    """
    if key_range.nulls:
        nulls = " OR ".join(f"{c} IS NULL" for c in columns)
        return f"({nulls})" if len(columns) > 1 else nulls
    parts = [f"{c} IS NOT NULL" for c in columns] if nullable else []
    if key_range.lower is not None:
        parts.append(_compare(columns, key_range.lower, ">", ">="))
    if key_range.upper is not None:
        parts.append(_compare(columns, key_range.upper, "<", "<"))
    return " AND ".join(parts) or ALL_ROWS


def _compare(columns: Sequence[str], key: tuple[Literal, ...], strict: str, last: str) -> str:
    """Lexicographic comparison, expanded so MariaDB can use the index: a > x OR (a = x AND b >= y)."""
    if len(columns) == 1:
        return f"{columns[0]} {last} {key[0].sql}"
    terms = []
    for i, (column, value) in enumerate(zip(columns, key, strict=True)):
        equal = [f"{c} = {v.sql}" for c, v in zip(columns[:i], key[:i], strict=True)]
        op = last if i == len(columns) - 1 else strict
        terms.append(" AND ".join([*equal, f"{column} {op} {value.sql}"]))
    return "(" + " OR ".join(f"({t})" if " AND " in t else t for t in terms) + ")"


def shards_for(columns: Sequence[str], ranges: Sequence[KeyRange], nullable: bool) -> tuple[Shard, ...]:
    """Numbered shards for ranges over SQL column expressions, plus the NULL shard when ``nullable``."""
    if len(ranges) <= 1:
        return (Shard(0, ALL_ROWS, None, None),)
    if nullable:
        ranges = [*ranges, KeyRange(nulls=True)]
    return tuple(
        Shard(i, range_sql(columns, r, nullable), _show(r.lower, r.nulls), _show(r.upper, r.nulls))
        for i, r in enumerate(ranges)
    )


def _show(key: tuple[Literal, ...] | None, nulls: bool) -> str | None:
    if nulls:
        return "NULL"
    if key is None:
        return None
    return key[0].text if len(key) == 1 else "(" + ", ".join(v.text for v in key) + ")"


# ---- literals: values as the boundary queries return them -> SQL --------------------------------------


def literal(column: ColumnSpec, value: Any, collation: tuple[str, str] | None = None) -> Literal:
    """A key value read by ``value_sql`` -> a SQL literal; refuses anything that is not plainly a value."""
    kind = kind_of(column)
    if kind in ("int", "bit", "enum"):
        return Literal(str(_int(value)), str(value))
    if kind == "decimal" and isinstance(value, str) and _DECIMAL_TEXT.match(value):
        return Literal(value, value)
    if kind == "float" and isinstance(value, float) and _FLOAT_TEXT.match(repr(value)):
        return Literal(repr(value), repr(value))
    if kind == "temporal" and isinstance(value, str) and _TEMPORAL_TEXT.match(value):
        return Literal(f"'{value}'", value)
    if kind == "binary" and isinstance(value, bytes):
        return Literal(f"X'{value.hex()}'", f"0x{value.hex()}")
    if kind == "string" and isinstance(value, bytes) and collation and all(map(_NAME.match, collation)):
        charset, coll = collation
        shown = value.decode("utf-8", "replace") if charset.startswith("utf8") else f"0x{value.hex()}"
        return Literal(f"_{charset} X'{value.hex()}' COLLATE {coll}", shown)
    msg = f"column {column.name!r} ({column.column_type}): unexpected key value {value!r:.80}"
    code = "FULLPULL_BAD_SPLIT_COL"
    raise SplitError(code, msg)


def _int(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        msg = f"expected an integer key, got {value!r:.80}"
        code = "FULLPULL_BAD_SPLIT_COL"
        raise SplitError(code, msg)
    return value


def quote_name(name: str) -> str:
    """`name` with backticks doubled."""
    return "`" + name.replace("`", "``") + "`"


def key_sql(column: ColumnSpec) -> str:
    """The expression shard conditions compare: the column, or its index number for ENUM/SET (whose
    ORDER BY is by index number, while comparing with a string would compare text)."""
    name = quote_name(column.name)
    return f"({name} + 0)" if kind_of(column) == "enum" else name


def value_sql(column: ColumnSpec) -> str:
    """What the boundary query selects for a key column, in the form ``literal`` takes."""
    name = quote_name(column.name)
    kind = kind_of(column)
    if kind is None:  # choose_split picks columns of a kind it handles alone
        msg = f"cannot split on {column.name!r} of type {column.column_type}"
        code = "FULLPULL_BAD_SPLIT_COL"
        raise SplitError(code, msg)
    return {
        "int": name,
        "bit": f"CAST({name} AS UNSIGNED)",
        "enum": f"({name} + 0)",
        "decimal": f"CAST({name} AS CHAR)",
        "float": f"CAST({name} AS DOUBLE)",
        "temporal": f"CAST({name} AS CHAR)",
        "binary": name,
        "string": f"CAST({name} AS BINARY)",
    }[kind]


# ---- the edge: two queries ---------------------------------------------------------------------------


def plan(
    db,
    info: TableInfo,
    *,
    split_col: str | None = None,
    shard_size: int = DEFAULT_SHARD_SIZE,
    where: str | None = None,
) -> SplitPlan:
    """Count the rows, pick the split column and cut the table into shards.

    TIMESTAMP bounds are wall-clock text in the session time zone: run this on a connection that ran
    ``fullpuller.render.SESSION_SQL`` (UTC), as the pulling connections do.
    """
    if (
        isinstance(shard_size, bool)
        or not isinstance(shard_size, int)
        or (shard_size < 1 and shard_size != NO_SPLIT)
    ):
        msg = f"{info.schema}.{info.table}: shard size must be -1 or a positive integer, got {shard_size!r}"
        code = "FULLPULL_BAD_REQUEST"
        raise SplitError(code, msg)
    names, source, warning = choose_split(info, split_col)
    count = _count(db, info, where)
    shards = shard_count(count, shard_size)
    if not names or shards == 1 or count == 0:
        return SplitPlan(
            names if shard_size != NO_SPLIT else (),
            source if shard_size != NO_SPLIT else "none",
            count,
            (Shard(0, ALL_ROWS, None, None),),
            warning,
        )
    columns = [_column(info, n) for n in names]
    nullable = any(c.nullable for c in columns)
    ranges = _ranges(db, info, columns, where, shards, shard_size)
    return SplitPlan(
        names, source, count, shards_for([key_sql(c) for c in columns], ranges, nullable), warning
    )


def _column(info: TableInfo, name: str) -> ColumnSpec:
    """The column ``name`` of the table (choose_split names its columns alone)."""
    column = info.column(name)
    if column is None:
        msg = f"{info.schema}.{info.table}: split column {name!r} is not a column of the table"
        code = "FULLPULL_BAD_SPLIT_COL"
        raise SplitError(code, msg)
    return column


def _ranges(
    db, info: TableInfo, columns: list[ColumnSpec], where: str | None, shards: int, shard_size: int
) -> list[KeyRange]:
    if len(columns) == 1 and kind_of(columns[0]) in ("int", "bit"):
        lo, hi = _min_max(db, info, columns[0], where)
        if lo is None:
            return [KeyRange()]
        ranges = integer_ranges(_int(lo), _int(hi), shards)
        return [_as_literals(columns, r) for r in ranges]
    rows = _boundaries(db, info, columns, where, shard_size)
    keys = [
        tuple(literal(c, v, info.collation(c.name)) for c, v in zip(columns, row, strict=True))
        for row in rows
    ]
    return boundary_ranges(keys)


def _as_literals(columns: list[ColumnSpec], key_range: KeyRange) -> KeyRange:
    def convert(key):
        return None if key is None else tuple(literal(c, v) for c, v in zip(columns, key, strict=True))

    return KeyRange(convert(key_range.lower), convert(key_range.upper), key_range.nulls)


def _table(info: TableInfo) -> str:
    return f"{quote_name(info.schema)}.{quote_name(info.table)}"


def _filter(where: str | None, extra: Sequence[str] = ()) -> str:
    parts = [*extra, *([f"({where})"] if where and where.strip() else [])]
    return " WHERE " + " AND ".join(parts) if parts else ""


def _count(db, info: TableInfo, where: str | None) -> int:
    with db.cursor() as cur:
        cur.execute(f"SELECT COUNT(*) FROM {_table(info)}{_filter(where)}")
        return int(cur.fetchone()[0])


def _min_max(db, info: TableInfo, column: ColumnSpec, where: str | None) -> tuple[Any, Any]:
    expr = value_sql(column)
    with db.cursor() as cur:
        cur.execute(f"SELECT MIN({expr}), MAX({expr}) FROM {_table(info)}{_filter(where)}")
        return cur.fetchone()


def _boundaries(
    db, info: TableInfo, columns: list[ColumnSpec], where: str | None, shard_size: int
) -> list[tuple[Any, ...]]:
    """Every ``shard_size``-th key in key order (the 1st, the (n+1)th...), in one index scan."""
    keys = ", ".join(key_sql(c) for c in columns)
    values = ", ".join(f"{value_sql(c)} AS k{i}" for i, c in enumerate(columns))
    outer = ", ".join(f"k{i}" for i in range(len(columns)))
    not_null = [f"{quote_name(c.name)} IS NOT NULL" for c in columns if c.nullable]
    sql = (
        f"SELECT {outer} FROM (SELECT {values}, ROW_NUMBER() OVER (ORDER BY {keys}) AS rn"
        f" FROM {_table(info)}{_filter(where, not_null)}) AS x WHERE rn % {shard_size} = 1 ORDER BY rn"
    )
    with db.cursor() as cur:
        cur.execute(sql)
        return [tuple(row) for row in cur.fetchall()]
