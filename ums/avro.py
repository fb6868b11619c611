"""UMS messages as Avro (optional encoding of ``<ds>.<schema>.result``): written here column by column
(``encode_avro``, held byte for byte to fastavro's writer, ``encode_avro_fastavro``), read via fastavro.

The Avro schema is derived from the UMS schema: an envelope record with ``protocol``, ``version``,
``namespace``, ``batchId`` and ``payload`` (an array of ``Tuple`` records, one field per UMS field,
``["null", T]`` when nullable). Each tuple field keeps its UMS name, type and ``encoded`` flag in
``ums_name``/``ums_type``/``ums_encoded`` attributes, so ``decode_avro`` rebuilds the exact message.

| UMS                         | Avro                                  | why                            |
|-----------------------------|---------------------------------------|--------------------------------|
| long                        | bytes, decimal(20, 0)                 | BIGINT UNSIGNED exceeds int64  |
| int / boolean               | int / boolean                         |                                |
| float, double               | double                                | holds the JSON number exactly  |
| decimal                     | string (plain digits)                 | UMS fields carry no scale      |
| date, datetime              | string, as in the JSON                |                                |
| binary                      | bytes (raw, not Base64)               |                                |
| string, jsonobject, raw     | string                                |                                |

Example schema (abridged)::

    {"type":"record","name":"ums_mysql_demo_shop_orders_3_0_0","namespace":"dbus.ums",
     "fields":[{"name":"protocol","type":"string"},...,{"name":"payload","type":{"type":"array",
       "items":{"type":"record","name":"Tuple","fields":[{"name":"ums_id_","type":{"type":"bytes",
       "logicalType":"decimal","precision":20,"scale":0},"ums_name":"ums_id_","ums_type":"long",
       "ums_encoded":false},...]}}}]}
"""

from __future__ import annotations

import base64
import io
import json
import re
import struct
from collections.abc import Callable, Sequence
from decimal import Decimal
from functools import lru_cache
from typing import Any, cast

import fastavro

from ums.errors import BadAvroError
from ums.message import UMS_VERSION, ProtocolType, UmsField, UmsMessage, UmsSchema
from ums.namespace import Namespace
from ums.scalars import JsonValue
from ums.types import UmsType

AVRO_NAMESPACE = "dbus.ums"
_LONG = {"type": "bytes", "logicalType": "decimal", "precision": 20, "scale": 0}
_AVRO_TYPES: dict[UmsType, Any] = {
    UmsType.LONG: _LONG,
    UmsType.INT: "int",
    UmsType.BOOLEAN: "boolean",
    UmsType.FLOAT: "double",
    UmsType.DOUBLE: "double",
    UmsType.BINARY: "bytes",
    UmsType.DECIMAL: "string",
    UmsType.DATE: "string",
    UmsType.DATETIME: "string",
    UmsType.STRING: "string",
    UmsType.JSONOBJECT: "string",
    UmsType.RAW: "string",
}
_TO_AVRO: dict[UmsType, Callable[[Any], Any]] = {
    UmsType.LONG: lambda v: Decimal(int(v)),
    UmsType.BINARY: base64.b64decode,
}
_FROM_AVRO: dict[UmsType, Callable[[Any], JsonValue]] = {
    UmsType.LONG: lambda v: str(int(v)),
    UmsType.BINARY: lambda v: base64.b64encode(v).decode("ascii"),
}
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_NOT_NAME_CHAR = re.compile(r"[^A-Za-z0-9_]")


def avro_schema(schema: UmsSchema) -> dict[str, Any]:
    """A fresh Avro schema dict for messages of this namespace and field list."""
    return json.loads(_schema_text(str(schema.namespace), schema.fields))


def record_name(namespace: Namespace | str) -> str:
    """``mysql.demo.shop.orders.3.0.0`` -> ``ums_mysql_demo_shop_orders_3_0_0``."""
    return "ums_" + _NOT_NAME_CHAR.sub("_", str(namespace))


def avro_field_name(name: str, index: int) -> str:
    """A column name if Avro accepts it, else ``_<index>_`` plus the name with bad chars as ``_``."""
    return name if _NAME.match(name) else f"_{index}_" + _NOT_NAME_CHAR.sub("_", name)


