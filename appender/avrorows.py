"""Rows the JVM rendered -> Avro record values, by column, without a tuple per row (pure).

``rendered_avro`` gives, for one rows event, the same bytes as ``encode_avro`` of each message of
``appender.convert.rendered_messages`` (tests/unit/test_appender_avrorows.py holds the two to each other),
for the case the appender sends that way: Avro output, no masking rule for the table, no column named
like a system field. For a source with Avro output the JVM also writes each line's user columns as Avro
(``dbus_rows_avro``, binlog/jvm ``AvroRows``): when its column kinds are the schema's, a tuple is the
system columns written here and those bytes (``ums.avro.encode_avro_rows``), no value of a user column
is touched in Python. Otherwise the lines are parsed in one ``json.loads`` per event, as there, and the
payload is the parsed images' columns (one ``zip``) beside the system columns, written by
``ums.avro.encode_avro_columns``. Either way messages are cut where ``split_tuples`` cuts (by count and
JSON payload bytes).
"""

from __future__ import annotations

import json
import sys
from array import array
from zoneinfo import ZoneInfo

from appender.convert import PROTOCOL, ConvertSettings, rendered_schema
from binlog.rawevent import RawHeader
from binlog.rows import DecodedRows
from ums import SYSTEM_FIELDS, ums_id, ums_ts_ms
from ums.avro import encode_avro_columns, encode_avro_rows, jvm_kinds
from ums.build import split_tuples
from ums.ids import ROW_LIMIT, uid_tails, ums_uid, ums_uids
from ums.message import UmsSchema


def rendered_avro(
    header: RawHeader,
    shape: DecodedRows,
    lines: list[bytes],
    version: int,
    settings: ConvertSettings,
    batch_id: int = 0,
    section: bytes | None = None,
) -> tuple[UmsSchema, list[bytes]]:
    """The event's messages as Avro values (in order) and their schema; every column of ``shape`` is a
    user column (none named like a system field). ``section``: the JVM's Avro of the lines' user
    columns (``jvm_rows``), used when its kinds are the schema's; else the lines are parsed."""
    schema = rendered_schema(shape, version, settings, batch_id)
    if not lines:
        return schema, []
    uid_base = ums_id(*header.position)
    ts = ums_ts_ms(header.ts_ms, ZoneInfo(settings.timezone))
    rows = jvm_rows(section, schema, len(lines)) if section is not None else None
    users: list = []
    if rows is None:
        images = json.loads(b"[[" + b"],[".join(lines) + b"]]")
        users = list(zip(*images, strict=True))
        if len(users) != len(shape.columns):
            msg = f"{len(users)} values per row for {len(shape.columns)} columns"
            raise ValueError(msg)
    op = shape.op
    if op == "u" and not settings.before_update_image:
        lines = lines[1::2]
        users = [c[1::2] for c in users]
        rows = rows[1::2] if rows is not None else None
    n = len(lines)
    ops = ["b", "u"] * (n // 2) if op == "u" and settings.before_update_image else [op] * n
    uids = _uids(uid_base, n)
    values = []
    start = 0
    for chunk in _bounds(uid_base, ts, ops, uids, lines, settings.max_tuples, settings.max_bytes):
        end = start + chunk
        k = end - start
        system = [[uid_base] * k, [ts] * k, ops[start:end], uids[start:end]]
        if rows is not None:
            values.append(encode_avro_rows(PROTOCOL, schema, system, rows[start:end]))
        else:
            columns = [*system, *(c[start:end] for c in users)]
            values.append(encode_avro_columns(PROTOCOL, schema, columns, k))
        start = end
    return schema, values


def jvm_rows(section: bytes, schema: UmsSchema, n: int) -> list[bytes] | None:
    """The user columns' Avro of each of the ``n`` lines, from the JVM's section (binlog/jvm ``AvroRows``:
    the kinds, one letter per column; the count and n + 1 offsets, u32 little-endian; the bytes); None
    when its kinds are not the schema's (``ums.avro.jvm_kinds``) or it does not hold n rows."""
    kinds = jvm_kinds(schema.fields[len(SYSTEM_FIELDS[PROTOCOL]) :]).encode("ascii")
    k = len(kinds)
    if section[:k] != kinds or len(section) < k + 8:
        return None
    count = int.from_bytes(section[k : k + 4], "little")
    start = k + 4 + 4 * (count + 1)
    if count != n or len(section) < start:
        return None
    offsets = array("I", section[k + 4 : start])
    if sys.byteorder == "big":
        offsets.byteswap()
    if offsets[0] != 0 or offsets[-1] != len(section) - start:
        return None
    area = section[start:]
    return [area[a:b] for a, b in zip(offsets, offsets[1:], strict=False)]


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
