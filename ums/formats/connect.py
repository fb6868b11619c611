"""Kafka Connect schemas of a table version, as Debezium's MySQL connector (3.6) makes them, and the
conversion of UMS wire values to Connect values and back (docs/formats.md, "Type mapping").

``connect_table(shape, options)`` builds, once per ``TableShape``, everything the per-row formats need:
the key struct (``<ds>.<schema>.<table>.Key``, None without a primary key), the value struct (``...Value``),
the envelope (``...Envelope``: before, after, source, op, ts_ms, ts_us, ts_ns, transaction) in Kafka
Connect's JsonConverter form, and one converter per column each way. Schemas are plain dicts in the key
order JsonConverter writes (type, fields, optional, name, version, doc, parameters, default, field).

Connect values of ``bytes`` schemas are Python ``bytes`` here; the JSON edge (ums/formats/debezium.py)
writes them in Base64 as JsonConverter does, the Avro edge (ums/formats/avro.py) raw.

Examples (default options): ``int(10) unsigned`` -> ``{"type":"int64"}``, ``decimal(10,2)`` ->
``{"type":"bytes","name":"org.apache.kafka.connect.data.Decimal","version":1,"parameters":{"scale":"2",
"connect.decimal.precision":"10"}}``, ``datetime(6)`` -> ``io.debezium.time.MicroTimestamp`` (int64 µs),
a zero date ``"0000-00-00"`` -> null (Debezium's behaviour; the epoch for a NOT NULL column).
"""

from __future__ import annotations

import base64
import binascii
import re
import struct
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any

import orjson

from ums.formats import FormatOptions
from ums.message import UmsField
from ums.rowchange import TableShape
from ums.scalars import float32_repr, format_time, fraction, parse_time
from ums.types import ColumnSpec, UmsType, fsp_for, parse_column_type, set_members, ums_type_for

Schema = dict[str, Any]
Convert = Callable[[Any], Any]

SOURCE_TYPE = "__debezium.source.column.type"
SOURCE_LENGTH = "__debezium.source.column.length"
SOURCE_SCALE = "__debezium.source.column.scale"
SOURCE_NAME = "__debezium.source.column.name"
DBUS_TYPE = "__dbus.column.type"  # the full COLUMN_TYPE: decoders rebuild the exact ColumnSpec
DBUS_FIELD = "__dbus.field.type"  # a masked (encoded) field: its UMS type and nullability
DBUS_NULLABLE = "__dbus.field.nullable"
DBUS_BINARY = "__dbus.binary.mode"  # a binary column written as text: base64, base64-url-safe or hex

DECIMAL = "org.apache.kafka.connect.data.Decimal"
SNAPSHOT_ALLOWED = "true,first,first_in_data_collection,last_in_data_collection,last,false,incremental"
ENVELOPE_VERSION = 2  # io.debezium.data.Envelope.SCHEMA_VERSION

_EPOCH = datetime(1970, 1, 1)  # noqa: DTZ001 - DATETIME values are naive wall clocks, read as UTC
_EPOCH_ORDINAL = date(1970, 1, 1).toordinal()
_US = timedelta(microseconds=1)
_TWO64 = 1 << 64
_GEOMETRY = frozenset(
    {"geometry", "linestring", "polygon", "multipoint", "multilinestring", "multipolygon",
     "geometrycollection", "geomcollection"}
)  # fmt: skip
_NAME_CHAR = re.compile(r"[^A-Za-z0-9_.]")
_FIELD_CHAR = re.compile(r"[^A-Za-z0-9_]")


def avro_fullname(name: str) -> str:
    """A Connect schema name as Debezium's ``schema.name.adjustment.mode=avro`` adjusts it: every
    character but letters, digits, ``_`` and ``.`` becomes ``_``, and a first character that is not a
    letter or ``_`` too: ``demo.shop-1.orders.Value`` -> ``demo.shop_1.orders.Value``."""
    out = _NAME_CHAR.sub("_", name)
    return out if out[:1].isalpha() and out[:1].isascii() or out[:1] == "_" else "_" + out[1:]


