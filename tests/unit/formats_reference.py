"""The per-row encoders as they were before they were made fast (``e7377f9``), kept as the reference the
fast ones must equal byte for byte (not a test module: test_formats_fast imports from here).

Each is the straightforward form: the change's images as dicts of Connect values (``debezium.image_of``),
its records in order by ``debezium.events``, each serialized on its own; canal-json's rows as dicts
through ``json.dumps``.
"""

from __future__ import annotations

import io
import json
from typing import Any

import fastavro
import orjson

from ums.formats import UMS_ID_HEADER, UMS_UID_HEADER, FormatOptions, Record, SchemaIds, avro, canal, debezium
from ums.formats.connect import connect_table
from ums.rowchange import RowChange
from ums.scalars import JsonValue


class DebeziumJsonReference:
    def __init__(self, options: FormatOptions) -> None:
        self.options = options

    def records(self, topic: str, change: RowChange) -> list[Record]:
        table = connect_table(change.table, self.options)
        image = debezium.image_of(table.columns, [debezium._json_converter(c) for c in table.columns])
        envelope = debezium.envelope_dict(table, change.at)

        def value_json(op: str, old: Any, new: Any) -> bytes:
            return debezium.dump_json(envelope(op, old, new))

        out = []
        for event in debezium.events(table, change, image, value_json, debezium.base_headers(change)):
            key = None if event.key is None else orjson.dumps(event.key)
            value = event.value
            if self.options.schemas:
                key_schema, envelope_schema = (
                    orjson.dumps(table.key_schema),
                    orjson.dumps(table.envelope_schema),
                )
                key = None if key is None else b'{"schema":' + key_schema + b',"payload":' + key + b"}"
                value = (
                    None if value is None else b'{"schema":' + envelope_schema + b',"payload":' + value + b"}"
                )
            out.append(Record(key, value, event.headers))
        return out


class AvroRowsReference:
    """Each record's datum (the Connect values as dicts) written by fastavro with the registered schemas."""

    def __init__(self, options: FormatOptions, schema_ids: SchemaIds) -> None:
        self.options = options
        self.schema_ids = schema_ids

    def records(self, topic: str, change: RowChange) -> list[Record]:
        table = connect_table(change.table, self.options)
        image = debezium.image_of(table.columns, [c.to_connect for c in table.columns])
        key_schema, value_schema = avro.avro_schemas(table)
        key_prefix = b""
        if key_schema is not None:
            key_id = self.schema_ids(f"{topic}-key", avro.schema_text(key_schema))
            key_prefix = avro.MAGIC + key_id.to_bytes(4, "big")
        value_id = self.schema_ids(f"{topic}-value", avro.schema_text(value_schema))
        value_prefix = avro.MAGIC + value_id.to_bytes(4, "big")

        def write(schema: Any, datum: Any) -> bytes:
            out = io.BytesIO()
            fastavro.schemaless_writer(out, fastavro.parse_schema(schema), datum)
            return out.getvalue()

        envelope = debezium.envelope_dict(table, change.at)
        out = []
        for event in debezium.events(table, change, image, envelope, debezium.base_headers(change)):
            key = None if event.key is None else key_prefix + write(key_schema, event.key)
            value = None if event.value is None else value_prefix + write(value_schema, event.value)
            out.append(Record(key, value, event.headers))
        return out


def _compact(value: object) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


class CanalJsonReference:
    def __init__(self, options: FormatOptions) -> None:
        self.options = options

    def records(self, topic: str, change: RowChange) -> list[Record]:
        shape = change.table
        codecs = tuple(canal._codec(c, f) for c, f in zip(shape.columns, shape.fields, strict=True))
        sql_types = {c.name: c.sql_type for c in codecs}
        headers: tuple[tuple[str, bytes], ...] = (
            (UMS_ID_HEADER, str(change.at.ums_id).encode()),
            (UMS_UID_HEADER, change.ums_uid.encode()),
            (canal.VERSION_HEADER, str(shape.version).encode()),
            (canal.DS_HEADER, shape.ds.encode()),
        )
        encoded = {f.name: f.type.value for f in shape.fields if f.encoded}
        if encoded:
            headers += ((canal.ENCODED_HEADER, json.dumps(encoded, separators=(",", ":")).encode()),)
        if change.at.snapshot != "false":
            headers += ((canal.SNAPSHOT_HEADER, change.at.snapshot.encode()),)
        where = f"{topic} ums_uid_ {change.ums_uid}"

        def row(values: tuple[JsonValue, ...]) -> tuple[dict[str, Any], dict[str, int] | None]:
            data: dict[str, Any] = {}
            wider = None
            for codec, value in zip(codecs, values, strict=True):
                if value is None:
                    data[codec.name] = None
                    continue
                try:
                    text = codec.text(value)
                except (TypeError, ValueError) as err:
                    msg = f"{where}: field {codec.name} ({codec.mysql_type}): {err}"
                    raise canal.BadValueError(msg) from err
                data[codec.name] = text
                if codec.wider is not None and int(text) > codec.wider[0]:
                    wider = {**(wider or sql_types), codec.name: codec.wider[1]}
            return data, wider

        def record(kind: str, values: Any, before: Any) -> Record:
            if values is None:
                raise canal.BadValueError(f"{where}: the change lacks the row image its operation needs")
            data, wider = row(values)
            old = "null"
            if before is not None:
                old_data, _ = row(before)
                old = _compact([{n: t for n, t in old_data.items() if t != data[n]}])
            at = change.at
            doc = {
                "data": [data],
                "database": shape.schema,
                "es": at.ts_ms,
                "gtid": at.gtid or "",
                "id": at.ums_id,
                "isDdl": False,
                "mysqlType": {c.name: c.mysql_type for c in codecs},
                "old": json.loads(old),
                "pkNames": list(shape.primary_key) or None,
                "sql": "",
                "sqlType": wider or sql_types,
                "table": shape.table,
                "ts": at.ts_ms,
                "type": kind,
            }
            key = None
            if shape.primary_key:
                key = _compact({shape.fields[i].name: values[i] for i in shape.key_indices}).encode()
            return Record(key, _compact(doc).encode(), headers)

        def delete(values: Any) -> list[Record]:
            deleted = record("DELETE", values, None)
            if not self.options.tombstones or deleted.key is None:
                return [deleted]
            return [deleted, Record(deleted.key, None, headers)]

        if change.op in ("c", "r"):
            return [record("INSERT", change.after, None)]
        if change.op == "d":
            return delete(change.before)
        if change.key_changed:
            return [*delete(change.before), record("INSERT", change.after, None)]
        return [record("UPDATE", change.after, change.before)]
