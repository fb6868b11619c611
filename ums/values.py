"""Column values: Python values from a MySQL decoder <-> the JSON values UMS writes (spec 1.9).

| UMS type   | Python in                                  | JSON out                         |
|------------|--------------------------------------------|----------------------------------|
| int        | int (TINYINT..INT, YEAR, BIT(<=31))        | number ``42``                    |
| long       | int (BIGINT [UNSIGNED], INT UNSIGNED, BIT) | string ``"18446744073709551615"``|
| float      | float (a 32-bit FLOAT)                     | number, shortest 32-bit repr     |
| double     | float                                      | number                           |
| decimal    | Decimal or int                             | string, exact, scale kept        |
| date       | date                                       | ``"2024-01-02"``                 |
| datetime   | datetime (naive = wall clock, aware -> UTC)| ``"2024-01-02 03:04:05.123456"`` |
| string     | str; timedelta (TIME); set (SET); UTF-8 bytes | string                        |
| binary     | bytes                                      | Base64 string                    |
| jsonobject | dict, list or any JSON value               | compact JSON text string         |
| boolean    | bool                                       | ``true``/``false``               |

``None`` is ``null`` for every type. Fractional seconds follow the column's fsp when it is known
(``datetime(3)`` -> 3 digits); without one, 6 digits when the value has microseconds, else none.
DATETIME column values are naive (MySQL DATETIME has no zone); aware ones (TIMESTAMP) go to UTC.
The decoder is in ``ums.decode``.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal, InvalidOperation

from ums.errors import BadValueError
from ums.scalars import (
    DATE_TEXT,
    DATETIME_TEXT,
    INT_MAX,
    INT_MIN,
    LONG_MAX,
    LONG_MIN,
    JsonValue,
    finite_float,
    float32_repr,
    format_time,
    fraction,
    integer_in,
    show,
)
from ums.types import ColumnSpec, UmsType


@dataclass(frozen=True)
class ValueFormat:
    """Column details some encoders need: fractional-second digits and SET member order."""

    fsp: int | None = None
    members: tuple[str, ...] = ()


PLAIN = ValueFormat()


def encode_value(
    ums_type: UmsType, value: object, fmt: ValueFormat = PLAIN, field: str = "value"
) -> JsonValue:
    """Python value -> UMS JSON value; ``field`` names the column in errors.

    >>> encode_value(UmsType.LONG, 2**64 - 1)
    '18446744073709551615'
    """
    if value is None:
        return None
    try:
        return _ENCODERS[ums_type](value, fmt)
    except (TypeError, ValueError, OverflowError, InvalidOperation) as err:
        msg = f"{field}: cannot encode {show(value)} as {ums_type.value}: {err}"
        raise BadValueError(msg) from err


def encode_column(column: ColumnSpec, value: object) -> JsonValue:
    """Encode with the column's UMS type, fsp and SET order; errors name the column."""
    fmt = ValueFormat(column.fsp, column.members)
    return encode_value(column.ums_type, value, fmt, column.name)


def _decimal(value: object, fmt: ValueFormat) -> str:
    if isinstance(value, bool) or not isinstance(value, Decimal | int):
        msg = f"expected a Decimal or int, got {type(value).__name__}"
        raise TypeError(msg)
    number = Decimal(value)
    if not number.is_finite():
        msg = "NaN and infinity are not DECIMAL values"
        raise ValueError(msg)
    return format(number, "f")


def _date(value: object, fmt: ValueFormat) -> str:
    if isinstance(value, str) and DATE_TEXT.match(value):
        return value  # e.g. the zero date "0000-00-00", passed through as MySQL prints it
    if isinstance(value, datetime) or not isinstance(value, date):
        msg = f"expected a date, got {type(value).__name__}"
        raise TypeError(msg)
    return value.isoformat()


def _datetime(value: object, fmt: ValueFormat) -> str:
    if isinstance(value, str) and DATETIME_TEXT.match(value):
        return value  # e.g. "0000-00-00 00:00:00"
    if not isinstance(value, datetime):
        msg = f"expected a datetime, got {type(value).__name__}"
        raise TypeError(msg)
    wall = value.astimezone(UTC).replace(tzinfo=None) if value.utcoffset() is not None else value
    return f"{wall.date().isoformat()} {wall:%H:%M:%S}{fraction(wall.microsecond, fmt.fsp)}"


def _string(value: object, fmt: ValueFormat) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, timedelta):
        return format_time(value, fmt.fsp)
    if isinstance(value, set | frozenset):
        return ",".join(_set_order(value, fmt.members))
    if isinstance(value, bytes | bytearray):
        return bytes(value).decode("utf-8")
    msg = f"expected str, timedelta (TIME) or set (SET), got {type(value).__name__}"
    raise TypeError(msg)


def _set_order(members: set[str] | frozenset[str], order: tuple[str, ...]) -> list[str]:
    """SET members in definition order (as MySQL prints them); unknown ones sorted after."""
    rank = {name: i for i, name in enumerate(order)}
    return sorted(members, key=lambda m: (rank.get(m, len(rank)), m))


def _binary(value: object, fmt: ValueFormat) -> str:
    if not isinstance(value, bytes | bytearray | memoryview):
        msg = f"expected bytes, got {type(value).__name__}"
        raise TypeError(msg)
    return base64.b64encode(bytes(value)).decode("ascii")


def _json(value: object, fmt: ValueFormat) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def _boolean(value: object, fmt: ValueFormat) -> bool:
    if value not in (0, 1) or isinstance(value, float):
        msg = f"expected a bool, got {value!r}"
        raise ValueError(msg)
    return bool(value)


def _raw(value: object, fmt: ValueFormat) -> str:
    if not isinstance(value, str):
        msg = f"expected str, got {type(value).__name__}"
        raise TypeError(msg)
    return value


_ENCODERS: dict[UmsType, Callable[[object, ValueFormat], JsonValue]] = {
    UmsType.INT: lambda v, f: integer_in(v, INT_MIN, INT_MAX),
    UmsType.LONG: lambda v, f: str(integer_in(v, LONG_MIN, LONG_MAX)),
    UmsType.FLOAT: lambda v, f: float32_repr(finite_float(v)),
    UmsType.DOUBLE: lambda v, f: finite_float(v),
    UmsType.DECIMAL: _decimal,
    UmsType.DATE: _date,
    UmsType.DATETIME: _datetime,
    UmsType.STRING: _string,
    UmsType.BINARY: _binary,
    UmsType.JSONOBJECT: _json,
    UmsType.BOOLEAN: _boolean,
    UmsType.RAW: _raw,
}
