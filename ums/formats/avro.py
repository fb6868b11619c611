"""avro: Debezium's MySQL envelope in Avro, as Confluent's AvroConverter writes it (docs/formats.md).

The Avro schemas are derived from the Connect schemas of ums/formats/connect.py by the rules of
Confluent's ``AvroData.fromConnectSchema`` (which Apicurio's converter follows too): a struct is a
``record`` named after its Connect name (``demo.shop.orders.Value`` -> name ``Value``, namespace
``demo.shop.orders``; a name already defined is referenced, not defined twice), an optional schema is the
union ``["null", T]`` with default null (``[T, "null"]`` with its default when it has one), INT8/INT16 are
Avro ``int`` with ``connect.type``, and a schema's name, version, parameters and default go to
``connect.name``, ``connect.version``, ``connect.parameters`` and ``connect.default``; Connect's Decimal
is ``bytes`` with ``logicalType`` decimal, ``precision`` (its ``connect.decimal.precision``) and ``scale``.

Key and value are each in the Confluent wire format: byte 0, the schema's registry id (4 bytes, big
endian) under the subject ``<topic>-key`` / ``<topic>-value``, then the Avro binary (written here per
column, byte for byte what fastavro's schemaless writer writes: ``encoder`` below). The ids come from a
``SchemaIds`` callable (the registry edge, dbuslib/registry.py); its ``SchemaRefused`` propagates (the
caller dead-letters the record). Headers as debezium-json:
``ums_id_``, ``ums_uid_``, ``ums_version`` (and ``__debezium.oldkey``/``newkey`` on a key change).

Example value schema (abridged)::

    {"type":"record","name":"Envelope","namespace":"demo.shop.orders","fields":[
      {"name":"before","type":["null",{"type":"record","name":"Value","fields":[
        {"name":"id","type":"int"},
        {"name":"amount","type":["null",{"type":"bytes","scale":2,"precision":10,"connect.version":1,
          "connect.parameters":{"scale":"2","connect.decimal.precision":"10"},
          "connect.name":"org.apache.kafka.connect.data.Decimal","logicalType":"decimal"}],"default":null}],
        "connect.name":"demo.shop.orders.Value"}],"default":null},
      {"name":"after","type":["null","Value"],"default":null}, {"name":"source",...}, {"name":"op",...},
      ...],"connect.version":2,"connect.name":"demo.shop.orders.Envelope"}
"""

from __future__ import annotations

import io
import json
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import fastavro

from ums.formats import (
    UMS_ID_HEADER,
    UMS_UID_HEADER,
    UMS_VERSION_HEADER,
    FormatOptions,
    Record,
    SchemaIds,
    SchemaLookup,
)
from ums.formats.connect import ConnectTable, Schema, avro_fullname, connect_table, table_from
from ums.formats.debezium import (
    NEW_KEY_HEADER,
    OLD_KEY_HEADER,
    Envelope,
    change_from,
    connect_values,
    dump_json,
    header,
    image_of,
    position_from,
    source_of,
)
from ums.rowchange import Position, RowChange, TableShape
from ums.scalars import JsonValue

MAGIC = b"\x00"
_PRIMITIVE = {
    "int8": "int",
    "int16": "int",
    "int32": "int",
    "int64": "long",
    "float": "float",
    "double": "double",
    "boolean": "boolean",
    "string": "string",
    "bytes": "bytes",
}
_LOGICAL = {
    "org.apache.kafka.connect.data.Decimal": "decimal",
    "org.apache.kafka.connect.data.Date": "date",
    "org.apache.kafka.connect.data.Time": "time-millis",
    "org.apache.kafka.connect.data.Timestamp": "timestamp-millis",
}


