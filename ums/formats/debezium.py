"""debezium-json: Debezium's MySQL change event, JSON as Kafka Connect's JsonConverter writes it
(docs/formats.md).

A record's key is the primary key (``{"schema": <...Key struct>, "payload": {"id": 1}}``; no primary key:
a null key), its value the envelope (``{"schema": <...Envelope>, "payload": {"before": ..., "after": ...,
"source": {...}, "op": "u", "ts_ms": ..., "ts_us": ..., "ts_ns": ..., "transaction": null}}``); with
``FormatOptions.schemas`` off both are the bare payloads. Ops: ``c`` insert, ``u`` update, ``d`` delete
(then a tombstone: the key and a null value, when ``tombstones``), ``r`` a full-pull row. An update that
changes the primary key is written as Debezium writes it: a delete of the old key (header
``__debezium.newkey``), its tombstone, and a create of the new key (header ``__debezium.oldkey``).

Every record carries the headers ``ums_id_``, ``ums_uid_`` and ``ums_version`` (ASCII digits), so
``decode_debezium`` rebuilds the exact ``RowChange``: the table's columns from the value schema's
``__dbus.column.type`` parameters, the values from the payload.

Example payload of an insert (``op`` c, schema omitted)::

    {"before": null, "after": {"id": 1, "amount": "AMg="}, "source": {"version": "dbus-0.1.0",
     "connector": "mysql", "name": "demo", "ts_ms": 1700000000000, "snapshot": "false", "db": "shop", ...,
     "table": "orders", "server_id": 1, "gtid": null, "file": "mysql-bin.000003", "pos": 1234, "row": 0,
     "thread": null, "query": null}, "op": "c", "ts_ms": 1700000000000, ..., "transaction": null}
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from ums.formats import (
    UMS_ID_HEADER,
    UMS_UID_HEADER,
    UMS_VERSION_HEADER,
    FormatOptions,
    Record,
)
from ums.formats.connect import (
    DECIMAL,
    ConnectColumn,
    ConnectTable,
    connect_table,
    decimal_base64,
    identity,
    table_from,
)
from ums.rowchange import Position, RowChange, Snapshot, TableShape
from ums.scalars import JsonValue
from ums.types import UmsType

OLD_KEY_HEADER, NEW_KEY_HEADER = "__debezium.oldkey", "__debezium.newkey"
FILE_NUMBER_SCALE = 10**13  # ums_id = binlog file number * 10^13 + pos (ums.ids)

Image = Callable[[Sequence[JsonValue]], dict[str, Any]]


@dataclass(frozen=True)
class Event:
    """One record before serialization: the key payload (Connect values), the value as the format built
    it (None: a tombstone), extra headers."""

    key: dict[str, Any] | None
    value: Any
    headers: tuple[tuple[str, bytes], ...]


# (op, before image, after image) -> the record's value in the format's terms
Envelope = Callable[[str, dict[str, Any] | None, dict[str, Any] | None], Any]


def _json_bytes(value: Any) -> str:
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    raise TypeError(type(value).__name__)


def dump_json(value: Any) -> bytes:
    """JSON text of Connect values (bytes in Base64, as JsonConverter writes them)."""
    return orjson.dumps(value, default=_json_bytes)


def connect_values(
    columns: Sequence[ConnectColumn], convert: Sequence[Callable[[Any], Any] | None]
) -> Callable[[Sequence[JsonValue]], list[Any]]:
    """``image_of``'s values as a list in column order. Only the columns with a converter are visited;
    a fallback can only be needed where a converter gave None (a zero date), so it is checked there."""
    converted = [(i, f, c.fallback) for i, (f, c) in enumerate(zip(convert, columns, strict=True))
                 if f is not None and f is not identity]  # fmt: skip
    funcs = tuple((i, f) for i, f, fallback in converted if fallback is None)
    guarded = tuple((i, f, fallback) for i, f, fallback in converted if fallback is not None)
    size = len(columns)

    def values_of(values: Sequence[JsonValue]) -> list[Any]:
        if len(values) != size:
            msg = f"a row of {len(values)} values for {size} columns"
            raise ValueError(msg)
        out = list(values)
        for i, f in funcs:
            if (v := out[i]) is not None:
                out[i] = f(v)
        for i, f, fallback in guarded:
            if (v := out[i]) is not None:
                out[i] = fallback if (got := f(v)) is None else got
        return out

    return values_of


def image_of(columns: Sequence[ConnectColumn], convert: Sequence[Callable[[Any], Any] | None]) -> Image:
    """A converter of a UMS tuple to the Connect struct of ``columns`` (``convert``: one converter per
    column, None where the UMS value is the Connect value); a NOT NULL column whose value Debezium cannot
    represent (a zero date) takes Debezium's fallback."""
    names = tuple(c.name for c in columns)
    convert_values = connect_values(columns, convert)

    def image(values: Sequence[JsonValue]) -> dict[str, Any]:
        return dict(zip(names, convert_values(values), strict=True))

    return image


