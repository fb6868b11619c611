"""The UMS 1.3 data message: protocol, schema (namespace, fields, batchId) and payload tuples.

A ``UmsMessage`` is valid by construction: ``__post_init__`` checks the fixed fields of its
protocol (spec 1.2), tuple arity, nullability and every value's JSON form, and raises
``BadMessageError`` naming the path. Payload tuples hold the JSON values exactly as written on the
wire (``ums_id_`` as ``"1030000012345678"``); ``ums.values.decode_value`` gives Python values.

JSON example (``ums.encoding.to_json``)::

    {"protocol":{"type":"data_increment_heartbeat","version":"1.3"},
     "schema":{"namespace":"mysql.demo.shop.orders.3.0.0","fields":[
       {"name":"ums_id_","type":"long","nullable":false,"encoded":false},
       {"name":"ums_ts_","type":"datetime","nullable":false,"encoded":false}],"batchId":0},
     "payload":[{"tuple":["1030000012345678","2024-01-02 03:04:05.000"]}]}
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import NoReturn

from ums.decode import check_wire_value
from ums.errors import BadMessageError
from ums.namespace import Namespace
from ums.scalars import JsonValue
from ums.types import UmsType

UMS_VERSION = "1.3"


class ProtocolType(Enum):
    """``protocol.type`` values (the original's ``DbusMessage.ProtocolType``, lower case)."""

    DATA_INCREMENT_DATA = "data_increment_data"
    DATA_INITIAL_DATA = "data_initial_data"
    DATA_INCREMENT_HEARTBEAT = "data_increment_heartbeat"
    DATA_INCREMENT_TERMINATION = "data_increment_termination"


class Op(Enum):
    """``ums_op_``: insert, update, delete, and ``b``, the before-image sent just before a ``u``."""

    INSERT = "i"
    UPDATE = "u"
    DELETE = "d"
    BEFORE = "b"


@dataclass(frozen=True)
class UmsField:
    """One entry of ``schema.fields``: ``{"name":"id","type":"long","nullable":true,"encoded":false}``.

    ``encoded`` is true once a masking rule rewrote the column.
    """

    name: str
    type: UmsType
    nullable: bool
    encoded: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            _fail(f"field name {self.name!r}: must be a non-empty string")
        if not isinstance(self.type, UmsType):
            _fail(f"field {self.name!r}: type {self.type!r} is not a UmsType")
        if not isinstance(self.nullable, bool) or not isinstance(self.encoded, bool):
            _fail(f"field {self.name!r}: nullable and encoded must be booleans")


UMS_ID = UmsField("ums_id_", UmsType.LONG, False)
UMS_TS = UmsField("ums_ts_", UmsType.DATETIME, False)
UMS_OP = UmsField("ums_op_", UmsType.STRING, False)
UMS_UID = UmsField("ums_uid_", UmsType.STRING, False)
_DATA_FIELDS = (UMS_ID, UMS_TS, UMS_OP, UMS_UID)

SYSTEM_FIELDS: dict[ProtocolType, tuple[UmsField, ...]] = {
    ProtocolType.DATA_INCREMENT_DATA: _DATA_FIELDS,
    ProtocolType.DATA_INITIAL_DATA: _DATA_FIELDS,
    ProtocolType.DATA_INCREMENT_HEARTBEAT: (UMS_ID, UMS_TS),
    ProtocolType.DATA_INCREMENT_TERMINATION: (UMS_TS,),
}
SYSTEM_NAMES = frozenset(f.name for f in _DATA_FIELDS)

# ums_op_ values each data protocol may carry; full-pull rows are always inserts (spec 1.6).
ALLOWED_OPS: dict[ProtocolType, frozenset[str]] = {
    ProtocolType.DATA_INCREMENT_DATA: frozenset(op.value for op in Op),
    ProtocolType.DATA_INITIAL_DATA: frozenset({Op.INSERT.value}),
}


@dataclass(frozen=True)
class UmsSchema:
    """``schema``: namespace, fields (system fields first) and ``batchId`` (full-pull batch)."""

    namespace: Namespace
    fields: tuple[UmsField, ...]
    batch_id: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.namespace, Namespace):
            _fail(f"schema.namespace {self.namespace!r}: not a Namespace")
        if not isinstance(self.fields, tuple) or not all(isinstance(f, UmsField) for f in self.fields):
            _fail(f"schema.fields of {self.namespace}: must be a tuple of UmsField")
        if isinstance(self.batch_id, bool) or not isinstance(self.batch_id, int) or self.batch_id < 0:
            _fail(f"schema.batchId of {self.namespace}: {self.batch_id!r} is not a non-negative int")
        _check_unique([f.name for f in self.fields], self.namespace)

    @property
    def names(self) -> tuple[str, ...]:
        """Field names in tuple order."""
        return tuple(f.name for f in self.fields)


