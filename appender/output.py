"""How a UMS message leaves the appender: the Kafka record value and extra headers (``ums.format``).

- ``json`` (default): ``ums.to_json(message)`` in UTF-8, no extra header. The value is self-describing.
- ``avro``: schemaless Avro (``ums.encode_avro``), i.e. the bare datum without a schema or container
  header, so a record costs no more than its values. The schema (``ums.avro_schema(message.schema)``,
  one per namespace, i.e. per table version; masking that changes a field's type gives another one) is
  stored once in the meta store table ``dbus_meta_avro_schema``, keyed by its fingerprint, and every
  record carries the header ``ums_avro_schema`` = that fingerprint (ASCII, 64 hex digits). A consumer
  reads the header, fetches the schema once per fingerprint (``MetaStore.avro_schema``) and decodes
  with ``ums.decode_avro``; ``decode`` below does exactly that.

The fingerprint is the SHA-256 (hex) of the schema's canonical text (``json.dumps(schema,
sort_keys=True, separators=(",", ":"))``), which is also the stored ``schema_json``: a consumer can
check what it fetched. Avro's own Parsing Canonical Form is not used because it drops the ``ums_*``
attributes that rebuild the exact UMS message.

The schema is stored before the first record that needs it is produced, so a consumer never sees a
fingerprint it cannot resolve. The encoder caches fingerprints per (namespace, fields): the store is
written once per schema per process; inserts are idempotent and race-safe across executors.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from ums import UmsField, UmsMessage, UmsSchema, avro_schema, decode_avro, encode_avro, from_json, to_json
from ums import headers as ums_headers

SCHEMA_HEADER = ums_headers.AVRO_SCHEMA
FORMATS = ("json", "avro")


class SchemaStore(Protocol):
    """The part of ``dbuslib.metastore.MetaStore`` the encoder and ``decode`` use."""

    def add_avro_schema(self, namespace: str, fingerprint: str, schema_json: str) -> Any: ...

    def avro_schema(self, fingerprint: str) -> Any: ...  # an object with ``schema_json``, or None


def schema_text(message: UmsMessage) -> str:
    """The canonical text of the message's Avro schema (what is stored and fingerprinted)."""
    return schema_text_of(message.schema)


def schema_text_of(schema: UmsSchema) -> str:
    """``schema_text`` of the messages of ``schema``."""
    return json.dumps(avro_schema(schema), sort_keys=True, separators=(",", ":"))


def fingerprint(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass
class MessageEncoder:
    """``encode(message) -> (value, extra headers)`` in the source's ``ums.format``."""

    format: str = "json"
    store: SchemaStore | None = None
    _known: dict[tuple[str, tuple[UmsField, ...]], str] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        if self.format not in FORMATS:
            msg = f"ums.format {self.format!r}: expected one of {FORMATS}"
            raise ValueError(msg)
        if self.format == "avro" and self.store is None:
            msg = "ums.format avro needs the meta store to publish the Avro schemas"
            raise ValueError(msg)

    @classmethod
    def from_source(cls, src: Any, store: SchemaStore | None) -> MessageEncoder:
        """From a ``dbuslib.config.Source`` (its ``ums.format``) and the meta store."""
        return cls(src.ums.format, store)

    def encode(self, message: UmsMessage) -> tuple[bytes, tuple[tuple[str, bytes], ...]]:
        if self.format == "json":
            return to_json(message).encode(), ()
        return encode_avro(message), ((SCHEMA_HEADER, self.schema_id(message).encode("ascii")),)

    def schema_id(self, message: UmsMessage) -> str:
        """The fingerprint of the message's Avro schema, stored in the meta store on first use."""
        return self.schema_id_of(message.schema)

    def schema_id_of(self, schema: UmsSchema) -> str:
        """``schema_id`` of the messages of ``schema``."""
        key = (str(schema.namespace), schema.fields)
        known = self._known.get(key)
        if known is None:
            text = schema_text_of(schema)
            known = fingerprint(text)
            assert self.store is not None
            self.store.add_avro_schema(key[0], known, text)
            self._known[key] = known
        return known


@dataclass
class SchemaCache:
    """Consumer side: Avro schemas by fingerprint, fetched from the store once each."""

    store: SchemaStore
    _schemas: dict[str, dict[str, Any]] = field(default_factory=dict, repr=False)

    def get(self, fp: str) -> dict[str, Any]:
        schema = self._schemas.get(fp)
        if schema is None:
            row = self.store.avro_schema(fp)
            if row is None:
                msg = f"Avro schema {fp} is not in the meta store"
                raise LookupError(msg)
            if fingerprint(row.schema_json) != fp:
                msg = f"Avro schema {fp}: the stored text does not match its fingerprint"
                raise LookupError(msg)
            schema = self._schemas[fp] = json.loads(row.schema_json)
        return schema


def decode(
    value: bytes, headers: Iterable[tuple[str, bytes]] | None, store: SchemaStore | SchemaCache | None = None
) -> UmsMessage:
    """A result record back to its UMS message: Avro when it carries ``ums_avro_schema``, else JSON.

    ``store`` (a MetaStore or, better for many records, a ``SchemaCache``) is needed for Avro only.
    """
    fp = next((v for k, v in headers or () if k == SCHEMA_HEADER), None)
    if fp is None:
        return from_json(value)
    if store is None:
        msg = "an Avro record needs the meta store to resolve its schema"
        raise ValueError(msg)
    cache = store if isinstance(store, SchemaCache) else SchemaCache(store)
    fp_text = fp.decode("ascii") if isinstance(fp, bytes) else fp
    return decode_avro(value, cache.get(fp_text))


Headers = tuple[tuple[str, bytes], ...]


def encode_record(encoder: MessageEncoder | None, message: UmsMessage) -> tuple[bytes, Headers]:
    """What ``PartitionProcessor._out`` calls: the encoder's output, or JSON without one."""
    if encoder is None:
        return to_json(message).encode(), ()
    return encoder.encode(message)