def avro_schema(schema: Schema, defined: set[str] | None = None, namespace: str = "") -> Any:
    """The Avro schema (JSON value) of a Connect schema in JsonConverter form, as AvroData makes it;
    ``defined``: the record full names already written (referenced by name from then on)."""
    defined = set() if defined is None else defined
    kind = schema["type"]
    name = schema.get("name")
    if kind == "struct":
        full = avro_fullname(name or "ConnectDefault")
        space, _, short = full.rpartition(".")
        if full in defined:  # referenced by name, short within its own namespace (as Avro writes it)
            return short if space == namespace else full
        defined.add(full)
        record: dict[str, Any] = {"type": "record", "name": short}
        if space != namespace:
            record["namespace"] = space
        record["fields"] = [_avro_field(f, defined, space) for f in schema["fields"]]
        _connect_props(record, schema, with_name=True)
        return record
    if kind == "map":
        return {"type": "map", "values": _optional(schema["values"], defined, namespace)[0]}
    base = _PRIMITIVE[kind]
    plain = not (name or schema.get("parameters") or schema.get("version") or kind in ("int8", "int16"))
    if plain and schema.get("default") is None:
        return base
    out: dict[str, Any] = {"type": base}
    params = schema.get("parameters") or {}
    if name == "org.apache.kafka.connect.data.Decimal":
        out["scale"] = int(params.get("scale", "0"))
        out["precision"] = int(params.get("connect.decimal.precision", "64"))
    _connect_props(out, schema, with_name=True)
    if kind in ("int8", "int16"):
        out["connect.type"] = kind
    if name in _LOGICAL:
        out["logicalType"] = _LOGICAL[name]
    return out


def _connect_props(out: dict[str, Any], schema: Schema, *, with_name: bool) -> None:
    """AvroData's connect.* properties, in its order (connect.type follows them)."""
    if schema.get("doc") is not None:
        out["connect.doc"] = schema["doc"]
    if schema.get("version") is not None:
        out["connect.version"] = schema["version"]
    if schema.get("parameters"):
        out["connect.parameters"] = dict(schema["parameters"])
    if schema.get("default") is not None:
        out["connect.default"] = schema["default"]
    if with_name and schema.get("name"):
        out["connect.name"] = schema["name"]


def _optional(schema: Schema, defined: set[str], namespace: str) -> tuple[Any, Any, bool]:
    """(Avro type, default, has default) of a field schema."""
    inner = avro_schema(schema, defined, namespace)
    if not schema.get("optional"):
        return inner, None, False
    if schema.get("default") is not None:
        return [inner, "null"], schema["default"], True
    return ["null", inner], None, True


def _avro_field(field: Schema, defined: set[str], namespace: str) -> dict[str, Any]:
    seen = field["type"] == "struct" and avro_fullname(field.get("name") or "ConnectDefault") in defined
    kind, default, has_default = _optional(field, defined, namespace)
    out: dict[str, Any] = {"name": field["field"], "type": kind}
    if has_default:
        out["default"] = default
    if seen and field.get("parameters"):  # a record referenced again keeps its parameters on the field
        out["connect.parameters"] = dict(field["parameters"])
    return out


def schema_text(schema: Any) -> str:
    """The schema as the text registered (compact JSON)."""
    return json.dumps(schema, separators=(",", ":"), ensure_ascii=False)


def _strip_logical(schema: Any) -> Any:
    """The schema without logicalType: fastavro then reads decimals and dates as their raw bytes and
    ints, the Connect values the converters take."""
    if isinstance(schema, list):
        return [_strip_logical(s) for s in schema]
    if isinstance(schema, dict):
        return {k: _strip_logical(v) for k, v in schema.items() if k != "logicalType"}
    return schema


# --- encoding -----------------------------------------------------------------------------------------
# Avro's binary encoding written here, field by field from the Connect schema (fastavro's writer spends
# most of its time choosing union branches; tests hold these bytes equal to fastavro's for every golden
# row): int and long zigzag varints, float and double little-endian, bytes and string length-prefixed,
# a union the branch's index then the value, a record its fields in order.

Encode = Callable[[Any], bytes]


def _varint(number: int) -> bytes:
    n = (number << 1) ^ (number >> 63)
    if n < 0x4000:
        return bytes((n,)) if n < 0x80 else bytes(((n & 0x7F) | 0x80, n >> 7))
    if n < 0x200000:
        return bytes(((n & 0x7F) | 0x80, (n >> 7 & 0x7F) | 0x80, n >> 14))
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


_SMALL = {n: _varint(n) for n in range(-8192, 8192)}  # one and two bytes: looked up


def zigzag(number: int) -> bytes:
    """Avro's int/long encoding: zigzag, then base-128 varint."""
    small = _SMALL.get(number)
    return _varint(number) if small is None else small


