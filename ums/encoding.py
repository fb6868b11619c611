"""UMS messages <-> the original's JSON text (spec 1.1), byte-stable.

``to_json`` writes compact JSON (no spaces), UTF-8 characters as they are (``ensure_ascii=False``)
and keys in this fixed order::

    {"protocol":{"type":"data_increment_data","version":"1.3"},
     "schema":{"namespace":"mysql.demo.shop.orders.3.0.0",
               "fields":[{"name":"ums_id_","type":"long","nullable":false,"encoded":false},...],
               "batchId":0},
     "payload":[{"tuple":["1030000012345678","2024-01-02 03:04:05.000","i","...",...]}]}

``from_json`` accepts any key order and extra keys, defaults a field's missing ``nullable`` and
``encoded`` to false (as the original's fastjson beans do), and raises ``BadMessageError`` naming
the path of the first problem, e.g. ``payload[3].tuple: 5 values for 6 fields``.
"""

from __future__ import annotations

import functools
import json
import math
from dataclasses import dataclass
from enum import Enum
from typing import Any, NoReturn

from ums.errors import BadMessageError, UmsError
from ums.message import ProtocolType, UmsField, UmsMessage, UmsSchema
from ums.namespace import Namespace
from ums.types import UmsType


def to_json(msg: UmsMessage) -> str:
    """The message as one line of compact JSON."""
    return dumps_compact(to_dict(msg))


def to_dict(msg: UmsMessage) -> dict[str, Any]:
    """The message as plain JSON-ready dicts and lists, in wire key order."""
    schema = msg.schema
    return {
        "protocol": {"type": msg.protocol.value, "version": msg.version},
        "schema": {
            "namespace": str(schema.namespace),
            "fields": [_field_dict(f) for f in schema.fields],
            "batchId": schema.batch_id,
        },
        "payload": [{"tuple": list(row)} for row in msg.payload],
    }


def dumps_compact(obj: object) -> str:
    """``json.dumps`` the way UMS writes: no spaces, raw UTF-8, no NaN."""
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


@dataclass(frozen=True)
class JsonLimits:
    """What a strict reader (control messages) accepts beyond plain JSON syntax.

    ``max_number_chars``: the longest number literal (Python's ``int`` refuses more than 4300 digits with a
    ``ValueError`` of its own; a literal over this limit is refused by name before it is converted).
    ``max_depth``: the deepest nesting of objects and arrays (the top level is depth 1).
    Strings must be Unicode text: a lone surrogate escape such as ``"\\ud800"`` is refused, as are
    ``NaN`` and ``Infinity`` and floats that overflow to infinity.
    """

    max_number_chars: int = 64
    max_depth: int = 32


def loads(text: str | bytes, error: type[Exception], where: str, limits: JsonLimits | None = None) -> object:
    """``json.loads`` of UTF-8 text, raising ``error`` that names ``where`` (and, with ``limits``, the path
    of the value at fault, e.g. ``control message: payload.SEQNO: a number of 5000 characters``) when the
    text is not JSON or breaks ``limits``. Never raises anything but ``error``."""
    try:
        if isinstance(text, (bytes, bytearray, memoryview)):
            text = bytes(text).decode("utf-8")
        if limits is None:
            return json.loads(text)
        number = functools.partial(_number, limit=limits.max_number_chars)
        obj = json.loads(text, parse_int=number, parse_float=number, parse_constant=_constant)
    except UnicodeDecodeError as err:
        msg = (
            f"{where}: not UTF-8: byte {err.start} ({err.object[err.start : err.start + 1]!r}): {err.reason}"
        )
        raise error(msg) from None
    except json.JSONDecodeError as err:
        msg = f"{where}: not JSON: {err}"
        raise error(msg) from None
    except RecursionError:
        msg = f"{where}: not JSON this reader can take: nested too deeply"
        raise error(msg) from None
    except ValueError as err:  # Python's int-digit limit (no limits given), or _constant
        msg = f"{where}: not JSON this reader can take: {err}"
        raise error(msg) from None
    problem = _strict_problem(obj, limits)
    if problem is not None:
        msg = f"{where}: {problem}"
        raise error(msg)
    return obj


@dataclass(frozen=True)
class _BadNumber:
    """A number literal that ``limits`` refuse, kept in place so the error can name its path."""

    chars: int
    reason: str


def _number(literal: str, limit: int) -> object:
    if len(literal) > limit:
        return _BadNumber(len(literal), f"a number of {len(literal)} characters (at most {limit})")
    if any(c in literal for c in ".eE"):
        value = float(literal)
        return value if math.isfinite(value) else _BadNumber(len(literal), f"number {literal} overflows")
    return int(literal)


