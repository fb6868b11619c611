"""A faster rows-event decoder with per-table compiled layouts (prototype A of docs/decoder-choice.md).

The appender decodes with it; measured by ``bench/decoder_spike.py``, compared in docs/decoder-choice.md.

The table map is parsed once by ``binlog.rows`` (same cache, same checks, same ``ColumnSpec``s and
primary key). From its columns a per-table row reader is *generated as Python source* and compiled once:

- a fast path for row images whose null bitmap is all zero: runs of fixed-width little-endian columns
  (TINYINT/SMALLINT/INT/BIGINT, FLOAT, DOUBLE) are read with one precompiled ``struct.unpack_from``;
  the other columns are inlined (length-prefixed strings sliced and decoded, DECIMAL/DATETIME/TIMESTAMP/
  DATE unpacked with straight-line integer arithmetic);
- a general path (some column NULL) with the same inlined code, each column guarded by its null bit;
- any other column type (ENUM, SET, BIT, TIME, YEAR, JSON, GEOMETRY, pre-5.6 temporals, a charset Python
  has no codec for) calls ``rowdecode``'s own reader for that one column.

Values are exactly those of ``rowdecode.decode_rows`` (tests/unit/test_fastdecode.py checks equality),
including zero dates as text, TIMESTAMP as aware UTC, FLOAT as the shortest float32 repr.
Rows come back as tuples in table-map column order (``FastRows.before`` / ``after``), which transpose to
column lists (``columns_of``) for pyarrow. Row images that leave columns out (``binlog_row_image`` MINIMAL/
NOBLOB) are not handled here: such events go to ``rowdecode`` whole (``decode_fast`` does it).
"""

from __future__ import annotations

import codecs
import struct
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any

from pymysqlreplication.constants import BINLOG, FIELD_TYPE
from pymysqlreplication.row_event import RowsEvent

from binlog import rows as rowdecode
from binlog.rawevent import RawEvent
from binlog.rows import DecodedRows, RowDecodeError, RowImage
from ums.scalars import float32_repr
from ums.types import ColumnSpec, UmsType
from ums.values import encode_column

_HEADER_LEN, _CRC_LEN = 19, 4
_OPS = {
    BINLOG.WRITE_ROWS_EVENT_V1: ("i", 1),
    BINLOG.WRITE_ROWS_EVENT_V2: ("i", 2),
    BINLOG.UPDATE_ROWS_EVENT_V1: ("u", 1),
    BINLOG.UPDATE_ROWS_EVENT_V2: ("u", 2),
    BINLOG.DELETE_ROWS_EVENT_V1: ("d", 1),
    BINLOG.DELETE_ROWS_EVENT_V2: ("d", 2),
}
_FIXED = {FIELD_TYPE.TINY: "bB", FIELD_TYPE.SHORT: "hH", FIELD_TYPE.LONG: "iI", FIELD_TYPE.LONGLONG: "qQ"}
_DIG2BYTES = (0, 1, 1, 2, 2, 3, 3, 4, 4, 4)
_STRINGS = (FIELD_TYPE.VARCHAR, FIELD_TYPE.VAR_STRING, FIELD_TYPE.STRING, FIELD_TYPE.BLOB)


@dataclass(frozen=True)
class FastRows:
    """The rows of one rows event as tuples in column order; ``before``/``after`` None when not in the op."""

    schema: str
    table: str
    op: str
    columns: tuple[ColumnSpec, ...]
    primary_key: tuple[str, ...]
    before: list[tuple[Any, ...]] | None
    after: list[tuple[Any, ...]] | None

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)


def columns_of(rows: list[tuple[Any, ...]], width: int) -> list[tuple[Any, ...]]:
    """Row tuples transposed into one sequence per column (what ``pyarrow.array`` takes)."""
    return list(zip(*rows, strict=True)) if rows else [()] * width


# ---------------------------------------------------------------- code generation per column