def base_headers(change: RowChange) -> tuple[tuple[str, bytes], ...]:
    return (
        (UMS_ID_HEADER, str(change.at.ums_id).encode("ascii")),
        (UMS_UID_HEADER, change.ums_uid.encode("ascii")),
        (UMS_VERSION_HEADER, str(change.table.version).encode("ascii")),
    )


def source_of(table: ConnectTable, at: Position) -> dict[str, Any]:
    """The envelope's ``source`` block (Debezium's MySQL SourceInfo) for a change at ``at``."""
    shape, options = table.shape, table.options
    return {
        "version": options.version,
        "connector": options.connector,
        "name": shape.ds,
        "ts_ms": at.ts_ms,
        "snapshot": at.snapshot,
        "db": shape.schema,
        "sequence": None,
        "ts_us": at.ts_ms * 1000,
        "ts_ns": at.ts_ms * 1_000_000,
        "table": shape.table,
        "server_id": at.server_id or 0,
        "gtid": at.gtid,
        "file": at.file,
        "pos": at.pos,
        "row": at.row,
        "thread": None,
        "query": None,
    }


def envelope_dict(table: ConnectTable, at: Position) -> Envelope:
    """The envelope as a dict of Connect values (the Avro writer's datum, the tests' reference)."""
    source = source_of(table, at)
    ts = at.ts_ms

    def envelope(op: str, old: dict[str, Any] | None, new: dict[str, Any] | None) -> dict[str, Any]:
        return {"before": old, "after": new, "source": source, "op": op, "ts_ms": ts, "ts_us": ts * 1000,
                "ts_ns": ts * 1_000_000, "transaction": None}  # fmt: skip

    return envelope


def events(
    table: ConnectTable,
    change: RowChange,
    image: Image,
    envelope: Envelope,
    headers: tuple[tuple[str, bytes], ...],
) -> list[Event]:
    """The records of ``change`` in order (key changes and tombstones as Debezium writes them)."""
    key_names = table.key_names
    before = None if change.before is None else image(change.before)
    after = None if change.after is None else image(change.after)

    def key_of(row: dict[str, Any] | None) -> dict[str, Any] | None:
        return None if row is None or not key_names else {k: row[k] for k in key_names}

    tombstones = table.options.tombstones
    if change.op == "d":
        key = key_of(before)
        out = [Event(key, envelope("d", before, None), headers)]
        return [*out, Event(key, None, headers)] if tombstones else out
    if change.op == "u" and before is not None and after is not None and key_names:
        old_key, new_key = key_of(before), key_of(after)
        if old_key != new_key:
            new_header = ((NEW_KEY_HEADER, dump_json(new_key)),)
            old_header = ((OLD_KEY_HEADER, dump_json(old_key)),)
            out = [Event(old_key, envelope("d", before, None), headers + new_header)]
            if tombstones:
                out.append(Event(old_key, None, headers + new_header))
            out.append(Event(new_key, envelope("c", None, after), headers + old_header))
            return out
    return [Event(key_of(after), envelope(change.op, before, after), headers)]


def _json_converter(column: ConnectColumn) -> Callable[[Any], Any]:
    """UMS wire value -> the JSON value JsonConverter writes for ``column``."""
    to = column.to_connect
    if column.binary == "bytes":
        if column.schema.get("name") is None:  # plain bytes: the UMS Base64 text is already the JSON value
            return identity
        if column.schema.get("name") == DECIMAL and column.field.type is UmsType.DECIMAL:
            return decimal_base64(int(column.schema["parameters"]["scale"]))

        def b64(value: Any) -> Any:
            got = to(value)
            return None if got is None else binascii.b2a_base64(got, newline=False).decode("ascii")

        return b64
    if column.binary == "struct":

        def struct(value: Any) -> Any:
            got = dict(to(value))
            got["wkb"] = base64.b64encode(got["wkb"]).decode("ascii")
            return got

        return struct
    return to


