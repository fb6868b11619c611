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

**The fast path.** ``ums.encoding.from_json`` checks every value of every tuple against its field's type,
most of the time of a row. ``Decoder.read_json``, which the consumer uses, trusts the appender for the
user values: a message's protocol and schema are read checked the first time their JSON is seen (the
whole message checked: ``read_checked``), and a later message with the same protocol and schema JSON is
taken with them, each tuple checked for what the row change is made of: a JSON array of as many values as
fields, an ``ums_op_`` its protocol allows, ``ums_id_`` and ``ums_uid_`` of decimal digits, an ``ums_ts_``
string, and key values that are not null and decode (``decode_value``). The other values reach
``RowChange.values`` unchecked (a sink decodes them: ``dbusclient.sink_sql`` refuses a value that does not
decode, naming the column). A record that does not pass is read checked, so whatever its bytes it gives
row changes or a ``BadRowError`` naming the record; a valid message gives the same row changes both ways
(tests/unit/test_client_decode.py plays both with hypothesis).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from dbuslib.errors import DbusError
from ums.avro import decode_avro
from ums.decode import decode_value
from ums.encoding import from_json
from ums.errors import UmsError
from ums.message import ALLOWED_OPS, SYSTEM_FIELDS, Op, ProtocolType, UmsField, UmsMessage, UmsSchema
from ums.namespace import Namespace
from ums.scalars import INT_MAX, INT_MIN, JsonValue
from ums.types import UmsType

DATA_PROTOCOLS = frozenset({ProtocolType.DATA_INCREMENT_DATA, ProtocolType.DATA_INITIAL_DATA})
_OPS = {op.value: op for op in Op}
_SHAPES_KEPT = 1024  # protocol and schema pairs the fast path remembers per Decoder (then starts again)
# what reading a message that is not as the appender writes it raises on the fast path: read it checked
_NOT_FAST = (ValueError, TypeError, KeyError, IndexError, AttributeError, RecursionError)


class BadRowError(DbusError):
    """A data message cannot become row changes: no key given for its table, a key column missing from
    its fields or null in a tuple, a message that does not parse. The message names the namespace, the
    tuple and the column."""

    code = "CLIENT_BAD_ROW"


class RowRefused(BadRowError):
    """A row change whose values do not decode, found where they are decoded (a sink: the fast path
    leaves user values unchecked). ``change`` is the refused change: the consumer sets the record that
    carried it aside (a dead letter, when configured) and applies the rest of its window."""

    def __init__(self, message: str, change: RowChange) -> None:
        super().__init__(message)
        self.change = change


@dataclass(frozen=True, order=True)
class TableRef:
    """A table of one source: ``{"ds": "demo", "schema": "shop", "table": "orders"}``; ``str`` gives
    ``demo:shop.orders``."""

    ds: str
    schema: str
    table: str

    def __post_init__(self) -> None:
        # a key of the merge's states is (TableRef, key values): hashed several times per row change
        object.__setattr__(self, "_hash", hash((self.ds, self.schema, self.table)))

    def __hash__(self) -> int:
        return self._hash  # type: ignore[attr-defined]

    def __reduce__(self) -> tuple[type[TableRef], tuple[str, str, str]]:
        return TableRef, (self.ds, self.schema, self.table)  # the hash is made again (str hashes are per run)

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