def _utc(seconds: int, micros: int, fsp: int) -> datetime | str:
    return rowdecode._utc(seconds, micros, fsp)


def _wall(y: int, mo: int, d: int, h: int, mi: int, s: int, us: int, fsp: int) -> datetime | str:
    try:
        return datetime(y, mo, d, h, mi, s, us)  # noqa: DTZ001 - DATETIME is a wall clock
    except ValueError:
        return rowdecode._zero_text(y, mo, d, (h, mi, s), us, fsp)


def _date(v: int) -> date | str:
    y, mo, d = v >> 9, (v >> 5) & 0xF, v & 0x1F
    try:
        return date(y, mo, d)
    except ValueError:
        return rowdecode._zero_text(y, mo, d, None, 0, 0)


class _Gen:
    """Builds the source of one table's row-image reader."""

    def __init__(self) -> None:
        self.env: dict[str, Any] = {
            "_from": int.from_bytes,
            "_Decimal": Decimal,
            "_datetime": datetime,
            "_wall": _wall,
            "_date": _date,
            "_date_cls": date,
            "_utc": _utc,
            "_f32": float32_repr,
            "_Packet": rowdecode._Packet,
            "_EPOCH": datetime(1970, 1, 1, tzinfo=UTC),
            "_td": timedelta,
        }
        self.n = 0

    def name(self, prefix: str, value: Any) -> str:
        self.n += 1
        key = f"_{prefix}{self.n}"
        self.env[key] = value
        return key


def _fixed_code(c: Any) -> str | None:
    """struct code of a fixed-width little-endian column, or None."""
    if c.type in _FIXED:
        return _FIXED[c.type][1 if c.unsigned else 0]
    if c.type == FIELD_TYPE.DOUBLE:
        return "d"
    if c.type == FIELD_TYPE.FLOAT:
        return "f"
    return None


def _string_encoding(c: Any) -> str | None:
    """The Python codec of a text column, '' for binary, None when rowdecode must read it."""
    if c.character_set_name == "binary":
        return ""
    encoding = RowsEvent.charset_to_encoding(c.character_set_name or "utf8mb4")
    try:
        codecs.lookup(encoding)
    except LookupError:
        return None
    return encoding


def _column_code(g: _Gen, c: Any, v: str, spec: ColumnSpec | None = None, reader: Any = None) -> list[str]:
    """Lines that read column ``c`` into ``v``: rowdecode's value, or with ``spec`` UMS's JSON value;
    ``reader`` (an INET4/INET6/UUID column's text reader) reads it instead when given: text either way."""
    if reader is not None:
        r = g.name("R", reader)
        return ["_p = _Packet(b); _p._position = o", f"{v} = {r}(_p); o = _p._position"]
    if spec is None:
        return _value_code(g, c, v)
    text = _ums_code(g, c, v, spec)
    if text is not None:
        return text
    enc = g.name("E", lambda value, spec=spec: encode_column(spec, value))
    return [*_value_code(g, c, v), f"{v} = {enc}({v})"]


