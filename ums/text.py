"""UMS data messages written as text around tuples that are already JSON (pure).

The appender and the full puller both have each row's values as JSON text before they have a message:
the JVM decoder (binlog/jvm, ``dbus_rows``) or MariaDB rendered them. The JVM writes one line per row
image, the JSON texts of all the table's columns joined by ``,``::

    1,"alice","12.50",null

(after images for an insert, before images for a delete, before/after pairs for an update). This module
adds what a tuple carries besides the columns (``ums_id_``, ``ums_ts_``, ``ums_op_``, ``ums_uid_``, see
ums/ids.py), cuts the tuples into messages by count and payload bytes the way ``ums.build.split_tuples``
cuts, and writes the message around them: byte for byte what ``ums.to_json`` writes for the same message
(tests/unit/test_ums_text.py holds the two to each other on captured records). Python does a few string
operations per row here instead of decoding and encoding every value.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from itertools import chain, repeat

from ums.build import data_schema
from ums.encoding import to_json
from ums.ids import ROW_LIMIT, uid_tails, ums_uids
from ums.message import ProtocolType, UmsMessage, UmsSchema
from ums.namespace import Namespace
from ums.types import ColumnSpec

TUPLE_OVERHEAD = len(b'{"tuple":},') - len(b'{"tuple":}')  # split_tuples counts a comma per tuple
ENDING = b"]}"
_prefixes: dict[Hashable, bytes] = {}


def message_prefix(
    ns: Namespace,
    columns: tuple[ColumnSpec, ...],
    batch_id: int = 0,
    protocol: ProtocolType = ProtocolType.DATA_INCREMENT_DATA,
) -> bytes:
    """``{"protocol":...,"schema":...,"payload":[`` of a data message, cached per namespace/columns."""
    key = ("columns", ns, columns, batch_id, protocol)
    return cached_prefix(key, protocol, lambda: data_schema(ns, columns, batch_id, protocol))


def cached_prefix(key: Hashable, protocol: ProtocolType, schema: Callable[[], UmsSchema]) -> bytes:
    """The text of a data message with ``schema()`` and no tuples, up to its payload's ``[``; built once
    per ``key`` (the caller's description of the schema), so the schema is only built on a miss."""
    prefix = _prefixes.get(key)
    if prefix is None:
        empty = to_json(UmsMessage.prevalidated(protocol, schema(), ()))
        assert empty.endswith("[]}"), empty
        prefix = empty[:-2].encode()
        if len(_prefixes) > 4096:
            _prefixes.clear()
        _prefixes[key] = prefix
    return prefix


def messages(
    prefix: bytes, tuples: list[bytes], max_tuples: int, max_bytes: int, sizes: list[int] | None = None
) -> list[bytes]:
    """Message texts of at most ``max_tuples`` tuples and ``max_bytes`` payload bytes (as
    ``split_tuples`` counts them), tuples in order; one oversized tuple gets a message of its own.
    ``sizes``: the lengths to cut by instead of the tuples' own (ums.masktext: the unmasked tuples')."""
    out: list[bytes] = []
    start, size = 0, 0
    for i, text in enumerate(tuples):
        row_size = (len(text) if sizes is None else sizes[i]) + TUPLE_OVERHEAD
        if i > start and (i - start >= max_tuples or size + row_size > max_bytes):
            out.append(prefix + b",".join(tuples[start:i]) + ENDING)
            start, size = i, 0
        size += row_size
    if start < len(tuples):
        out.append(prefix + b",".join(tuples[start:]) + ENDING)
    return out


def tuple_texts(
    ums_id: str, ums_ts: str, op: str, lines: list[bytes], before_update_image: bool
) -> list[bytes]:
    """``{"tuple":[...]}`` per tuple of one rows event, in order (``lines`` as the JVM wrote them; an
    update's ``b`` tuples only with ``before_update_image``)."""
    head = f'{{"tuple":["{ums_id}","{ums_ts}","'.encode()
    if op == "u":
        pairs = [(b"b", lines[i]) if i % 2 == 0 else (b"u", lines[i]) for i in range(len(lines))]
        if not before_update_image:
            pairs = pairs[1::2]
    else:
        code = op.encode()
        pairs = [(code, line) for line in lines]
    uids = ums_uids(ums_id, len(pairs))
    return [
        b"".join((head, code, b'","', uid.encode(), b'",', line, b"]}"))
        for uid, (code, line) in zip(uids, pairs, strict=True)
    ]


def event_messages(
    prefix: bytes,
    ums_id: str,
    ums_ts: str,
    op: str,
    lines: list[bytes],
    before_update_image: bool,
    max_tuples: int,
    max_bytes: int,
    sized_by: list[bytes] | None = None,
) -> list[bytes]:
    """``messages(prefix, tuple_texts(...), ...)`` of one rows event, with no Python work per tuple in the
    usual case (inserts, deletes, updates without before images, the event within the byte limit): the
    payload is one ``join`` over the JVM's lines, ``ums_uid_`` written as the ``ums_id_`` digits and
    ``ums.ids.uid_tails``. ``sized_by``: lines (one per line of ``lines``) whose sizes decide the cuts
    instead of ``lines``' own (ums.masktext: masked lines cut where the unmasked ones are)."""
    images = lines[1::2] if op == "u" else lines
    sizing = images if sized_by is None else sized_by[1::2] if op == "u" else sized_by
    n = len(images)
    head = f'{{"tuple":["{ums_id}","{ums_ts}","{op}","{ums_id}'.encode()
    per_tuple = len(head) + len(b'000000",') + len(ENDING) + TUPLE_OVERHEAD
    too_big = sum(map(len, sizing)) + n * per_tuple > max_bytes
    if (op == "u" and before_update_image) or n >= ROW_LIMIT or too_big or ums_id == "0":
        texts = tuple_texts(ums_id, ums_ts, op, lines, before_update_image)
        sizes = None
        if sized_by is not None:
            unmasked = tuple_texts(ums_id, ums_ts, op, sized_by, before_update_image)
            sizes = [len(t) for t in unmasked]
        return messages(prefix, texts, max_tuples, max_bytes, sizes)
    between = ENDING + b"," + head
    tails = _closed_tails(n)
    out = []
    for start in range(0, n, max_tuples):
        part = images[start : start + max_tuples]
        body = b"".join(chain.from_iterable(zip(tails[start : start + len(part)], part, repeat(between))))
        out.append(b"".join((prefix, head, body[: len(body) - len(between)], ENDING, ENDING)))
    return out


_CLOSED_TAILS: list[bytes] = []  # b'000000",', b'000001",', ...: ums.ids.uid_tails with the quote and comma


def _closed_tails(count: int) -> list[bytes]:
    if len(_CLOSED_TAILS) < count:
        tails = uid_tails(count)
        _CLOSED_TAILS.extend(t + b'",' for t in tails[len(_CLOSED_TAILS) :])
    return _CLOSED_TAILS