def _text(value: str) -> bytes:
    data = value.encode("utf-8")
    return zigzag(len(data)) + data


def _blob(value: bytes) -> bytes:
    return zigzag(len(value)) + value


_FLOAT, _DOUBLE = struct.Struct("<f").pack, struct.Struct("<d").pack
_ENCODERS: dict[str, Encode] = {
    "boolean": lambda v: b"\x01" if v else b"\x00",
    "int8": zigzag,
    "int16": zigzag,
    "int32": zigzag,
    "int64": zigzag,
    "float": _FLOAT,
    "double": _DOUBLE,
    "string": _text,
    "bytes": _blob,
}
_NULL_FIRST, _VALUE_SECOND = b"\x00", b"\x02"  # union branch 0 and 1


def _optional_text(v: Any) -> bytes:
    if v is None:
        return b"\x00"
    data = v.encode("utf-8")
    small = _SMALL.get(len(data))
    return b"\x02" + (_varint(len(data)) if small is None else small) + data


def _optional_number(v: Any) -> bytes:
    if v is None:
        return b"\x00"
    small = _SMALL.get(v)
    return b"\x02" + (_varint(v) if small is None else small)


# optional schemas (union null first) of these types: one call per value
_OPTIONAL: dict[str, Encode] = {
    "string": _optional_text,
    **dict.fromkeys(("int8", "int16", "int32", "int64"), _optional_number),
}


def encoder(schema: Schema) -> Encode:
    """The Avro binary encoder of a Connect schema, for the Avro schema ``avro_schema`` makes of it."""
    inner = _inner_encoder(schema)
    if not schema.get("optional"):
        return inner
    if schema.get("default") is None and schema["type"] in _OPTIONAL:
        return _OPTIONAL[schema["type"]]
    if schema.get("default") is not None:  # [T, "null"]
        return lambda v: _VALUE_SECOND if v is None else _NULL_FIRST + inner(v)
    return lambda v: _NULL_FIRST if v is None else _VALUE_SECOND + inner(v)


def _inner_encoder(schema: Schema) -> Encode:
    kind = schema["type"]
    if kind == "struct":
        fields = [(f["field"], encoder(f)) for f in schema["fields"]]
        return lambda v: b"".join([enc(v[name]) for name, enc in fields])
    if kind == "map":
        value = encoder(schema["values"])

        def map_(v: dict[str, Any]) -> bytes:
            if not v:
                return b"\x00"
            items = b"".join(_text(k) + value(x) for k, x in v.items())
            return zigzag(len(v)) + items + b"\x00"

        return map_
    return _ENCODERS[kind]


@dataclass(frozen=True)
class _Plan:
    table: ConnectTable
    image: Callable[[Sequence[JsonValue]], dict[str, Any]]  # a UMS tuple -> its Connect struct (tests)
    key_schema: Any  # Avro JSON (None: no primary key)
    value_schema: Any
    key_encode: Encode | None
    envelope: EnvelopeEncoder
    version_header: tuple[str, bytes]
    values: Callable[[Sequence[JsonValue]], list[Any]]  # a UMS tuple -> its Connect values, in order
    row: Callable[[list[Any]], bytes]  # Connect values -> the Value record's Avro, as before/after
    key: Callable[[list[Any]], bytes]  # Connect values -> the Key record's Avro
    key_columns: tuple[int, ...]


def avro_schemas(table: ConnectTable) -> tuple[Any, Any]:
    """(key, value) Avro schemas of a table version (key None without a primary key)."""
    key = None if table.key_schema is None else avro_schema(table.key_schema)
    return key, avro_schema(table.envelope_schema)


def _row_encoder(table: ConnectTable) -> Callable[[list[Any]], bytes]:
    """Connect values -> the optional Value record (union branch 1, then each field's encoding)."""
    encoders = tuple(encoder(c.schema) for c in table.columns)

    def row(values: list[Any]) -> bytes:
        return b"\x02" + b"".join([enc(v) for enc, v in zip(encoders, values, strict=True)])

    return row


def _key_encoder(table: ConnectTable) -> Callable[[list[Any]], bytes]:
    """Connect values -> the Key record (its columns NOT NULL, in key order)."""
    encoders = tuple((i, encoder({**table.columns[i].schema, "optional": False})) for i in table.key_columns)
    return lambda values: b"".join([enc(values[i]) for i, enc in encoders])