def _constant(name: str) -> NoReturn:
    msg = f"{name} is not a JSON number"
    raise ValueError(msg)


def _strict_problem(obj: object, limits: JsonLimits) -> str | None:
    """The first problem found walking ``obj`` (iteratively: no recursion on hostile nesting), or None."""
    stack: list[tuple[object, str, int]] = [(obj, "", 1)]
    while stack:
        value, path, depth = stack.pop()
        where = path or "the top level"
        if isinstance(value, _BadNumber):
            return f"{where}: {value.reason}"
        if isinstance(value, str) and not _is_text(value):
            return f"{where}: a string with a lone surrogate escape (not Unicode text)"
        if isinstance(value, (dict, list)) and depth > limits.max_depth:
            return f"{where}: nested deeper than {limits.max_depth} levels"
        if isinstance(value, dict):
            if not all(_is_text(key) for key in value):
                return f"{where}: a key with a lone surrogate escape (not Unicode text)"
            children = [
                (item, f"{path}.{_clip(key)}" if path else _clip(key), depth + 1)
                for key, item in value.items()
            ]
            stack.extend(reversed(children))  # popped in document order: the first problem is named
        elif isinstance(value, list):
            stack.extend(reversed([(item, f"{path}[{i}]", depth + 1) for i, item in enumerate(value)]))
    return None


def _is_text(value: str) -> bool:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _clip(key: str, limit: int = 40) -> str:
    return key if len(key) <= limit else f"{key[:limit]}..."


def from_json(text: str | bytes) -> UmsMessage:
    """Parse and validate one UMS JSON message."""
    return from_dict(loads(text, BadMessageError, "$"))


def from_dict(obj: object) -> UmsMessage:
    """Build a validated message from parsed JSON (``json.loads`` output)."""
    top = _object(obj, "$")
    protocol = _object(_member(top, "protocol", "$"), "protocol")
    schema = _schema(_object(_member(top, "schema", "$"), "schema"))
    payload = _list(_member(top, "payload", "$"), "payload")
    rows = tuple(_tuple(item, f"payload[{i}]") for i, item in enumerate(payload))
    ptype = _enum(ProtocolType, _member(protocol, "type", "protocol"), "protocol.type")
    version = _member(protocol, "version", "protocol")
    return UmsMessage(ptype, schema, rows, version)


def _schema(obj: dict[str, Any]) -> UmsSchema:
    namespace = _member(obj, "namespace", "schema")
    if not isinstance(namespace, str):
        _fail(f"schema.namespace: expected a string, got {namespace!r}")
    try:
        parsed = Namespace.parse(namespace)
    except UmsError as err:
        msg = f"schema.namespace: {err}"
        raise BadMessageError(msg) from err
    items = _list(_member(obj, "fields", "schema"), "schema.fields")
    fields = tuple(_field(item, f"schema.fields[{i}]") for i, item in enumerate(items))
    return UmsSchema(parsed, fields, _member(obj, "batchId", "schema"))


def _field(obj: object, path: str) -> UmsField:
    item = _object(obj, path)
    ftype = _enum(UmsType, _member(item, "type", path), f"{path}.type")
    nullable, encoded = item.get("nullable", False), item.get("encoded", False)
    return UmsField(_member(item, "name", path), ftype, nullable, encoded)


def _field_dict(field: UmsField) -> dict[str, Any]:
    return {
        "name": field.name,
        "type": field.type.value,
        "nullable": field.nullable,
        "encoded": field.encoded,
    }


def _tuple(obj: object, path: str) -> tuple[Any, ...]:
    values = _list(_member(_object(obj, path), "tuple", path), f"{path}.tuple")
    return tuple(values)


def _enum(kind: type[Enum], value: object, path: str) -> Any:
    try:
        return kind(value)
    except ValueError:
        known = ", ".join(m.value for m in kind)
        _fail(f"{path}: unknown value {value!r} (known: {known})")


def _member(obj: dict[str, Any], key: str, path: str) -> Any:
    if key not in obj:
        _fail(f"{path}: missing key {key!r}")
    return obj[key]


def _object(obj: object, path: str) -> dict[str, Any]:
    if not isinstance(obj, dict):
        _fail(f"{path}: expected a JSON object, got {type(obj).__name__}")
    return obj


def _list(obj: object, path: str) -> list[Any]:
    if not isinstance(obj, list):
        _fail(f"{path}: expected a JSON array, got {type(obj).__name__}")
    return obj


def _fail(text: str) -> NoReturn:
    raise BadMessageError(text)
