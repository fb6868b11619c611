"""Scalar helpers shared by the UMS value encoder and decoder: ranges, TIME text, float32.

>>> format_time(-timedelta(hours=30, seconds=1))
'-30:00:01'
"""

from __future__ import annotations

import math
import re
import struct
from datetime import timedelta

from ums.errors import BadValueError

JsonValue = None | bool | int | float | str

INT_MIN, INT_MAX = -(2**31), 2**31 - 1  # UMS int is a Java int
LONG_MIN, LONG_MAX = -(2**63), 2**64 - 1  # UMS long also carries BIGINT UNSIGNED
DATE_TEXT = re.compile(r"^\d{4}-\d{2}-\d{2}$")
DATETIME_TEXT = re.compile(r"^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(\.\d{1,6})?$")
LONG_TEXT = re.compile(r"^-?(0|[1-9][0-9]*)$")
DECIMAL_TEXT = re.compile(r"^-?[0-9]+(\.[0-9]+)?$")
_TIME = re.compile(r"^(-?)(\d{2,}):(\d{2}):(\d{2})(?:\.(\d{1,6}))?$")
_US = timedelta(microseconds=1)


def format_time(value: timedelta, fsp: int | None = None) -> str:
    """TIME value -> ``[-]HH:MM:SS[.ffffff]``; hours may exceed 24: ``-838:59:59``."""
    total = value // _US
    sign = "-" if total < 0 else ""
    seconds, micros = divmod(abs(total), 10**6)
    hours, rest = divmod(seconds, 3600)
    return f"{sign}{hours:02d}:{rest // 60:02d}:{rest % 60:02d}{fraction(micros, fsp)}"


def parse_time(text: str) -> timedelta:
    """``"-01:02:03.5"`` -> ``-timedelta(hours=1, minutes=2, seconds=3.5)``."""
    match = _TIME.match(text) if isinstance(text, str) else None
    if match is None:
        msg = f"TIME {text!r}: expected [-]HH:MM:SS[.ffffff]"
        raise BadValueError(msg)
    sign, hours, minutes, seconds, frac = match.groups()
    size = timedelta(
        hours=int(hours),
        minutes=int(minutes),
        seconds=int(seconds),
        microseconds=int((frac or "").ljust(6, "0")),
    )
    return -size if sign else size


def float32_repr(value: float) -> float:
    """Shortest float that reads back as the same 32-bit float: 1.100000023841858 -> 1.1."""
    packed = struct.pack("<f", value)
    for digits in range(1, 10):
        candidate = float(f"{value:.{digits}g}")
        if _pack32(candidate) == packed:
            return candidate
    return value


def _pack32(value: float) -> bytes | None:
    try:
        return struct.pack("<f", value)
    except OverflowError:  # a rounded candidate just above the largest float32
        return None


def fraction(micros: int, fsp: int | None) -> str:
    """``.ffffff`` cut to ``fsp`` digits; refuses to drop non-zero digits (exactness)."""
    digits = f"{micros:06d}"
    if fsp is None:
        return f".{digits}" if micros else ""
    if not 0 <= fsp <= 6 or digits[fsp:].strip("0"):
        msg = f"fractional seconds .{digits} do not fit fsp {fsp}"
        raise ValueError(msg)
    return f".{digits[:fsp]}" if fsp else ""


def integer_in(value: object, low: int, high: int) -> int:
    if isinstance(value, float) or not isinstance(value, int):
        msg = f"expected an int, got {type(value).__name__}"
        raise TypeError(msg)
    if not low <= value <= high:
        msg = f"out of range {low}..{high}"
        raise ValueError(msg)
    return int(value)


def finite_float(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        msg = f"expected a float, got {type(value).__name__}"
        raise TypeError(msg)
    result = float(value)
    if not math.isfinite(result):
        msg = "NaN and infinity have no JSON form"
        raise ValueError(msg)
    return result


def show(value: object) -> str:
    """Short repr for error messages (values can be megabytes)."""
    text = repr(value)
    return text if len(text) <= 80 else f"{text[:77]}..."