class AvroRows:
    """The avro encoder (``formatter("avro", options, schema_ids)``). Per row it converts the values to
    Connect's (only the columns whose UMS value is not already its Connect value) and writes each field
    with its column's encoder; the source block's parts and the timestamps are encoded once per binlog
    event (``envelope_encoder``), the registry ids asked once per (topic, table version)."""

    name = "avro"

    def __init__(self, options: FormatOptions, schema_ids: SchemaIds) -> None:
        self.options = options
        self.schema_ids = schema_ids
        self._plans: dict[TableShape, _Plan] = {}
        self._ids: dict[tuple[str, TableShape], tuple[bytes | None, bytes]] = {}
        self._last: tuple[TableShape | None, _Plan | None] = (None, None)
        self._last_ids: tuple[str, TableShape | None, tuple[bytes | None, bytes] | None] = ("", None, None)
        self._ums_id, self._ums_id_bytes = -1, b""

    def plan(self, shape: TableShape) -> _Plan:
        last_shape, last_plan = self._last
        if shape is last_shape and last_plan is not None:
            return last_plan
        plan = self._plans.get(shape)
        if plan is None:
            table = connect_table(shape, self.options)
            to_connect = [c.to_connect for c in table.columns]
            image = image_of(table.columns, to_connect)
            key, value = avro_schemas(table)
            key_encode = None if table.key_schema is None else encoder(table.key_schema)
            version = (UMS_VERSION_HEADER, str(shape.version).encode("ascii"))
            plan = _Plan(
                table, image, key, value, key_encode, EnvelopeEncoder(table), version,
                connect_values(table.columns, to_connect), _row_encoder(table), _key_encoder(table),
                table.key_columns,
            )  # fmt: skip
            self._plans[shape] = plan
        self._last = (shape, plan)
        return plan

    def _prefixes(self, topic: str, shape: TableShape, plan: _Plan) -> tuple[bytes | None, bytes]:
        last_topic, last_shape, last = self._last_ids
        if topic == last_topic and shape is last_shape and last is not None:
            return last
        got = self._ids.get((topic, shape))
        if got is None:
            key = None
            if plan.key_schema is not None:
                key_id = self.schema_ids(f"{topic}-key", schema_text(plan.key_schema))
                key = MAGIC + key_id.to_bytes(4, "big")
            value_id = self.schema_ids(f"{topic}-value", schema_text(plan.value_schema))
            got = self._ids[(topic, shape)] = (key, MAGIC + value_id.to_bytes(4, "big"))
        self._last_ids = (topic, shape, got)
        return got

    def records(self, topic: str, change: RowChange) -> list[Record]:
        """The change's records in order, as ``debezium.events`` orders them."""
        shape = change.table
        last_shape, plan = self._last
        if shape is not last_shape or plan is None:
            plan = self.plan(shape)
        key_prefix, value_prefix = self._prefixes(topic, shape, plan)
        at = change.at
        upto, tail = plan.envelope.event(at)
        source = upto + zigzag(at.row) + b"\x00\x00"  # row, then thread and query: null
        if at.ums_id != self._ums_id:
            self._ums_id, self._ums_id_bytes = at.ums_id, str(at.ums_id).encode("ascii")
        headers = (
            (UMS_ID_HEADER, self._ums_id_bytes),
            (UMS_UID_HEADER, change.ums_uid.encode("ascii")),
            plan.version_header,
        )

        def envelope(op: str, old: bytes, new: bytes) -> bytes:
            return b"".join((value_prefix, old, new, source, _OPS[op], tail))

        values_of, row, key_columns = plan.values, plan.row, plan.key_columns
        before = None if change.before is None else values_of(change.before)
        after = None if change.after is None else values_of(change.after)
        old = b"\x00" if before is None else row(before)
        keyed = key_prefix is not None and bool(key_columns)
        op = change.op
        if op == "d":
            key = None if before is None or not keyed else key_prefix + plan.key(before)  # type: ignore[operator]
            deleted = Record(key, envelope("d", old, b"\x00"), headers)
            return [deleted, Record(key, None, headers)] if self.options.tombstones else [deleted]
        new = b"\x00" if after is None else row(after)
        key = None if after is None or not keyed else key_prefix + plan.key(after)  # type: ignore[operator]
        if (
            op == "u"
            and before is not None
            and after is not None
            and key_columns
            and [before[i] for i in key_columns] != [after[i] for i in key_columns]
        ):
            names = plan.table.key_names
            new_header = (
                (NEW_KEY_HEADER, dump_json({n: after[i] for n, i in zip(names, key_columns, strict=True)})),
            )
            old_header = (
                (OLD_KEY_HEADER, dump_json({n: before[i] for n, i in zip(names, key_columns, strict=True)})),
            )
            old_key = None if not keyed else key_prefix + plan.key(before)  # type: ignore[operator]
            out = [Record(old_key, envelope("d", old, b"\x00"), headers + new_header)]
            if self.options.tombstones:
                out.append(Record(old_key, None, headers + new_header))
            out.append(Record(key, envelope("c", b"\x00", new), headers + old_header))
            return out
        return [Record(key, envelope(op, old, new), headers)]