# the slot setters of RowChange's fields, in field order (a field added to RowChange breaks this unpacking
# in _changes, loudly, rather than leave it unset)
_SETTERS = tuple(getattr(RowChange, f.name).__set__ for f in dataclasses.fields(RowChange))


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
        self._shapes: dict[bytes, _Shape] = {}  # JSON of a checked message's protocol and schema -> its shape

    @property
    def keys(self) -> Mapping[tuple[str, str], tuple[str, ...]]:
        """``(schema, table)`` -> key columns, as given."""
        return self._keys

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

    def from_json(self, value: str | bytes, where: str = "message", checked: bool = False) -> list[RowChange]:
        """``changes`` of one UMS JSON record value; ``where`` (e.g. ``demo.shop.result/0@41``) names it.
        The message is read by ``read_json`` (the fast path), or with ``checked`` by ``ums.encoding``,
        every value checked; the row changes of a valid message are the same."""
        msg = self.read_checked(value, where) if checked else self.read_json(value, where)
        try:
            return self.changes(msg)
        except BadRowError as e:
            text = f"{where}: {e}"
            raise BadRowError(text) from None

    def read_json(self, value: str | bytes, where: str = "message") -> UmsMessage:
        """One UMS JSON record value as a message, the fast way (module docstring, "The fast path"): the
        JSON, protocol, schema and system values of every tuple checked, the user values trusted. A
        message that does not pass is read by ``read_checked``, whose error names ``where``."""
        shape_key = None
        try:
            # orjson: 2-3x json's speed; anything it refuses (a >64-bit integer, NaN, bad UTF-8) is a
            # ValueError, and the message goes to the checked path, which reads it with json
            obj = orjson.loads(value)
            shape_key = orjson.dumps((obj["protocol"], obj["schema"]))
            shape = self._shapes.get(shape_key)
            if shape is not None:
                rows = shape.rows(obj["payload"])
                if rows is not None:
                    return UmsMessage.prevalidated(shape.protocol, shape.schema, rows)
        except _NOT_FAST:
            pass
        msg = self.read_checked(value, where)
        if shape_key is not None and msg.protocol in DATA_PROTOCOLS:
            if len(self._shapes) >= _SHAPES_KEPT:
                self._shapes.clear()
            self._shapes[shape_key] = _Shape.of(msg)
        return msg

    def read_checked(self, value: str | bytes, where: str = "message") -> UmsMessage:
        """One UMS JSON record value as a message, every value checked (``ums.encoding.from_json``)."""
        try:
            return from_json(value)
        except UmsError as e:
            text = f"{where}: {e}"
            raise BadRowError(text) from None

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
    # a data message's system fields come first (UmsMessage checks it): the user columns are the rest
    first_user = len(SYSTEM_FIELDS[msg.protocol])
    user_names = names[first_user:]
    table, initial, version = TableRef.of(ns), msg.protocol is ProtocolType.DATA_INITIAL_DATA, ns.version
    new, (s_table, s_version, s_key, s_op, s_id, s_uid, s_ts, s_values, s_initial) = object.__new__, _SETTERS
    # one long key column (the usual key) is read here, without a call; any other key by _key
    long_key = key_at[0][0] if len(key_at) == 1 and key_at[0][1].type is UmsType.LONG else None
    last_id_text, last_id, out = None, 0, []
    for t, row in enumerate(msg.payload):
        value = row[long_key] if long_key is not None else None
        if (
            type(value) is str
            and value.isdigit()
            and value.isascii()
            and len(value) < 20
            and (value[0] != "0" or len(value) == 1)
        ):  # _plain_long, inline
            key: tuple[Any, ...] = (int(value),)
        else:
            key = _key(row, key_at, ns, t)
        uid = row[3]
        if not (type(uid) is str and uid.isdigit() and uid.isascii()):
            # an increment's ums_uid_ is ums_id_ * 10^6 + index, a full-pull row's 15 digits longer
            # (docs/fullpull.md): no width is assumed, only decimal digits
            text = f"{ns}: payload[{t}]: ums_uid_ {uid!r} is not a decimal integer"
            raise BadRowError(text)
        if row[0] != last_id_text:  # the tuples of one binlog event share their ums_id_
            last_id_text, last_id = row[0], int(row[0])  # type: ignore[arg-type]
        # RowChange(table=table, version=version, ...), its fields set as its __init__ would, without the
        # object.__setattr__ of a frozen dataclass per field (a third of the time of a row)
        change = new(RowChange)
        s_table(change, table)
        s_version(change, version)
        s_key(change, key)
        s_op(change, _OPS[row[2]])  # type: ignore[index]
        s_id(change, last_id)
        s_uid(change, int(uid))
        s_ts(change, row[1])
        s_values(change, dict(zip(user_names, row[first_user:])))  # noqa: B905 (widths are checked)
        s_initial(change, initial)
        out.append(change)
    return out


def _plain_long(digits: str) -> bool:
    """True when a string of ASCII digits is a long as ``decode_value`` reads it: no leading zero, and
    under 20 digits (LONG_TEXT, and within a long)."""
    return len(digits) < 20 and (digits[0] != "0" or len(digits) == 1)


def _key(
    row: tuple[JsonValue, ...], key_at: list[tuple[int, UmsField]], ns: Namespace, t: int
) -> tuple[Any, ...]:
    """The key values of tuple ``t``: not null, and decoded (a message of the fast path: not checked yet)."""
    key: list[Any] = []
    for i, field in key_at:
        value = row[i]
        # the usual keys (a long as a decimal string, an int as a number) without a call; what they
        # skip (a sign, a leading zero, a long past 19 digits) goes through decode_value
        if field.type is UmsType.LONG and type(value) is str and value.isdigit() and value.isascii():
            if _plain_long(value):
                key.append(int(value))
                continue
        elif field.type is UmsType.INT and type(value) is int and INT_MIN <= value <= INT_MAX:
            key.append(value)
            continue
        if value is None:
            text = f"{ns}: payload[{t}] (ums_uid_ {row[3]}): key column {field.name!r} is null"
            raise BadRowError(text)
        try:
            key.append(decode_value(field.type, value, field.name))
        except UmsError as e:
            text = f"{ns}: payload[{t}] (ums_uid_ {row[3]}): key column {e}"
            raise BadRowError(text) from None
    return tuple(key)


@dataclass(frozen=True)
class _Shape:
    """The protocol and schema of a data message that was read checked: a later message with the same
    protocol and schema JSON has the same, valid, ones; ``rows`` checks what else the fast path checks."""

    protocol: ProtocolType
    schema: UmsSchema
    width: int
    ops: frozenset[str]

    @classmethod
    def of(cls, msg: UmsMessage) -> _Shape:
        return cls(msg.protocol, msg.schema, len(msg.schema.fields), ALLOWED_OPS[msg.protocol])

    def rows(self, payload: object) -> tuple[tuple[JsonValue, ...], ...] | None:
        """The tuples of ``payload`` (a non-empty JSON array of ``{"tuple": [...]}``), or None when one
        is not a list of ``width`` values with an ``ums_op_`` of the protocol, an ``ums_id_`` of decimal
        digits and an ``ums_ts_`` string (``ums_uid_`` and the key are checked by ``changes``). Raises
        one of ``_NOT_FAST`` on other shapes."""
        if type(payload) is not list or not payload:
            return None
        width, ops, out = self.width, self.ops, []
        for item in payload:
            row = item["tuple"]
            if type(row) is not list or len(row) != width or row[2] not in ops:
                return None
            ums_id = row[0]
            if not (type(ums_id) is str and type(row[1]) is str and ums_id.isdigit() and ums_id.isascii()):
                return None
            out.append(tuple(row))
        return tuple(out)
