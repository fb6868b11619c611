"""One row change, in the terms every per-row output format needs (docs/formats.md).

The UMS path packs many tuples of one table into a message; the per-row formats (Debezium's envelope,
Canal's flat message, Avro in the Confluent wire format: ``ums.formats``) write one Kafka record per row
change, keyed by the primary key. A ``RowChange`` is what they are built from: the table as it is at this
change (``TableShape``: its MySQL column types, the UMS fields after masking, its primary key), the
operation, the before and after images as UMS wire values (``ums.values``: what a UMS tuple holds for
those columns) and where the change comes from (``Position``).

JSON example (``op`` u, one primary-key column ``id``)::

    {"table": {"ds": "demo", "schema": "shop", "table": "orders", "version": 1,
               "columns": [{"name": "id", "column_type": "int(11)", "nullable": false}, ...],
               "fields": [{"name": "id", "type": "int", "nullable": false, "encoded": false}, ...],
               "primary_key": ["id"]},
     "op": "u", "before": [1, "2.50"], "after": [1, "3.00"],
     "at": {"ums_id": 30000000001234, "ts_ms": 1700000000000, "file": "mysql-bin.000003", "pos": 1234,
            "row": 0, "server_id": 1, "gtid": "0-1-42", "snapshot": "false"},
     "ums_uid": "30000000001234000000"}
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Literal

from ums.errors import BadMessageError
from ums.ids import OFFSET_LIMIT, parse_ums_id, row_of_uid
from ums.message import SYSTEM_FIELDS, ProtocolType, UmsField, UmsMessage
from ums.scalars import JsonValue
from ums.types import ColumnSpec

OpCode = Literal["c", "u", "d", "r"]  # create, update, delete, read (a full-pull row): Debezium's letters
Snapshot = Literal["false", "true", "last"]  # Debezium's source.snapshot: increments, pulled rows, the last


@dataclass(frozen=True)
class TableShape:
    """One table at one schema version. ``columns`` are the source's columns (MySQL COLUMN_TYPE, in table
    order), ``fields`` the UMS user fields of the same columns in the same order after masking (a masked
    column has ``encoded`` true, and its type is the one masking gave it: formats map it by its UMS type,
    not by its MySQL type), ``primary_key`` the key columns in key order (empty: no key)."""

    ds: str
    schema: str
    table: str
    version: int
    columns: tuple[ColumnSpec, ...]
    fields: tuple[UmsField, ...]
    primary_key: tuple[str, ...]

    @cached_property
    def key_indices(self) -> tuple[int, ...]:
        """Indices in ``fields`` (and in a change's images) of the primary-key columns, in key order."""
        names = [f.name for f in self.fields]
        missing = [k for k in self.primary_key if k not in names]
        if missing:
            msg = f"{self.schema}.{self.table} v{self.version}: primary key {missing} not among its fields"
            raise BadMessageError(msg)
        return tuple(names.index(k) for k in self.primary_key)


@dataclass(frozen=True)
class Position:
    """Where a change comes from: the binlog event (``ums_id`` = file number * 10^13 + pos, ``ts_ms`` its
    commit time in epoch ms, ``file``/``pos``, ``row`` the row's index in the event, the server id and GTID
    when known), or a full pull (``snapshot`` true, or last for the pull's last row)."""

    ums_id: int
    ts_ms: int
    file: str
    pos: int
    row: int
    server_id: int | None = None
    gtid: str | None = None
    snapshot: Snapshot = "false"


@dataclass(frozen=True)
class RowChange:
    """A row change: ``before`` for u and d, ``after`` for c, u and r, each a tuple of UMS wire values in
    ``table.fields`` order; ``ums_uid`` the UMS tuple's ``ums_uid_``."""

    table: TableShape
    op: OpCode
    before: tuple[JsonValue, ...] | None
    after: tuple[JsonValue, ...] | None
    at: Position
    ums_uid: str

    @property
    def key_changed(self) -> bool:
        """An update whose primary-key values differ between its images (formats write it as a delete of
        the old key and a create of the new one, as Debezium does)."""
        if self.op != "u" or self.before is None or self.after is None or not self.table.primary_key:
            return False
        before, after = self.before, self.after
        return any(before[i] != after[i] for i in self.table.key_indices)


def from_message(
    message: UmsMessage,
    columns: tuple[ColumnSpec, ...],
    primary_key: tuple[str, ...],
    *,
    file: str,
    ts_ms: int,
    server_id: int | None = None,
    gtid: str | None = None,
    last_snapshot_row: bool = False,
) -> list[RowChange]:
    """The row changes of a (masked) UMS ``data_increment_data`` or ``data_initial_data`` message.

    ``columns``: the table version's MySQL columns (by name: a masked field keeps its column's spec);
    an update's ``b`` tuple (the message must carry before images: ``ums.before_update_image`` on, or the
    per-row path's own setting) pairs with the ``u`` tuple after it; a ``u`` without its ``b`` has before
    None. ``data_initial_data`` tuples are ``r`` with ``snapshot`` true (``last_snapshot_row``: the
    message's last tuple is the pull's last row, snapshot last). ``pos`` and ``row`` come from each tuple's
    ``ums_id_`` and ``ums_uid_``.

    Raises ``BadMessageError`` naming the namespace and tuple for a message that is not data, a field
    without its column, or a ``b`` tuple not followed by a ``u``.
    """
    schema = message.schema
    where = str(schema.namespace)
    if message.protocol not in (ProtocolType.DATA_INCREMENT_DATA, ProtocolType.DATA_INITIAL_DATA):
        msg = f"{where}: {message.protocol.value} carries no row changes"
        raise BadMessageError(msg)
    shape = table_shape(message, columns, primary_key)
    initial = message.protocol is ProtocolType.DATA_INITIAL_DATA
    system = len(SYSTEM_FIELDS[message.protocol])
    last_index = len(message.payload) - 1
    changes: list[RowChange] = []
    before: tuple[JsonValue, ...] | None = None
    id_text: object = None
    id_number = pos = 0
    for index, row in enumerate(message.payload):
        op = row[2]
        values = row[system:]
        if op == "b":
            if before is not None:
                msg = f"{where}: payload[{index}]: a b tuple after a b tuple (each b pairs with the next u)"
                raise BadMessageError(msg)
            before = values
            continue
        if before is not None and op != "u":
            msg = f"{where}: payload[{index}]: a b tuple followed by {op!r}, not by its u"
            raise BadMessageError(msg)
        if row[0] != id_text:  # the tuples of one binlog event share ums_id_: parse it once
            id_text = row[0]
            file_number, pos = parse_ums_id(_text(row[0], "ums_id_", where, index))
            id_number = file_number * OFFSET_LIMIT + pos
        uid = _text(row[3], "ums_uid_", where, index)
        row_index = row_of_uid(str(id_text), uid)
        if initial:
            snapshot: Snapshot = "last" if last_snapshot_row and index == last_index else "true"
            change_op: OpCode = "r"
            images: tuple[tuple[JsonValue, ...] | None, tuple[JsonValue, ...] | None] = (None, values)
        elif op == "i":
            snapshot, change_op, images = "false", "c", (None, values)
        elif op == "u":
            snapshot, change_op, images = "false", "u", (before, values)
            before = None
        elif op == "d":
            snapshot, change_op, images = "false", "d", (values, None)
        else:
            msg = f"{where}: payload[{index}]: ums_op_ {op!r} is not one of b, i, u, d"
            raise BadMessageError(msg)
        at = Position(id_number, ts_ms, file, pos, row_index, server_id, gtid, snapshot)
        changes.append(RowChange(shape, change_op, images[0], images[1], at, uid))
    if before is not None:
        msg = f"{where}: payload[{last_index}]: the last tuple is a b without its u"
        raise BadMessageError(msg)
    return changes


def table_shape(
    message: UmsMessage, columns: tuple[ColumnSpec, ...], primary_key: tuple[str, ...]
) -> TableShape:
    """The ``TableShape`` of a data message: its user fields (after the system fields), the columns of the
    same names in the same order, the version and names from its namespace."""
    schema = message.schema
    namespace = schema.namespace
    fields = schema.fields[len(SYSTEM_FIELDS[message.protocol]) :]
    by_name = {c.name: c for c in columns}
    missing = [f.name for f in fields if f.name not in by_name]
    if missing:
        msg = f"{namespace}: fields {missing} have no column among the table version's columns"
        raise BadMessageError(msg)
    return TableShape(
        namespace.ds_alias,
        namespace.schema,
        namespace.table,
        namespace.version,
        tuple(by_name[f.name] for f in fields),
        fields,
        tuple(primary_key),
    )


def _text(value: JsonValue, name: str, where: str, index: int) -> str:
    if not isinstance(value, str):
        msg = f"{where}: payload[{index}] ({name}): {value!r} is not a decimal string"
        raise BadMessageError(msg)
    return value
