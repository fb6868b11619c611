"""How Debezium's JDBC sink lands DBus's records of tests/golden/cdc/every_type.sql's ``cdc_types`` in
PostgreSQL, and the comparison of what it landed (tests/integration/test_connect_jdbc_sink.py,
test_formats_acceptance.py): the table created first (``CREATED_FIRST``), TIME values moved into the day
(``IN_A_DAY``), each column's PostgreSQL type and value as psycopg reads it back (``LANDS``), and the
differences, by row and column."""

from __future__ import annotations

import base64
import dataclasses
import struct
from collections.abc import Callable
from datetime import UTC, date, datetime, time
from decimal import Decimal
from typing import Any

from unit.every_type_changes import SHAPE

from ums.rowchange import RowChange
from ums.scalars import JsonValue

TABLE = "cdc_types"
CREATED_FIRST = f"CREATE TABLE {TABLE} (id integer PRIMARY KEY, de numeric(65,30), nn varchar(5) NOT NULL)"
NAMES = [f.name for f in SHAPE.fields]
# MySQL TIME values of every_type.sql outside PostgreSQL's time range -> values within it
IN_A_DAY = {
    "838:59:59": "23:59:59",
    "-838:59:59": "00:00:00",
    "-00:00:01": "00:00:01",
    "838:59:58.999": "23:59:58.999",
    "-838:59:58.999": "00:00:00.001",
    "-00:00:00.001": "00:00:00.001",
    "-12:00:00.500": "12:00:00.500",
}


def _float32(v: Any) -> float:
    return float(struct.unpack("<f", struct.pack("<f", float(v)))[0])


def _wrapped(v: Any) -> int:  # bigint_unsigned_handling_mode=long: above 2^63-1 wraps, as Debezium does
    n = int(v)
    return n - (1 << 64) if n >= 1 << 63 else n


def _date(v: Any) -> date | None:  # a zero or partly zero date: Debezium writes null
    try:
        return date.fromisoformat(v)
    except ValueError:
        return None


def _datetime(v: Any) -> datetime | None:
    try:
        return datetime.fromisoformat(v)
    except ValueError:
        return None


def _zoned(v: Any) -> datetime | None:
    got = _datetime(v)
    return None if got is None else got.replace(tzinfo=UTC)


def _bytes(v: Any) -> bytes:
    return base64.b64decode(v)


_int: Callable[[Any], Any] = int
_str: Callable[[Any], Any] = str

# column -> (its PostgreSQL type as format_type() prints it, UMS wire value -> what psycopg reads back)
LANDS: dict[str, tuple[str, Callable[[Any], Any]]] = {
    "id": ("integer", _int),  # created first
    "de": ("numeric(65,30)", Decimal),  # created first (the sink would make numeric(38,30))
    "nn": ("character varying(5)", _str),  # created first (NOT NULL without a default)
    "ti": ("smallint", _int),  # int8 -> smallint (PostgreSQL has no 1-byte integer)
    "tiu": ("smallint", _int),  # int16
    "si": ("smallint", _int),  # int16
    "siu": ("integer", _int),  # int32
    "mi": ("integer", _int),  # int32
    "miu": ("integer", _int),  # int32
    "i": ("integer", _int),  # int32
    "iu": ("bigint", _int),  # int64
    "bi": ("bigint", _int),  # int64
    "biu": ("bigint", _wrapped),  # int64, wrapped above 2^63-1 (bigint.unsigned.handling.mode=long)
    "d2": ("numeric(10,2)", Decimal),  # org.apache.kafka.connect.data.Decimal
    "fl": ("real", _float32),  # float32
    "db": ("double precision", float),  # float64
    "b1": ("bit(1)", lambda v: str(int(v))),  # boolean with source type BIT -> bit(1), read as '0'/'1'
    "b64": ("bit(64)", lambda v: format(int(v), "064b")),  # io.debezium.data.Bits
    "dt": ("date", _date),  # io.debezium.time.Date
    "dtm": ("timestamp(6) without time zone", _datetime),  # io.debezium.time.Timestamp (ms)
    "dtm6": ("timestamp(6) without time zone", _datetime),  # io.debezium.time.MicroTimestamp
    "ts": ("timestamp(6) with time zone", _zoned),  # io.debezium.time.ZonedTimestamp (UTC)
    "ts3": ("timestamp(3) with time zone", _zoned),
    "tm": ("time(6) without time zone", time.fromisoformat),  # io.debezium.time.MicroTime, within a day
    "tm3": ("time(3) without time zone", time.fromisoformat),
    "yr": ("integer", _int),  # io.debezium.time.Year
    "ch": ("character(10)", lambda v: v.ljust(10)),  # PostgreSQL pads char(n)
    "vc": ("character varying(20)", _str),  # the propagated length
    "tt": ("text", _str),
    "tx": ("text", _str),
    "mt": ("text", _str),
    "lt": ("text", _str),
    "bn": ("bytea", _bytes),
    "vb": ("bytea", _bytes),
    "tb": ("bytea", _bytes),
    "bl": ("bytea", _bytes),
    "mb": ("bytea", _bytes),
    "lb": ("bytea", _bytes),
    "en": ("text", _str),  # io.debezium.data.Enum
    "st": ("text", _str),  # io.debezium.data.EnumSet
    "js": ("text", _str),  # MariaDB's JSON is LONGTEXT
    "i4": ("text", _str),  # INET4, INET6, UUID: strings
    "i6": ("text", _str),
    "uu": ("text", _str),
}


def in_a_day(change: RowChange) -> RowChange:
    def moved(image: tuple[JsonValue, ...] | None) -> tuple[JsonValue, ...] | None:
        if image is None:
            return None
        return tuple(
            IN_A_DAY.get(v, v) if n in ("tm", "tm3") and isinstance(v, str) else v
            for n, v in zip(NAMES, image, strict=True)
        )

    return dataclasses.replace(change, before=moved(change.before), after=moved(change.after))


def final_rows(changes: list[RowChange]) -> dict[int, dict[str, Any]]:
    """The table after the changes, by id: each column as psycopg reads it back (``LANDS``)."""
    table: dict[int, tuple[JsonValue, ...]] = {}
    for c in changes:
        if c.before is not None:
            table.pop(int(c.before[0]), None)  # type: ignore[arg-type]
        if c.after is not None:
            table[int(c.after[0])] = c.after  # type: ignore[arg-type]
    return {
        key: {n: None if v is None else LANDS[n][1](v) for n, v in zip(NAMES, image, strict=True)}
        for key, image in table.items()
    }


def differences(want: dict[int, dict[str, Any]], got: list[dict[str, Any]]) -> list[str]:
    out = []
    have = {row["id"]: row for row in got}
    for key in sorted(set(want) | set(have)):
        if key not in have or key not in want:
            out.append(f"id {key}: {'missing' if key not in have else 'not expected'} in PostgreSQL")
            continue
        for name in NAMES:
            w, g = want[key][name], have[key][name]
            if name == "fl" and g is not None:
                g = _float32(g)
            if w != g or type(w) is not type(g):
                out.append(f"id {key} column {name}: expected {w!r}, PostgreSQL has {g!r}")
    return out