def _ums_code(g: _Gen, c: Any, v: str, spec: ColumnSpec) -> list[str] | None:
    """Lines that read column ``c`` straight into its UMS JSON value (ums.values), or None."""
    t = c.type
    code = _fixed_code(c)
    if code is not None and code not in "fd":
        lines = _value_code(g, c, v)
        return [*lines, f"{v} = str({v})"] if spec.ums_type == UmsType.LONG else lines
    if t == FIELD_TYPE.NEWDECIMAL:
        lines = _decimal_code(c, v)[:-1]
        scale = c.decimals
        if scale:
            lines += [
                f"_t = '%0{scale + 1}d' % _u",
                f"{v} = ('-' if _neg else '') + _t[:-{scale}] + '.' + _t[-{scale}:]",
            ]
        else:
            lines += [f"{v} = ('-%d' if _neg else '%d') % _u"]
        return lines
    if t == FIELD_TYPE.DATETIME2:
        fsize, fsp = (c.fsp + 1) // 2, c.fsp
        lines = [
            "_x = _from(b[o:o + 5], 'big') - 0x8000000000; o += 5",
            "_ymd = _x >> 17; _hms = _x & 0x1FFFF; _y, _mo = divmod(_ymd >> 5, 13)",
        ]
        clock = (
            "'%04d-%02d-%02d %02d:%02d:%02d' % "
            "(_y, _mo, _ymd & 0x1F, _hms >> 12, (_hms >> 6) & 0x3F, _hms & 0x3F)"
        )
        if fsize:
            lines.append(f"_us = _from(b[o:o + {fsize}], 'big') * {10 ** (6 - 2 * fsize)}; o += {fsize}")
            lines.append(f"{v} = {clock} + ('.%06d' % _us)[:{fsp + 1}]")
        else:
            lines.append(f"{v} = {clock}")
        return lines
    if t in (FIELD_TYPE.DATE, FIELD_TYPE.NEWDATE):
        return [
            "_x = _from(b[o:o + 3], 'little'); o += 3",
            f"{v} = '%04d-%02d-%02d' % (_x >> 9, (_x >> 5) & 0xF, _x & 0x1F)",
        ]
    if t in _STRINGS and _string_encoding(c):
        return _value_code(g, c, v)
    return None


def _value_code(g: _Gen, c: Any, v: str) -> list[str]:
    """Lines that read column ``c`` at offset ``o`` of ``b`` into variable ``v`` and advance ``o``."""
    t = c.type
    code = _fixed_code(c)
    if code is not None:
        s = g.name("S", struct.Struct("<" + code))
        lines = [f"{v}, = {s}.unpack_from(b, o); o += {struct.calcsize('<' + code)}"]
        if code == "f":
            lines.append(f"{v} = _f32({v})")
        return lines
    if t == FIELD_TYPE.INT24:
        return [f"{v} = _from(b[o:o + 3], 'little', signed={not c.unsigned}); o += 3"]
    if t == FIELD_TYPE.NEWDECIMAL:
        return _decimal_code(c, v)
    if t == FIELD_TYPE.DATETIME2:
        fsize = (c.fsp + 1) // 2
        lines = ["_x = _from(b[o:o + 5], 'big') - 0x8000000000; o += 5"]
        if fsize:
            lines.append(f"_us = _from(b[o:o + {fsize}], 'big') * {10 ** (6 - 2 * fsize)}; o += {fsize}")
        else:
            lines.append("_us = 0")
        lines += [
            "_ymd = _x >> 17; _hms = _x & 0x1FFFF; _y, _mo = divmod(_ymd >> 5, 13)",
            f"try: {v} = _datetime(_y, _mo, _ymd & 0x1F, _hms >> 12, (_hms >> 6) & 0x3F, _hms & 0x3F, _us)",
            f"except ValueError: {v} = _wall(_y, _mo, _ymd & 0x1F, _hms >> 12, (_hms >> 6) & 0x3F, "
            f"_hms & 0x3F, _us, {c.fsp})",
        ]
        return lines
    if t == FIELD_TYPE.TIMESTAMP2:
        fsize = (c.fsp + 1) // 2
        lines = ["_x = _from(b[o:o + 4], 'big'); o += 4"]
        if fsize:
            lines.append(f"_us = _from(b[o:o + {fsize}], 'big') * {10 ** (6 - 2 * fsize)}; o += {fsize}")
        else:
            lines.append("_us = 0")
        lines.append(f"{v} = _EPOCH + _td(seconds=_x, microseconds=_us) if _x else _utc(0, 0, {c.fsp})")
        return lines
    if t in (FIELD_TYPE.DATE, FIELD_TYPE.NEWDATE):
        return [f"{v} = _date(_from(b[o:o + 3], 'little')); o += 3"]
    if t in (FIELD_TYPE.VARCHAR, FIELD_TYPE.VAR_STRING, FIELD_TYPE.STRING, FIELD_TYPE.BLOB):
        encoding = _string_encoding(c)
        if encoding is not None:
            size = rowdecode._length_size(c)
            head = "_n = b[o]; o += 1" if size == 1 else f"_n = _from(b[o:o + {size}], 'little'); o += {size}"
            if encoding == "":
                pad = c.max_length if t == FIELD_TYPE.STRING else 0
                tail = f".ljust({pad}, b'\\x00')" if pad else ""
                return [head, f"{v} = b[o:o + _n]{tail}; o += _n"]
            return [head, f"{v} = b[o:o + _n].decode({encoding!r}); o += _n"]
    # anything else: rowdecode's reader for this one column
    reader = g.name("R", rowdecode._READERS[t](c))
    return ["_p = _Packet(b); _p._position = o", f"{v} = {reader}(_p); o = _p._position"]


