"""``ums_ts_`` timestamps: ``yyyy-MM-dd HH:mm:ss.SSS`` in an explicit time zone.

The original formatted with the JVM's default zone (spec 1.5); we take the zone as an argument,
UTC by default, and never accept or return naive datetimes.

    >>> ums_ts_ms(1704164645123)
    '2024-01-02 03:04:05.123'
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, tzinfo

from ums.errors import BadTimestampError

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_UMS_TS = re.compile(r"^(\d{4})-(\d{2})-(\d{2}) (\d{2}):(\d{2}):(\d{2})\.(\d{3})$")


def ums_ts(moment: datetime, tz: tzinfo = UTC) -> str:
    """Format an aware datetime in ``tz``; sub-millisecond digits are truncated, like Java's."""
    local = require_aware(moment, "moment").astimezone(tz)
    return f"{local.date().isoformat()} {local:%H:%M:%S}.{local.microsecond // 1000:03d}"


def ums_ts_ms(epoch_ms: int, tz: tzinfo = UTC) -> str:
    """Format epoch milliseconds (binlog seconds * 1000) in ``tz``: 0 -> ``1970-01-01 00:00:00.000``."""
    return ums_ts(from_epoch_ms(epoch_ms), tz)


def parse_ums_ts(text: str, tz: tzinfo = UTC) -> datetime:
    """Parse ``yyyy-MM-dd HH:mm:ss.SSS`` written in ``tz`` into an aware datetime."""
    match = _UMS_TS.match(text) if isinstance(text, str) else None
    if match is None:
        msg = f"ums_ts {text!r}: expected yyyy-MM-dd HH:mm:ss.SSS"
        raise BadTimestampError(msg)
    year, month, day, hour, minute, second, millis = (int(g) for g in match.groups())
    try:
        return datetime(year, month, day, hour, minute, second, millis * 1000, tzinfo=tz)
    except ValueError as err:
        msg = f"ums_ts {text!r}: {err}"
        raise BadTimestampError(msg) from err


def from_epoch_ms(epoch_ms: int) -> datetime:
    """Epoch milliseconds -> aware UTC datetime (exact, no float rounding)."""
    if isinstance(epoch_ms, bool) or not isinstance(epoch_ms, int):
        msg = f"epoch_ms {epoch_ms!r}: expected an int number of milliseconds"
        raise BadTimestampError(msg)
    return _EPOCH + timedelta(milliseconds=epoch_ms)


def epoch_ms(moment: datetime) -> int:
    """Aware datetime -> epoch milliseconds, truncated toward the past."""
    return (require_aware(moment, "moment") - _EPOCH) // timedelta(milliseconds=1)


def require_aware(moment: datetime, what: str) -> datetime:
    """Return ``moment`` if it is an aware datetime, else raise naming ``what``."""
    if not isinstance(moment, datetime) or moment.utcoffset() is None:
        msg = f"{what} {moment!r}: expected a timezone-aware datetime"
        raise BadTimestampError(msg)
    return moment