class EnvelopeEncoder:
    """The Envelope record's Avro for one table version. The source block's parts that stay the same
    through a binlog event (all but ``row``: up to ``pos``) and the timestamps are encoded once per event
    (``event``); ``encoder(at)`` gives the envelope of a change at ``at`` from its images (dicts of
    Connect values, or already encoded)."""

    def __init__(self, table: ConnectTable) -> None:
        self.table = table
        fields = {f["field"]: f for f in table.envelope_schema["fields"]}
        self.row_image = encoder(fields["before"])
        source_fields = fields["source"]["fields"]
        self._head = encoder(
            {**fields["source"], "fields": [f for f in source_fields if f["field"] not in _SOURCE_TAIL]}
        )
        self._key: tuple[Any, ...] | None = None
        self._file: str | None = None
        self._pos: int | None = None
        self._parts = (b"", b"", b"", b"")  # head, file, up to pos, the times and transaction

    def event(self, at: Position) -> tuple[bytes, bytes]:
        """(the source block up to and with ``pos``, the envelope's fields after ``op``) at ``at``."""
        head, file_bytes, upto, tail = self._parts
        key = (at.ts_ms, at.snapshot, at.server_id, at.gtid)
        if key != self._key:
            ts = at.ts_ms
            # ts_ms, ts_us, ts_ns, then transaction: null
            tail = (
                b"\x02"
                + zigzag(ts)
                + b"\x02"
                + zigzag(ts * 1000)
                + b"\x02"
                + zigzag(ts * 1_000_000)
                + b"\x00"
            )
            self._key, head, self._pos = key, self._head(source_of(self.table, at)), None
        if at.file != self._file:
            self._file, file_bytes, self._pos = at.file, _text(at.file), None
        if at.pos != self._pos:
            self._pos, upto = at.pos, head + file_bytes + zigzag(at.pos)
            self._parts = (head, file_bytes, upto, tail)
        return upto, tail

    def __call__(self, at: Position) -> Envelope:
        upto, tail = self.event(at)
        # the source block: its fields up to pos, row, thread and query (null)
        source = upto + zigzag(at.row) + b"\x00\x00"
        row_image = self.row_image

        def envelope(op: str, old: Any, new: Any) -> bytes:
            if type(old) is not bytes:
                old = row_image(old)
            if type(new) is not bytes:
                new = row_image(new)
            return b"".join((old, new, source, _OPS[op], tail))

        return envelope


def envelope_encoder(table: ConnectTable) -> Callable[[Position], Envelope]:
    """The encoder of the envelope of a change at a position (``EnvelopeEncoder``)."""
    return EnvelopeEncoder(table)


_OPS = {op: _text(op) for op in ("c", "u", "d", "r")}


# the source fields from ``file`` on (file, pos, row, thread, query): written per change
_SOURCE_TAIL = frozenset({"file", "pos", "row", "thread", "query"})


# --- decoding -----------------------------------------------------------------------------------------


