"""UMS data messages written as text around tuples that are already JSON (pure).

The appender's fast path (appender/textpath.py) and the full puller (fullpuller/) both have each tuple's
JSON text before they have a message: the JVM or MariaDB rendered the values. This module writes the
message around them, byte for byte what ``ums.to_json`` writes for the same message, cut by tuple count
and payload bytes the way ``ums.build.split_tuples`` cuts.
"""

from __future__ import annotations

from ums.build import data_schema
from ums.encoding import to_json
from ums.message import ProtocolType, UmsMessage
from ums.namespace import Namespace
from ums.types import ColumnSpec

TUPLE_OVERHEAD = len(b'{"tuple":},') - len(b'{"tuple":}')  # split_tuples counts a comma per tuple
ENDING = b"]}"
_prefixes: dict[tuple[Namespace, tuple[ColumnSpec, ...], int, ProtocolType], bytes] = {}


def message_prefix(
    ns: Namespace,
    columns: tuple[ColumnSpec, ...],
    batch_id: int = 0,
    protocol: ProtocolType = ProtocolType.DATA_INCREMENT_DATA,
) -> bytes:
    """``{"protocol":...,"schema":...,"payload":[`` of a data message, cached per namespace/columns."""
    key = (ns, columns, batch_id, protocol)
    prefix = _prefixes.get(key)
    if prefix is None:
        empty = to_json(UmsMessage.prevalidated(protocol, data_schema(ns, columns, batch_id, protocol), ()))
        assert empty.endswith("[]}"), empty
        prefix = empty[:-2].encode()
        if len(_prefixes) > 4096:
            _prefixes.clear()
        _prefixes[key] = prefix
    return prefix


def messages(prefix: bytes, tuples: list[bytes], max_tuples: int, max_bytes: int) -> list[bytes]:
    """Message texts of at most ``max_tuples`` tuples and ``max_bytes`` payload bytes (as
    ``split_tuples`` counts them), tuples in order; one oversized tuple gets a message of its own."""
    out: list[bytes] = []
    start, size = 0, 0
    for i, text in enumerate(tuples):
        row_size = len(text) + TUPLE_OVERHEAD
        if i > start and (i - start >= max_tuples or size + row_size > max_bytes):
            out.append(prefix + b",".join(tuples[start:i]) + ENDING)
            start, size = i, 0
        size += row_size
    if start < len(tuples):
        out.append(prefix + b",".join(tuples[start:]) + ENDING)
    return out
