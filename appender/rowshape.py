"""What the real-time JVM needs to write a per-row table's records alone (appender/jvm ``PerRowFormat``).

The sidecar (appender/sidecar.py) describes a table version written in a per-row format after it wrote
the version's first record; from then on ``dbus.jvm.AppendUdf`` writes its rows events in the JVM, byte
for byte what ``ums.formats.formatter(format, options)`` writes through the micro-batch path
(``PartitionProcessor._rows_per_row``). ``describer(format)`` gives the format's describe function
(``DESCRIBERS``: one module per format, e.g. appender/rowshape_avro.py), None for a format the JVM does
not write. A description's first field is the format's name (``AppendUdf`` picks its Java class by it),
then the fields every format shares: from, until, topic, ums_key head, ums_key tail, record limit,
schema, table; then the format's own.

In debezium-json (``describe`` below, ``dbus.jvm.DebeziumJson``) the description is::

    debezium-json, from, until, topic, ums_key head, ums_key tail, record limit, schema, table,
    ums_version, schemas (0/1), tombstones (0/1), key prefix, value prefix,
    source head (up to the commit time), source middle (up to ts_us), source tail (up to server_id),
    column count, count x (field name as JSON, kind, fallback JSON or null), key columns ("0,2")

A column's ``kind`` says how the JVM turns the decoder's UMS wire token into the Connect JSON value
(``ums/formats/connect.py``): ``id`` (the token is the value), ``long`` (a quoted integer -> the number),
``ulong`` (unsigned BIGINT wrapped above 2^63-1), ``udec`` (unsigned BIGINT as a Connect Decimal),
``dec:<scale>`` (a Connect Decimal: Base64 of the unscaled two's complement), ``bool``, ``float`` (the
token when it is plain decimal notation), ``date`` (days), ``dt_ms`` / ``dt_us`` (DATETIME in ms / µs),
``ts:<fsp>`` (TIMESTAMP as ``io.debezium.time.ZonedTimestamp``), ``time_us`` / ``time_ms`` (TIME),
``bits:<bytes>`` (BIT(n), little-endian bytes), ``bin:<mode>`` (binary as hex or Base64 text). A table
with a column of any other mapping (geometry, a decimal written as a double, a masked column) gets no
description: its records keep the sidecar. So does anything the JVM cannot convert with certainty,
record by record (the JVM then sends that record to the sidecar).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

import orjson

from ums.formats import FormatOptions
from ums.formats.connect import ConnectColumn, ConnectTable, connect_table
from ums.formats.debezium import dump_json
from ums.rowchange import TableShape
from ums.types import UmsType, fsp_for, parse_column_type

FORMAT = "debezium-json"

Where = tuple[int, int, str, str, str, int]
"""(from, until, topic, ums_key head, ums_key tail, record limit): a description's shared fields."""
Describe = Callable[[TableShape, Any, Where], "list[bytes | None] | None"]
"""(table, the format's formatter, where) -> the description, or None when the table keeps the sidecar."""

DESCRIBERS: dict[str, str] = {
    FORMAT: "appender.rowshape:describe_formatter",
    "canal-json": "appender.rowshape_canal:describe",
    "avro": "appender.rowshape_avro:describe",
}
"""Per-row format -> ``module:function``, its ``Describe`` (imported when first asked for)."""


def describer(fmt: str) -> Describe | None:
    """The describe function of per-row format ``fmt``, None when the JVM does not write it."""
    target = DESCRIBERS.get(fmt)
    if target is None:
        return None
    module, name = target.split(":")
    found: Describe = getattr(importlib.import_module(module), name)
    return found


def table_shape(shape: Any, ns: Any, settings: Any) -> TableShape:
    """The ``TableShape`` that ``from_message`` gives the per-row path's changes of a rows event whose
    table is ``shape`` (``binlog.rows.table_of``) at namespace ``ns``: its UMS fields as the JVM's lines
    carry them."""
    from appender.convert import PROTOCOL, rendered_schema
    from ums.message import SYSTEM_FIELDS

    fields = rendered_schema(shape, ns.version, settings).fields[len(SYSTEM_FIELDS[PROTOCOL]) :]
    return TableShape(ns.ds_alias, shape.schema, shape.table, ns.version, tuple(shape.columns), fields,
                      tuple(shape.primary_key))  # fmt: skip


