"""Full-pull requests: ``FULL_DATA_INDEPENDENT_PULL_REQ`` on ``<ds>_ctrl`` (spec 2.2), checked (pure).

``build`` is the one builder, ``ums.control.full_pull_request``. The payload has the original's keys, all
strings, so a request the original's keeper would send is accepted too::

    {"id":1704164645123,"type":"FULL_DATA_INDEPENDENT_PULL_REQ","timestamp":"2024-01-02 03:04:05.123",
     "from":"dbus-cli-fullpull","payload":{"DBUS_DATASOURCE_ID":"demo","SCHEMA_NAME":"shop",
     "TABLE_NAME":"orders","PHYSICAL_TABLES":"orders","SEQNO":"1704164645123","SPLIT_COL":"",
     "SPLIT_SHARD_SIZE":"100000","SPLIT_SHARD_STYLE":"","INPUT_CONDITIONS":"","SINK_TYPE":"KAFKA",
     "resultTopic":"demo.shop.result","INCREASE_VERSION":"false","INCREASE_BATCH_NO":"false",...}}

``parse`` turns a control record into a ``PullRequest`` or raises ``PullRejected`` with a code from
docs/errors.md (FULLPULL_BAD_REQUEST for a null, oversized, non-UTF-8 or malformed record, an unknown
type, a missing or invalid field); it raises nothing else, whatever the bytes. ``SCHEMA_NAME`` and
``TABLE_NAME`` must be MariaDB identifiers (``ums.control.identifier_problem``); they are never used
raw as paths (``dbuslib.zk.escape``). Whether the table and split column exist is checked against the
source when the request is accepted.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, TypeVar

from dbuslib.errors import DbusError
from dbuslib.topics import topic_problem
from ums.control import (
    MAX_ID,
    ControlMessage,
    ControlType,
    from_json,
    identifier_problem,
    new_control_message,
    peek,
    show,
    to_json,
)
from ums.control import PULL_REQUEST_FROM as FROM
from ums.control import full_pull_request as build
from ums.errors import BadControlError

__all__ = [
    "FROM",
    "TYPE",
    "PullRejected",
    "PullRequest",
    "build",
    "check",
    "is_request",
    "not_a_request",
    "parse",
    "reply",
    "to_record",
]

TYPE = ControlType.FULL_DATA_INDEPENDENT_PULL_REQ
FINISH = ControlType.FULL_DATA_FINISH_REQ
SINKS = ("KAFKA",)
MAX_ERROR_CHARS = 2000  # ERROR_MSG of a reply is cut there: a reply is always a small record
D = TypeVar("D", bound=int | None)  # _int_field's default: a field with an int default is an int
_INTEGER = re.compile(r"-?[0-9]{1,19}")  # ASCII digits that fit a Java long (int() takes any Unicode digit)


class PullRejected(DbusError):
    """A request that cannot be served; ``code`` names the reason (docs/errors.md), ``seqno`` the request
    when known (a record that is not JSON has none)."""

    def __init__(self, code: str, message: str, seqno: int | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.seqno = seqno


@dataclass(frozen=True)
class PullRequest:
    """One accepted-for-checking request. ``split_col`` may name several columns (``a,b``);
    ``shard_size`` None means the source's ``fullpull.shard_size``, -1 one shard."""

    seqno: int
    ds: str
    schema: str
    table: str
    split_col: str | None
    shard_size: int | None
    where: str | None
    result_topic: str | None
    message: ControlMessage

    @property
    def name(self) -> str:
        return f"{self.schema}.{self.table}"


def to_record(message: ControlMessage) -> tuple[bytes, bytes]:
    """Kafka key and value of a control message."""
    return message.type.value.encode(), to_json(message).encode()


def is_request(key: bytes | None) -> bool:
    """Whether a ``<ds>_ctrl`` record is for the full puller (other stages' messages share the topic)."""
    return key is not None and key.startswith(b"FULL_DATA_")


def parse(value: bytes | None, ds: str) -> PullRequest:
    """A ``<ds>_ctrl`` record whose key is for the full puller -> the request; PullRejected otherwise."""
    try:
        message = from_json(value)
    except BadControlError as e:
        raise not_a_request(value, e) from None
    return check(message, ds)


def not_a_request(value: bytes | None, e: BadControlError) -> PullRejected:
    """The refusal of a record that is not a control message (``ums.control.from_json`` said why)."""
    return PullRejected("FULLPULL_BAD_REQUEST", f"not a control message: {e}", _seqno_of(value))


