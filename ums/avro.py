"""UMS messages as Avro (optional encoding of ``<ds>.<schema>.result``), via fastavro.

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
from collections.abc import Callable
from decimal import Decimal
from functools import lru_cache
from typing import Any, cast

import fastavro

from ums.errors import BadAvroError
from ums.message import ProtocolType, UmsField, UmsMessage, UmsSchema
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
    """Schemaless Avro bytes of ``msg`` (the reader needs ``avro_schema(msg.schema)``)."""
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