def _json_back(column: ConnectColumn) -> Callable[[Any], Any]:
    """A JSON value of ``column`` -> the UMS wire value."""
    back = column.from_connect
    if column.binary == "bytes":
        if column.schema.get("name") is None:
            return identity
        return lambda v: back(base64.b64decode(v))
    if column.binary == "struct":
        return lambda v: back({**v, "wkb": base64.b64decode(v["wkb"])})
    return back


@dataclass(frozen=True)
class _Plan:
    table: ConnectTable
    image: Image
    key_prefix: bytes
    value_prefix: bytes
    version_header: tuple[str, bytes]
    key_of: Callable[[dict[str, Any]], bytes | None]  # an image -> its key payload's JSON (None: no key)
    before: bytes  # the value's start, up to before's image
    close: bytes  # after the envelope: "}" with the schema, else nothing


_OPS = {op: b'"' + op.encode("ascii") + b'"' for op in ("c", "u", "d", "r")}
_SOURCE_END = b',"thread":null,"query":null},"op":'


def _key_changed(names: tuple[str, ...], before: dict[str, Any], after: Any) -> bool:
    """As the images' key dicts compare (identity first, then ==)."""
    return [before[k] for k in names] != [after[k] for k in names]


def _key_json(key_names: tuple[str, ...]) -> Callable[[dict[str, Any]], bytes | None]:
    if not key_names:
        return lambda row: None
    if len(key_names) == 1:
        (name,) = key_names
        return lambda row: orjson.dumps({name: row[name]})
    return lambda row: orjson.dumps({k: row[k] for k in key_names})


class DebeziumJson:
    """The debezium-json encoder (``formatter("debezium-json", options)``). Per row it converts the values
    (only the columns whose UMS value is not already their JSON value), writes each image with one
    ``orjson.dumps`` and joins the parts: the schemas' JSON is written once per table version, the
    ``source`` block and the envelope's tail once per binlog event (all but the source's ``row``)."""

    name = "debezium-json"

    def __init__(self, options: FormatOptions) -> None:
        self.options = options
        self._plans: dict[TableShape, _Plan] = {}
        self._last: tuple[TableShape | None, _Plan | None] = (None, None)
        self._event_at: Position | None = None
        self._event_plan: _Plan | None = None
        self._event_key: tuple[Any, ...] = ()
        self._event: tuple[bytes, bytes, bytes] = (b"", b"", b"")

    def plan(self, shape: TableShape) -> _Plan:
        """The shape's schemas and converters, built once per shape."""
        last_shape, last_plan = self._last
        if shape is last_shape and last_plan is not None:
            return last_plan
        plan = self._plans.get(shape)
        if plan is None:
            table = connect_table(shape, self.options)
            image = image_of(table.columns, [_json_converter(c) for c in table.columns])
            key_prefix = b'{"schema":' + orjson.dumps(table.key_schema) + b',"payload":'
            value_prefix = b'{"schema":' + orjson.dumps(table.envelope_schema) + b',"payload":'
            version = (UMS_VERSION_HEADER, str(shape.version).encode("ascii"))
            schemas = self.options.schemas
            before = (value_prefix if schemas else b"") + b'{"before":'
            key_of, close = _key_json(table.key_names), b"}" if schemas else b""
            plan = _Plan(table, image, key_prefix, value_prefix, version, key_of, before, close)
            self._plans[shape] = plan
        self._last = (shape, plan)
        return plan

    def _event_parts(self, plan: _Plan, at: Position) -> tuple[bytes, bytes, bytes]:
        """(the source block's JSON up to ``"row":``, the envelope's tail after ``op`` with the value's
        closing, the ums_id_ header) of the binlog event at ``at``."""
        if at is self._event_at and plan is self._event_plan:
            return self._event
        key = (id(plan), at.ums_id, at.ts_ms, at.file, at.pos, at.snapshot, at.server_id, at.gtid)
        if key != self._event_key:
            source = source_of(plan.table, at)
            for name in ("row", "thread", "query"):
                del source[name]
            head = orjson.dumps(source)[:-1] + b',"row":'
            ts = at.ts_ms
            tail = b',"ts_ms":%d,"ts_us":%d,"ts_ns":%d,"transaction":null}%s' % (
                ts, ts * 1000, ts * 1_000_000, plan.close)  # fmt: skip
            self._event_key, self._event = key, (head, tail, str(at.ums_id).encode("ascii"))
        self._event_at, self._event_plan = at, plan
        return self._event

    def records(self, topic: str, change: RowChange) -> list[Record]:
        """The change's records in order, as ``events`` orders them (key changes and tombstones)."""
        shape = change.table
        last_shape, plan = self._last
        if shape is not last_shape or plan is None:
            plan = self.plan(shape)
        at = change.at
        head, tail, ums_id = self._event_parts(plan, at)
        source = b"%s%d%s" % (head, at.row, _SOURCE_END)
        headers = (
            (UMS_ID_HEADER, ums_id),
            (UMS_UID_HEADER, change.ums_uid.encode("ascii")),
            plan.version_header,
        )
        image, key_of, start = plan.image, plan.key_of, plan.before
        before = None if change.before is None else image(change.before)
        after = None if change.after is None else image(change.after)
        old = b"null" if before is None else orjson.dumps(before)
        op = change.op
        if op == "d":
            key = None if before is None else key_of(before)
            value = b"".join((start, old, b',"after":null,"source":', source, _OPS["d"], tail))
            record = Record(self._key(plan, key), value, headers)
            return [record, Record(record.key, None, headers)] if self.options.tombstones else [record]
        new = b"null" if after is None else orjson.dumps(after)
        key = None if after is None else key_of(after)
        names = plan.table.key_names
        if op == "u" and before is not None and key is not None and _key_changed(names, before, after):
            old_key = key_of(before) or b"null"  # never None: the table has a key
            new_header = ((NEW_KEY_HEADER, key),)
            old_header = ((OLD_KEY_HEADER, old_key),)
            deleted_key = self._key(plan, old_key)
            deleted = b"".join((start, old, b',"after":null,"source":', source, _OPS["d"], tail))
            out = [Record(deleted_key, deleted, headers + new_header)]
            if self.options.tombstones:
                out.append(Record(deleted_key, None, headers + new_header))
            created = b"".join((start, b'null,"after":', new, b',"source":', source, _OPS["c"], tail))
            out.append(Record(self._key(plan, key), created, headers + old_header))
            return out
        value = b"".join((start, old, b',"after":', new, b',"source":', source, _OPS[op], tail))
        return [Record(self._key(plan, key), value, headers)]

    def _key(self, plan: _Plan, payload: bytes | None) -> bytes | None:
        if payload is None or not self.options.schemas:
            return payload
        return b"%s%s}" % (plan.key_prefix, payload)