def column_kind(column: ConnectColumn, options: FormatOptions) -> str | None:
    """How the JVM converts ``column``'s UMS token (module docstring), None when it cannot."""
    if column.field.encoded:
        return None
    parsed = parse_column_type(column.column.column_type)
    base, ums = parsed.base, column.field.type
    schema = column.schema
    kind, name = schema["type"], schema.get("name")
    if base in ("bool", "boolean") or (base == "bit" and kind == "boolean"):
        return "bool"
    if name == "io.debezium.data.Bits":
        return f"bits:{(int(parsed.args or '1') + 7) // 8}"
    if base in ("bigint", "int8", "serial") and (parsed.unsigned or base == "serial"):
        return "udec" if name is not None else "ulong"
    if kind in ("int16", "int32", "int64") and name is None:
        return "long" if ums is UmsType.LONG else "id"
    if kind in ("float", "double") and name is None:
        return (
            "float" if ums in (UmsType.FLOAT, UmsType.DOUBLE) and base != "real" or base == "real" else None
        )
    if name == "org.apache.kafka.connect.data.Decimal":
        return f"dec:{schema['parameters']['scale']}" if ums is UmsType.DECIMAL else None
    if name in ("io.debezium.time.Date", "org.apache.kafka.connect.data.Date"):
        return "date"
    if name in ("io.debezium.time.Timestamp", "org.apache.kafka.connect.data.Timestamp"):
        return "dt_ms"
    if name == "io.debezium.time.MicroTimestamp":
        return "dt_us"
    if name == "io.debezium.time.ZonedTimestamp":
        return f"ts:{fsp_for(column.column.column_type) or 0}"
    if name == "io.debezium.time.MicroTime":
        return "time_us"
    if name == "org.apache.kafka.connect.data.Time":
        return "time_ms"
    if name == "io.debezium.time.Year":
        return "id"
    if kind == "bytes" and name is None:
        return "id"  # the UMS Base64 text is JsonConverter's
    if kind == "string":
        if ums is UmsType.BINARY:
            return f"bin:{options.binary_handling_mode}"
        if ums is UmsType.DECIMAL:
            return "id" if options.decimal_handling_mode == "string" else None
        return "id" if ums in (UmsType.STRING, UmsType.JSONOBJECT, UmsType.RAW) else None
    return None


def _fallback(column: ConnectColumn) -> bytes | None:
    return None if column.fallback is None else dump_json(column.fallback)


def source_parts(table: ConnectTable) -> tuple[bytes, bytes, bytes]:
    """The source block's constant parts: up to ``ts_ms``'s value, from it to ``ts_us``'s, and from
    ``ts_ns``'s to ``server_id``'s (``debezium.source_of``'s key order)."""
    shape, options = table.shape, table.options
    head = b'{"version":%s,"connector":%s,"name":%s,"ts_ms":' % (
        orjson.dumps(options.version),
        orjson.dumps(options.connector),
        orjson.dumps(shape.ds),
    )
    middle = b',"snapshot":"false","db":%s,"sequence":null,"ts_us":' % orjson.dumps(shape.schema)
    tail = b',"table":%s,"server_id":' % orjson.dumps(shape.table)
    return head, middle, tail


def describe(
    shape: TableShape,
    options: FormatOptions,
    key_prefix: bytes,
    value_prefix: bytes,
    where: Where,
) -> list[bytes | None] | None:
    """The description of ``shape`` in debezium-json (module docstring), None when a column keeps the
    sidecar. ``key_prefix``/``value_prefix``: the formatter's ``{"schema":...,"payload":`` parts;
    ``where``: (from, until, topic, ums_key head, ums_key tail, record limit)."""
    table = connect_table(shape, options)
    kinds = [column_kind(c, options) for c in table.columns]
    if any(k is None for k in kinds):
        return None
    start, until, topic, key_head, key_tail, limit = where
    head, middle, tail = source_parts(table)
    fields: list[Any] = [
        FORMAT, str(start), str(until), topic, key_head, key_tail, str(limit), shape.schema, shape.table,
        str(shape.version), "1" if options.schemas else "0", "1" if options.tombstones else "0",
        key_prefix, value_prefix, head, middle, tail, str(len(table.columns)),
    ]  # fmt: skip
    for column, kind in zip(table.columns, kinds, strict=True):
        fields += [orjson.dumps(column.name), kind, _fallback(column)]
    fields.append(",".join(str(i) for i in table.key_columns))
    return [f if f is None or isinstance(f, bytes) else str(f).encode() for f in fields]


def describe_formatter(shape: TableShape, encoder: Any, where: Where) -> list[bytes | None] | None:
    """``describe`` with the key and value prefixes of ``encoder`` (the debezium-json formatter)."""
    plan = encoder.plan(shape)
    return describe(shape, encoder.options, plan.key_prefix, plan.value_prefix, where)
