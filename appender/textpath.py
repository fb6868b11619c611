"""UMS JSON text built from rows the JVM already rendered (pure): the appender's fast path.

The JVM decoder (``dbus.jvm.RowsUdf``, binlog/jvm/, registered as the Spark SQL function
``dbus_rows``) turns a raw ``rows`` record into one line per row image, each line the JSON texts of
all the table's columns joined by ``,``: after images for an insert, before images for a delete, and
before/after pairs for an update. Those lines are exactly what ``json.dumps`` writes for
``fastdecode.decode_fast(event, ums=True)`` (tests/unit/test_jvm_rows.py holds the two to each other),
so this module only adds what a tuple carries besides the columns (``ums_id_``, ``ums_ts_``,
``ums_op_``, ``ums_uid_``), cuts the tuples into messages by count and bytes the way
``ums.build.split_tuples`` does, and writes the message text around them. The result is byte for byte
``ums.to_json`` of ``appender.convert.to_ums_fast`` (tests/unit/test_appender_textpath.py).

Python does a few string operations per row here instead of decoding and encoding every value.
"""

from __future__ import annotations

from itertools import chain, repeat
from typing import Any
from zoneinfo import ZoneInfo

from ums import ums_id, ums_ts_ms, ums_uid
from ums.ids import ROW_LIMIT
from ums.text import ENDING as _ENDING
from ums.text import TUPLE_OVERHEAD as _TUPLE_OVERHEAD
from ums.text import message_prefix, messages

__all__ = ["event_messages", "message_prefix", "messages", "tuple_texts"]


def tuple_texts(
    header: dict[str, Any], op: str, lines: list[bytes], timezone: str, before_update_image: bool
) -> list[bytes]:
    """``{"tuple":[...]}`` per tuple of the event, in order (``lines`` as the JVM wrote them)."""
    uid_base = ums_id(header["file"], header["pos"])
    base = int(uid_base) * ROW_LIMIT
    ts = ums_ts_ms(header["ts"] * 1000, ZoneInfo(timezone))
    head = f'{{"tuple":["{uid_base}","{ts}","'.encode()
    if op == "u":
        pairs = [(b"b", lines[i]) if i % 2 == 0 else (b"u", lines[i]) for i in range(len(lines))]
        if not before_update_image:
            pairs = pairs[1::2]
    else:
        code = op.encode()
        pairs = [(code, line) for line in lines]
    if len(pairs) > ROW_LIMIT:
        ums_uid(uid_base, len(pairs) - 1)  # raises with the limit named
    return [
        b"".join((head, code, b'","', str(base + t).encode(), b'",', line, b"]}"))
        for t, (code, line) in enumerate(pairs)
    ]


_UID_TAILS: list[bytes] = []  # b'000000",', b'000001",', ...: ums_uid_ = ums_id_ digits + these


def _uid_tails(n: int) -> list[bytes]:
    """The first ``n`` tails (at least), made once per process as events need them."""
    if len(_UID_TAILS) < n:
        _UID_TAILS.extend(f'{t:06d}",'.encode() for t in range(len(_UID_TAILS), max(n, 1024)))
    return _UID_TAILS


def event_messages(
    prefix: bytes,
    header: dict[str, Any],
    op: str,
    lines: list[bytes],
    timezone: str,
    before_update_image: bool,
    max_tuples: int,
    max_bytes: int,
) -> list[bytes]:
    """``messages(prefix, tuple_texts(...), ...)`` of one event, with no Python work per tuple in the
    usual case (inserts, deletes, updates without before images, the event within the byte limit): the
    payload is one ``join`` over the JVM's lines. ``ums_uid_`` = ``ums_id_ * 10^6 + t`` is written as
    the ``ums_id_`` digits followed by ``t`` in six digits."""
    images = lines[1::2] if op == "u" else lines
    n = len(images)
    uid_base = ums_id(header["file"], header["pos"])
    ts = ums_ts_ms(header["ts"] * 1000, ZoneInfo(timezone))
    head = f'{{"tuple":["{uid_base}","{ts}","{op}","{uid_base}'.encode()
    per_tuple = len(head) + len(b'000000",') + len(_ENDING) + _TUPLE_OVERHEAD
    too_big = sum(map(len, images)) + n * per_tuple > max_bytes
    if (op == "u" and before_update_image) or n >= ROW_LIMIT or too_big:
        return messages(
            prefix, tuple_texts(header, op, lines, timezone, before_update_image), max_tuples, max_bytes
        )
    between = _ENDING + b"," + head
    tails = _uid_tails(n)
    out = []
    for start in range(0, n, max_tuples):
        part = images[start : start + max_tuples]
        body = b"".join(chain.from_iterable(zip(tails[start : start + len(part)], part, repeat(between))))
        out.append(b"".join((prefix, head, body[: len(body) - len(between)], _ENDING, _ENDING)))
    return out