# --- decoding -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Reading:
    """What a decoder needs of one value schema: the columns and their converters back to UMS."""

    columns: tuple[tuple[str, Callable[[Any], Any]], ...]  # (Connect field name, back converter)
    shape: TableShape


def header(headers: Sequence[tuple[str, bytes]], name: str) -> str | None:
    for key, value in headers:
        if key == name:
            return value.decode("ascii")
    return None


def position_from(source: dict[str, Any], headers: Sequence[tuple[str, bytes]]) -> tuple[Position, str]:
    """The change's Position and ums_uid from the source block and the ums headers (a record without them,
    e.g. from Debezium itself: ums_id from the binlog file number and position, ums_uid empty)."""
    file, pos = source["file"], int(source["pos"])
    ums_id_text = header(headers, UMS_ID_HEADER)
    if ums_id_text is None:
        number = int(file.rsplit(".", 1)[-1]) if "." in file and file.rsplit(".", 1)[-1].isdigit() else 0
        ums_id = number * FILE_NUMBER_SCALE + pos
    else:
        ums_id = int(ums_id_text)
    snapshot: Snapshot = source.get("snapshot") or "false"
    at = Position(
        ums_id=ums_id,
        ts_ms=int(source["ts_ms"]),
        file=file,
        pos=pos,
        row=int(source.get("row") or 0),
        server_id=source.get("server_id") or None,
        gtid=source.get("gtid"),
        snapshot=snapshot if snapshot in ("false", "last") else "true",
    )
    return at, header(headers, UMS_UID_HEADER) or ""


_SCHEMA, _PAYLOAD = b'{"schema":', b',"payload":'
_Reader = tuple[ConnectTable, list[tuple[str, Callable[[Any], Any]]]]


