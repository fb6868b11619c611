"""UMS JSON values -> Python values, and the wire checks that keep messages valid.

>>> decode_value(UmsType.DECIMAL, "-12.500")
Decimal('-12.500')
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable
from datetime import date, datetime
from decimal import Decimal, InvalidOperation

from ums.errors import BadValueError
from ums.scalars import (
    DATE_TEXT,
    DATETIME_TEXT,
    DECIMAL_TEXT,
    INT_MAX,
    INT_MIN,
    LONG_MAX,
    LONG_MIN,
    LONG_TEXT,
    JsonValue,
    finite_float,
    integer_in,
    show,
)
from ums.types import UmsType


def decode_value(ums_type: UmsType, value: JsonValue, field: str = "value") -> object:
    """UMS JSON value -> Python value: the inverse of ``encode_value`` where one exists.

    string stays str (use ``parse_time`` for TIME columns); a zero date such as
    ``"0000-00-00"`` has no Python value and is returned unchanged.
    """
    if value is None:
        return None
    try:
        return _DECODERS[ums_type](value)
    except (TypeError, ValueError, InvalidOperation, binascii.Error) as err:
        msg = f"{field}: cannot decode {show(value)} as {ums_type.value}: {err}"
        raise BadValueError(msg) from err


def _decode_int(value: JsonValue) -> int:
    if isinstance(value, bool):
        msg = "expected a JSON number, got bool"
        raise TypeError(msg)
    return integer_in(value, INT_MIN, INT_MAX)


def _decode_long(value: JsonValue) -> int:
    text = _expect_str(value)
    if not LONG_TEXT.match(text):
        msg = "expected a decimal integer string"
        raise ValueError(msg)
    return integer_in(int(text), LONG_MIN, LONG_MAX)


def _decode_decimal(value: JsonValue) -> Decimal:
    text = _expect_str(value)
    if not DECIMAL_TEXT.match(text):
        msg = "expected a plain decimal string such as -12.50"
        raise ValueError(msg)
    return Decimal(text)


def _decode_date(value: JsonValue) -> date | str:
    text = _expect_str(value)
    if not DATE_TEXT.match(text):
        msg = "expected yyyy-MM-dd"
        raise ValueError(msg)
    return text if _is_zero_date(text) else date.fromisoformat(text)


def _decode_datetime(value: JsonValue) -> datetime | str:
    text = _expect_str(value)
    if not DATETIME_TEXT.match(text):
        msg = "expected yyyy-MM-dd HH:mm:ss[.ffffff]"
        raise ValueError(msg)
    return text if _is_zero_date(text) else datetime.fromisoformat(text)


def _is_zero_date(text: str) -> bool:
    """MySQL's zero dates (``0000-00-00``, ``2024-00-00``) have no Python date."""
    return text.startswith("0000") or "-00" in text[:10]


def _decode_binary(value: JsonValue) -> bytes:
    text = _expect_str(value)
    data = base64.b64decode(text, validate=True)
    if base64.b64encode(data).decode("ascii") != text:
        msg = "expected canonical Base64"
        raise ValueError(msg)
    return data


def _decode_boolean(value: JsonValue) -> bool:
    if not isinstance(value, bool):
        msg = f"expected true or false, got {type(value).__name__}"
        raise TypeError(msg)
    return value


def _expect_str(value: JsonValue) -> str:
    if not isinstance(value, str):
        msg = f"expected a JSON string, got {type(value).__name__}"
        raise TypeError(msg)
    return value


def _expect_number(value: JsonValue) -> float:
    return finite_float(value)


_DECODERS: dict[UmsType, Callable[[JsonValue], object]] = {
    UmsType.INT: _decode_int,
    UmsType.LONG: _decode_long,
    UmsType.FLOAT: _expect_number,
    UmsType.DOUBLE: _expect_number,
    UmsType.DECIMAL: _decode_decimal,
    UmsType.DATE: _decode_date,
    UmsType.DATETIME: _decode_datetime,
    UmsType.STRING: _expect_str,
    UmsType.BINARY: _decode_binary,
    UmsType.JSONOBJECT: lambda v: json.loads(_expect_str(v)),
    UmsType.BOOLEAN: _decode_boolean,
    UmsType.RAW: _expect_str,
}

# Cheap wire checks used to validate messages: the JSON kind and canonical text per type.
_WIRE_CHECKS: dict[UmsType, Callable[[JsonValue], object]] = {
    **_DECODERS,
    UmsType.JSONOBJECT: _expect_str,
}


def check_wire_value(ums_type: UmsType, value: JsonValue) -> str | None:
    """Why ``value`` is not a valid UMS JSON value of ``ums_type``, or None when it is."""
    if value is None:
        return None
    try:
        _WIRE_CHECKS[ums_type](value)
    except (TypeError, ValueError, InvalidOperation, binascii.Error) as err:
        return f"{show(value)} is not a {ums_type.value} value: {err}"
    return None
