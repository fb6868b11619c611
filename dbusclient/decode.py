"""UMS data messages -> typed row changes: what a consumer merges and applies.

A ``RowChange`` is one tuple of a ``data_increment_data`` or ``data_initial_data`` message, with its
system fields parsed (``ums_id_`` and ``ums_uid_`` as ints, ``ums_op_`` as ``Op``) and its primary key
picked out. The message itself is parsed and checked by ``ums`` (``ums.encoding.from_json``,
``ums.avro.decode_avro``); nothing of the wire format is repeated here. One row change, as JSON::

    {"table": {"ds": "demo", "schema": "shop", "table": "orders"}, "version": 3, "key": [42],
     "op": "u", "ums_id": 1030000012345678, "ums_uid": 1030000012345678000001,
     "ums_ts": "2024-01-02 03:04:05.000", "initial": false,
     "values": {"id": 42, "amount": "19.90", "note": null}}

``values`` holds every user column (system fields left out) as the message carries it: the UMS JSON
value (``ums.decode.decode_value`` gives the Python value). ``key`` holds the key columns' Python values
(``decode_value``), so a key compares equal across versions whose wire form differs (a column that went
from ``int``, a JSON number, to ``long``, a JSON string) and between a full pull and the increments.

UMS does not say which columns form the key: the consumer gives them per table (``Decoder(keys)``), as
``dbus reconcile --primary-key`` does.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from dbuslib.errors import DbusError
from ums.avro import decode_avro
from ums.decode import decode_value
from ums.encoding import from_json
from ums.errors import UmsError
from ums.message import SYSTEM_NAMES, Op, ProtocolType, UmsMessage
from ums.namespace import Namespace
from ums.scalars import JsonValue

DATA_PROTOCOLS = frozenset({ProtocolType.DATA_INCREMENT_DATA, ProtocolType.DATA_INITIAL_DATA})
_OPS = {op.value: op for op in Op}


class BadRowError(DbusError):
    """A data message cannot become row changes: no key given for its table, a key column missing from
    its fields or null in a tuple, a message that does not parse. The message names the namespace, the
    tuple and the column."""

    code = "CLIENT_BAD_ROW"


@dataclass(frozen=True, order=True)
class TableRef:
    """A table of one source: ``{"ds": "demo", "schema": "shop", "table": "orders"}``; ``str`` gives
    ``demo:shop.orders``."""

    ds: str
    schema: str
    table: str

    def __str__(self) -> str:
        return f"{self.ds}:{self.schema}.{self.table}"

    @classmethod
    def of(cls, namespace: Namespace) -> TableRef:
        """The table of a namespace (its ``ds_alias``, schema and table; version and partitions dropped)."""
        return cls(namespace.ds_alias, namespace.schema, namespace.table)


@dataclass(frozen=True, slots=True)
class RowChange:
    """One tuple of a data message (module docstring). ``initial`` is true for a full-pull row
    (``data_initial_data``, whose ``ums_id_`` is the pull's snapshot position)."""

    table: TableRef
    version: int
    key: tuple[Any, ...]
    op: Op
    ums_id: int
    ums_uid: int
    ums_ts: str
    values: Mapping[str, JsonValue]
    initial: bool = False

    @property
    def position(self) -> tuple[int, int]:
        """The merge order: ``(ums_id_, ums_uid_)``, as numbers."""
        return self.ums_id, self.ums_uid

    @property
    def gone(self) -> bool:
        """True when the change means "no row under this key": a delete, or a before image (``b``; an
        update that moved the row writes its ``u`` under the new key)."""
        return self.op is Op.DELETE or self.op is Op.BEFORE


class Decoder:
    """Row changes of the data messages of the tables in ``keys``: ``"schema.table"`` -> key columns,
    e.g. ``Decoder({"shop.orders": ("id",)})``. A table of any source matches by schema and table."""

    def __init__(self, keys: Mapping[str, Sequence[str]]) -> None:
        from ums.names import split_table

        self._keys: dict[tuple[str, str], tuple[str, ...]] = {}
        for name, columns in keys.items():
            try:
                schema_table = split_table(name)
            except ValueError as e:
                msg = f"key columns of {name!r}: {e}"
                raise BadRowError(msg) from None
            if not columns:
                msg = f"key columns of {name!r}: none given"
                raise BadRowError(msg)
            self._keys[schema_table] = tuple(columns)

    def changes(self, msg: UmsMessage) -> list[RowChange]:
        """The row changes of ``msg`` in tuple order; none for a heartbeat or termination message."""
        if msg.protocol not in DATA_PROTOCOLS:
            return []
        ns = msg.schema.namespace
        key_columns = self._keys.get((ns.schema, ns.table))
        if key_columns is None:
            msg_text = f"{ns}: no key columns given for {ns.schema}.{ns.table}"
            raise BadRowError(msg_text)
        return _changes(msg, key_columns)

    def from_json(self, value: str | bytes, where: str = "message") -> list[RowChange]:
        """``changes`` of one UMS JSON record value; ``where`` (e.g. ``demo.shop.result/0@41``) names it."""
        try:
            msg = from_json(value)
        except UmsError as e:
            text = f"{where}: {e}"
            raise BadRowError(text) from None
        return self.changes(msg)

    def from_avro(self, value: bytes, schema: dict[str, Any], where: str = "message") -> list[RowChange]:
        """``changes`` of one Avro record value written with ``schema`` (``ums.avro.avro_schema``)."""
        try:
            msg = decode_avro(value, schema)
        except UmsError as e:
            text = f"{where}: {e}"
            raise BadRowError(text) from None
        return self.changes(msg)


def _changes(msg: UmsMessage, key_columns: tuple[str, ...]) -> list[RowChange]:
    ns = msg.schema.namespace
    fields = msg.schema.fields
    names = msg.schema.names
    index = {name: i for i, name in enumerate(names)}
    missing = [c for c in key_columns if c not in index]
    if missing:
        text = f"{ns}: key column(s) {missing} are not fields of version {ns.version} (fields: {list(names)})"
        raise BadRowError(text)
    key_at = [(index[c], fields[index[c]]) for c in key_columns]
    user = [(i, name) for i, name in enumerate(names) if name not in SYSTEM_NAMES]
    table, initial = TableRef.of(ns), msg.protocol is ProtocolType.DATA_INITIAL_DATA
    out = []
    for t, row in enumerate(msg.payload):
        key = []
        for i, field in key_at:
            if row[i] is None:
                text = f"{ns}: payload[{t}] (ums_uid_ {row[3]}): key column {field.name!r} is null"
                raise BadRowError(text)
            key.append(decode_value(field.type, row[i], field.name))
        out.append(
            RowChange(
                table=table,
                version=ns.version,
                key=tuple(key),
                op=_OPS[str(row[2])],
                ums_id=int(str(row[0])),
                ums_uid=_uid(row[3], ns, t),
                ums_ts=str(row[1]),
                values={name: row[i] for i, name in user},
                initial=initial,
            )
        )
    return out


def _uid(value: JsonValue, ns: Namespace, t: int) -> int:
    """``ums_uid_`` as an int: an increment's is ``ums_id_`` * 10^6 + index, a full-pull row's 15 digits
    longer (docs/fullpull.md), so no width is assumed, only decimal digits."""
    if not (isinstance(value, str) and value.isascii() and value.isdigit()):
        text = f"{ns}: payload[{t}]: ums_uid_ {value!r} is not a decimal integer"
        raise BadRowError(text)
    return int(value)