class _Decoder:
    """Reads records, the table built once per (value schema, key schema, version): a record's schema part
    is compared with the last one's bytes, and only its payload parsed."""

    def __init__(self) -> None:
        self._readers: dict[tuple[bytes, bytes, int], _Reader] = {}
        self._last: tuple[bytes, bytes, int, _Reader] | None = None

    def decode(
        self, key: bytes | None, value: bytes | None, headers: Sequence[tuple[str, bytes]]
    ) -> RowChange | None:
        if value is None:
            return None
        version = int(header(headers, UMS_VERSION_HEADER) or "0")
        cut = value.find(_PAYLOAD) if value.startswith(_SCHEMA) else -1
        payload: Any = None
        if cut > 0:
            try:
                payload = orjson.loads(memoryview(value)[cut + len(_PAYLOAD) : len(value) - 1])
            except orjson.JSONDecodeError:
                payload = None
        if isinstance(payload, dict):
            value_schema = value[:cut]
            schema: Any = None
        else:  # not our layout: the whole value parsed
            doc = _whole(value)
            payload, schema = doc["payload"], doc["schema"]
            value_schema = orjson.dumps(schema)
        key_schema = b""
        if key is not None and key.startswith(_SCHEMA):
            key_cut = key.find(_PAYLOAD)
            key_schema = key[:key_cut] if key_cut > 0 else key
        source = payload["source"]
        last = self._last
        if last is not None and last[0] == value_schema and last[1] == key_schema and last[2] == version:
            reader = last[3]
        else:
            cache_key = (value_schema, key_schema, version)
            reader = self._readers.get(cache_key) or self._readers.setdefault(
                cache_key, self._reader(schema, value, cut, key, source, version)
            )
            self._last = (value_schema, key_schema, version, reader)
        table, backs = reader
        if table.shape.ds != source["name"] or table.shape.table != (source.get("table") or ""):
            table, backs = self._reader(schema, value, cut, key, source, version)
        at, uid = position_from(source, headers)
        return change_from(payload, table.shape, backs, at, uid, "debezium-json")

    @staticmethod
    def _reader(
        schema: Any, value: bytes, cut: int, key: bytes | None, source: dict[str, Any], version: int
    ) -> _Reader:
        if schema is None:
            schema = orjson.loads(memoryview(value)[len(_SCHEMA) : cut])
        fields = {f["field"]: f for f in schema["fields"]}
        value_fields = fields["after"]["fields"]
        key_fields = None
        if key is not None:
            key_doc = orjson.loads(key)
            if isinstance(key_doc, dict) and "schema" in key_doc and key_doc["schema"]:
                key_fields = key_doc["schema"]["fields"]
        table = table_from(value_fields, key_fields, source, version)
        return table, [(c.name, _json_back(c)) for c in table.columns]


def change_from(
    envelope: dict[str, Any],
    shape: TableShape,
    backs: Sequence[tuple[str, Callable[[Any], Any]]],
    at: Position,
    uid: str,
    what: str,
) -> RowChange:
    """The change an envelope (debezium-json's payload, avro's datum) holds: its op, before and after."""
    op = envelope["op"]
    if op not in ("c", "u", "d", "r"):
        msg = f"{what} value: op {op!r} is not c, u, d or r"
        raise ValueError(msg)
    before, after = envelope.get("before"), envelope.get("after")
    return RowChange(
        shape,
        op,
        None if before is None else tuple_from(before, backs),
        None if after is None else tuple_from(after, backs),
        at,
        uid,
    )


def tuple_from(
    image: dict[str, Any], backs: Sequence[tuple[str, Callable[[Any], Any]]]
) -> tuple[JsonValue, ...]:
    """A Connect struct back to the UMS tuple, by (field, converter back) in field order."""
    return tuple([v if (v := image[n]) is None or back is identity else back(v) for n, back in backs])


def _whole(value: bytes) -> dict[str, Any]:
    try:
        doc = orjson.loads(value)
    except orjson.JSONDecodeError as err:
        msg = f"debezium-json value: not JSON: {err}"
        raise ValueError(msg) from err
    if not isinstance(doc, dict) or "schema" not in doc or "payload" not in doc:
        msg = "debezium-json value: no schema (written with schemas off?): cannot rebuild the table"
        raise ValueError(msg)
    return doc


_DECODER = _Decoder()


def decode_debezium(
    key: bytes | None, value: bytes | None, headers: Sequence[tuple[str, bytes]] = ()
) -> RowChange | None:
    """A debezium-json record back to its RowChange (None for a tombstone); ``ValueError`` names what it
    cannot read. A create carrying ``__debezium.oldkey`` (a primary-key change) decodes as the create."""
    try:
        return _DECODER.decode(key, value, headers)
    except (KeyError, TypeError, IndexError) as err:
        msg = f"debezium-json value: missing or bad field {err}"
        raise ValueError(msg) from err