def _decimal_code(c: Any, v: str) -> list[str]:
    whole, scale = c.precision - c.decimals, c.decimals
    groups = (
        [(_DIG2BYTES[whole % 9], whole % 9)]
        + [(4, 9)] * (whole // 9)
        + [(4, 9)] * (scale // 9)
        + [(_DIG2BYTES[scale % 9], scale % 9)]
    )
    groups = [(size, 10**digits) for size, digits in groups if size]
    size = sum(s for s, _ in groups)
    top, ones = 1 << (8 * size - 1), (1 << (8 * size)) - 1
    lines = [
        f"_x = _from(b[o:o + {size}], 'big') ^ {top}; o += {size}",
        f"_neg = _x & {top}",
        f"if _neg: _x ^= {ones}",
    ]
    shift, expr = 8 * size, None
    for gsize, base in groups:
        shift -= 8 * gsize
        part = f"(_x >> {shift} & {(1 << (8 * gsize)) - 1})" if shift else f"(_x & {(1 << (8 * gsize)) - 1})"
        expr = part if expr is None else f"({expr}) * {base} + {part}"
    suffix = f"E-{scale}" if scale else ""
    lines.append(f"_u = {expr}")
    lines.append(f"{v} = _Decimal(('-%d{suffix}' if _neg else '%d{suffix}') % _u)")
    return lines


def _compile_image(
    columns: list[Any], specs: tuple[ColumnSpec, ...] | None = None, texts: dict[int, Any] | None = None
) -> Any:
    """``read(b, o) -> (values, o)``: one full row image (null bitmap, then every column); with ``specs``
    the values are UMS JSON values (``ums.values.encode_column`` of rowdecode's values). ``texts`` maps
    a column's index to rowdecode's text reader for INET4/INET6/UUID columns (a str in both forms)."""
    spec_of = (lambda k: specs[k]) if specs is not None else (lambda k: None)
    texts = texts or {}
    g = _Gen()
    n = len(columns)
    nbytes = (n + 7) // 8
    names = [f"v{i}" for i in range(n)]
    src = ["def read(b, o):"]
    src.append("    nb = b[o]" if nbytes == 1 else f"    nb = _from(b[o:o + {nbytes}], 'little')")
    src.append(f"    o += {nbytes}")
    src.append("    if not nb:")
    i = 0
    while i < n:  # fast path: merge runs of fixed-width columns into one unpack
        j = i
        codes = ""
        while j < n and _fixed_code(columns[j]) is not None:
            codes += _fixed_code(columns[j])
            j += 1
        if j - i >= 2:
            s = g.name("S", struct.Struct("<" + codes))
            size = struct.calcsize("<" + codes)
            src.append(f"        {', '.join(names[i:j])}, = {s}.unpack_from(b, o); o += {size}")
            src += [
                f"        {names[k]} = _f32({names[k]})"
                for k in range(i, j)
                if columns[k].type == FIELD_TYPE.FLOAT
            ]
            src += [
                f"        {names[k]} = str({names[k]})"
                for k in range(i, j)
                if specs is not None and specs[k].ums_type == UmsType.LONG
            ]
            i = j
            continue
        src += ["        " + line for line in _column_code(g, columns[i], names[i], spec_of(i), texts.get(i))]
        i += 1
    src.append(f"        return ({', '.join(names)},), o")
    for k, c in enumerate(columns):  # general path: each column behind its null bit
        src.append(f"    if nb & {1 << k}: {names[k]} = None")
        src.append("    else:")
        src += ["        " + line for line in _column_code(g, c, names[k], spec_of(k), texts.get(k))]
    src.append(f"    return ({', '.join(names)},), o")
    text = "\n".join(src)
    namespace = dict(g.env)
    exec(compile(text, "<fastdecode>", "exec"), namespace)
    read = namespace["read"]
    read.source = text
    return read


@dataclass(frozen=True)
class _Layout:
    table: Any  # rowdecode._Table
    width: int
    full_bitmap: bytes
    read: Any  # rowdecode's values
    read_ums: Any  # UMS JSON values


_LAYOUTS: dict[int, _Layout] = {}


def _layout(table: Any) -> _Layout:
    layout = _LAYOUTS.get(id(table))
    if layout is None or layout.table is not table:
        columns = table.library_table.columns
        n = len(columns)
        full = bytes(((1 << n) - 1 >> 8 * k) & 0xFF for k in range((n + 7) // 8))
        texts = {k: table.readers[k][1] for k in table.texts}
        layout = _Layout(
            table,
            n,
            full,
            _compile_image(columns, None, texts),
            _compile_image(columns, table.columns, texts),
        )
        if len(_LAYOUTS) >= 1024:
            _LAYOUTS.clear()
        _LAYOUTS[id(table)] = layout
    return layout


# ---------------------------------------------------------------- decoding a record


class _NotFull(Exception):
    """The row image leaves columns out: rowdecode decodes this event."""


def _packed_int(b: bytes, o: int) -> tuple[int, int]:
    first = b[o]
    if first < 251:
        return first, o + 1
    size = {252: 2, 253: 3, 254: 8}[first]
    return int.from_bytes(b[o + 1 : o + 1 + size], "little"), o + 1 + size


def decode_fast(event: RawEvent, *, ums: bool = False) -> FastRows:
    """The rows of a ``rows`` record as tuples; RowDecodeError as ``rowdecode.decode_rows`` raises it.

    With ``ums`` the values are already UMS JSON values (``ums.values.encode_column`` of what rowdecode
    gives): BIGINT and DECIMAL as strings, DATETIME/DATE as UMS's text, ready for ``json.dumps``.
    """
    try:
        return _decode(event, ums)
    except RowDecodeError:
        raise
    except _NotFull:
        return _from_rowdecode(rowdecode.decode_rows(event), ums)
    except Exception as err:
        msg = f"{rowdecode._where(event)}: rows event does not decode: {err}"
        raise RowDecodeError(msg, event) from err


def _from_rowdecode(d: DecodedRows, ums: bool = False) -> FastRows:
    def row(image: dict[str, Any]) -> tuple[Any, ...]:
        if ums:
            return tuple(encode_column(c, image.get(c.name)) for c in d.columns)
        return tuple(image.get(c.name) for c in d.columns)

    before = [row(r.before) for r in d.rows] if d.op != "i" else None
    after = [row(r.after) for r in d.rows] if d.op != "d" else None
    return FastRows(d.schema, d.table, d.op, d.columns, d.primary_key, before, after)


def rows_op(event_type: int) -> str:
    """``i``/``u``/``d`` of a binlog rows event type code (write/update/delete, v1 or v2)."""
    return _OPS[event_type][0]


def table_of(event: RawEvent) -> TableShape:
    """The table a whole ``rows`` record describes (its table map parsed once, cached), without
    decoding any row: what the appender needs when the rows were decoded elsewhere (the JVM)."""
    try:
        table = _checked_table(event)
    except RowDecodeError:
        raise
    except Exception as err:
        msg = f"{rowdecode._where(event)}: table map does not decode: {err}"
        raise RowDecodeError(msg, event) from err
    return TableShape(table.schema, table.table, table.columns, table.primary_key)


@dataclass(frozen=True)
class TableShape:
    schema: str
    table: str
    columns: tuple[ColumnSpec, ...]
    primary_key: tuple[str, ...]


def _checked_table(event: RawEvent) -> Any:
    header = event.header
    crc = bool(header["crc"])
    tm_data, data = event.table_map_bytes(), event.rows_event_bytes()
    what = f"table map ({header['tm_len']} bytes by tm_len)"
    rowdecode._check_event(tm_data, crc, BINLOG.TABLE_MAP_EVENT, what)
    rowdecode._check_event(data, crc, header["event_type"], "rows event")
    control = rowdecode._Control(rowdecode._flavor(header))
    types = rowdecode.header_types(header)
    table = rowdecode._cached_table(str(header["file"]), tm_data, crc, control, types)
    if (table.schema, table.table) != (header["schema"], header["table"]):
        msg = f"{rowdecode._where(event)}: the table map describes {table.schema}.{table.table}"
        raise RowDecodeError(msg, event)
    return table


def _decode(event: RawEvent, ums: bool) -> FastRows:
    header = event.header
    if event.kind != "rows" or event.chunk is not None or header["event_type"] not in _OPS:
        return _from_rowdecode(rowdecode.decode_rows(event), ums)  # raises the same errors
    crc = bool(header["crc"])
    data = event.rows_event_bytes()
    table = _checked_table(event)
    layout = _layout(table)
    op, version = _OPS[header["event_type"]]
    o = _HEADER_LEN
    table_id = int.from_bytes(data[o : o + 6], "little")
    if table_id != table.table_id:
        msg = f"rows event is for table id {table_id}, the table map for id {table.table_id}"
        raise ValueError(msg)
    o += 8  # table id, flags
    if version == 2:
        o += int.from_bytes(data[o : o + 2], "little")  # extra data, its length counting itself
    width, o = _packed_int(data, o)
    if width != layout.width:
        msg = f"rows event has {width} columns, the table map {layout.width}"
        raise ValueError(msg)
    nb = (width + 7) // 8
    if data[o : o + nb] != layout.full_bitmap:
        raise _NotFull
    o += nb
    if op == "u":
        if data[o : o + nb] != layout.full_bitmap:
            raise _NotFull
        o += nb
    end = len(data) - (_CRC_LEN if crc else 0)
    read = layout.read_ums if ums else layout.read
    if op == "u":
        before, after = [], []
        while o < end:
            row, o = read(data, o)
            before.append(row)
            row, o = read(data, o)
            after.append(row)
    else:
        rows = []
        while o < end:
            row, o = read(data, o)
            rows.append(row)
        before, after = (None, rows) if op == "i" else (rows, None)
    if o != end:
        msg = f"rows event: rows took {o - _HEADER_LEN} bytes of a {end - _HEADER_LEN}-byte body"
        raise ValueError(msg)
    return FastRows(table.schema, table.table, op, table.columns, table.primary_key, before, after)


def as_decoded_rows(fast: FastRows) -> DecodedRows:
    """The same rows in ``rowdecode``'s form (dicts per image), for comparing the two decoders."""
    names = fast.names
    if fast.op == "u":
        images = tuple(
            RowImage(dict(zip(names, b, strict=True)), dict(zip(names, a, strict=True)))
            for b, a in zip(fast.before, fast.after, strict=True)
        )
    elif fast.op == "i":
        images = tuple(RowImage(None, dict(zip(names, a, strict=True))) for a in fast.after)
    else:
        images = tuple(RowImage(dict(zip(names, b, strict=True)), None) for b in fast.before)
    return DecodedRows(fast.schema, fast.table, fast.op, fast.columns, fast.primary_key, images)
