"""Per-row output formats: one Kafka record per row change, keyed by the primary key (docs/formats.md).

``output.format`` of a source (or of a table glob) picks one; ``ums`` (the default) is not here: it stays
the UMS message path (ums.build, ums.text). Each format is a pure encoder over ``ums.rowchange.RowChange``
and its decoder back to the same terms, so that the appender, the full puller and every reader
(``dbusclient``, reconcile, verify, replicate) share one home per format:

- ``debezium-json`` (ums/formats/debezium.py): Debezium's MySQL envelope, JSON as Kafka Connect's
  JsonConverter writes it (with ``schema`` and ``payload`` unless ``schemas`` is off);
- ``canal-json`` (ums/formats/canal.py): Canal's flat message;
- ``avro`` (ums/formats/avro.py): Debezium's envelope in Avro, as Confluent's AvroConverter writes it:
  the Confluent wire format (magic byte 0, 4-byte big-endian schema id, Avro binary) for key and value;
  the ids come from a schema registry through a ``SchemaIds`` callable (the I/O edge:
  dbuslib/registry.py), so this package stays pure.

A delete is followed by a tombstone (key, null value) when ``FormatOptions.tombstones``; an update that
changes the primary key becomes a delete of the old key (and its tombstone) and a create of the new one.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Literal, Protocol

from ums.rowchange import RowChange

FormatName = Literal["debezium-json", "canal-json", "avro"]
FORMATS: tuple[str, ...] = ("ums", "debezium-json", "canal-json", "avro")  # output.format's values
PER_ROW: tuple[str, ...] = ("debezium-json", "canal-json", "avro")

# (subject, Avro schema as canonical JSON text) -> the registry's id for it (registering it if new).
# Raises ums.formats.SchemaRefused when the registry refuses it (incompatible with the subject's level).
SchemaIds = Callable[[str, str], int]


class SchemaRefused(ValueError):
    """The registry refused a new schema version (compatibility): the record is a dead letter."""

    code = "REGISTRY_SCHEMA_REFUSED"


@dataclass(frozen=True)
class FormatOptions:
    """How a per-row format writes values (config ``output``; Debezium's own option names and defaults).

    - ``tombstones``: a delete is followed by a record with the key and a null value (compaction drops the
      key then), Debezium's ``tombstones.on.delete``;
    - ``schemas``: debezium-json carries ``schema`` beside ``payload`` (JsonConverter ``schemas.enable``);
    - ``decimal_handling_mode``: precise (Connect Decimal: bytes), double or string;
    - ``time_precision_mode``: adaptive_time_microseconds (io.debezium.time.*), or connect (Connect's
      Date, Time, Timestamp logical types in ms);
    - ``bigint_unsigned_handling_mode``: long (wraps above 2^63-1, as Debezium does) or precise (Decimal);
    - ``binary_handling_mode``: bytes, base64, base64-url-safe or hex;
    - ``propagate_source_types``: each column's Connect schema carries Debezium's
      ``__debezium.source.column.type`` / ``.length`` / ``.scale`` parameters (its
      ``column.propagate.source.type``): the JDBC sink then creates exact column types, and our decoders
      rebuild the exact UMS values (an unsigned BIGINT above 2^63-1 included);
    - ``connector`` / ``version``: ``source.connector`` and ``source.version``.
    """

    tombstones: bool = True
    schemas: bool = True
    decimal_handling_mode: Literal["precise", "double", "string"] = "precise"
    time_precision_mode: Literal["adaptive_time_microseconds", "connect"] = "adaptive_time_microseconds"
    bigint_unsigned_handling_mode: Literal["long", "precise"] = "long"
    binary_handling_mode: Literal["bytes", "base64", "base64-url-safe", "hex"] = "bytes"
    propagate_source_types: bool = True
    connector: str = "mysql"
    version: str = "dbus-0.1.0"


@dataclass(frozen=True)
class Record:
    """One output record: ``key`` and ``value`` bytes (``value`` None: a tombstone), extra headers."""

    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes], ...] = ()


class Format(Protocol):
    """A per-row format: ``records(topic, change)`` -> the change's output records, in order."""

    name: str

    def records(self, topic: str, change: RowChange) -> list[Record]: ...


def formatter(name: str, options: FormatOptions, schema_ids: SchemaIds | None = None) -> Format:
    """The encoder of ``name`` (one of ``PER_ROW``); ``schema_ids`` is needed for ``avro``."""
    if name == "debezium-json":
        from ums.formats.debezium import DebeziumJson

        return DebeziumJson(options)
    if name == "canal-json":
        from ums.formats.canal import CanalJson  # type: ignore[import-not-found, unused-ignore]

        return CanalJson(options)  # type: ignore[no-any-return, unused-ignore]
    if name == "avro":
        if schema_ids is None:
            msg = "format avro: needs schema_ids (a schema registry: endpoints.registry)"
            raise ValueError(msg)
        from ums.formats.avro import AvroRows

        return AvroRows(options, schema_ids)
    msg = f"output format {name!r}: not a per-row format (one of {', '.join(PER_ROW)})"
    raise ValueError(msg)


# Every per-row record carries these headers (ASCII): the change's UMS ids, so readers merge per key by
# ``(ums_id_, ums_uid_)`` as they do for UMS (dbusclient/merge.py), whatever the format.
UMS_ID_HEADER, UMS_UID_HEADER = "ums_id_", "ums_uid_"
# The table's UMS schema version (ASCII digits) on every debezium-json and avro record: the Connect schema
# has no place for it, and decoders rebuild ``TableShape.version`` from it.
UMS_VERSION_HEADER = "ums_version"

# Avro readers: a registry id -> the schema's text (the I/O edge fetches and caches it).
SchemaLookup = Callable[[int], str]


def decode(
    name: str,
    key: bytes | None,
    value: bytes | None,
    headers: tuple[tuple[str, bytes], ...] = (),
    schemas: SchemaLookup | None = None,
) -> RowChange | None:
    """A record of format ``name`` back to its ``RowChange`` (None for a tombstone): the table's shape
    from the record itself (the Connect schema's propagated source types; Canal's ``mysqlType`` and
    ``pkNames``), values back in UMS wire form, ``ums_id``/``ums_uid`` from the headers above. Exact for
    the default options; a lossy option (decimal double, bigint long without propagated types, a zero
    date Debezium writes as null) is documented in docs/formats.md. ``schemas`` is needed for ``avro``.
    Raises ``ValueError`` naming the field for a record it cannot read."""
    if name == "debezium-json":
        from ums.formats.debezium import decode_debezium

        return decode_debezium(key, value, headers)
    if name == "canal-json":
        from ums.formats.canal import decode_canal  # type: ignore[import-not-found, unused-ignore]

        return decode_canal(key, value, headers)  # type: ignore[no-any-return, unused-ignore]
    if name == "avro":
        if schemas is None:
            msg = "format avro: needs schemas (a schema registry: endpoints.registry)"
            raise ValueError(msg)
        from ums.formats.avro import decode_avro_row

        return decode_avro_row(key, value, headers, schemas)
    msg = f"output format {name!r}: not a per-row format (one of {', '.join(PER_ROW)})"
    raise ValueError(msg)


def sniff(value: bytes | None, headers: Mapping[str, bytes]) -> str:
    """The format a record looks like, for readers of a topic that mixes them (a per-schema topic of
    tables in several formats): ``ums`` (no ``ums_id_`` header: a UMS JSON or Avro message), ``tombstone``
    (a per-row record with a null value), ``avro`` (the Confluent wire format's magic byte 0),
    ``canal-json`` (``isDdl``), ``debezium-json`` (``payload`` and ``schema``, or ``op``). ValueError for a
    per-row record that is none of them."""
    if UMS_ID_HEADER not in headers:
        return "ums"
    if value is None:
        return "tombstone"
    if value[:1] == b"\x00":
        return "avro"
    try:
        obj = json.loads(value)
    except ValueError as e:  # not JSON, or not UTF-8
        msg = f"a per-row record (header {UMS_ID_HEADER}) that is neither Avro nor JSON: {e}"
        raise ValueError(msg) from None
    if isinstance(obj, dict):
        if "isDdl" in obj:
            return "canal-json"
        if ("payload" in obj and "schema" in obj) or "op" in obj:
            return "debezium-json"
    msg = "a per-row JSON record that is neither Debezium's envelope nor Canal's flat message"
    raise ValueError(msg)