def connect_field(field: dict[str, Any]) -> Schema:
    """An Avro record field (as AvroData writes it) -> its Connect field schema in JsonConverter form (the
    parts ``column_from_schema`` reads: type, optional, name, parameters, field)."""
    kind = field["type"]
    optional = False
    if isinstance(kind, list):
        optional = "null" in kind
        kind = next(k for k in kind if k != "null")
    if isinstance(kind, str) and kind not in _AVRO_PRIMITIVE:  # a record defined earlier, by name
        out: Schema = {"type": "struct", "optional": optional, "name": kind}
        if field.get("connect.parameters"):
            out["parameters"] = field["connect.parameters"]
        out["field"] = field["name"]
        return out
    out = {"type": _connect_type(kind), "optional": optional}
    if isinstance(kind, dict):
        if kind.get("connect.name"):
            out["name"] = kind["connect.name"]
        if kind.get("connect.parameters"):
            out["parameters"] = kind["connect.parameters"]
    out["field"] = field["name"]
    return out


_AVRO_PRIMITIVE = frozenset({"null", "boolean", "int", "long", "float", "double", "bytes", "string"})


def _connect_type(kind: Any) -> str:
    if isinstance(kind, str):
        return {"int": "int32", "long": "int64"}.get(kind, kind)
    if kind.get("type") == "record":
        return "struct"
    if kind.get("connect.type"):
        return str(kind["connect.type"])
    return _connect_type(kind["type"])


def _record_fields(schema: Any, field: str) -> list[dict[str, Any]]:
    """The fields of record ``field`` (before/after: the Value record) of an envelope schema."""
    for f in schema["fields"]:
        if f["name"] == field:
            kinds = f["type"] if isinstance(f["type"], list) else [f["type"]]
            return next(k for k in kinds if isinstance(k, dict) and k.get("type") == "record")["fields"]
    msg = f"avro value schema: no field {field!r}"
    raise ValueError(msg)


class _Decoder:
    def __init__(self) -> None:
        self._readers: dict[tuple[str, str, int], tuple[ConnectTable, list[tuple[str, Any]]]] = {}
        self._parsed: dict[str, tuple[Any, Any]] = {}

    def _schema(self, text: str) -> tuple[Any, Any]:
        """The schema of a text the lookup gave (cached by text: ids are only unique per registry)."""
        got = self._parsed.get(text)
        if got is None:
            schema = json.loads(text)
            got = self._parsed[text] = (schema, fastavro.parse_schema(_strip_logical(schema)))
        return got

    def decode(
        self,
        key: bytes | None,
        value: bytes | None,
        headers: Sequence[tuple[str, bytes]],
        schemas: SchemaLookup,
    ) -> RowChange | None:
        if value is None:
            return None
        value_text = schemas(_schema_id(value, "value"))
        key_text = "" if key is None else schemas(_schema_id(key, "key"))
        schema, parsed = self._schema(value_text)
        datum: Any = fastavro.schemaless_reader(io.BytesIO(value[5:]), parsed, None)
        source = datum["source"]
        version = int(header(headers, UMS_VERSION_HEADER) or "0")
        reader = self._readers.get((key_text, value_text, version))
        if reader is None:
            value_fields = [connect_field(f) for f in _record_fields(schema, "before")]
            key_fields = None
            if key_text:
                key_fields = [connect_field(f) for f in self._schema(key_text)[0]["fields"]]
            table = table_from(value_fields, key_fields, source, version)
            backs = [(c.name, c.from_connect) for c in table.columns]
            reader = self._readers[(key_text, value_text, version)] = (table, backs)
        table, backs = reader
        at, uid = position_from(source, headers)
        return change_from(datum, table.shape, backs, at, uid, "avro")


def _schema_id(data: bytes, what: str) -> int:
    if len(data) < 5 or data[:1] != MAGIC:
        msg = f"avro {what}: not the Confluent wire format (magic byte 0 and a 4-byte schema id)"
        raise ValueError(msg)
    return int.from_bytes(data[1:5], "big")


_DECODER = _Decoder()


def decode_avro_row(
    key: bytes | None, value: bytes | None, headers: Sequence[tuple[str, bytes]], schemas: SchemaLookup
) -> RowChange | None:
    """An avro record back to its RowChange (None for a tombstone); ``ValueError`` names what it cannot
    read (a schema the lookup fails on raises the lookup's own error)."""
    try:
        return _DECODER.decode(key, value, headers, schemas)
    except (KeyError, TypeError, IndexError, StopIteration, EOFError) as err:
        msg = f"avro value: missing or bad field {err!r}"
        raise ValueError(msg) from err