def avro_field_name(name: str) -> str:
    """A column name as a valid Avro field name (Debezium's ``field.name.adjustment.mode=avro``)."""
    out = _FIELD_CHAR.sub("_", name)
    return out if out[:1].isalpha() and out[:1].isascii() or out[:1] == "_" else "_" + out[1:]


def _schema(
    kind: str,
    optional: bool,
    name: str | None = None,
    version: int | None = None,
    parameters: dict[str, str] | None = None,
    fields: list[Schema] | None = None,
    doc: str | None = None,
    default: Any = None,
) -> Schema:
    """A Connect schema in JsonConverter's key order."""
    out: Schema = {"type": kind}
    if fields is not None:
        out["fields"] = fields
    out["optional"] = optional
    if name is not None:
        out["name"] = name
    if version is not None:
        out["version"] = version
    if doc is not None:
        out["doc"] = doc
    if parameters:
        out["parameters"] = parameters
    if default is not None:
        out["default"] = default
    return out


def _field(name: str, schema: Schema) -> Schema:
    return {**schema, "field": name}


# --- values -------------------------------------------------------------------------------------------


def unscaled_bytes(number: int) -> bytes:
    """Two's-complement big-endian, minimal length: Java's ``BigInteger.toByteArray``."""
    size = ((number if number >= 0 else ~number).bit_length() + 8) // 8
    return number.to_bytes(size, "big", signed=True)


def _unscaled(text: str, scale: int) -> int:
    whole, _, frac = text.partition(".")
    if len(frac) == scale:
        return int(whole + frac)
    if len(frac) < scale:
        return int(whole + frac.ljust(scale, "0"))
    if frac[scale:].strip("0"):
        msg = f"decimal {text!r}: more than {scale} fractional digits"
        raise ValueError(msg)
    return int(whole + frac[:scale])


def scaled_text(unscaled: int, scale: int) -> str:
    """Unscaled integer and scale -> the exact UMS decimal text: ``(50, 2)`` -> ``"0.50"``."""
    if scale <= 0:
        return str(unscaled * 10**-scale)
    digits = str(abs(unscaled)).rjust(scale + 1, "0")
    sign = "-" if unscaled < 0 else ""
    return f"{sign}{digits[:-scale]}.{digits[-scale:]}"


