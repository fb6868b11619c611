"""Build UMS messages from decoded rows (spec 1.13 A, C, D) and cut them to size.

>>> ns = Namespace("mysql", "demo", "shop", "orders", 3)
>>> cols = (ColumnSpec("id", "bigint(20) unsigned", False),)
>>> row = DataRow("1030000012345678", "2024-01-02 03:04:05.000", Op.INSERT,
...               "1030000012345678000000", (7,))
>>> build_data_message(ns, cols, [row]).payload
(('1030000012345678', '2024-01-02 03:04:05.000', 'i', '1030000012345678000000', '7'),)
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ums.encoding import dumps_compact
from ums.errors import BadValueError
from ums.message import SYSTEM_FIELDS, SYSTEM_NAMES, Op, ProtocolType, UmsField, UmsMessage, UmsSchema
from ums.namespace import Namespace
from ums.scalars import JsonValue
from ums.types import ColumnSpec
from ums.values import encode_column

# The one default of a message's size: ``ums.tuples_per_message`` and ``ums.max_message_bytes``
# (dbuslib/config.py) take these, and every builder below. The original's template used 5 tuples.
DEFAULT_MAX_TUPLES = 500  # tuples per message
DEFAULT_MAX_BYTES = 1_000_000  # payload bytes per message; under Kafka's default 1 MiB record

Tuple = tuple[JsonValue, ...]


@dataclass(frozen=True)
class DataRow:
    """One tuple to emit: system values (already in wire form) and the user columns' Python values.

    JSON example: ``{"ums_id": "1030000012345678", "ums_ts": "2024-01-02 03:04:05.000",
    "op": "i", "ums_uid": "1030000012345678000000", "values": [7, "alice"]}``
    """

    ums_id: str
    ums_ts: str
    op: Op
    ums_uid: str
    values: tuple[object, ...]


def field_for(column: ColumnSpec, encoded: bool = False) -> UmsField:
    """``schema.fields`` entry of a source column."""
    return UmsField(column.name, column.ums_type, column.nullable, encoded)


def user_columns(columns: Sequence[ColumnSpec]) -> tuple[int, ...]:
    """Indices of the columns UMS carries: all but those named like a system field (spec 1.2)."""
    return tuple(i for i, c in enumerate(columns) if c.name not in SYSTEM_NAMES)


def data_schema(
    namespace: Namespace,
    columns: Sequence[ColumnSpec],
    batch_id: int = 0,
    protocol: ProtocolType = ProtocolType.DATA_INCREMENT_DATA,
) -> UmsSchema:
    """System fields of ``protocol`` followed by one field per carried column."""
    users = tuple(field_for(columns[i]) for i in user_columns(columns))
    return UmsSchema(namespace, SYSTEM_FIELDS[protocol] + users, batch_id)


def data_tuple(columns: Sequence[ColumnSpec], row: DataRow, where: str = "row") -> Tuple:
    """Encode one row: ``(ums_id_, ums_ts_, ums_op_, ums_uid_, *user values)``."""
    if len(row.values) != len(columns):
        msg = f"{where}: {len(row.values)} values for {len(columns)} columns"
        raise BadValueError(msg)
    users = tuple(encode_column(columns[i], row.values[i]) for i in user_columns(columns))
    return (row.ums_id, row.ums_ts, row.op.value, row.ums_uid, *users)


def build_data_message(
    namespace: Namespace,
    columns: Sequence[ColumnSpec],
    rows: Sequence[DataRow],
    batch_id: int = 0,
    protocol: ProtocolType = ProtocolType.DATA_INCREMENT_DATA,
) -> UmsMessage:
    """One message holding all ``rows`` (use ``build_data_messages`` to respect size limits)."""
    schema = data_schema(namespace, columns, batch_id, protocol)
    payload = tuple(data_tuple(columns, row, f"rows[{i}]") for i, row in enumerate(rows))
    return UmsMessage(protocol, schema, payload)


def build_data_messages(
    namespace: Namespace,
    columns: Sequence[ColumnSpec],
    rows: Sequence[DataRow],
    batch_id: int = 0,
    protocol: ProtocolType = ProtocolType.DATA_INCREMENT_DATA,
    max_tuples: int = DEFAULT_MAX_TUPLES,
    max_bytes: int = DEFAULT_MAX_BYTES,
) -> list[UmsMessage]:
    """Messages of at most ``max_tuples`` tuples and ``max_bytes`` payload bytes, rows in order."""
    schema = data_schema(namespace, columns, batch_id, protocol)
    tuples = [data_tuple(columns, row, f"rows[{i}]") for i, row in enumerate(rows)]
    return [UmsMessage(protocol, schema, chunk) for chunk in split_tuples(tuples, max_tuples, max_bytes)]


def split_tuples(
    tuples: Iterable[Tuple],
    max_tuples: int = DEFAULT_MAX_TUPLES,
    max_bytes: int = DEFAULT_MAX_BYTES,
    sizes: Iterable[int] | None = None,
) -> list[tuple[Tuple, ...]]:
    """Cut tuples into chunks by count and by JSON payload bytes, keeping order.

    A single tuple larger than ``max_bytes`` gets a chunk of its own: nothing is dropped. ``sizes``: each
    tuple's ``tuple_bytes``, from a caller that knows them without writing the tuple's JSON.
    """
    known = iter(sizes) if sizes is not None else None
    if max_tuples < 1 or max_bytes < 1:
        msg = f"split_tuples: max_tuples={max_tuples} and max_bytes={max_bytes} must be >= 1"
        raise BadValueError(msg)
    chunks: list[tuple[Tuple, ...]] = []
    current: list[Tuple] = []
    size = 0
    for row in tuples:
        row_size = tuple_bytes(row) if known is None else next(known)
        if current and (len(current) >= max_tuples or size + row_size > max_bytes):
            chunks.append(tuple(current))
            current, size = [], 0
        current.append(row)
        size += row_size
    if current:
        chunks.append(tuple(current))
    return chunks


def tuple_bytes(row: Tuple) -> int:
    """UTF-8 size of ``{"tuple":[...]},`` as it appears in the payload array."""
    return len(dumps_compact(list(row)).encode("utf-8")) + len('{"tuple":},')


def build_heartbeat_message(namespace: Namespace, ums_id: str, ums_ts: str, batch_id: int = 0) -> UmsMessage:
    """``data_increment_heartbeat``: one tuple ``[ums_id_, ums_ts_]`` (spec 1.13 C)."""
    protocol = ProtocolType.DATA_INCREMENT_HEARTBEAT
    schema = UmsSchema(namespace, SYSTEM_FIELDS[protocol], batch_id)
    return UmsMessage(protocol, schema, ((ums_id, ums_ts),))


def build_termination_message(namespace: Namespace, ums_ts: str, batch_id: int = 0) -> UmsMessage:
    """``data_increment_termination`` for the *old* version's namespace (spec 1.13 D)."""
    protocol = ProtocolType.DATA_INCREMENT_TERMINATION
    schema = UmsSchema(namespace, SYSTEM_FIELDS[protocol], batch_id)
    return UmsMessage(protocol, schema, ((ums_ts,),))
