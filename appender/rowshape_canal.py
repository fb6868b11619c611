"""What the real-time JVM needs to write a canal-json table's records alone (``dbus.jvm.CanalJson``).

As for debezium-json (appender/rowshape.py), the sidecar describes a table version after it wrote the
version's first record; from then on ``AppendUdf`` writes its rows events in the JVM, byte for byte what
``ums.formats.formatter("canal-json", options)`` writes (ums/formats/canal.py). The description::

    canal-json, from, until, topic, ums_key head, ums_key tail, record limit, schema, table,
    ums_version, ums_ds, tombstones (0/1),
    database part (`],"database":"shop","es":`), middle (`,"isDdl":false,"mysqlType":{...},"old":`),
    tail (`,"pkNames":["id"],"sql":"","sqlType":`), sqlType ({"id":4,...}),
    table part (`,"table":"t","ts":`), column count,
    count x (field name as JSON, kind, sqlType, wider or "", members or null), key columns ("0,2")

A column's ``kind`` says how the JVM turns the decoder's UMS wire token (JSON, as ``json.dumps`` writes the
UMS value) into Canal's string value: ``str`` (a JSON string: the token is the value), ``int`` (an integer:
its decimal text), ``year`` (an integer, ``0000`` for 0), ``float`` (Python's repr of a double: Java's
``Double.toString`` text, as ``canal.java_text`` writes it), ``bin`` (Base64: the ISO-8859-1 text of its
bytes), ``enum`` / ``set`` (the member's index / the members' bit mask; ``members`` lists the members as
JSON strings, one a line). ``wider`` is ``<largest signed value>:<wider sqlType>`` for an unsigned integer
column (a value above it writes the wider sqlType, as Canal does). A masked table gets no description (its
records keep the sidecar), and so does anything the JVM cannot convert with certainty, record by record.
"""

from __future__ import annotations

import json
from typing import Any

from appender.rowshape import Where
from ums.formats import FormatOptions
from ums.formats.canal import _codec
from ums.message import UmsField
from ums.rowchange import TableShape
from ums.types import ColumnSpec, UmsType, parse_column_type, set_members

FORMAT = "canal-json"

_KINDS: dict[UmsType, str] = {
    UmsType.INT: "int",
    UmsType.FLOAT: "float",
    UmsType.DOUBLE: "float",
    UmsType.BINARY: "bin",
}


def _json(value: object) -> str:
    """As ums/formats/canal.py writes a JSON part: compact, non-ASCII as it is."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def column_kind(column: ColumnSpec, field: UmsField) -> str | None:
    """How the JVM writes ``column``'s values (module docstring), None when it does not (masked)."""
    if field.encoded:
        return None
    base = parse_column_type(column.column_type).base
    if base in ("enum", "set", "year"):
        return base
    return _KINDS.get(column.ums_type, "str")


def _members(column: ColumnSpec, kind: str) -> bytes | None:
    if kind not in ("enum", "set"):
        return None
    return "\n".join(_json(m) for m in set_members(column.column_type)).encode()


def describe(shape: TableShape, encoder: Any, where: Where) -> list[bytes | None] | None:
    """The description of ``shape`` in canal-json (module docstring), None when a column keeps the sidecar.
    ``encoder``: the canal-json formatter (its ``options``); ``where``: (from, until, topic, ums_key head,
    ums_key tail, record limit)."""
    options: FormatOptions = encoder.options
    kinds = [column_kind(c, f) for c, f in zip(shape.columns, shape.fields, strict=True)]
    if any(k is None for k in kinds):
        return None
    codecs = [_codec(c, f) for c, f in zip(shape.columns, shape.fields, strict=True)]
    start, until, topic, key_head, key_tail, limit = where
    mysql_types = _json({c.name: c.mysql_type for c in codecs})
    fields: list[Any] = [
        FORMAT, str(start), str(until), topic, key_head, key_tail, str(limit), shape.schema, shape.table,
        str(shape.version), shape.ds, "1" if options.tombstones else "0",
        f'],"database":{_json(shape.schema)},"es":',
        f',"isDdl":false,"mysqlType":{mysql_types},"old":',
        f',"pkNames":{_json(list(shape.primary_key) or None)},"sql":"","sqlType":',
        _json({c.name: c.sql_type for c in codecs}),
        f',"table":{_json(shape.table)},"ts":',
        str(len(codecs)),
    ]  # fmt: skip
    for column, codec, kind in zip(shape.columns, codecs, kinds, strict=True):
        wider = "" if codec.wider is None else f"{codec.wider[0]}:{codec.wider[1]}"
        fields += [_json(codec.name), kind, str(codec.sql_type), wider, _members(column, str(kind))]
    fields.append(",".join(str(i) for i in shape.key_indices))
    return [f if f is None or isinstance(f, bytes) else str(f).encode() for f in fields]