def encode_avro(msg: UmsMessage) -> bytes:
    """Schemaless Avro bytes of ``msg`` (the reader needs ``avro_schema(msg.schema)``).

    Written here column by column (``encode_avro_columns``), byte for byte what fastavro's
    ``schemaless_writer`` writes for the record ``encode_avro_fastavro`` builds (tests/unit/test_ums_avro.py
    holds the two to each other): the appender's Avro hot path, with no record dict and no Python call per
    value."""
    rows = msg.payload
    return encode_avro_columns(
        msg.protocol, msg.schema, list(zip(*rows, strict=True)), len(rows), msg.version
    )


def encode_avro_columns(
    protocol: ProtocolType,
    schema: UmsSchema,
    columns: Sequence[Sequence[Any]],
    count: int,
    version: str = UMS_VERSION,
) -> bytes:
    """``encode_avro`` of the message whose payload is ``count`` tuples given as ``columns`` (one
    sequence of wire values per field, in field order): for a caller that has the values by column."""
    plan = _plan(str(schema.namespace), schema.fields)
    head = _envelope(protocol.value, version, str(schema.namespace), schema.batch_id)
    if not count:
        return head + b"\x00"
    return b"".join((head, _uvarint(count << 1), _payload(plan, columns, count), b"\x00"))


def encode_avro_fastavro(msg: UmsMessage) -> bytes:
    """``encode_avro`` through fastavro: a record dict per tuple and ``schemaless_writer`` (the reference
    the column writer is tested against)."""
    schema = msg.schema
    parsed = _parsed(_schema_text(str(schema.namespace), schema.fields))
    names = _avro_names(schema.fields)
    record = {
        "protocol": msg.protocol.value,
        "version": msg.version,
        "namespace": str(schema.namespace),
        "batchId": schema.batch_id,
        "payload": _to_records(schema.fields, names, msg.payload),
    }
    out = io.BytesIO()
    fastavro.schemaless_writer(out, parsed, record)
    return out.getvalue()


# ---------------------------------------------------------------- the column writer (Avro binary encoding)
#
# A tuple is its fields in order: a string or bytes as its length (zig-zag varint) and the bytes; an int as a
# zig-zag varint; a double as 8 bytes little-endian; a boolean as one byte; a UMS long as the bytes of its
# decimal(20, 0), i.e. the big-endian two's complement of the integer in (|x|.bit_length() + 8) // 8 bytes
# (fastavro's length, one byte more than needed for some negatives). A nullable field is a union
# ["null", T]: 0 for null, 2 (the index 1) and the value otherwise. The payload is one array block (the
# count, the tuples) and the end marker 0. Each column is written with a few C-level passes (``map``)
# over all of the message's values, then the columns are interleaved tuple by tuple in one ``join``.

_TABLE = 1 << 12  # lengths below this are looked up
_INT_TABLE = 1 << 15  # zig-zagged ints below this too
_PACK_DOUBLE = struct.Struct("<d").pack
_DECIMAL_LIMIT = 10**20  # decimal(20, 0): fastavro refuses more digits