def _decimal_bytes(scale: int) -> Convert:
    """DECIMAL text -> Connect Decimal's bytes (``unscaled_bytes`` of ``_unscaled``, in one call)."""

    def convert(text: str) -> bytes:
        whole, _, frac = text.partition(".")
        n = int(whole + frac) if len(frac) == scale else _unscaled(text, scale)
        return n.to_bytes(((n if n >= 0 else ~n).bit_length() + 8) // 8, "big", signed=True)

    return convert


def decimal_base64(scale: int) -> Convert:
    """DECIMAL text -> its Connect Decimal bytes in Base64, as JsonConverter writes them (one call)."""

    def convert(text: str) -> str:
        whole, _, frac = text.partition(".")
        n = int(whole + frac) if len(frac) == scale else _unscaled(text, scale)
        raw = n.to_bytes(((n if n >= 0 else ~n).bit_length() + 8) // 8, "big", signed=True)
        return binascii.b2a_base64(raw, newline=False).decode("ascii")

    return convert


def _days(text: str) -> int | None:
    try:
        return date.fromisoformat(text).toordinal() - _EPOCH_ORDINAL
    except ValueError:
        return None  # a zero or invalid date ("0000-00-00", "2024-00-15")


def _micros(text: str) -> int | None:
    try:
        return (datetime.fromisoformat(text) - _EPOCH) // _US
    except ValueError:
        return None


_MS = timedelta(milliseconds=1)


def _millis(text: str) -> int | None:
    """DATETIME text -> ms since the epoch (``_micros`` // 1000), None for a zero or invalid one."""
    try:
        return (datetime.fromisoformat(text) - _EPOCH) // _MS
    except ValueError:
        return None


def _datetime_text(micros: int, fsp: int | None) -> str:
    wall = _EPOCH + timedelta(microseconds=micros)
    return f"{wall.date().isoformat()} {wall:%H:%M:%S}{fraction(wall.microsecond, fsp)}"


def _zoned(fsp: int) -> Convert:
    def convert(text: str) -> str | None:
        try:
            wall = datetime.fromisoformat(text)
        except ValueError:
            return None
        return f"{wall.date().isoformat()}T{wall:%H:%M:%S}{fraction(wall.microsecond, fsp or None)}Z"

    return convert


def _unzoned(fsp: int | None) -> Convert:
    def convert(text: str) -> str:
        moment = datetime.fromisoformat(text).astimezone(UTC).replace(tzinfo=None)
        return f"{moment.date().isoformat()} {moment:%H:%M:%S}{fraction(moment.microsecond, fsp)}"

    return convert


def _bytes_to_text(mode: str) -> tuple[Convert, Convert]:
    """binary_handling_mode: raw bytes -> the string Debezium writes, and back."""
    if mode == "hex":
        return bytes.hex, bytes.fromhex
    if mode == "base64-url-safe":
        return (lambda b: base64.urlsafe_b64encode(b).decode("ascii")), base64.urlsafe_b64decode
    return (lambda b: base64.b64encode(b).decode("ascii")), base64.b64decode


def _b64(value: str) -> bytes:
    return base64.b64decode(value)


def _to_b64(value: bytes) -> str:
    return base64.b64encode(value).decode("ascii")


# --- one column ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ConnectColumn:
    """One column of the value struct: its Connect field name (``name``, valid in Avro), the UMS field it
    carries, its Connect schema (without ``field``), and the converters UMS wire value <-> Connect value
    (never called with None). ``binary``: the Connect value is bytes (or a geometry struct holding bytes),
    so JSON writes it in Base64."""

    name: str
    field: UmsField
    column: ColumnSpec
    schema: Schema
    to_connect: Convert
    from_connect: Convert
    binary: str = ""  # "", "bytes" or "struct"
    fallback: Any = None  # the value of a NOT NULL column whose value Debezium cannot represent


def _source_parameters(column: ColumnSpec) -> dict[str, str]:
    parsed = parse_column_type(column.column_type)
    flags = column.column_type.lower().split(")")[-1].split()
    type_name = parsed.base.upper()
    for flag in ("unsigned", "zerofill"):
        if flag in flags:
            type_name += " " + flag.upper()
    params = {SOURCE_TYPE: type_name}
    if parsed.base not in ("enum", "set") and parsed.args:
        parts = [p.strip() for p in parsed.args.split(",")]
        if parts[0].isdigit():
            params[SOURCE_LENGTH] = parts[0]
        if len(parts) > 1 and parts[1].isdigit():
            params[SOURCE_SCALE] = parts[1]
    params[SOURCE_NAME] = column.name
    params[DBUS_TYPE] = column.column_type
    return params


def _decimal_args(column_type: str, default: tuple[int, int] = (10, 0)) -> tuple[int, int]:
    args = [a.strip() for a in parse_column_type(column_type).args.split(",") if a.strip()]
    precision = int(args[0]) if args else default[0]
    scale = int(args[1]) if len(args) > 1 else 0
    return precision, scale


def connect_column(column: ColumnSpec, field: UmsField, options: FormatOptions) -> ConnectColumn:
    """The Connect schema and converters of one column (Debezium 3.6's MySQL default mapping)."""
    name = avro_field_name(field.name)
    optional = field.nullable
    if field.encoded:
        params = {DBUS_FIELD: field.type.value, DBUS_NULLABLE: str(field.nullable).lower()}
        if options.propagate_source_types:
            params = {**_source_parameters(column), **params}
        back: Convert = _ident if field.type in _TEXT_TYPES else orjson.loads
        schema = _schema("string", True, parameters=params)
        return ConnectColumn(name, field, column, schema, _masked_text, back)
    kind, logical, version, params, to, back, binary, fallback = _mapping(column, options)
    if options.propagate_source_types:
        params = {**params, **_source_parameters(column)}
    schema = _schema(kind, optional, logical, version, params, fields=_GEOMETRY_FIELDS.get(logical or ""))
    return ConnectColumn(name, field, column, schema, to, back, binary, None if optional else fallback)


_POINT = "io.debezium.data.geometry.Point"
_GEOM = "io.debezium.data.geometry.Geometry"
_GEOMETRY_FIELDS: dict[str, list[Schema]] = {
    _GEOM: [
        _field("wkb", _schema("bytes", False)),
        _field("srid", _schema("int32", True)),
    ],  # fmt: skip
    _POINT: [
        _field("x", _schema("double", False)),
        _field("y", _schema("double", False)),
        _field("wkb", _schema("bytes", True)),
        _field("srid", _schema("int32", True)),
    ],
}


def _ident(value: Any) -> Any:
    return value


identity = _ident  # the converter of a column whose UMS value is its Connect value


# UMS types whose wire value is a string already; a masked field of another type is written as JSON text
_TEXT_TYPES = frozenset({UmsType.STRING, UmsType.LONG, UmsType.DECIMAL, UmsType.DATE, UmsType.DATETIME,
                         UmsType.BINARY, UmsType.JSONOBJECT, UmsType.RAW})  # fmt: skip


def _masked_text(value: Any) -> str:
    return value if isinstance(value, str) else orjson.dumps(value).decode()


_Mapping = tuple[str, str | None, int | None, dict[str, str], Convert, Convert, str, Any]


def _mapping(column: ColumnSpec, options: FormatOptions) -> _Mapping:
    """(Connect type, logical name, version, parameters, to, back, binary, NOT NULL fallback)."""
    parsed = parse_column_type(column.column_type)
    base, unsigned = parsed.base, parsed.unsigned
    ums = ums_type_for(column.column_type)
    as_long: Convert = (lambda v: int(v)) if ums is UmsType.LONG else _ident
    back_long: Convert = str if ums is UmsType.LONG else _ident
    connect_time = options.time_precision_mode == "connect"
    if base in ("bool", "boolean"):
        return "boolean", None, None, {}, bool, int, "", False
    if base == "bit":
        width = int(parsed.args or "1")
        if width == 1:
            return "boolean", None, None, {}, bool, int, "", False
        size = (width + 7) // 8
        back_bits: Convert = (lambda b: int.from_bytes(b, "little")) if ums is UmsType.INT else (
            lambda b: str(int.from_bytes(b, "little")))  # fmt: skip
        return ("bytes", "io.debezium.data.Bits", 1, {"length": str(width)},
                lambda v: int(v).to_bytes(size, "little"), back_bits, "bytes", bytes(size))  # fmt: skip
    if base in ("tinyint", "int1"):
        return "int16", None, None, {}, _ident, _ident, "", 0  # Debezium 3.6: SMALLINT's JDBC type
    if base in ("smallint", "int2"):
        return ("int32" if unsigned else "int16"), None, None, {}, _ident, _ident, "", 0
    if base in ("mediumint", "int3", "middleint"):
        return "int32", None, None, {}, _ident, _ident, "", 0
    if base in ("int", "integer", "int4"):
        return ("int64" if unsigned else "int32"), None, None, {}, as_long, back_long, "", 0
    if base in ("bigint", "int8", "serial"):
        if unsigned or base == "serial":
            if options.bigint_unsigned_handling_mode == "precise":
                params = {"scale": "0", "connect.decimal.precision": "20"}
                return ("bytes", DECIMAL, 1, params, lambda v: unscaled_bytes(int(v)),
                        lambda b: str(int.from_bytes(b, "big", signed=True)), "bytes", bytes(1))  # fmt: skip

            def wrap(v: str) -> int:
                number = int(v)
                return number - _TWO64 if number >= 1 << 63 else number

            return "int64", None, None, {}, wrap, lambda n: str(n + _TWO64 if n < 0 else n), "", 0
        return "int64", None, None, {}, int, str, "", 0
    if base in ("float", "real", "double"):
        precision, scale = _float_args(parsed.args)
        if base == "float" and scale is None and precision <= 24:
            return "float", None, None, {}, float, float32_repr, "", 0.0
        if base == "real":  # REAL is DOUBLE in MySQL's default sql_mode (COLUMN_TYPE says double)
            return "double", None, None, {}, float, float, "", 0.0
        back_f: Convert = float32_repr if ums is UmsType.FLOAT else float
        return "double", None, None, {}, float, back_f, "", 0.0
    if ums is UmsType.DECIMAL:
        precision, scale = _decimal_args(column.column_type)
        mode = options.decimal_handling_mode
        if mode == "double":
            return "double", None, None, {}, float, lambda f: format(Decimal(repr(f)), "f"), "", 0.0
        if mode == "string":
            return "string", None, None, {}, _ident, _ident, "", "0"
        params = {"scale": str(scale), "connect.decimal.precision": str(precision)}
        return ("bytes", DECIMAL, 1, params, _decimal_bytes(scale),
                lambda b: scaled_text(int.from_bytes(b, "big", signed=True), scale),
                "bytes", bytes(1))  # fmt: skip
    if base == "date":
        name = "org.apache.kafka.connect.data.Date" if connect_time else "io.debezium.time.Date"
        return ("int32", name, 1, {}, _days,
                lambda d: date.fromordinal(d + _EPOCH_ORDINAL).isoformat(), "", 0)  # fmt: skip
    if base == "datetime":
        fsp = fsp_for(column.column_type) or 0
        if connect_time or fsp <= 3:
            name = "org.apache.kafka.connect.data.Timestamp" if connect_time else "io.debezium.time.Timestamp"
            return ("int64", name, 1, {}, _millis,
                    lambda ms: _datetime_text(ms * 1000, fsp), "", 0)  # fmt: skip
        return ("int64", "io.debezium.time.MicroTimestamp", 1, {}, _micros,
                lambda us: _datetime_text(us, fsp), "", 0)  # fmt: skip
    if base == "timestamp":
        fsp = fsp_for(column.column_type) or 0
        return ("string", "io.debezium.time.ZonedTimestamp", 1, {}, _zoned(fsp), _unzoned(fsp), "",
                "1970-01-01T00:00:00Z")  # fmt: skip
    if base == "time":
        fsp = fsp_for(column.column_type) or 0
        if connect_time:
            return ("int32", "org.apache.kafka.connect.data.Time", 1, {},
                    _time_ms,
                    lambda ms: format_time(timedelta(milliseconds=ms), fsp), "", 0)  # fmt: skip
        return ("int64", "io.debezium.time.MicroTime", 1, {}, lambda v: parse_time(v) // _US,
                lambda us: format_time(timedelta(microseconds=us), fsp), "", 0)  # fmt: skip
    if base == "year":
        return "int32", "io.debezium.time.Year", 1, {}, _ident, _ident, "", 0
    if base == "enum":
        allowed = ",".join(set_members(column.column_type))
        return "string", "io.debezium.data.Enum", 1, {"allowed": allowed}, _ident, _ident, "", ""
    if base == "set":
        allowed = ",".join(set_members(column.column_type))
        return "string", "io.debezium.data.EnumSet", 1, {"allowed": allowed}, _ident, _ident, "", ""
    if base == "json":
        return "string", "io.debezium.data.Json", 1, {}, _ident, _ident, "", "{}"
    if base == "point":
        return "struct", _POINT, 1, {}, _point, _geometry_back, "struct", None
    if base in _GEOMETRY:
        return "struct", _GEOM, 1, {}, _geometry, _geometry_back, "struct", None
    if ums is UmsType.BINARY:
        if options.binary_handling_mode == "bytes":
            return "bytes", None, None, {}, _b64, _to_b64, "bytes", b""
        to_text, from_text = _bytes_to_text(options.binary_handling_mode)
        text_mode: dict[str, str] = {DBUS_BINARY: options.binary_handling_mode}
        return ("string", None, None, text_mode, lambda v: to_text(_b64(v)),
                lambda t: _to_b64(from_text(t)), "", "")  # fmt: skip
    return "string", None, None, {}, _ident, _ident, "", ""


def _float_args(args: str) -> tuple[int, int | None]:
    parts = [a.strip() for a in args.split(",") if a.strip()]
    precision = int(parts[0]) if parts else -1
    scale = int(parts[1]) if len(parts) > 1 else None
    return precision, scale


def _time_ms(text: str) -> int | None:
    """TIME in Connect's Time: ms past midnight, which Connect only takes within a day (its ``Time``
    refuses others, and Debezium's connect mode fails on them): another TIME is null."""
    ms = (parse_time(text) // _US) // 1000
    return ms if 0 <= ms < 86_400_000 else None


def _geometry(value: str) -> dict[str, Any]:
    raw = base64.b64decode(value)
    return {"wkb": raw[4:], "srid": int.from_bytes(raw[:4], "little")}


def _point(value: str) -> dict[str, Any]:
    raw = base64.b64decode(value)
    wkb = raw[4:]
    order = "<" if wkb[:1] == b"\x01" else ">"
    x, y = struct.unpack_from(order + "dd", wkb, 5)
    return {"x": x, "y": y, "wkb": wkb, "srid": int.from_bytes(raw[:4], "little")}


def _geometry_back(value: dict[str, Any]) -> str:
    srid = value.get("srid") or 0
    return _to_b64(int(srid).to_bytes(4, "little") + value["wkb"])


# --- the table ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ConnectTable:
    """A table version's Connect schemas (JsonConverter form) and per-column converters."""

    shape: TableShape
    options: FormatOptions
    columns: tuple[ConnectColumn, ...]
    key_columns: tuple[int, ...]  # indexes into ``columns``, in key order
    key_names: tuple[str, ...]  # their Connect field names
    key_schema: Schema | None  # None: no primary key (Debezium writes a null key)
    value_schema: Schema  # the optional ``...Value`` struct
    envelope_schema: Schema

    @property
    def prefix(self) -> str:
        return avro_fullname(f"{self.shape.ds}.{self.shape.schema}.{self.shape.table}")


def source_schema() -> Schema:
    """``io.debezium.connector.mysql.Source`` as Debezium 3.6 builds it (SchemaFactory, BinlogSourceInfo)."""
    snapshot = _schema(
        "string", True, "io.debezium.data.Enum", 1, {"allowed": SNAPSHOT_ALLOWED}, default="false"
    )
    fields = [
        _field("version", _schema("string", False)),
        _field("connector", _schema("string", False)),
        _field("name", _schema("string", False)),
        _field("ts_ms", _schema("int64", False)),
        _field("snapshot", snapshot),
        _field("db", _schema("string", False)),
        _field("sequence", _schema("string", True)),
        _field("ts_us", _schema("int64", True)),
        _field("ts_ns", _schema("int64", True)),
        _field("table", _schema("string", True)),
        _field("server_id", _schema("int64", False)),
        _field("gtid", _schema("string", True)),
        _field("file", _schema("string", False)),
        _field("pos", _schema("int64", False)),
        _field("row", _schema("int32", False)),
        _field("thread", _schema("int64", True)),
        _field("query", _schema("string", True)),
    ]
    return _schema("struct", False, "io.debezium.connector.mysql.Source", 1, fields=fields)


def transaction_schema() -> Schema:
    fields = [
        _field("id", _schema("string", False)),
        _field("total_order", _schema("int64", False)),
        _field("data_collection_order", _schema("int64", False)),
    ]
    return _schema("struct", True, "event.block", 1, fields=fields)


def connect_table(shape: TableShape, options: FormatOptions) -> ConnectTable:
    """Build the Connect model of ``shape`` (call once per shape: the formats cache it)."""
    if len(shape.columns) != len(shape.fields):
        msg = (
            f"table {shape.schema}.{shape.table}: {len(shape.columns)} columns but {len(shape.fields)} fields"
        )
        raise ValueError(msg)
    columns = tuple(connect_column(c, f, options) for c, f in zip(shape.columns, shape.fields, strict=True))
    names = [c.name for c in columns]
    if len(set(names)) != len(names):
        msg = f"table {shape.schema}.{shape.table}: two columns share an Avro field name in {names}"
        raise ValueError(msg)
    by_name = {f.name: i for i, f in enumerate(shape.fields)}
    missing = [k for k in shape.primary_key if k not in by_name]
    if missing:
        msg = f"table {shape.schema}.{shape.table}: primary key columns {missing} are not fields"
        raise ValueError(msg)
    key_columns = tuple(by_name[k] for k in shape.primary_key)
    prefix = avro_fullname(f"{shape.ds}.{shape.schema}.{shape.table}")
    key_schema = None
    if key_columns:
        key_fields = [_field(columns[i].name, {**columns[i].schema, "optional": False}) for i in key_columns]
        key_schema = _schema("struct", False, f"{prefix}.Key", fields=key_fields)
    value_fields = [_field(c.name, c.schema) for c in columns]
    value_schema = _schema("struct", True, f"{prefix}.Value", fields=value_fields)
    envelope = _schema(
        "struct",
        False,
        f"{prefix}.Envelope",
        ENVELOPE_VERSION,
        fields=[
            _field("before", value_schema),
            _field("after", value_schema),
            _field("source", source_schema()),
            _field("op", _schema("string", False)),
            _field("ts_ms", _schema("int64", True)),
            _field("ts_us", _schema("int64", True)),
            _field("ts_ns", _schema("int64", True)),
            _field("transaction", transaction_schema()),
        ],
    )
    key_names = tuple(columns[i].name for i in key_columns)
    return ConnectTable(shape, options, columns, key_columns, key_names, key_schema, value_schema, envelope)


# --- rebuilding a table shape from a Connect value schema (decoders) ----------------------------------

_INFERRED: dict[tuple[str, str | None], str] = {
    ("boolean", None): "bit(1)",
    ("int8", None): "tinyint(4)",
    ("int16", None): "smallint(6)",
    ("int32", None): "int(11)",
    ("int64", None): "bigint(20)",
    ("float", None): "float",
    ("double", None): "double",
    ("string", None): "longtext",
    ("bytes", None): "longblob",
    ("int32", "io.debezium.time.Date"): "date",
    ("int32", "org.apache.kafka.connect.data.Date"): "date",
    ("int64", "io.debezium.time.Timestamp"): "datetime(3)",
    ("int64", "org.apache.kafka.connect.data.Timestamp"): "datetime(3)",
    ("int64", "io.debezium.time.MicroTimestamp"): "datetime(6)",
    ("string", "io.debezium.time.ZonedTimestamp"): "timestamp(6)",
    ("int64", "io.debezium.time.MicroTime"): "time(6)",
    ("int32", "org.apache.kafka.connect.data.Time"): "time(3)",
    ("int32", "io.debezium.time.Year"): "year(4)",
    ("string", "io.debezium.data.Json"): "json",
    ("struct", _GEOM): "geometry",
    ("struct", _POINT): "point",
}


def column_from_schema(field: Schema) -> tuple[ColumnSpec, UmsField]:
    """A Connect field schema (JsonConverter form, with ``field``) -> the column and UMS field it came
    from: exact with DBus's ``__dbus.column.type`` parameter, from Debezium's propagated source type
    otherwise, else inferred from the Connect type (lossy: docs/formats.md)."""
    params: dict[str, str] = field.get("parameters") or {}
    name = str(params.get(SOURCE_NAME) or field["field"])
    optional = bool(field.get("optional"))
    if DBUS_FIELD in params:
        nullable = params.get(DBUS_NULLABLE, "true") == "true"
        column_type = params.get(DBUS_TYPE, "longtext")
        return ColumnSpec(name, column_type, nullable), UmsField(
            name, UmsType(params[DBUS_FIELD]), nullable, True
        )
    column_type = params.get(DBUS_TYPE) or _from_source_type(params) or _inferred(field)
    column = ColumnSpec(name, column_type, optional)
    return column, UmsField(name, column.ums_type, optional)


def _from_source_type(params: dict[str, str]) -> str | None:
    type_name = params.get(SOURCE_TYPE)
    if not type_name:
        return None
    words = type_name.lower().split()
    args = ",".join(p for p in (params.get(SOURCE_LENGTH), params.get(SOURCE_SCALE)) if p)
    return (
        f"{words[0]}({args}){' ' + ' '.join(words[1:]) if words[1:] else ''}" if args else type_name.lower()
    )


def _inferred(field: Schema) -> str:
    name = field.get("name")
    params: dict[str, str] = field.get("parameters") or {}
    if name == DECIMAL:
        return f"decimal({params.get('connect.decimal.precision', '65')},{params.get('scale', '0')})"
    if name in ("io.debezium.data.Enum", "io.debezium.data.EnumSet"):
        members = ",".join(
            "'" + m.replace("'", "''") + "'" for m in params.get("allowed", "").split(",") if m
        )
        return f"{'enum' if name.endswith('Enum') else 'set'}({members})"
    if name == "io.debezium.data.Bits":
        return f"bit({params.get('length', '64')})"
    return _INFERRED.get((field["type"], name), _INFERRED.get((field["type"], None), "longtext"))


def shape_from(
    value_fields: list[Schema],
    key_fields: list[Schema] | None,
    ds: str,
    schema: str,
    table: str,
    version: int,
    options: FormatOptions,
) -> tuple[TableShape, ConnectTable]:
    """The TableShape a Connect value struct (and key struct) describe."""
    specs = [column_from_schema(f) for f in value_fields]
    by_connect = {f["field"]: spec[1].name for f, spec in zip(value_fields, specs, strict=True)}
    primary_key = tuple(str(by_connect.get(f["field"], f["field"])) for f in key_fields or [])
    shape = TableShape(
        ds,
        schema,
        table,
        version,
        tuple(s[0] for s in specs),
        tuple(s[1] for s in specs),
        primary_key,
    )
    return shape, connect_table(shape, options)


def options_from(value_fields: list[Schema]) -> FormatOptions:
    """The value options a schema was written with, as far as decoding needs them."""
    decimal: Any = "precise"
    bigint: Any = "long"
    binary: Any = "bytes"
    time: Any = "adaptive_time_microseconds"
    for field in value_fields:
        params = field.get("parameters") or {}
        column_type = params.get(DBUS_TYPE, "").lower()
        kind, name = field["type"], field.get("name")
        if column_type.startswith(("decimal", "numeric")) and kind != "bytes":
            decimal = "double" if kind == "double" else "string"
        if column_type.startswith("bigint") and "unsigned" in column_type and name:
            bigint = "precise"
        if (
            name
            and name.startswith("org.apache.kafka.connect.data.")
            and name != "org.apache.kafka.connect.data.Decimal"
        ):
            time = "connect"
        if DBUS_BINARY in params:
            binary = params[DBUS_BINARY]
    return FormatOptions(
        decimal_handling_mode=decimal,
        bigint_unsigned_handling_mode=bigint,
        binary_handling_mode=binary,
        time_precision_mode=time,
    )


def table_from(
    value_fields: list[Schema], key_fields: list[Schema] | None, source: dict[str, Any], version: int
) -> ConnectTable:
    """The table a record's Connect value struct (and key struct) describe, named by its envelope's
    ``source`` block (``name``, ``db``, ``table``), with the value options it was written with: what the
    debezium-json and avro decoders read a record's values back with."""
    _, table = shape_from(
        value_fields,
        key_fields,
        source["name"],
        source["db"],
        source.get("table") or "",
        version,
        options_from(value_fields),
    )
    return table
