"""What the real-time JVM needs to write a table's avro records alone (``dbus.jvm.ConfluentAvro``).

The sidecar wrote the table version's first record through ``ums.formats.formatter("avro", ...)``, which
registered the key and value schemas (dbuslib/registry.py); the description carries their ids as the
Confluent prefixes (byte 0 and the 4-byte id), so the JVM needs no registry client. After the fields
every format shares (appender/rowshape.py), it is::

    ums_version, tombstones (0/1), key prefix (null: no primary key), value prefix,
    source head (version, connector, name), source middle (snapshot, db, sequence), source tail (table),
    column count, count x (kind, optional 0/1, fallback Avro bytes or null), key columns ("0,2"),
    the key columns' field names as JSON strings (a key change's ``__debezium.oldkey``/``newkey`` headers)

The source parts are the Avro bytes of the ``source`` record's constant fields between the ones the JVM
writes per record (ts_ms; ts_us and ts_ns; then server_id, gtid, file, pos, row, thread, query). A
column's ``kind`` says how the JVM turns the decoder's UMS wire token into the Avro value the formatter
writes (``ConnectColumn.to_connect``, then ``ums.formats.avro.encoder``): ``bool``, ``int`` (an integer
token: zigzag), ``long`` (an integer, quoted or not), ``ulong`` (unsigned BIGINT wrapped above 2^63-1),
``udec`` (unsigned BIGINT as a Decimal's bytes), ``dec:<scale>`` (a Decimal's unscaled bytes),
``float`` / ``double`` (little-endian IEEE), ``date`` (days), ``dt_ms`` / ``dt_us``, ``ts:<fsp>``
(``io.debezium.time.ZonedTimestamp`` text), ``time_us`` / ``time_ms``, ``str`` (the string's UTF-8),
``bytes`` (the Base64 token's bytes), ``bits:<bytes>`` (BIT(n), little-endian), ``bin:<mode>`` (binary
as hex or Base64 text). ``fallback``: the NOT NULL value Debezium writes for what it cannot represent (a
zero date), encoded. A table with a column of any other mapping (geometry, a masked column) gets no
description, nor one whose schemas the registry refuses or cannot give now: its records keep the
sidecar, as does anything the JVM cannot convert with certainty, record by record.
"""

from __future__ import annotations

from typing import Any

import orjson

from appender.rowshape import Where
from dbuslib.errors import DbusError
from ums.formats import SchemaRefused
from ums.formats.avro import MAGIC, AvroRows, encoder, schema_text
from ums.formats.connect import DECIMAL, ConnectColumn
from ums.rowchange import TableShape
from ums.types import UmsType, fsp_for, parse_column_type

FORMAT = "avro"

_DATES = ("io.debezium.time.Date", "org.apache.kafka.connect.data.Date")
_TIMES = {
    "io.debezium.time.Timestamp": "dt_ms",
    "org.apache.kafka.connect.data.Timestamp": "dt_ms",
    "io.debezium.time.MicroTimestamp": "dt_us",
    "io.debezium.time.MicroTime": "time_us",
    "org.apache.kafka.connect.data.Time": "time_ms",
}
_TEXTS = (None, "io.debezium.data.Enum", "io.debezium.data.EnumSet", "io.debezium.data.Json")


def column_kind(column: ConnectColumn, binary_mode: str) -> str | None:
    """How the JVM converts ``column``'s UMS token (module docstring), None when it cannot."""
    if column.field.encoded:
        return None
    parsed = parse_column_type(column.column.column_type)
    base, ums = parsed.base, column.field.type
    kind, name = column.schema["type"], column.schema.get("name")
    if kind == "boolean":
        return "bool"
    if name == "io.debezium.data.Bits":
        return f"bits:{(int(parsed.args or '1') + 7) // 8}"
    if base in ("bigint", "int8", "serial") and (parsed.unsigned or base == "serial"):
        return "udec" if name == DECIMAL else "ulong"
    if kind in ("int16", "int32", "int64") and name in (None, "io.debezium.time.Year"):
        return "long" if base in ("bigint", "int8") or ums is UmsType.LONG else "int"
    if name == DECIMAL:
        return f"dec:{column.schema['parameters']['scale']}" if ums is UmsType.DECIMAL else None
    if kind in ("float", "double") and name is None:
        return str(kind)
    if name in _DATES:
        return "date"
    if name in _TIMES:
        return _TIMES[name]
    if name == "io.debezium.time.ZonedTimestamp":
        return f"ts:{fsp_for(column.column.column_type) or 0}"
    if kind == "bytes" and name is None:
        return "bytes"
    if kind == "string" and ums is UmsType.BINARY:
        return f"bin:{binary_mode}"
    if kind == "string" and name in _TEXTS:
        return "str"
    return None


def _source_parts(source: dict[str, Any], values: dict[str, Any]) -> tuple[bytes, bytes, bytes]:
    """The source record's constant fields, encoded: (version, connector, name), (snapshot, db,
    sequence), (table)."""
    fields = {f["field"]: f for f in source["fields"]}

    def part(*names: str) -> bytes:
        return b"".join(encoder(fields[n])(values[n]) for n in names)

    return part("version", "connector", "name"), part("snapshot", "db", "sequence"), part("table")


def describe(shape: TableShape, rows: AvroRows, where: Where) -> list[bytes | None] | None:
    """The description of ``shape`` in avro (module docstring), None when the table keeps the sidecar.
    ``rows``: the sidecar's avro formatter (its schema ids: cached since it wrote the first record)."""
    plan = rows.plan(shape)
    table, options = plan.table, rows.options
    kinds = [column_kind(c, options.binary_handling_mode) for c in table.columns]
    if any(k is None for k in kinds):
        return None
    start, until, topic, key_head, key_tail, limit = where
    try:
        key_prefix = None
        if plan.key_schema is not None:
            key_id = rows.schema_ids(f"{topic}-key", schema_text(plan.key_schema))
            key_prefix = MAGIC + key_id.to_bytes(4, "big")
        value_id = rows.schema_ids(f"{topic}-value", schema_text(plan.value_schema))
    except (SchemaRefused, DbusError):
        return None  # refused (its records are dead letters) or the registry away: the sidecar's
    source = next(f for f in table.envelope_schema["fields"] if f["field"] == "source")
    values = {"version": options.version, "connector": options.connector, "name": shape.ds,
              "snapshot": "false", "db": shape.schema, "sequence": None, "table": shape.table}  # fmt: skip
    head, middle, tail = _source_parts(source, values)
    fields: list[Any] = [
        FORMAT, str(start), str(until), topic, key_head, key_tail, str(limit), shape.schema, shape.table,
        str(shape.version), "1" if options.tombstones else "0", key_prefix,
        MAGIC + value_id.to_bytes(4, "big"), head, middle, tail, str(len(table.columns)),
    ]  # fmt: skip
    for column, kind in zip(table.columns, kinds, strict=True):
        optional = bool(column.schema.get("optional"))
        fallback = None if column.fallback is None else encoder(column.schema)(column.fallback)
        fields += [kind, "1" if optional else "0", fallback]
    fields.append(",".join(str(i) for i in table.key_columns))
    fields += [orjson.dumps(name) for name in table.key_names]
    return [f if f is None or isinstance(f, bytes) else str(f).encode() for f in fields]
