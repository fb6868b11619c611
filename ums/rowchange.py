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
from typing import Literal

from ums.message import UmsField, UmsMessage
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
        raise NotImplementedError


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
    """
    raise NotImplementedError
