"""UMS for log tables (pure): namespaces, ``ums_id_``, ``ums_uid_``, ``ums_ts_``, Kafka keys and messages
(docs/logs.md, UMS for log tables; spec §5). The processor builds them in the JVM (``dbus.jvm.LogUms``, given
the texts ``namespace_head``, ``message_frame`` and ``heartbeat_frame`` make here); this is its reference,
tests/unit/test_record_jvm.py and test_logums_jvm.py compare the two byte for byte.

Namespace ``<type>.<ds>.<schema>.<table>.<version>.<host>.0``, the host segment from the adapter (dots as
``_``); a heartbeat has the same namespace (the original dropped the type there, §5.2, and kept it in the
key; the key's text is the original's either way):

    >>> ns = log_namespace("log_logstash", "applog", "applog_schema", "order_events", 3, "app-01_prod")
    >>> str(ns)
    'log_logstash.applog.applog_schema.order_events.3.app-01_prod.0'
    >>> data_key(ns, 1709604930123)
    'data_increment_data.log_logstash.applog.applog_schema.order_events.3.app-01_prod.0.1709604930123.wh_placeholder'

``ums_id_`` is a positive 64-bit long made of the line's record coordinates and its row index among the
rows the table made of that record (all its groups together, in order)::

    bit 63: 0 | bits 62-55: partition (8 bits) | bits 54-12: offset (43 bits) | bits 11-0: row index (12 bits)

    >>> ums_id(0, 4711, 0), ums_id(3, 4711, 2)
    (19296256, 108086391076188162)

So it increases with the offset within a partition, and never collides inside a table: partitions 0..255,
offsets below 2^43 (8.8 * 10^12: 2.8 years of 100,000 records a second into one partition), 4096 rows per
record and table. Beyond a limit the line is an error (``LOG_LINE_UMS_ID_RANGE``), never a wrapped id.

``ums_uid_`` follows the database rows' convention (``ums.ids``): ``position * 10^6 + row index``, the
position being ``partition * 10^13 + offset``, so a replay gives the same uid:

    >>> ums_uid(3, 4711, 2)
    '30000000004711000002'

Unlike the original's ZooKeeper sequence (one per data source) it is unique within a table, not across the
tables of a source: a line taken by two tables has the same uid in both.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from zoneinfo import ZoneInfo

from logprocessor.grammar import Column
from ums.build import build_heartbeat_message
from ums.encoding import dumps_compact, to_json
from ums.errors import BadPositionError, BadValueError
from ums.ids import position_id
from ums.ids import ums_uid as row_uid
from ums.keys import data_key as _data_key
from ums.keys import heartbeat_key as _heartbeat_key
from ums.message import SYSTEM_FIELDS, Op, ProtocolType, UmsField, UmsMessage, UmsSchema
from ums.namespace import Namespace, escape_part
from ums.scalars import JsonValue
from ums.timefmt import ums_ts_ms
from ums.types import UmsType

PARTITION_BITS, OFFSET_BITS, INDEX_BITS = 8, 43, 12
MAX_PARTITION = (1 << PARTITION_BITS) - 1
MAX_OFFSET = (1 << OFFSET_BITS) - 1
MAX_INDEX = (1 << INDEX_BITS) - 1
OFFSET_SHIFT, PARTITION_SHIFT = INDEX_BITS, INDEX_BITS + OFFSET_BITS

UMS_ID_RANGE = "LOG_LINE_UMS_ID_RANGE"
BAD_DOUBLE = "LOG_LINE_BAD_DOUBLE"
# What a DOUBLE value may be: a decimal number, with an exponent or not (also Java's Double.toString form).
DOUBLE_PATTERN = r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?"
_DOUBLE = re.compile(DOUBLE_PATTERN)
HEARTBEAT_STATUS = "ok"


def log_namespace(log_type: str, ds: str, schema: str, table: str, version: int, host: str) -> Namespace:
    """The namespace of a log table's rows from one host (``host``: the adapter's segment, dots as ``_``)."""
    return Namespace(log_type, ds, schema, table, version, host, "0")


def ums_id(partition: int, offset: int, index: int) -> int:
    """``partition << 55 | offset << 12 | index``; ``BadPositionError`` (with ``ums_id_problem``'s text)
    beyond the limits."""
    problem = ums_id_problem(partition, offset, index)
    if problem is not None:
        raise BadPositionError(problem)
    return partition << PARTITION_SHIFT | offset << OFFSET_SHIFT | index


def ums_id_problem(partition: int, offset: int, index: int) -> str | None:
    """Why the coordinates have no ``ums_id_`` (a line error ``LOG_LINE_UMS_ID_RANGE``), or None."""
    if not 0 <= partition <= MAX_PARTITION:
        return f"partition {partition} is outside 0..{MAX_PARTITION}, the partitions ums_id_ can hold"
    if not 0 <= offset <= MAX_OFFSET:
        return f"offset {offset} is outside 0..{MAX_OFFSET}, the offsets ums_id_ can hold"
    if not 0 <= index <= MAX_INDEX:
        return f"row {index} of the record is outside 0..{MAX_INDEX}, the rows ums_id_ can number"
    return None


def ums_uid(partition: int, offset: int, index: int) -> str:
    """``(partition * 10^13 + offset) * 10^6 + index`` as a decimal string (see the module docstring)."""
    return row_uid(position_id(partition, offset, f"partition {partition}", "partition"), index)


def ums_ts(epoch_ms: int, timezone: str) -> str:
    """``yyyy-MM-dd HH:mm:ss.SSS`` in the source's ``ums.timezone``."""
    return ums_ts_ms(epoch_ms, _zone(timezone))


def data_key(namespace: Namespace, ums_ts_epoch_ms: int) -> str:
    """``data_increment_data.<namespace>.<ms of the first row's ums_ts_>.wh_placeholder`` (spec §5.6)."""
    return _data_key(ProtocolType.DATA_INCREMENT_DATA, namespace, ums_ts_epoch_ms, None)


def heartbeat_key(namespace: Namespace, time_ms: int, tx_time_ms: int, status: str = HEARTBEAT_STATUS) -> str:
    """``data_increment_heartbeat.<namespace>.<time>|<txTime>|<status>.wh_placeholder`` (spec §5.6)."""
    return _heartbeat_key(namespace, time_ms, tx_time_ms, status, None)


@dataclass(frozen=True)
class LogRow:
    """One row of a log table: its record's coordinates, its row index among the rows the table made of
    that record, the record's event time, and the typed row (strings, or None) in saveAs order.

    JSON example: ``{"partition": 0, "offset": 4711, "index": 0, "event_ms": 1709604930123,
    "values": ["2024-03-05 10:15:30.100", "WARN", "98123", "45.50", "app-01.prod"]}``
    """

    partition: int
    offset: int
    index: int
    event_ms: int
    values: tuple[str | None, ...]


def user_fields(columns: Sequence[Column]) -> tuple[UmsField, ...]:
    """``schema.fields`` of the saveAs columns: their UMS type, ``nullable`` true (a regexExtract group that
    took no part is null; the original declared false), ``encoded`` false."""
    return tuple(UmsField(c.name, UmsType(c.type), True) for c in columns)


def value_problem(values: Sequence[str | None], columns: Sequence[Column]) -> str | None:
    """Why a typed row cannot be written (a line error ``LOG_LINE_BAD_DOUBLE``), or None: a DOUBLE value
    must be a finite decimal number (the original dropped such a row without a word)."""
    for value, column in zip(values, columns, strict=True):
        if column.type == "double" and value is not None and _double(value) is None:
            return f"column {column.name} (DOUBLE): not a finite number"
    return None


def build_message(
    namespace: Namespace, columns: Sequence[Column], rows: Sequence[LogRow], timezone: str
) -> UmsMessage:
    """``data_increment_data`` with every row in order: ``ums_id_``, ``ums_ts_`` (the row's event time),
    ``ums_op_`` ``i``, ``ums_uid_``, then the saveAs columns: DOUBLE as a JSON number, the others as strings
    as the rules left them (LONG and DATETIME are not checked, as in the original), null as null. Raises
    ``BadPositionError``/``BadValueError`` on a row ``ums_id_problem``/``value_problem`` refuses."""
    protocol = ProtocolType.DATA_INCREMENT_DATA
    schema = UmsSchema(namespace, SYSTEM_FIELDS[protocol] + user_fields(columns), 0)
    payload = tuple(_tuple(row, columns, timezone) for row in rows)
    if not payload:
        msg = f"{namespace}: a message needs at least one row"
        raise BadValueError(msg)
    return UmsMessage.prevalidated(protocol, schema, payload)


def message_json(
    namespace: Namespace, columns: Sequence[Column], rows: Sequence[LogRow], timezone: str
) -> str:
    """``build_message`` as the JSON text written to the table's result topic."""
    return to_json(build_message(namespace, columns, rows, timezone))


def heartbeat_message(
    namespace: Namespace, partition: int, offset: int, epoch_ms: int, timezone: str
) -> UmsMessage:
    """``data_increment_heartbeat`` of a shipper heartbeat: ``[ums_id_, ums_ts_]``, the id from the
    heartbeat record's coordinates (row 0), the time its heartbeat time."""
    return build_heartbeat_message(namespace, str(ums_id(partition, offset, 0)), ums_ts(epoch_ms, timezone))


def _tuple(row: LogRow, columns: Sequence[Column], timezone: str) -> tuple[JsonValue, ...]:
    if len(row.values) != len(columns):
        msg = f"row {row.index} of offset {row.offset}: {len(row.values)} values for {len(columns)} columns"
        raise BadValueError(msg)
    problem = value_problem(row.values, columns)
    if problem is not None:
        raise BadValueError(problem)
    values: list[JsonValue] = [
        _double(v) if c.type == "double" and v is not None else _text(v)
        for v, c in zip(row.values, columns, strict=True)
    ]
    head: list[JsonValue] = [
        str(ums_id(row.partition, row.offset, row.index)),
        ums_ts(row.event_ms, timezone),
        Op.INSERT.value,
        ums_uid(row.partition, row.offset, row.index),
    ]
    return tuple(head + values)


def _double(text: str) -> float | None:
    if _DOUBLE.fullmatch(text) is None:
        return None
    x = float(text)
    return x if math.isfinite(x) else None


def _text(value: str | None) -> str | None:
    """A string as Spark holds it: an unpaired surrogate (only Python can hold one) as ``?``."""
    if value is None:
        return None
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return value.encode("utf-8", "replace").decode("utf-8")
    return value


@lru_cache(maxsize=64)
def _zone(name: str) -> ZoneInfo:
    return ZoneInfo(name)


# ---------------------------------------------------------------- the texts the JVM's builder is given


def namespace_head(log_type: str, ds: str, schema: str, table: str, version: int) -> str:
    """A log table's namespace before its host segment: ``<type>.<ds>.<schema>.<table>.<version>.``."""
    return ".".join(escape_part(p) for p in (log_type, ds, schema, table, str(version))) + "."


def _frame_head(protocol: ProtocolType, fields: Sequence[UmsField]) -> tuple[str, str]:
    fields_json = dumps_compact(
        [{"name": f.name, "type": f.type.value, "nullable": f.nullable, "encoded": f.encoded} for f in fields]
    )
    head = f'{{"protocol":{{"type":"{protocol.value}","version":"1.3"}},"schema":{{"namespace":'
    return head, f',"fields":{fields_json},"batchId":0}},"payload":['


def message_frame(columns: Sequence[Column]) -> tuple[str, str]:
    """The text of a table's message before its quoted namespace, and between it and the first tuple."""
    protocol = ProtocolType.DATA_INCREMENT_DATA
    return _frame_head(protocol, SYSTEM_FIELDS[protocol] + user_fields(columns))


def heartbeat_frame() -> tuple[str, str]:
    """The text of a heartbeat message before its quoted namespace, and between it and its ``ums_id_``."""
    protocol = ProtocolType.DATA_INCREMENT_HEARTBEAT
    head, middle = _frame_head(protocol, SYSTEM_FIELDS[protocol])
    return head, middle + '{"tuple":["'
