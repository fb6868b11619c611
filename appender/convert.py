"""Rows of one binlog rows event -> UMS 1.3 ``data_increment_data`` messages (pure).

Per tuple: ``ums_id_`` = binlog file number * 10^13 + the rows event's offset (every tuple of one event
shares it, as in the original); ``ums_ts_`` = the event's server time in the configured zone;
``ums_op_`` = i/u/d, plus ``b`` (the before image) ahead of each ``u`` when before images are on;
``ums_uid_`` = ``ums_id_ * 10^6 + t`` (ums/ids.py) where ``t`` counts the event's tuples, ``b`` included,
so a replay of the same binlog gives the same uids. An insert or update carries the after image, a delete
the before image. A message holds tuples of one table and one schema version only.

Two inputs, the same messages: the JVM decoder's lines (``rendered_messages``: the values are already
UMS JSON, parsed once per event), or the reference decoder's typed rows (``to_ums``: binlog/rows.py, each
value through ``ums.values.encode_column``), for what the JVM declines.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from typing import Any
from zoneinfo import ZoneInfo

from binlog.rawevent import RawHeader
from binlog.rows import DecodedRows
from ums import (
    DataRow,
    Namespace,
    Op,
    ProtocolType,
    UmsMessage,
    UmsSchema,
    build_data_messages,
    chunks,
    data_key,
    ums_id,
    ums_ts_ms,
    ums_uid,
)
from ums.build import DEFAULT_MAX_BYTES, DEFAULT_MAX_TUPLES, data_schema, split_tuples, user_columns
from ums.ids import ums_uids

OPS = {"i": Op.INSERT, "u": Op.UPDATE, "d": Op.DELETE}


@dataclass(frozen=True)
class ConvertSettings:
    ds: str
    ds_type: str = "mysql"
    timezone: str = "UTC"
    before_update_image: bool = False
    max_tuples: int = DEFAULT_MAX_TUPLES
    max_bytes: int = DEFAULT_MAX_BYTES


def rendered_tuples(
    header: RawHeader, shape: DecodedRows, lines: list[bytes], settings: ConvertSettings
) -> list[tuple]:
    """The event's tuples from the JVM's lines (one per row image, an update's before and after
    alternating): ``(ums_id_, ums_ts_, ums_op_, ums_uid_, *user columns)``, the same as ``data_rows``
    encoded. The lines are parsed in one ``json.loads`` per event: each is the column texts joined by
    ``,``, so ``[line]`` is the row's JSON array."""
    images = json.loads(b"[[" + b"],[".join(lines) + b"]]") if lines else []
    uid_base = ums_id(*header.position)
    ts = ums_ts_ms(header.ts_ms, ZoneInfo(settings.timezone))
    users = user_columns(shape.columns)
    pick = (lambda row: tuple(row[i] for i in users)) if len(users) != len(shape.columns) else tuple
    op = shape.op
    if op != "u":
        uids = ums_uids(uid_base, len(images))
        return [(uid_base, ts, op, uid, *pick(row)) for uid, row in zip(uids, images, strict=True)]
    if not settings.before_update_image:
        after = images[1::2]
        uids = ums_uids(uid_base, len(after))
        return [(uid_base, ts, "u", uid, *pick(row)) for uid, row in zip(uids, after, strict=True)]
    uids = ums_uids(uid_base, len(images))
    return [
        (uid_base, ts, "b" if t % 2 == 0 else "u", uid, *pick(row))
        for t, (uid, row) in enumerate(zip(uids, images, strict=True))
    ]


PROTOCOL = ProtocolType.DATA_INCREMENT_DATA  # the protocol of the messages of rows the JVM rendered


def rendered_schema(
    shape: DecodedRows, version: int, settings: ConvertSettings, batch_id: int = 0
) -> UmsSchema:
    """The schema of the messages of rows the JVM rendered for ``shape`` at table ``version``."""
    ns = Namespace(settings.ds_type, settings.ds, shape.schema, shape.table, version)
    return data_schema(ns, shape.columns, batch_id, PROTOCOL)


def rendered_messages(
    header: RawHeader,
    shape: DecodedRows,
    lines: list[bytes],
    version: int,
    settings: ConvertSettings,
    batch_id: int = 0,
) -> list[UmsMessage]:
    """``to_ums`` for rows the JVM rendered (``shape`` from ``binlog.rows.table_of``): the same messages,
    as values for masking and Avro; unmasked JSON output takes ``ums.text.event_messages`` instead."""
    schema = rendered_schema(shape, version, settings, batch_id)
    tuples = rendered_tuples(header, shape, lines, settings)
    sizes = None
    if tuples and len(user_columns(shape.columns)) == len(shape.columns):
        # a tuple's JSON is its four system values and the JVM's line: its size without writing it
        images = lines[1::2] if shape.op == "u" and not settings.before_update_image else lines
        ums_id_, ts = tuples[0][0], tuples[0][1]
        fixed = len(f'{{"tuple":["{ums_id_}","{ts}","","",]}},')
        sizes = [fixed + len(t[2]) + len(t[3]) + len(line) for t, line in zip(tuples, images, strict=True)]
    return [
        UmsMessage.prevalidated(PROTOCOL, schema, chunk)
        for chunk in split_tuples(tuples, settings.max_tuples, settings.max_bytes, sizes)
    ]


def data_rows(header: RawHeader, decoded: DecodedRows, settings: ConvertSettings) -> Iterator[DataRow]:
    """The event's tuples in order, with their system values."""
    uid_base = ums_id(*header.position)
    ts = ums_ts_ms(header.ts_ms, ZoneInfo(settings.timezone))
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
    header: RawHeader, decoded: DecodedRows, version: int, settings: ConvertSettings, batch_id: int = 0
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
        # every masked value is checked against its output type by the rule (ums.masking), the others
        # were wire values already: not checked again per value
        payload = tuple(mask.apply_row(t) for t in m.payload)
        out.append(UmsMessage.prevalidated(m.protocol, schema, payload))
    return out


def record_key(message: UmsMessage) -> str:
    """Kafka key of an output record: ``<schema>.<table>``, so one table stays in one partition (in order)
    across schema versions, whatever the topic's partition count."""
    ns = message.schema.namespace
    return f"{ns.schema}.{ns.table}"


def original_key(message: UmsMessage, header: RawHeader, ds: str) -> str:
    """The original DBus key, ``data_increment_data.<namespace>.<ums_ts_ ms>|<ds>.wh_placeholder``, sent
    as the ``ums_key`` record header for consumers that parse it (it would scatter a table over partitions
    if used as the key)."""
    return data_key(message.protocol, message.schema.namespace, header.ts_ms, ds)


def chunked(records: Iterable[Any], max_bytes: int) -> Iterator[Any]:
    """``records`` (appender.process.OutRecord) as they are, except a value above the Kafka record limit
    ``max_bytes`` (``endpoints.kafka.max_message_bytes``), which becomes its ordered chunks (ums.chunks):
    same topic, key and headers, plus ``ums_chunk``/``ums_chunk_id``. One length test per record."""
    fits = chunks.limit(max_bytes)
    for rec in records:
        if rec.value is None or len(rec.value) <= fits:  # None: a per-row tombstone
            yield rec
            continue
        for part, extra in chunks.split(rec.value, max_bytes):
            yield replace(rec, value=part, headers=(*rec.headers, *extra))
