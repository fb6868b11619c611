"""UMS value types and the MySQL/MariaDB column type -> UMS type mapping.

The input is a column type as ``information_schema.COLUMNS.COLUMN_TYPE`` gives it, e.g.
``"int(11) unsigned"``, ``"decimal(65,30)"``, ``"datetime(6)"``, ``"enum('a','b')"``.
Unlike the original (spec 1.10), no column is dropped: every MySQL type has a UMS type.
Types we do not know fall back to ``string``, as the original's ``convertMysqlDataType`` does.

    >>> ums_type_for("bigint(20) unsigned").value
    'long'
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum
from functools import lru_cache

from ums.errors import BadColumnTypeError


class UmsType(Enum):
    """The original's ``DataType`` names, lower case as written in ``schema.fields[].type``."""

    STRING = "string"
    INT = "int"
    LONG = "long"
    FLOAT = "float"
    DOUBLE = "double"
    BOOLEAN = "boolean"
    DATE = "date"
    DATETIME = "datetime"
    DECIMAL = "decimal"
    BINARY = "binary"
    RAW = "raw"
    JSONOBJECT = "jsonobject"


_S, _I, _L = UmsType.STRING, UmsType.INT, UmsType.LONG
_B = UmsType.BINARY

# Base type name (lower case, before "(") -> UMS type. BIT and unsigned INT are handled below.
_BY_BASE: dict[str, UmsType] = {
    "tinyint": _I,
    "smallint": _I,
    "mediumint": _I,
    "int": _I,
    "integer": _I,
    "year": _I,
    "bool": _I,
    "boolean": _I,
    "bigint": _L,
    "serial": _L,
    "float": UmsType.FLOAT,
    "double": UmsType.DOUBLE,
    "real": UmsType.DOUBLE,
    "decimal": UmsType.DECIMAL,
    "numeric": UmsType.DECIMAL,
    "dec": UmsType.DECIMAL,
    "fixed": UmsType.DECIMAL,
    "date": UmsType.DATE,
    "datetime": UmsType.DATETIME,
    "timestamp": UmsType.DATETIME,
    "time": _S,
    "char": _S,
    "varchar": _S,
    "tinytext": _S,
    "text": _S,
    "mediumtext": _S,
    "longtext": _S,
    "enum": _S,
    "set": _S,
    "inet4": _S,
    "inet6": _S,
    "uuid": _S,
    "json": UmsType.JSONOBJECT,
    "binary": _B,
    "varbinary": _B,
    "tinyblob": _B,
    "blob": _B,
    "mediumblob": _B,
    "longblob": _B,
    "vector": _B,
    "geometry": _B,
    "point": _B,
    "linestring": _B,
    "polygon": _B,
    "multipoint": _B,
    "multilinestring": _B,
    "multipolygon": _B,
    "geometrycollection": _B,
    "geomcollection": _B,
}

# Unsigned types whose range no longer fits the signed UMS type (INT UNSIGNED > 2^31-1).
_UNSIGNED_WIDER: dict[str, UmsType] = {"int": _L, "integer": _L}

_BIT_INT_MAX_WIDTH = 31  # BIT(n) with n <= 31 fits a signed 32-bit UMS int
_FSP_TYPES = frozenset({"datetime", "timestamp", "time"})

_COLUMN_TYPE = re.compile(
    r"^\s*(?P<base>[A-Za-z][A-Za-z0-9_]*)\s*(?:\((?P<args>.*)\))?(?P<flags>(?:\s+[A-Za-z]+)*)\s*$",
    re.DOTALL,
)
_QUOTED = re.compile(r"'((?:[^']|'')*)'")


@dataclass(frozen=True)
class ParsedColumnType:
    """A COLUMN_TYPE split up: ``"decimal(10,2) unsigned"`` -> ``decimal``, ``10,2``, unsigned."""

    base: str
    args: str
    unsigned: bool


@lru_cache(maxsize=4096)
def parse_column_type(column_type: str) -> ParsedColumnType:
    """Split a COLUMN_TYPE string; the base name is lower-cased, the arguments are kept as is."""
    match = _COLUMN_TYPE.match(column_type)
    if match is None:
        msg = f"column type {column_type!r}: not a MySQL COLUMN_TYPE"
        raise BadColumnTypeError(msg)
    flags = match["flags"].lower().split()
    return ParsedColumnType(match["base"].lower(), match["args"] or "", "unsigned" in flags)


@lru_cache(maxsize=4096)
def ums_type_for(column_type: str) -> UmsType:
    """UMS type of a MySQL column type, e.g. ``"int(10) unsigned"`` -> ``UmsType.LONG``."""
    parsed = parse_column_type(column_type)
    if parsed.base == "bit":
        return _I if _int_arg(parsed, column_type, 1) <= _BIT_INT_MAX_WIDTH else _L
    if parsed.unsigned and parsed.base in _UNSIGNED_WIDER:
        return _UNSIGNED_WIDER[parsed.base]
    return _BY_BASE.get(parsed.base, _S)


def _int_arg(parsed: ParsedColumnType, column_type: str, default: int) -> int:
    """The single integer argument of ``bit(n)``/``datetime(n)``, or ``default`` without one."""
    text = parsed.args.strip()
    if not text:
        return default
    if not (text.isascii() and text.isdigit()):
        msg = f"column type {column_type!r}: expected one integer argument, got {text!r}"
        raise BadColumnTypeError(msg)
    return int(text)


@lru_cache(maxsize=4096)
def fsp_for(column_type: str) -> int | None:
    """Fractional-second digits of DATETIME/TIMESTAMP/TIME (``"datetime(6)"`` -> 6), else None."""
    parsed = parse_column_type(column_type)
    if parsed.base not in _FSP_TYPES:
        return None
    return _int_arg(parsed, column_type, 0)


@lru_cache(maxsize=4096)
def set_members(column_type: str) -> tuple[str, ...]:
    """Members of an ENUM or SET in definition order: ``"set('x','y')"`` -> ``("x", "y")``."""
    parsed = parse_column_type(column_type)
    if parsed.base not in ("set", "enum"):
        return ()
    return tuple(m.replace("''", "'") for m in _QUOTED.findall(parsed.args))


@dataclass(frozen=True)
class ColumnSpec:
    """One source column, as information_schema describes it.

    JSON example: ``{"name": "amount", "column_type": "decimal(65,30)", "nullable": true}``
    """

    name: str
    column_type: str
    nullable: bool = True

    @property
    def ums_type(self) -> UmsType:
        """UMS type of this column (see ``ums_type_for``)."""
        return ums_type_for(self.column_type)

    @property
    def fsp(self) -> int | None:
        """Fractional-second digits for temporal columns, else None."""
        return fsp_for(self.column_type)

    @property
    def members(self) -> tuple[str, ...]:
        """SET/ENUM members in definition order, else ``()``."""
        return set_members(self.column_type)
