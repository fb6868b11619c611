"""Decode a raw ``rows`` event (``binlog.rawevent``) offline into typed Python values.

No connection to the source is needed: with ``binlog_row_metadata=FULL`` the table map in the record
names the columns and carries signedness, charsets, ENUM/SET members and the primary key.

    >>> decoded = decode_rows(rawevent.decode(record_value))          # doctest: +SKIP
    >>> decoded.op, decoded.primary_key, decoded.rows[0].after        # doctest: +SKIP
    ('i', ('id',), {'id': 1, 'note': 'héllo ✓', 'amount': Decimal('12.50')})

Parsing reuses python-mysql-replication (pinned 1.0.17): its ``BinLogPacketWrapper`` reads the event
headers, its ``TableMapEvent`` the table map with all optional metadata, its ``Write/Update/DeleteRowsEvent``
the rows event header, the column bitmaps and the row loop, and its ``parse_json`` MySQL's binary JSON.
Two stand-ins replace what a replication stream would give those classes: ``_Packet`` for pymysql's
packet (a byte buffer: ``read``, ``advance``, ``rewind``, ``_data``, ``_position``) and ``_Control`` for
the control connection (``charset`` and ``_get_dbms()``; it never runs a query). The per-value readers
are ours (``_READERS``, hooked in through ``RowsEvent._read_column_data``): the library's differ from
``SELECT`` for several types and take three times as long. A decoded value equals what pymysql's ``SELECT``
gives for the same row, except for the normalisations marked *by design*:

| column type                    | decoded value                                                        |
|--------------------------------|----------------------------------------------------------------------|
| TINYINT..BIGINT [UNSIGNED]     | int, unsigned ones up to their maximum (2**64-1)                     |
| DECIMAL(p,s)                   | Decimal with exactly ``s`` digits after the point                    |
| FLOAT                          | float: the shortest decimal that reads back as the stored 32-bit    |
|                                | float (1.1, not 1.100000023841858). *By design*: MariaDB's SELECT    |
|                                | shows 6 significant digits (3.14159 for a stored 3.1415927)          |
| DOUBLE                         | float                                                                |
| BIT(n)                         | int (big-endian value of the bits). *By design*: pymysql gives bytes|
| YEAR                           | int; YEAR 0000 is 0                                                  |
| DATE                           | date; zero or partly zero dates are text as MySQL prints them,       |
|                                | ``"0000-00-00"``, ``"2024-00-15"`` (pymysql does the same)           |
| DATETIME(fsp)                  | naive datetime with microseconds; zero dates as text,                |
|                                | ``"0000-00-00 00:00:00.000"`` with ``fsp`` fraction digits           |
| TIMESTAMP(fsp)                 | aware datetime in UTC. *By design*: SELECT gives the session time    |
|                                | zone's naive wall clock; the zero TIMESTAMP is text as for DATETIME  |
| TIME(fsp)                      | timedelta, negative and beyond 24 h included (``-838:59:58.999``)    |
| CHAR, VARCHAR, *TEXT           | str decoded with the column's charset (utf8mb4: emoji included)     |
| BINARY(n)                      | bytes right-padded with ``\\0`` to n (the binlog drops the padding)  |
| INET4, INET6, UUID (MariaDB)   | str as SELECT prints it (``1.2.3.4``, ``2001:db8::ff00:42:8329``,    |
|                                | ``::ffff:1.2.3.4``, lowercase 8-4-4-4-12) when the header's ``types``|
|                                | names the column (the binlog says BINARY(4)/BINARY(16)); else bytes  |
| VARBINARY, *BLOB, GEOMETRY     | bytes (b"" for empty, never "")                                      |
| ENUM                           | str, ``""`` for the invalid value 0                                  |
| SET                            | set of str, ``set()`` when empty. *By design*: pymysql gives "a,b"   |
| JSON (MySQL binary JSON)       | the parsed value (dict/list/str/int/float/bool/None); object keys and|
|                                | strings are str; DECIMAL inside JSON is a float; dates inside JSON   |
|                                | are text as MySQL prints them                                        |
| JSON (MariaDB)                 | str: MariaDB's JSON is LONGTEXT with a CHECK, the binlog cannot tell |
| NULL                           | None                                                                 |

``ColumnSpec.column_type`` is rebuilt COLUMN_TYPE-style from the binlog type code and its metadata
(``decimal(65,30)``, ``int unsigned``, ``datetime(6)``, ``enum('a','b')``, ``bit(64)``, ``char(5)``,
``mediumtext``/``mediumblob``, ``json``...), without display widths. Columns left out of a row image
(``binlog_row_image`` MINIMAL/NOBLOB) are left out of the row dict, so a missing key is never NULL.

The binlog cannot tell MariaDB's INET4, INET6 and UUID from BINARY(4)/BINARY(16): the extractor names
such columns in the record header, ``"types": {"addr": "inet6"}`` (``dbuslib.coltypes``), and a column
named there whose binlog type is the matching BINARY(n) decodes as text, with ``column_type`` ``inet6``.

A table map is parsed once per (binlog file, table-map body without its header and checksum, ``types``)
and cached,
so the events of one table share it across transactions. The server flavour (charset ids differ) comes
from the header's ``flavor`` if present, else from the GTID's form, else from the rows event version.

Any body that does not parse, or parses with bytes left over or missing, raises ``RowDecodeError``
(code ``RAW_UNDECODABLE``) naming ``schema.table`` at ``file:pos``; rows are never returned partly.
"""