@dataclass(frozen=True)
class UmsMessage:
    """A UMS data message: tuples of one namespace and one table version."""

    protocol: ProtocolType
    schema: UmsSchema
    payload: tuple[tuple[JsonValue, ...], ...]
    version: str = UMS_VERSION

    @classmethod
    def prevalidated(
        cls, protocol: ProtocolType, schema: UmsSchema, payload: tuple[tuple[JsonValue, ...], ...]
    ) -> UmsMessage:
        """A message whose tuples are already in wire form (``encode_column`` output), built without
        re-checking every value: the appender's hot path. Everything else should use the constructor."""
        message = object.__new__(cls)
        for name, value in (
            ("protocol", protocol),
            ("schema", schema),
            ("payload", payload),
            ("version", UMS_VERSION),
        ):
            object.__setattr__(message, name, value)
        return message

    def __post_init__(self) -> None:
        if not isinstance(self.protocol, ProtocolType):
            _fail(f"protocol.type {self.protocol!r}: not a ProtocolType")
        if self.version != UMS_VERSION:
            _fail(f"protocol.version {self.version!r}: only {UMS_VERSION} is supported")
        if not isinstance(self.schema, UmsSchema):
            _fail(f"schema {self.schema!r}: not a UmsSchema")
        _check_system_fields(self.protocol, self.schema)
        if not isinstance(self.payload, tuple) or not self.payload:
            _fail(f"payload of {self.schema.namespace}: must be a non-empty tuple of tuples")
        for index, row in enumerate(self.payload):
            _check_tuple(self, index, row)


def _check_unique(names: list[str], namespace: Namespace) -> None:
    seen: set[str] = set()
    for name in names:
        if name in seen:
            _fail(f"schema.fields of {namespace}: duplicate field {name!r}")
        seen.add(name)


def _check_system_fields(protocol: ProtocolType, schema: UmsSchema) -> None:
    fixed = SYSTEM_FIELDS[protocol]
    for index, expected in enumerate(fixed):
        actual = schema.fields[index] if index < len(schema.fields) else None
        if actual != expected:
            _fail(
                f"schema.fields[{index}] of {schema.namespace}: {protocol.value} needs "
                f"{_describe(expected)}, got {_describe(actual)}"
            )
    if protocol not in ALLOWED_OPS and len(schema.fields) != len(fixed):
        _fail(f"schema.fields of {schema.namespace}: {protocol.value} carries no user columns")


def _check_tuple(msg: UmsMessage, index: int, row: object) -> None:
    fields = msg.schema.fields
    if not isinstance(row, tuple):
        _fail(f"payload[{index}].tuple: must be a tuple, got {type(row).__name__}")
    if len(row) != len(fields):
        _fail(f"payload[{index}].tuple: {len(row)} values for {len(fields)} fields")
    for position, (field, value) in enumerate(zip(fields, row, strict=True)):
        _check_value(f"payload[{index}].tuple[{position}] ({field.name})", field, value)
    ops = ALLOWED_OPS.get(msg.protocol)
    if ops is not None and row[2] not in ops:
        _fail(
            f"payload[{index}].tuple[2] (ums_op_): {row[2]!r} is not one of {sorted(ops)}"
            f" for {msg.protocol.value}"
        )


def _check_value(path: str, field: UmsField, value: JsonValue) -> None:
    if value is None and not field.nullable:
        _fail(f"{path}: null in a non-nullable field")
    problem = check_wire_value(field.type, value)
    if problem is not None:
        _fail(f"{path}: {problem}")


def _describe(field: UmsField | None) -> str:
    if field is None:
        return "nothing"
    return f"{field.name} {field.type.value} nullable={str(field.nullable).lower()}"


def _fail(text: str) -> NoReturn:
    raise BadMessageError(text)
