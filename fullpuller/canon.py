"""Canonical text of UMS values, so that a snapshot and the source compare by meaning, not by spelling.

Pure: no I/O. Per UMS type:

| type | canonical | example |
|---|---|---|
| int, long | the integer | ``"42"``, ``42`` and ``42.0`` -> ``42`` |
| float | the value rounded to a 32-bit float (a FLOAT column's precision), shortest repr | ``1.1`` |
| double | the 64-bit float, shortest repr | ``"1.0E22"`` and ``1e22`` -> ``1e+22`` |
| decimal | the Decimal, normalised | ``"19.90"`` -> ``19.9`` |
| jsonobject | the parsed JSON, keys sorted, compact | ``{"b":1, "a":2}`` -> ``{"a":2,"b":1}`` |
| anything else | the text as written | |

``-0.0`` and ``0.0`` are one value; NULL is its own marker, distinct from every text.

    >>> canonical(UmsType.DECIMAL, "19.90") == canonical(UmsType.DECIMAL, "19.9")
    True
"""

from __future__ import annotations

import hashlib
import json
import struct
from collections.abc import Callable, Sequence
from decimal import Decimal
from typing import Any

from ums.types import UmsType

NULL = "\x00"  # never the canonical text of a value: every value's text is printable or a JSON dump


# The converters take whatever a row holds (Any): int() and float() raise TypeError or ValueError for a
# value they cannot take, and ``canonical`` / ``canonicalizer`` then compare that value as text.
def _int(value: Any) -> str:
    return str(int(value))


def _float32(value: Any) -> str:
    (rounded,) = struct.unpack("<f", struct.pack("<f", float(value)))
    return repr(rounded + 0.0)  # + 0.0 turns -0.0 into 0.0


def _double(value: Any) -> str:
    return repr(float(value) + 0.0)


def _decimal(value: object) -> str:
    number = Decimal(str(value))
    return "0" if number.is_zero() else format(number.normalize(), "f")


def _json(value: object) -> str:
    parsed = json.loads(value) if isinstance(value, str) else value
    return json.dumps(parsed, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _text(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return value if isinstance(value, str) else str(value)


_CANON: dict[UmsType, Callable[[object], str]] = {
    UmsType.INT: _int,
    UmsType.LONG: _int,
    UmsType.FLOAT: _float32,
    UmsType.DOUBLE: _double,
    UmsType.DECIMAL: _decimal,
    UmsType.JSONOBJECT: _json,
}


def canonical(ums_type: UmsType, value: object) -> str:
    """The canonical text of one value (a UMS wire value, or the typed value a snapshot holds).

    A value that does not parse as its type (e.g. a masked text in a column declared ``int``) is
    compared as text.
    """
    if value is None:
        return NULL
    try:
        return _CANON.get(ums_type, _text)(value)
    except (ValueError, TypeError, ArithmeticError):
        return _text(value)


def canonicalizer(types: Sequence[UmsType]) -> Callable[[Sequence[object]], tuple[str, ...]]:
    """A function that makes a row (values in ``types`` order) canonical in one call."""
    funcs = [_CANON.get(t) for t in types]  # None: text types, a str is already canonical

    def one(func: Callable[[object], str] | None, value: object) -> str:
        if value is None:
            return NULL
        if func is None:
            return value if type(value) is str else _text(value)
        try:
            return func(value)
        except (ValueError, TypeError, ArithmeticError):
            return _text(value)

    def row(values: Sequence[object]) -> tuple[str, ...]:
        if len(values) != len(funcs):
            msg = f"{len(values)} values for {len(funcs)} columns"
            raise ValueError(msg)
        return tuple(map(one, funcs, values))

    return row


def digest(canon: tuple[str, ...]) -> bytes:
    """16-byte hash of a canonical row. It hashes the tuple's repr, which no other tuple of strings has."""
    return hashlib.blake2b(repr(canon).encode("utf-8", "surrogatepass"), digest_size=16).digest()