from __future__ import annotations

import codecs
import re
import struct
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal
from typing import Any

from pymysqlreplication.constants import BINLOG, FIELD_TYPE
from pymysqlreplication.json_binary import parse_json
from pymysqlreplication.packet import BinLogPacketWrapper
from pymysqlreplication.row_event import (
    DeleteRowsEvent,
    RowsEvent,
    TableMapEvent,
    UpdateRowsEvent,
    WriteRowsEvent,
)

from binlog.rawevent import RawEvent, RawHeader
from dbuslib.errors import DbusError
from ums.scalars import float32_repr
from ums.types import ColumnSpec

_HEADER = struct.Struct("<IBIIIH")  # timestamp, type, server_id, event_size, log_pos, flags
_HEADER_LEN = 19
_CRC_LEN = 4
_TABLE_CACHE_MAX = 1024


class RowDecodeError(DbusError, ValueError):
    """A ``rows`` record whose body does not decode; the message names schema.table, file and pos."""

    code = "RAW_UNDECODABLE"
    retriable = False

    def __init__(self, message: str, event: RawEvent | None = None) -> None:
        super().__init__(message)
        self.event = event  # kept for a dead-letter record


@dataclass(frozen=True)
class RowImage:
    """One changed row: ``after`` only for an insert, ``before`` only for a delete, both for an update."""

    before: dict[str, Any] | None
    after: dict[str, Any] | None


@dataclass(frozen=True)
class DecodedRows:
    """The rows of one rows event, typed.

    JSON example: ``{"schema": "shop", "table": "orders", "op": "u", "primary_key": ["id"],
    "columns": [{"name": "id", "column_type": "int", "nullable": false}, ...],
    "rows": [{"before": {"id": 1, "qty": 2}, "after": {"id": 1, "qty": 3}}]}``
    """

    schema: str
    table: str
    op: str
    columns: tuple[ColumnSpec, ...]
    primary_key: tuple[str, ...]
    rows: tuple[RowImage, ...]


# ---------------------------------------------------------------- stand-ins for pymysql objects


class _Truncated(Exception):
    """A read past the end of the event's bytes."""


class _Packet:
    """Stands in for pymysql's ``MysqlPacket``: what ``BinLogPacketWrapper`` and the events read."""

    __slots__ = ("_data", "_position")

    def __init__(self, data: bytes) -> None:
        self._data = data
        self._position = 0

    def read(self, size: int) -> bytes:
        end = self._position + size
        if end > len(self._data):
            msg = f"read of {size} bytes at offset {self._position - 1} passes the event's end"
            raise _Truncated(msg)
        chunk = self._data[self._position : end]
        self._position = end
        return chunk

    def advance(self, size: int) -> None:
        self.read(size)

    def rewind(self, position: int = 0) -> None:
        self._position = position


@dataclass(frozen=True)
class _Control:
    """Stands in for the control connection: its charset and the server flavour, no queries."""

    dbms: str
    charset: str = "utf8mb4"

    def _get_dbms(self) -> str:
        return self.dbms


_EVENT_OPTIONS: dict[str, Any] = {
    "mysql_version": (0, 0, 0),
    "only_tables": None,
    "ignored_tables": None,
    "only_schemas": None,
    "ignored_schemas": None,
    "freeze_schema": False,
    "ignore_decode_errors": False,
    "verify_checksum": False,
    "optional_meta_data": True,
    "enable_logging": False,
    "use_column_name_cache": False,
    "post_header_lengths": None,
}


def _wrap(data: bytes, crc: bool, control: _Control) -> BinLogPacketWrapper:
    """The library's packet wrapper over one whole event; it reads the header and builds no event."""
    packet = _Packet(b"\x00" + data)  # the OK byte a replication stream puts before each event
    return BinLogPacketWrapper(
        packet, {}, control, allowed_events=frozenset(), use_checksum=crc, **_EVENT_OPTIONS
    )


def _body_size(wrapper: BinLogPacketWrapper, crc: bool) -> int:
    return wrapper.event_size - _HEADER_LEN - (_CRC_LEN if crc else 0)


# ---------------------------------------------------------------- value readers (replacing the library's)
#
# One reader per column, built once per table map: it reads the column's value from the packet. The
# library's own per-value reader is not used: it is slow and differs from SELECT for TIME(fsp) < 0,
# YEAR 0, zero dates, TIMESTAMP, BINARY, BIT, FLOAT, empty SET and empty VARBINARY/BLOB.