def _uvarint(z: int) -> bytes:
    """A non-negative (already zig-zagged) integer as Avro's base-128 varint."""
    out = bytearray()
    while z >= 0x80:
        out.append(z & 0x7F | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


_UV = [_uvarint(z) for z in range(_INT_TABLE)]  # _UV[z]: varint of z
_LEN = _UV[0 : _TABLE << 1 : 2]  # _LEN[n]: a length n (zig-zag 2n)
_NLEN = [b"\x02" + b for b in _LEN]  # union index 1, then a length n
_NULL = b"\x00"
_BOOL = {True: b"\x01", False: b"\x00"}
_NBOOL = {True: b"\x02\x01", False: b"\x02\x00"}


def _zigzag(v: int) -> int:
    return v << 1 if v >= 0 else ((-v) << 1) - 1


def _long_blobs(col: Sequence[Any]) -> list[bytes]:
    """UMS longs (decimal texts) as fastavro writes ``Decimal(int(v))`` in bytes decimal(20, 0)."""
    xs = list(map(int, col))
    if xs and (max(xs) >= _DECIMAL_LIMIT or min(xs) <= -_DECIMAL_LIMIT):
        msg = "The decimal precision is bigger than allowed by schema"
        raise ValueError(msg)
    return [x.to_bytes((x.bit_length() + 8) >> 3, "big", signed=True) for x in xs]


# A column's parts, in tuple order: a list holds one bytes per tuple, a bytes is the same in every tuple.
Parts = list[bytes | list[bytes]]
_UNION = b"\x02"  # a nullable field's value that is not null: union index 1


def _prefixed(blobs: list[bytes], table: list[bytes], lead: bytes) -> list[bytes]:
    """Each blob's length prefix (``table``: ``_LEN``, or ``_NLEN`` with the union index first)."""
    lens = list(map(len, blobs))
    if max(lens) < _TABLE:
        return list(map(table.__getitem__, lens))
    return [lead + _uvarint(n << 1) for n in lens]


def _blobs(
    col: Sequence[Any], nullable: bool, to_blobs: Callable[[Sequence[Any]], list[bytes]], filler: str
) -> Parts:
    """A string or bytes column: [length prefixes, the bytes] (the union index first when nullable; a
    null is ``filler`` converted, then its prefix and bytes replaced by the union index 0)."""
    if not nullable:
        blobs = to_blobs(col)
        return [_prefixed(blobs, _LEN, b""), blobs]
    nulls = [i for i, v in enumerate(col) if v is None]
    if not nulls:
        blobs = to_blobs(col)
        return [_prefixed(blobs, _NLEN, _UNION), blobs]
    values = list(col)
    for i in nulls:
        values[i] = filler
    blobs = to_blobs(values)
    pre = _prefixed(blobs, _NLEN, _UNION)
    for i in nulls:
        pre[i], blobs[i] = _NULL, b""
    return [pre, blobs]


def _ints(col: Sequence[Any], nullable: bool) -> Parts:
    if nullable and None in col:
        return [[_NULL if v is None else _UNION + _uvarint(_zigzag(v)) for v in col]]
    zs = [v << 1 if v >= 0 else ~(v << 1) for v in col]  # zig-zag
    out = list(map(_UV.__getitem__, zs)) if max(zs) < _INT_TABLE else list(map(_uvarint, zs))
    return [_UNION, out] if nullable else [out]


def _doubles(col: Sequence[Any], nullable: bool) -> Parts:
    if not nullable:
        return [list(map(_PACK_DOUBLE, col))]
    if None not in col:
        return [_UNION, list(map(_PACK_DOUBLE, col))]
    return [[_NULL if v is None else _UNION + _PACK_DOUBLE(v) for v in col]]


def _booleans(col: Sequence[Any], nullable: bool) -> Parts:
    if not nullable:
        return [list(map(_BOOL.__getitem__, col))]
    return [[_NULL if v is None else _NBOOL[v] for v in col]]


def _longs(col: Sequence[Any], nullable: bool) -> Parts:
    return _blobs(col, nullable, _long_blobs, "0")


def _strings(col: Sequence[Any], nullable: bool) -> Parts:
    return _blobs(col, nullable, _encoded, "")


def _binaries(col: Sequence[Any], nullable: bool) -> Parts:
    return _blobs(col, nullable, _decoded64, "")


def _encoded(col: Sequence[Any]) -> list[bytes]:
    return list(map(str.encode, col))


def _decoded64(col: Sequence[Any]) -> list[bytes]:
    return list(map(base64.b64decode, col))


_COLUMN_WRITERS: dict[UmsType, Callable[[Sequence[Any], bool], Parts]] = {
    UmsType.LONG: _longs,
    UmsType.INT: _ints,
    UmsType.BOOLEAN: _booleans,
    UmsType.FLOAT: _doubles,
    UmsType.DOUBLE: _doubles,
    UmsType.BINARY: _binaries,
    UmsType.DECIMAL: _strings,
    UmsType.DATE: _strings,
    UmsType.DATETIME: _strings,
    UmsType.STRING: _strings,
    UmsType.JSONOBJECT: _strings,
    UmsType.RAW: _strings,
}
# system fields: one value for all tuples of an event (ums_op_ too, but for an update's b/u pairs)
_REPEATED = frozenset({"ums_id_", "ums_ts_", "ums_op_"})
Plan = tuple[tuple[Callable[[Sequence[Any], bool], Parts], bool, bool], ...]


@lru_cache(maxsize=1024)
def _plan(namespace: str, fields: tuple[UmsField, ...]) -> Plan:
    """Per field: its column writer, nullable, whether its value usually repeats; the schema checked as
    fastavro's path checks it (names, parsed schema) so the same messages are refused."""
    _avro_names(fields)
    _parsed(_schema_text(namespace, fields))
    return tuple((_COLUMN_WRITERS[f.type], f.nullable, f.name in _REPEATED) for f in fields)


@lru_cache(maxsize=1024)
def _envelope(protocol: str, version: str, namespace: str, batch_id: int) -> bytes:
    """``protocol``, ``version``, ``namespace`` and ``batchId`` as Avro: what precedes the payload."""
    texts = [t.encode() for t in (protocol, version, namespace)]
    return b"".join(_uvarint(len(t) << 1) + t for t in texts) + _uvarint(_zigzag(batch_id))


def encode_avro_rows(
    protocol: ProtocolType,
    schema: UmsSchema,
    system: Sequence[Sequence[Any]],
    rows: Sequence[bytes],
    version: str = UMS_VERSION,
) -> bytes:
    """``encode_avro_columns`` of a message whose user fields of each tuple are already Avro: ``system`` the
    four system fields' columns, ``rows`` each tuple's user fields as written by the JVM decoder
    (binlog/jvm ``AvroRows``, whose kinds the caller checked against ``jvm_kinds``)."""
    plan = _plan(str(schema.namespace), schema.fields)
    head = _envelope(protocol.value, version, str(schema.namespace), schema.batch_id)
    n = len(rows)
    if not n:
        return head + b"\x00"
    parts = _parts(plan[: len(system)], system, n) + [list(rows)]
    return b"".join((head, _uvarint(n << 1), _interleave(parts, n), b"\x00"))


_KINDS = {
    UmsType.INT: "I",
    UmsType.LONG: "L",
    UmsType.FLOAT: "D",
    UmsType.DOUBLE: "D",
    UmsType.BINARY: "B",
    UmsType.DECIMAL: "S",
    UmsType.DATE: "S",
    UmsType.DATETIME: "S",
    UmsType.STRING: "S",
    UmsType.JSONOBJECT: "S",
    UmsType.RAW: "S",
}


@lru_cache(maxsize=1024)
def jvm_kinds(fields: tuple[UmsField, ...]) -> str:
    """The kinds the JVM's ``AvroRows`` names for these (user) fields when it writes them as this module
    does: one letter per field, lower case when nullable (``?`` for a type it never writes)."""
    kinds = (_KINDS.get(f.type, "?") for f in fields)
    return "".join(k.lower() if f.nullable else k for k, f in zip(kinds, fields, strict=True))


def _payload(plan: Plan, columns: Sequence[Sequence[Any]], n: int) -> bytes:
    """The ``n`` tuples of a non-empty payload: written column by column, then interleaved by slice
    assignment (consecutive parts that are the same in every tuple joined into one first)."""
    return _interleave(_parts(plan, columns, n), n)


def _parts(plan: Plan, columns: Sequence[Sequence[Any]], n: int) -> Parts:
    """Each column's parts (see ``Parts``), in field order."""
    parts: Parts = []
    for (write, nullable, repeated), col in zip(plan, columns, strict=True):
        if len(col) != n:
            msg = f"{len(col)} values in a column of a payload of {n} tuples"
            raise ValueError(msg)
        if repeated and col.count(col[0]) == n:
            parts += [p if isinstance(p, bytes) else p[0] for p in write(col[:1], nullable)]
        else:
            parts += write(col, nullable)
    return parts


def _interleave(parts: Parts, n: int) -> bytes:
    """The tuples' bytes: part after part for each tuple."""
    merged: Parts = []
    for p in parts:
        if isinstance(p, bytes) and merged and isinstance(merged[-1], bytes):
            merged[-1] += p
        else:
            merged.append(p)
    k = len(merged)
    out: list[bytes] = [b""] * (n * k)
    for j, p in enumerate(merged):
        out[j::k] = [p] * n if isinstance(p, bytes) else p
    return b"".join(out)


def decode_avro(data: bytes, schema_dict: dict[str, Any]) -> UmsMessage:
    """Read bytes written by ``encode_avro`` with the schema they were written with."""
    text = json.dumps(schema_dict, sort_keys=True)
    fields = _ums_fields(schema_dict)
    try:
        # A record schema reads as a dict; fastavro types the result as any Avro value.
        record = cast(dict[str, Any], fastavro.schemaless_reader(io.BytesIO(data), _parsed(text)))
        protocol = ProtocolType(record["protocol"])
    except (ValueError, TypeError, KeyError, EOFError, IndexError) as err:
        msg = f"Avro record of {schema_dict.get('name')!r}: {err}"
        raise BadAvroError(msg) from err
    names = _avro_names(fields)
    rows = tuple(_from_record(fields, names, r) for r in record["payload"])
    schema = UmsSchema(Namespace.parse(record["namespace"]), fields, record["batchId"])
    return UmsMessage(protocol, schema, rows, record["version"])


def _to_records(fields: tuple[UmsField, ...], names: tuple[str, ...], rows: tuple) -> list[dict[str, Any]]:
    """Each row as an Avro record dict, the per-field conversions (``_TO_AVRO``) looked up once per
    message: the appender's Avro hot path (most fields need none)."""
    converts = [(i, c) for i, c in enumerate(_TO_AVRO.get(f.type) for f in fields) if c is not None]
    if not converts:
        return [dict(zip(names, row, strict=True)) for row in rows]
    out = []
    for row in rows:
        values = list(row)
        for i, convert in converts:
            if values[i] is not None:
                values[i] = convert(values[i])
        out.append(dict(zip(names, values, strict=True)))
    return out


def _from_record(fields: tuple[UmsField, ...], names: tuple[str, ...], rec: dict) -> tuple:
    return tuple(_convert(_FROM_AVRO, f.type, rec[n]) for f, n in zip(fields, names, strict=True))


def _convert(table: dict[UmsType, Callable[[Any], Any]], ums_type: UmsType, value: Any) -> Any:
    convert = table.get(ums_type)
    return value if value is None or convert is None else convert(value)


@lru_cache(maxsize=1024)
def _schema_text(namespace: str, fields: tuple[UmsField, ...]) -> str:
    """The Avro schema as canonical JSON text; cached per (namespace, fields)."""
    tuple_record = {"type": "record", "name": "Tuple", "fields": _tuple_fields(fields)}
    schema = {
        "type": "record",
        "name": record_name(namespace),
        "namespace": AVRO_NAMESPACE,
        "doc": f"UMS 1.3 messages of {namespace}",
        "ums_namespace": namespace,
        "fields": [
            {"name": "protocol", "type": "string"},
            {"name": "version", "type": "string"},
            {"name": "namespace", "type": "string"},
            {"name": "batchId", "type": "long"},
            {"name": "payload", "type": {"type": "array", "items": tuple_record}},
        ],
    }
    return json.dumps(schema, sort_keys=True)


def _tuple_fields(fields: tuple[UmsField, ...]) -> list[dict[str, Any]]:
    names = _avro_names(fields)
    return [_avro_field(f, n) for f, n in zip(fields, names, strict=True)]


def _avro_field(field: UmsField, name: str) -> dict[str, Any]:
    base = _AVRO_TYPES[field.type]
    return {
        "name": name,
        "type": ["null", base] if field.nullable else base,
        "ums_name": field.name,
        "ums_type": field.type.value,
        "ums_encoded": field.encoded,
    }


@lru_cache(maxsize=1024)
def _avro_names(fields: tuple[UmsField, ...]) -> tuple[str, ...]:
    names = tuple(avro_field_name(f.name, i) for i, f in enumerate(fields))
    if len(set(names)) != len(names):
        msg = f"Avro field names collide after sanitising: {list(names)}"
        raise BadAvroError(msg)
    return names


@lru_cache(maxsize=1024)
def _parsed(schema_text: str) -> Any:
    """fastavro's parsed schema, parsed once per distinct schema."""
    return fastavro.parse_schema(json.loads(schema_text))


def _ums_fields(schema_dict: dict[str, Any]) -> tuple[UmsField, ...]:
    """UMS fields recorded in the ``ums_*`` attributes of the Tuple record."""
    try:
        payload = next(f for f in schema_dict["fields"] if f["name"] == "payload")
        items = payload["type"]["items"]["fields"]
        return tuple(
            UmsField(f["ums_name"], UmsType(f["ums_type"]), isinstance(f["type"], list), f["ums_encoded"])
            for f in items
        )
    except (KeyError, TypeError, ValueError, StopIteration) as err:
        msg = f"Avro schema {schema_dict.get('name')!r}: no UMS tuple fields ({err!r})"
        raise BadAvroError(msg) from err
