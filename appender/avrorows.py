"""Rows the JVM rendered -> Avro record values, by column, without a tuple per row (pure).

``rendered_avro`` gives, for one rows event, the same bytes as ``encode_avro`` of each message of
``appender.convert.rendered_messages`` (tests/unit/test_appender_avrorows.py holds the two to each other),
for the case the appender sends that way: Avro output, no masking rule for the table, no column named
like a system field. The JVM's lines are parsed in one ``json.loads`` per event as there; the payload is
then the parsed images' columns (one ``zip``) beside the system columns, cut into messages where
``split_tuples`` cuts (by count and JSON payload bytes) and written by ``ums.avro.encode_avro_columns``.
"""

from __future__ import annotations

import json
from zoneinfo import ZoneInfo

from appender.convert import ConvertSettings
from binlog.rawevent import RawHeader
from binlog.rows import DecodedRows
from ums import Namespace, ProtocolType, ums_id, ums_ts_ms
from ums.avro import encode_avro_columns
from ums.build import data_schema, split_tuples
from ums.ids import ROW_LIMIT, uid_tails, ums_uid, ums_uids
from ums.message import UmsSchema


def rendered_avro(
    header: RawHeader,
    shape: DecodedRows,
    lines: list[bytes],
    version: int,
    settings: ConvertSettings,
    batch_id: int = 0,
) -> tuple[UmsSchema, list[bytes]]:
    """The event's messages as Avro values (in order) and their schema; every column of ``shape`` is a
    user column (none named like a system field)."""
    protocol = ProtocolType.DATA_INCREMENT_DATA
    ns = Namespace(settings.ds_type, settings.ds, shape.schema, shape.table, version)
    schema = data_schema(ns, shape.columns, batch_id, protocol)
    if not lines:
        return schema, []
    uid_base = ums_id(header.file, header.pos)
    ts = ums_ts_ms(header.ts * 1000, ZoneInfo(settings.timezone))
    images = json.loads(b"[[" + b"],[".join(lines) + b"]]")
    op = shape.op
    if op == "u" and not settings.before_update_image:
        images, lines = images[1::2], lines[1::2]
    n = len(images)
    ops = ["b", "u"] * (n // 2) if op == "u" and settings.before_update_image else [op] * n
    uids = _uids(uid_base, n)
    users = list(zip(*images, strict=True))
    if len(users) != len(shape.columns):
        msg = f"{len(users)} values per row for {len(shape.columns)} columns"
        raise ValueError(msg)
    values = []
    start = 0
    for chunk in _bounds(uid_base, ts, ops, uids, lines, settings.max_tuples, settings.max_bytes):
        end = start + chunk
        k = end - start
        columns = [[uid_base] * k, [ts] * k, ops[start:end], uids[start:end], *(c[start:end] for c in users)]
        values.append(encode_avro_columns(protocol, schema, columns, k))
        start = end
    return schema, values


def _bounds(
    uid_base: str,
    ts: str,
    ops: list[str],
    uids: list[str],
    lines: list[bytes],
    max_tuples: int,
    max_bytes: int,
) -> list[int]:
    """The tuple count of each message, as ``split_tuples`` cuts the tuples by their JSON sizes: a tuple's
    JSON is its four system values and the JVM's line (as ``rendered_messages`` counts it)."""
    n = len(lines)
    fixed = len(f'{{"tuple":["{uid_base}","{ts}","","",]}},')
    total = fixed * n + sum(map(len, ops)) + sum(map(len, uids)) + sum(map(len, lines))
    if total <= max_bytes and max_tuples >= 1:  # no message reaches the byte limit: cut by count only
        return [min(max_tuples, n - s) for s in range(0, n, max_tuples)]
    sizes = [fixed + len(o) + len(u) + len(line) for o, u, line in zip(ops, uids, lines, strict=True)]
    return [len(c) for c in split_tuples([(i,) for i in range(n)], max_tuples, max_bytes, sizes)]


_TAILS: list[str] = []  # "000000", "000001", ...: ums.ids.uid_tails as text


def _uids(uid_base: str, n: int) -> list[str]:
    """``ums_uids(uid_base, n)``: for an ``ums_id_`` above 0, its digits and ``ums.ids.uid_tails``."""
    if uid_base == "0" or n >= ROW_LIMIT:
        return ums_uids(uid_base, n)
    ums_uid(uid_base, 0)  # the checks of ums_uids: a canonical ums_id_ within the long range
    if len(_TAILS) < n:
        _TAILS.extend(t.decode() for t in uid_tails(n)[len(_TAILS) :])
    return [uid_base + t for t in _TAILS[:n]]