Reader = Callable[[_Packet], Any]
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_DATETIMEF_INT_OFS = 0x8000000000
_TIMEF_INT_OFS = 0x800000
_TIMEF_OFS = 0x800000000000
_DIG2BYTES = (0, 1, 1, 2, 2, 3, 3, 4, 4, 4)
_INT_FORMATS = {  # type code -> (signed, unsigned) little-endian formats
    FIELD_TYPE.TINY: ("<b", "<B"),
    FIELD_TYPE.SHORT: ("<h", "<H"),
    FIELD_TYPE.LONG: ("<i", "<I"),
    FIELD_TYPE.LONGLONG: ("<q", "<Q"),
}


def _int_reader(c: Any) -> Reader:
    unpack, size = (s := struct.Struct(_INT_FORMATS[c.type][c.unsigned])).unpack, s.size
    return lambda p: unpack(p.read(size))[0]


def _int24_reader(c: Any) -> Reader:
    signed = not c.unsigned
    return lambda p: int.from_bytes(p.read(3), "little", signed=signed)


def _decimal_reader(c: Any) -> Reader:
    """DECIMAL(p,s) in MySQL's packed form (``decimal2bin``): groups of 9 digits in 4 bytes, the leading
    and trailing partial groups in fewer, all bytes inverted when negative, the top bit flipped."""
    whole, scale = c.precision - c.decimals, c.decimals
    groups = (
        [(_DIG2BYTES[whole % 9], whole % 9)]
        + [(4, 9)] * (whole // 9)
        + [(4, 9)] * (scale // 9)
        + [(_DIG2BYTES[scale % 9], scale % 9)]
    )
    groups = [(8 * size, 10**digits) for size, digits in groups if size]
    size = sum(bits for bits, _ in groups) // 8
    top, ones = 1 << (8 * size - 1), (1 << (8 * size)) - 1

    def read(p: _Packet) -> Decimal:
        packed = int.from_bytes(p.read(size), "big") ^ top
        negative = bool(packed & top)
        if negative:
            packed ^= ones
        shift, unscaled = 8 * size, 0
        for bits, base in groups:
            shift -= bits
            unscaled = unscaled * base + (packed >> shift & ((1 << bits) - 1))
        digits = f"{unscaled:0{scale + 1}d}"
        text = f"{digits[:-scale]}.{digits[-scale:]}" if scale else digits
        return Decimal("-" + text if negative else text)

    return read


def _fraction(p: _Packet, fsp: int) -> int:
    """Microseconds of a DATETIME2/TIMESTAMP2 fraction: (fsp+1)//2 big-endian bytes."""
    size = (fsp + 1) // 2
    return int.from_bytes(p.read(size), "big") * 10 ** (6 - 2 * size) if size else 0


def _zero_text(y: int, mo: int, d: int, clock: tuple[int, int, int] | None, micros: int, fsp: int) -> str:
    """A date MySQL stores but Python cannot hold, as MySQL prints it: ``2024-00-15 01:02:03.000``."""
    text = f"{y:04d}-{mo:02d}-{d:02d}"
    if clock is not None:
        text += f" {clock[0]:02d}:{clock[1]:02d}:{clock[2]:02d}"
        text += f".{micros:06d}"[: fsp + 1] if fsp else ""
    return text


def _wall(y: int, mo: int, d: int, clock: tuple[int, int, int], micros: int, fsp: int) -> datetime | str:
    try:
        return datetime(y, mo, d, *clock, micros)  # noqa: DTZ001 - DATETIME is a wall clock, no zone
    except ValueError:
        return _zero_text(y, mo, d, clock, micros, fsp)


def _read_date(p: _Packet) -> date | str:
    v = int.from_bytes(p.read(3), "little")
    y, mo, d = v >> 9, (v >> 5) & 0xF, v & 0x1F
    try:
        return date(y, mo, d)
    except ValueError:
        return _zero_text(y, mo, d, None, 0, 0)


def _datetime2_reader(c: Any) -> Reader:
    def read(p: _Packet) -> datetime | str:
        v = int.from_bytes(p.read(5), "big") - _DATETIMEF_INT_OFS
        micros = _fraction(p, c.fsp)
        ymd, hms = v >> 17, v & 0x1FFFF
        y, mo = divmod(ymd >> 5, 13)
        return _wall(y, mo, ymd & 0x1F, (hms >> 12, (hms >> 6) & 0x3F, hms & 0x3F), micros, c.fsp)

    return read


def _read_datetime(p: _Packet) -> datetime | str:
    """Pre-5.6 DATETIME: a little-endian YYYYMMDDhhmmss integer."""
    ymd, hms = divmod(int.from_bytes(p.read(8), "little"), 1000000)
    return _wall(ymd // 10000, ymd // 100 % 100, ymd % 100, (hms // 10000, hms // 100 % 100, hms % 100), 0, 0)


def _utc(seconds: int, micros: int, fsp: int) -> datetime | str:
    if seconds == 0:  # 1970-01-01 00:00:00 UTC is below TIMESTAMP's range: it is the zero TIMESTAMP
        return _zero_text(0, 0, 0, (0, 0, 0), 0, fsp)
    return _EPOCH + timedelta(seconds=seconds, microseconds=micros)


def _timestamp2_reader(c: Any) -> Reader:
    return lambda p: _utc(int.from_bytes(p.read(4), "big"), _fraction(p, c.fsp), c.fsp)


def _read_timestamp(p: _Packet) -> datetime | str:
    return _utc(int.from_bytes(p.read(4), "little"), 0, 0)


def _time2_reader(c: Any) -> Reader:
    """MySQL's ``my_time_packed_from_binary``: a signed packed value, the fraction stored with the sign."""
    size = (c.fsp + 1) // 2

    def read(p: _Packet) -> timedelta:
        if size == 3:
            packed = int.from_bytes(p.read(6), "big") - _TIMEF_OFS
        else:
            whole = int.from_bytes(p.read(3), "big") - _TIMEF_INT_OFS
            frac = int.from_bytes(p.read(size), "big") if size else 0
            if whole < 0 and frac:
                whole, frac = whole + 1, frac - (1 << (8 * size))
            packed = (whole << 24) + frac * 10 ** (6 - 2 * size)
        sign, packed = (-1, -packed) if packed < 0 else (1, packed)
        hms = packed >> 24
        return sign * timedelta(
            hours=(hms >> 12) & 0x3FF,
            minutes=(hms >> 6) & 0x3F,
            seconds=hms & 0x3F,
            microseconds=packed & 0xFFFFFF,
        )

    return read


def _read_time(p: _Packet) -> timedelta:
    """Pre-5.6 TIME: a signed little-endian HHMMSS integer."""
    v = int.from_bytes(p.read(3), "little", signed=True)
    sign, v = (-1, -v) if v < 0 else (1, v)
    return sign * timedelta(hours=v // 10000, minutes=v // 100 % 100, seconds=v % 100)


def _read_year(p: _Packet) -> int:
    v = p.read(1)[0]
    return 1900 + v if v else 0


def _enum_reader(c: Any) -> Reader:
    return lambda p: c.enum_values[int.from_bytes(p.read(c.size), "little")]


def _set_reader(c: Any) -> Reader:
    def read(p: _Packet) -> set[str]:
        mask = int.from_bytes(p.read(c.size), "little")
        return {m for i, m in enumerate(c.set_values) if mask >> i & 1}

    return read


def _bit_reader(c: Any) -> Reader:
    return lambda p: int.from_bytes(p.read(c.bytes), "big")


def _read_float(p: _Packet) -> float:
    return float32_repr(_FLOAT.unpack(p.read(4))[0])


def _read_double(p: _Packet) -> float:
    return _DOUBLE.unpack(p.read(8))[0]


_FLOAT, _DOUBLE = struct.Struct("<f"), struct.Struct("<d")


def _bytes_reader(length_size: int, pad_to: int = 0) -> Reader:
    """A value after its ``length_size``-byte little-endian length; BINARY(n) is padded back to n."""

    def read(p: _Packet) -> bytes:
        value = p.read(int.from_bytes(p.read(length_size), "little"))
        return value.ljust(pad_to, b"\x00") if pad_to else value

    return read


# ---------------------------------------------------------------- MariaDB's INET4, INET6 and UUID
#
# Stored as BINARY(4)/BINARY(16) (the binlog drops trailing zero bytes, so values are padded back first).
# The texts are what MariaDB 10.11's SELECT prints (tests/integration/test_rowdecode_types.py checks them
# against the server); the JVM decoder has the same rules (binlog/jvm, RowsDecoder.inet6).


def inet4_text(value: bytes) -> str:
    """INET4 as SELECT prints it: ``b"\\x01\\x02\\x03\\x04"`` -> ``"1.2.3.4"``."""
    if len(value) != 4:
        msg = f"INET4 value of {len(value)} bytes, expected 4"
        raise ValueError(msg)
    return "%d.%d.%d.%d" % tuple(value)


def inet6_text(value: bytes) -> str:
    """INET6 as SELECT prints it (MariaDB's inet_ntop): groups in lowercase hex without leading zeros, the
    first longest run of zero groups as ``::``, even a run of one (``1::1:1:1:1:1:1``, unlike RFC 5952).
    When that run starts at group 0 and is six groups long (IPv4-compatible), or five followed by
    ``ffff`` (IPv4-mapped), the last 32 bits are a dotted quad: ``::1.2.3.4``, ``::0.1.0.2``,
    ``::ffff:1.2.3.4``; ``::1``, ``::ffff`` and ``::`` stay.
    """
    if len(value) != 16:
        msg = f"INET6 value of {len(value)} bytes, expected 16"
        raise ValueError(msg)
    words = struct.unpack(">8H", value)
    pos, length, start = 0, 0, None
    for i in range(9):
        if i < 8 and words[i] == 0:
            start = i if start is None else start
        elif start is not None:
            if i - start > length:
                pos, length = start, i - start
            start = None
    if not length:
        return ":".join(f"{w:x}" for w in words)
    if pos == 0 and (length == 6 or (length == 5 and words[5] == 0xFFFF)):
        return ("::" if length == 6 else "::ffff:") + inet4_text(value[12:])
    hexes = [f"{w:x}" for w in words]
    return ":".join(hexes[:pos]) + "::" + ":".join(hexes[pos + length :])


def uuid_text(value: bytes) -> str:
    """UUID as SELECT prints it: lowercase ``8-4-4-4-12`` hex of the 16 bytes in the binlog's order."""
    if len(value) != 16:
        msg = f"UUID value of {len(value)} bytes, expected 16"
        raise ValueError(msg)
    h = value.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


# column type (as information_schema names it) -> (BINARY(n) it is stored as, text of the bytes)
TEXT_TYPES: dict[str, tuple[int, Callable[[bytes], str]]] = {
    "inet4": (4, inet4_text),
    "inet6": (16, inet6_text),
    "uuid": (16, uuid_text),
}


def _text_type(c: Any, types: dict[str, str]) -> str | None:
    """The header's type for column ``c`` when it is one stored as exactly the BINARY(n) ``c`` is."""
    real = types.get(c.name)
    if real not in TEXT_TYPES or c.type != FIELD_TYPE.STRING or not _is_binary(c):
        return None
    return real if c.max_length == TEXT_TYPES[real][0] else None


def _text_reader(real: str) -> Reader:
    """BINARY(n) bytes (1-byte length, zero padding dropped) -> the text of an INET4/INET6/UUID value."""
    size, text = TEXT_TYPES[real]

    def read(p: _Packet) -> str:
        n = p.read(1)[0]
        if n > size:
            msg = f"{real} value of {n} bytes, at most {size}"
            raise ValueError(msg)
        return text(p.read(n).ljust(size, b"\x00"))

    return read


def _length_size(c: Any) -> int:
    if c.type in (FIELD_TYPE.BLOB, FIELD_TYPE.GEOMETRY):
        return c.length_size
    return 2 if c.max_length > 255 else 1


def _string_reader(c: Any) -> Reader:
    """CHAR/VARCHAR/TEXT/BINARY/VARBINARY/BLOB: bytes for the binary charset, else str in the charset."""
    size = _length_size(c)
    if _is_binary(c):
        return _bytes_reader(size, c.max_length if c.type == FIELD_TYPE.STRING else 0)
    encoding = RowsEvent.charset_to_encoding(c.character_set_name or "utf8mb4")
    raw = _bytes_reader(size)
    try:
        codecs.lookup(encoding)
    except LookupError:  # a charset Python has no codec for (swe7...): bytes, as the library does
        return raw
    return lambda p: raw(p).decode(encoding)


def _json_reader(c: Any) -> Reader:
    def read(p: _Packet) -> Any:
        data = p.read(int.from_bytes(p.read(c.length_size), "little"))
        return _plain_json(parse_json(data[0], data[1:])) if data else None

    return read


def _plain_json(value: Any) -> Any:
    """MySQL binary JSON as json.loads of its text would give it (the library leaves bytes)."""
    if isinstance(value, bytes):
        return value.decode()
    if isinstance(value, dict):
        return {_plain_json(k): _plain_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain_json(v) for v in value]
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, datetime):
        return f"{value:%Y-%m-%d %H:%M:%S.%f}"
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, time):
        return f"{value:%H:%M:%S.%f}"
    return value


def _fixed(reader: Reader) -> Callable[[Any], Reader]:
    return lambda c: reader


_READERS: dict[int, Callable[[Any], Reader]] = {
    **dict.fromkeys(_INT_FORMATS, _int_reader),
    FIELD_TYPE.INT24: _int24_reader,
    FIELD_TYPE.NEWDECIMAL: _decimal_reader,
    FIELD_TYPE.FLOAT: _fixed(_read_float),
    FIELD_TYPE.DOUBLE: _fixed(_read_double),
    FIELD_TYPE.YEAR: _fixed(_read_year),
    FIELD_TYPE.DATE: _fixed(_read_date),
    FIELD_TYPE.NEWDATE: _fixed(_read_date),
    FIELD_TYPE.DATETIME2: _datetime2_reader,
    FIELD_TYPE.DATETIME: _fixed(_read_datetime),
    FIELD_TYPE.TIMESTAMP2: _timestamp2_reader,
    FIELD_TYPE.TIMESTAMP: _fixed(_read_timestamp),
    FIELD_TYPE.TIME2: _time2_reader,
    FIELD_TYPE.TIME: _fixed(_read_time),
    FIELD_TYPE.BIT: _bit_reader,
    FIELD_TYPE.ENUM: _enum_reader,
    FIELD_TYPE.SET: _set_reader,
    FIELD_TYPE.STRING: _string_reader,
    FIELD_TYPE.VARCHAR: _string_reader,
    FIELD_TYPE.VAR_STRING: _string_reader,
    FIELD_TYPE.BLOB: _string_reader,
    FIELD_TYPE.GEOMETRY: lambda c: _bytes_reader(c.length_size),
    FIELD_TYPE.JSON: _json_reader,
}


class _ExactRows:
    """Mixin over the library's rows events: its header, bitmaps and row loop, our column readers.

    ``_read_column_data`` is the library's hook that reads one row image (null bitmap, then each
    present column); ``dbus_columns`` holds (name, reader) per column, set from the parsed table map.
    """

    dbus_columns: tuple[tuple[str, Reader], ...] = ()
    packet: Any  # the library's BinLogPacketWrapper, set by the rows event class this mixes into

    def _read_column_data(self, cols_bitmap: bytes, row_image_type: Any = None) -> dict[str, Any]:
        wrapper = self.packet
        packet = wrapper.packet  # read our _Packet directly, then tell the wrapper how far we went
        start = packet._position
        present = [c for i, c in enumerate(self.dbus_columns) if cols_bitmap[i >> 3] >> (i & 7) & 1]
        nulls = packet.read((len(present) + 7) // 8)
        values = {
            name: None if nulls[n >> 3] >> (n & 7) & 1 else read(packet)
            for n, (name, read) in enumerate(present)
        }
        wrapper.read_bytes += packet._position - start
        return values


class _Write(_ExactRows, WriteRowsEvent):
    pass


class _Update(_ExactRows, UpdateRowsEvent):
    pass


class _Delete(_ExactRows, DeleteRowsEvent):
    pass


_ROWS_EVENTS: dict[int, tuple[str, type[RowsEvent]]] = {
    BINLOG.WRITE_ROWS_EVENT_V1: ("i", _Write),
    BINLOG.WRITE_ROWS_EVENT_V2: ("i", _Write),
    BINLOG.UPDATE_ROWS_EVENT_V1: ("u", _Update),
    BINLOG.UPDATE_ROWS_EVENT_V2: ("u", _Update),
    BINLOG.DELETE_ROWS_EVENT_V1: ("d", _Delete),
    BINLOG.DELETE_ROWS_EVENT_V2: ("d", _Delete),
}
_MARIADB_EVENT_TYPES = frozenset(
    {BINLOG.WRITE_ROWS_EVENT_V1, BINLOG.UPDATE_ROWS_EVENT_V1, BINLOG.DELETE_ROWS_EVENT_V1}
)
_MARIADB_GTID = re.compile(r"^\d+-\d+-\d+$")


# ---------------------------------------------------------------- column types from the table map

_INTS = {
    FIELD_TYPE.TINY: "tinyint",
    FIELD_TYPE.SHORT: "smallint",
    FIELD_TYPE.INT24: "mediumint",
    FIELD_TYPE.LONG: "int",
    FIELD_TYPE.LONGLONG: "bigint",
}
_BLOB_SIZES = {1: "tiny", 2: "", 3: "medium", 4: "long"}
_MBMAXLEN = {
    "utf8mb4": 4,
    "utf8mb3": 3,
    "utf8": 3,
    "ucs2": 2,
    "utf16": 4,
    "utf16le": 4,
    "utf32": 4,
    "big5": 2,
    "cp932": 2,
    "eucjpms": 3,
    "euckr": 2,
    "gb18030": 4,
    "gb2312": 2,
    "gbk": 2,
    "sjis": 2,
    "ujis": 3,
}


def _is_binary(column: Any) -> bool:
    return column.character_set_name == "binary"


def _chars(column: Any) -> int:
    """Characters of CHAR/VARCHAR from the byte length the binlog gives."""
    charset = (column.collation_name or "utf8mb4").split("_")[0]
    return column.max_length // _MBMAXLEN.get(charset, 1)


def _named(name: str) -> Callable[[Any], str]:
    return lambda c: name


def _signed(name: str) -> Callable[[Any], str]:
    return lambda c: name + (" unsigned" if c.unsigned else "")


def _fsp(name: str) -> Callable[[Any], str]:
    return lambda c: f"{name}({c.fsp})" if c.fsp else name


def _quoted(values: list[str]) -> str:
    return ",".join("'" + v.replace("'", "''") + "'" for v in values)


def _string_type(fixed: str, binary: str) -> Callable[[Any], str]:
    return lambda c: f"{binary}({c.max_length})" if _is_binary(c) else f"{fixed}({_chars(c)})"


def _decimal_type(c: Any) -> str:
    return _signed(f"decimal({c.precision},{c.decimals})")(c)


_TYPE_TEXT: dict[int, Callable[[Any], str]] = {
    **{code: _signed(name) for code, name in _INTS.items()},
    FIELD_TYPE.NEWDECIMAL: _decimal_type,
    FIELD_TYPE.FLOAT: _named("float"),
    FIELD_TYPE.DOUBLE: _named("double"),
    FIELD_TYPE.YEAR: _named("year"),
    FIELD_TYPE.DATE: _named("date"),
    FIELD_TYPE.NEWDATE: _named("date"),
    FIELD_TYPE.DATETIME: _named("datetime"),
    FIELD_TYPE.DATETIME2: _fsp("datetime"),
    FIELD_TYPE.TIMESTAMP: _named("timestamp"),
    FIELD_TYPE.TIMESTAMP2: _fsp("timestamp"),
    FIELD_TYPE.TIME: _named("time"),
    FIELD_TYPE.TIME2: _fsp("time"),
    FIELD_TYPE.BIT: lambda c: f"bit({c.bits})",
    FIELD_TYPE.ENUM: lambda c: f"enum({_quoted(c.enum_values[1:])})",
    FIELD_TYPE.SET: lambda c: f"set({_quoted(c.set_values)})",
    FIELD_TYPE.STRING: _string_type("char", "binary"),
    FIELD_TYPE.VARCHAR: _string_type("varchar", "varbinary"),
    FIELD_TYPE.VAR_STRING: _string_type("varchar", "varbinary"),
    FIELD_TYPE.BLOB: lambda c: _BLOB_SIZES[c.length_size] + ("blob" if _is_binary(c) else "text"),
    FIELD_TYPE.JSON: _named("json"),
    FIELD_TYPE.GEOMETRY: _named("geometry"),
}


def column_type_of(column: Any) -> str:
    """COLUMN_TYPE-like text of a library ``Column`` parsed from a table map: ``decimal(65,30)``."""
    if column.type not in _TYPE_TEXT:
        msg = f"column {column.name!r}: binlog type code {column.type} is not supported"
        raise ValueError(msg)
    return _TYPE_TEXT[column.type](column)


# ---------------------------------------------------------------- the table map, parsed once


@dataclass(frozen=True)
class _Table:
    """A parsed table map: the library's ``Table`` for its rows events, and what we made of it."""

    table_id: int
    schema: str
    table: str
    library_table: Any
    columns: tuple[ColumnSpec, ...]
    primary_key: tuple[str, ...]
    readers: tuple[tuple[str, Reader], ...]
    texts: tuple[int, ...] = ()  # columns read as INET4/INET6/UUID text (header ``types``)


_TABLES: dict[tuple[Any, ...], _Table] = {}


def _cached_table(
    file: str, data: bytes, crc: bool, control: _Control, types: dict[str, str] | None = None
) -> _Table:
    """Parse a table map once per (file, table-map body, ``types``): the 19-byte header differs per
    transaction."""
    key = (
        file,
        control.dbms,
        data[_HEADER_LEN : len(data) - (_CRC_LEN if crc else 0)],
        tuple(sorted((types or {}).items())),
    )
    table = _TABLES.get(key)
    if table is None:
        table = _parse_table_map(data, crc, control, types or {})
        if len(_TABLES) >= _TABLE_CACHE_MAX:
            _TABLES.pop(next(iter(_TABLES)))
        _TABLES[key] = table
    return table


def _parse_table_map(
    data: bytes, crc: bool, control: _Control, types: dict[str, str] | None = None
) -> _Table:
    # The library reads optional metadata until 4 bytes (a checksum) are left: give it 4 without one.
    wrapper = _wrap(data if crc else data + b"\x00" * _CRC_LEN, crc, control)
    library_map: dict[int, Any] = {}
    event = TableMapEvent(
        wrapper, _body_size(wrapper, crc), library_map, control, use_checksum=crc, **_EVENT_OPTIONS
    )
    if wrapper.read_bytes != _body_size(wrapper, crc):
        msg = f"table map: parsing took {wrapper.read_bytes} bytes of a {_body_size(wrapper, crc)}-byte body"
        raise ValueError(msg)
    meta = event.optional_metadata
    if len(meta.column_name_list) != event.column_count:
        msg = "table map carries no column names: the source must run with binlog_row_metadata=FULL"
        raise ValueError(msg)
    names = [c.name for c in event.columns]
    texts = [_text_type(c, types or {}) for c in event.columns]
    columns = tuple(
        ColumnSpec(c.name, texts[i] or column_type_of(c), _bit(event.null_bitmask, i))
        for i, c in enumerate(event.columns)
    )  # column_type_of refuses the types we cannot read
    keys = meta.simple_primary_key_list or list(meta.primary_keys_with_prefix)
    readers = tuple(
        (c.name, _text_reader(text) if text else _READERS[c.type](c))
        for c, text in zip(event.columns, texts, strict=True)
    )
    return _Table(
        event.table_id,
        event.schema,
        event.table,
        event.table_obj,
        columns,
        tuple(names[i] for i in keys),
        readers,
        tuple(i for i, t in enumerate(texts) if t),
    )


def _bit(bitmap: bytes, i: int) -> bool:
    return bool(bitmap[i // 8] >> (i % 8) & 1)


# ---------------------------------------------------------------- decoding a record


def _where(event: RawEvent) -> str:
    h = event.header
    return f"{h.schema}.{h.table} at {h.where}"


def _flavor(header: RawHeader) -> str:
    """``mariadb`` or ``mysql`` (charset ids and GEOMETRY's charset differ): the header's ``flavor`` if
    given, else the GTID's form (``0-1-42`` or ``uuid:42``), else the rows event version (MariaDB writes v1).
    """
    if header.flavor in ("mariadb", "mysql"):
        return header.flavor
    gtid = str(header.gtid or "")
    if gtid:
        return "mariadb" if _MARIADB_GTID.match(gtid) else "mysql"
    return "mariadb" if header.event_type in _MARIADB_EVENT_TYPES else "mysql"


def header_types(header: RawHeader) -> dict[str, str]:
    """The header's ``types`` (column name -> column type the binlog cannot tell), ``{}`` without one;
    ValueError when it is not an object of strings."""
    types = header.types
    if types is None:
        return {}
    if not isinstance(types, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in types.items()
    ):
        msg = f"header 'types' must be an object of column names to column types, got {types!r:.80}"
        raise ValueError(msg)
    return types


def _check_event(data: bytes, crc: bool, expected_type: int, what: str) -> None:
    """A whole binlog event: size as its header says, checksum right, the expected type."""
    if len(data) < _HEADER_LEN + (_CRC_LEN if crc else 0):
        msg = f"{what} of {len(data)} bytes is shorter than an event header"
        raise ValueError(msg)
    _, event_type, _, size, _, _ = _HEADER.unpack_from(data)
    if size != len(data):
        msg = f"{what} header says {size} bytes but the record holds {len(data)}"
        raise ValueError(msg)
    if crc and zlib.crc32(data[:-_CRC_LEN]) != int.from_bytes(data[-_CRC_LEN:], "little"):
        msg = f"{what} fails its CRC32 checksum"
        raise ValueError(msg)
    if event_type != expected_type:
        msg = f"{what} has binlog type code {event_type}, expected {expected_type}"
        raise ValueError(msg)


def decode_rows(event: RawEvent) -> DecodedRows:
    """The typed rows of a ``rows`` record; RowDecodeError (RAW_UNDECODABLE) if its body does not decode."""
    try:
        return _decode(event)
    except RowDecodeError:
        raise
    except Exception as err:  # anything the library raises on bad bytes is a body that does not decode
        msg = f"{_where(event)}: rows event does not decode: {err}"
        raise RowDecodeError(msg, event) from err


def table_of(event: RawEvent) -> DecodedRows:
    """The table and op of a ``rows`` record, its table map checked as ``decode_rows`` checks it (and
    cached), without decoding any row (``rows`` is empty): what the appender needs when the JVM decoded
    the rows. RowDecodeError as ``decode_rows`` raises it."""
    try:
        return _decode(event, with_rows=False)
    except RowDecodeError:
        raise
    except Exception as err:
        msg = f"{_where(event)}: table map does not decode: {err}"
        raise RowDecodeError(msg, event) from err


def _decode(event: RawEvent, with_rows: bool = True) -> DecodedRows:
    header = event.header
    if event.kind != "rows" or event.chunk is not None:
        msg = f"{_where(event)}: not a whole rows record (kind {event.kind!r}, chunk {event.chunk})"
        raise RowDecodeError(msg, event)
    if header.event_type not in _ROWS_EVENTS:
        msg = f"{_where(event)}: binlog event type {header.event_type} is not a rows event DBus decodes"
        raise RowDecodeError(msg, event)
    crc, control = bool(header.crc), _Control(_flavor(header))
    tm_data, rows_data = event.table_map_bytes(), event.rows_event_bytes()
    _check_event(tm_data, crc, BINLOG.TABLE_MAP_EVENT, f"table map ({header.tm_len} bytes by tm_len)")
    _check_event(rows_data, crc, header.event_type, "rows event")
    table = _cached_table(str(header.file), tm_data, crc, control, header_types(header))
    if (table.schema, table.table) != (header.schema, header.table):
        msg = f"{_where(event)}: the table map describes {table.schema}.{table.table}"
        raise RowDecodeError(msg, event)
    if not with_rows:
        op, _ = _ROWS_EVENTS[header.event_type]
        return DecodedRows(table.schema, table.table, op, table.columns, table.primary_key, ())
    op, rows = _read_rows(rows_data, crc, control, table)
    return DecodedRows(table.schema, table.table, op, table.columns, table.primary_key, rows)


def _read_rows(data: bytes, crc: bool, control: _Control, table: _Table) -> tuple[str, tuple[RowImage, ...]]:
    wrapper = _wrap(data, crc, control)
    op, event_class = _ROWS_EVENTS[wrapper.event_type]
    size = _body_size(wrapper, crc)
    event = event_class(
        wrapper, size, {table.table_id: table.library_table}, control, use_checksum=crc, **_EVENT_OPTIONS
    )
    if not event._processed:
        msg = f"rows event is for table id {event.table_id}, the table map for id {table.table_id}"
        raise ValueError(msg)
    event.dbus_columns = table.readers
    rows = event.rows
    if wrapper.read_bytes != size:
        msg = f"rows event: {len(rows)} rows took {wrapper.read_bytes} bytes of a {size}-byte body"
        raise ValueError(msg)
    if op == "u":
        return op, tuple(RowImage(r["before_values"], r["after_values"]) for r in rows)
    return op, tuple(RowImage(None, r["values"]) if op == "i" else RowImage(r["values"], None) for r in rows)
