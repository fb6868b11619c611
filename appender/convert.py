"""Decoded rows of one binlog rows event -> UMS 1.3 ``data_increment_data`` messages (pure).

Per tuple: ``ums_id_`` = binlog file number * 10^13 + the rows event's offset (every tuple of one event
shares it, as in the original); ``ums_ts_`` = the event's server time in the configured zone;
``ums_op_`` = i/u/d, plus ``b`` (the before image) ahead of each ``u`` when before images are on;
``ums_uid_`` = ``ums_id_ * 10^6 + t`` where ``t`` counts the event's tuples, ``b`` included, so a
replay of the same binlog gives the same uids. An insert or update carries the after image, a delete
the before image. A message holds tuples of one table and one schema version only.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from typing import Any
from zoneinfo import ZoneInfo

from binlog.rows import DecodedRows
from ums import (
    DataRow,
    Namespace,
    Op,
    ProtocolType,
    UmsMessage,
    build_data_messages,
    chunks,
    data_key,
    ums_id,
    ums_ts_ms,
    ums_uid,
)
from ums.build import data_schema, split_tuples, user_columns
from ums.ids import ROW_LIMIT

OPS = {"i": Op.INSERT, "u": Op.UPDATE, "d": Op.DELETE}


@dataclass(frozen=True)
class ConvertSettings:
    ds: str
    ds_type: str = "mysql"
    timezone: str = "UTC"
    before_update_image: bool = False
    max_tuples: int = 500
    max_bytes: int = 1_000_000


def wire_tuples(header: dict[str, Any], fast: Any, settings: ConvertSettings) -> list[tuple]:
    """The event's tuples straight from ``fastdecode.decode_fast(event, ums=True)`` (values already in
    UMS wire form): ``(ums_id_, ums_ts_, ums_op_, ums_uid_, *user columns)``, the same as ``data_rows``
    encoded, without a Python object per value."""
    uid_base = ums_id(header["file"], header["pos"])
    base = int(uid_base) * ROW_LIMIT
    ts = ums_ts_ms(header["ts"] * 1000, ZoneInfo(settings.timezone))
    users = user_columns(fast.columns)
    pick = (lambda row: tuple(row[i] for i in users)) if len(users) != len(fast.columns) else tuple
    op = fast.op
    images = fast.before if op == "d" else fast.after

    def uid(t: int) -> str:  # ums_uid() without its per-call parsing; it still raises past ROW_LIMIT
        return str(base + t) if t < ROW_LIMIT else ums_uid(uid_base, t)

    out: list[tuple] = []
    for n, row in enumerate(images):
        if op == "u" and settings.before_update_image:
            out.append((uid_base, ts, "b", uid(len(out)), *pick(fast.before[n])))
        out.append((uid_base, ts, op, uid(len(out)), *pick(row)))
    return out


def to_ums_fast(
    header: dict[str, Any], fast: Any, version: int, settings: ConvertSettings, batch_id: int = 0
) -> list[UmsMessage]:
    """``to_ums`` for ``decode_fast(event, ums=True)`` rows: the same messages, built for speed."""
    protocol = ProtocolType.DATA_INCREMENT_DATA
    ns = Namespace(settings.ds_type, settings.ds, fast.schema, fast.table, version)
    schema = data_schema(ns, fast.columns, batch_id, protocol)
    chunks = split_tuples(wire_tuples(header, fast, settings), settings.max_tuples, settings.max_bytes)
    return [UmsMessage.prevalidated(protocol, schema, chunk) for chunk in chunks]


def data_rows(header: dict[str, Any], decoded: DecodedRows, settings: ConvertSettings) -> Iterator[DataRow]:
    """The event's tuples in order, with their system values."""
    uid_base = ums_id(header["file"], header["pos"])
    ts = ums_ts_ms(header["ts"] * 1000, ZoneInfo(settings.timezone))
    names = [c.name for c in decoded.columns]
    op = OPS[decoded.op]
    t = 0
    for image in decoded.rows:
        if op is Op.UPDATE and settings.before_update_image:
            yield DataRow(uid_base, ts, Op.BEFORE, ums_uid(uid_base, t), _values(image.before, names))
            t += 1
        yield DataRow(
            uid_base,
            ts,
            op,
            ums_uid(uid_base, t),
            _values(image.before if op is Op.DELETE else image.after, names),
        )
        t += 1


def _values(image: dict[str, Any] | None, names: list[str]) -> tuple[Any, ...]:
    image = image or {}
    return tuple(image.get(n) for n in names)


def namespace(settings: ConvertSettings, decoded: DecodedRows, version: int) -> Namespace:
    return Namespace(settings.ds_type, settings.ds, decoded.schema, decoded.table, version)


def to_ums(
    header: dict[str, Any], decoded: DecodedRows, version: int, settings: ConvertSettings, batch_id: int = 0
) -> list[UmsMessage]:
    """UMS messages for one rows event, cut to ``max_tuples`` tuples and ``max_bytes`` bytes."""
    rows = list(data_rows(header, decoded, settings))
    return build_data_messages(
        namespace(settings, decoded, version),
        decoded.columns,
        rows,
        batch_id,
        ProtocolType.DATA_INCREMENT_DATA,
        settings.max_tuples,
        settings.max_bytes,
    )


def masked(plan: Any, messages: list[UmsMessage]) -> list[UmsMessage]:
    """``messages`` with the source's masking rules (ums.masking.MaskPlan) applied to fields and tuples:
    a masked column's clear value never leaves the appender."""
    out = []
    for m in messages:
        ns = m.schema.namespace
        mask = plan.for_table(ns.schema, ns.table, m.schema.fields) if plan is not None else None
        if mask is None:
            out.append(m)
            continue
        schema = replace(m.schema, fields=mask.fields)
        out.append(replace(m, schema=schema, payload=tuple(mask.apply_row(t) for t in m.payload)))
    return out


def record_key(message: UmsMessage) -> str:
    """Kafka key of an output record: ``<schema>.<table>``, so one table stays in one partition (in order)
    across schema versions, whatever the topic's partition count."""
    ns = message.schema.namespace
    return f"{ns.schema}.{ns.table}"


def original_key(message: UmsMessage, header: dict[str, Any], ds: str) -> str:
    """The original DBus key, ``data_increment_data.<namespace>.<ums_ts_ ms>|<ds>.wh_placeholder``, sent
    as the ``ums_key`` record header for consumers that parse it (it would scatter a table over partitions
    if used as the key)."""
    return data_key(message.protocol, message.schema.namespace, header["ts"] * 1000, ds)


def chunked(records: Iterable[Any], max_bytes: int) -> Iterator[Any]:
    """``records`` (appender.process.OutRecord) as they are, except a value above the Kafka record limit
    ``max_bytes`` (``endpoints.kafka.max_message_bytes``), which becomes its ordered chunks (ums.chunks):
    same topic, key and headers, plus ``ums_chunk``/``ums_chunk_id``. One length test per record."""
    fits = chunks.limit(max_bytes)
    for rec in records:
        if len(rec.value) <= fits:
            yield rec
            continue
        for part, extra in chunks.split(rec.value, max_bytes):
            yield replace(rec, value=part, headers=(*rec.headers, *extra))