def check(message: ControlMessage, ds: str) -> PullRequest:
    """A control message read from a ``FULL_DATA_*`` record -> the request; PullRejected when it is another
    type or a field is missing or invalid."""
    if message.type is not TYPE:
        msg = f"control message {message.id}: type {message.type.value} is not {TYPE.value}"
        code = "FULLPULL_BAD_REQUEST"
        raise PullRejected(code, msg, message.id)
    p = message.payload
    seqno = _int_field(p, "SEQNO", message.id, default=message.id)
    if not 0 < seqno <= MAX_ID:
        msg = f"request {message.id}: payload.SEQNO {seqno}: must be a positive integer of at most 64 bits"
        code = "FULLPULL_BAD_REQUEST"
        raise PullRejected(code, msg, message.id)

    def need(name: str) -> str:
        text = _text(p, name, seqno)
        if not text:
            code = "FULLPULL_BAD_REQUEST"
            raise PullRejected(code, f"request {seqno}: payload.{name} is missing", seqno)
        return text

    source = _text(p, "DBUS_DATASOURCE_ID", seqno)
    if source and source != ds and not (source.isascii() and source.isdigit()):  # the keeper's numeric id
        msg = f"request {seqno}: payload.DBUS_DATASOURCE_ID {show(source)} is not this source ({ds!r})"
        code = "FULLPULL_BAD_REQUEST"
        raise PullRejected(code, msg, seqno)
    for required in ("SCHEMA_NAME", "TABLE_NAME"):
        need(required)
    schema, table = _name(p, "SCHEMA_NAME", seqno), _name(p, "TABLE_NAME", seqno)
    physical = _text(p, "PHYSICAL_TABLES", seqno)
    if physical and physical != table.strip():
        msg = (
            f"request {seqno}: payload.PHYSICAL_TABLES {show(physical)}: only the table itself "
            f"({show(table)}) is supported"
        )
        code = "FULLPULL_BAD_REQUEST"
        raise PullRejected(code, msg, seqno)
    sink = _text(p, "SINK_TYPE", seqno) or "KAFKA"
    if sink not in SINKS:
        msg = f"request {seqno}: payload.SINK_TYPE {show(sink)} is not supported (use KAFKA)"
        code = "FULLPULL_BAD_REQUEST"
        raise PullRejected(code, msg, seqno)
    size = _int_field(p, "SPLIT_SHARD_SIZE", seqno, default=None)
    if size is not None and size != -1 and size < 1:
        msg = (
            f"request {seqno}: payload.SPLIT_SHARD_SIZE {size}: must be a positive row count or -1 "
            "(one shard)"
        )
        code = "FULLPULL_BAD_REQUEST"
        raise PullRejected(code, msg, seqno)
    split_col = _text(p, "SPLIT_COL", seqno) or None
    for column in (split_col or "").split(","):
        if split_col and (problem := identifier_problem(column.strip())):
            msg = (
                f"request {seqno}: payload.SPLIT_COL {show(split_col)}: column {show(column.strip())} "
                f"{problem}"
            )
            code = "FULLPULL_BAD_REQUEST"
            raise PullRejected(code, msg, seqno)
    topic = _text(p, "resultTopic", seqno) or None
    if topic is not None and (problem := topic_problem(topic)):
        msg = f"request {seqno}: payload.resultTopic {show(topic)} is not a Kafka topic name: {problem}"
        code = "FULLPULL_BAD_REQUEST"
        raise PullRejected(code, msg, seqno)
    return PullRequest(
        seqno, ds, schema, table, split_col, size, _text(p, "INPUT_CONDITIONS", seqno) or None, topic, message
    )


def reply(
    seqno: int | None,
    status: str,
    *,
    ds: str,
    table: str = "",
    code: str = "",
    error: str = "",
    **fields: Any,
) -> ControlMessage:
    """The ``FULL_DATA_FINISH_REQ`` sent to ``<ds>_callback``: ``STATUS`` ending (done) or abort (rejected
    or failed, with ``ERROR_CODE``/``ERROR_MSG``); ``SEQNO`` names the request ("" when unknown)."""
    payload = {
        "SEQNO": "" if seqno is None else str(seqno),
        "DBUS_DATASOURCE_ID": ds,
        "TABLE": _clean(table),
        "STATUS": status,
        "ERROR_CODE": code,
        "ERROR_MSG": _clean(error, MAX_ERROR_CHARS),
        **{k: _clean(str(v)) for k, v in fields.items()},
    }
    return new_control_message(FINISH, "dbus-fullpuller", payload)


def _clean(text: str, limit: int = 400) -> str:
    """Text a reply can carry: cut to ``limit`` characters, anything not UTF-8-encodable escaped."""
    text = text if len(text) <= limit else f"{text[: limit - 3]}..."
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _text(payload: dict[str, Any], name: str, seqno: int) -> str:
    value = payload.get(name, "")
    if value is None:
        return ""
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        msg = f"request {seqno}: payload.{name} must be a string, got {type(value).__name__}"
        code = "FULLPULL_BAD_REQUEST"
        raise PullRejected(code, msg, seqno)
    return str(value).strip()


def _name(payload: dict[str, Any], name: str, seqno: int) -> str:
    """A schema or table name as sent (not stripped: a leading space is part of a MariaDB name)."""
    value = payload[name]
    text = str(value) if isinstance(value, int) and not isinstance(value, bool) else value
    problem = identifier_problem(text)
    if problem is not None:
        msg = f"request {seqno}: payload.{name} {show(value)} is not a MariaDB name: it {problem}"
        code = "FULLPULL_BAD_REQUEST"
        raise PullRejected(code, msg, seqno)
    return text


def _int_field(payload: dict[str, Any], name: str, seqno: int, default: D) -> int | D:
    text = _text(payload, name, seqno)
    if not text:
        return default
    if not _INTEGER.fullmatch(text):
        msg = f"request {seqno}: payload.{name} {show(text)} is not an integer of at most 64 bits"
        code = "FULLPULL_BAD_REQUEST"
        raise PullRejected(code, msg, seqno)
    value = int(text)
    if not -MAX_ID - 1 <= value <= MAX_ID:
        msg = f"request {seqno}: payload.{name} {show(text)} is not an integer of at most 64 bits"
        code = "FULLPULL_BAD_REQUEST"
        raise PullRejected(code, msg, seqno)
    return value


def _seqno_of(value: bytes | None) -> int | None:
    """The id of a record that failed validation, when it says one (``ums.control.peek``)."""
    return peek(value)[0]
