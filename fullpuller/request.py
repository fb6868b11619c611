"""Full-pull requests: ``FULL_DATA_INDEPENDENT_PULL_REQ`` on ``<ds>_ctrl`` (spec 2.2), built and checked (pure).

The payload has the original's keys, all strings, so a request the original's keeper would send is
accepted too::

    {"id":1704164645123,"type":"FULL_DATA_INDEPENDENT_PULL_REQ","timestamp":"2024-01-02 03:04:05.123",
     "from":"dbus-cli-fullpull","payload":{"DBUS_DATASOURCE_ID":"demo","SCHEMA_NAME":"shop",
     "TABLE_NAME":"orders","PHYSICAL_TABLES":"orders","SEQNO":"1704164645123","SPLIT_COL":"",
     "SPLIT_SHARD_SIZE":"100000","SPLIT_SHARD_STYLE":"","INPUT_CONDITIONS":"","SINK_TYPE":"KAFKA",
     "resultTopic":"demo.shop.result","INCREASE_VERSION":"false","INCREASE_BATCH_NO":"true",...}}

``parse`` turns a control record into a ``PullRequest`` or raises ``PullRejected`` with a code from
docs/errors.md (FULLPULL_BAD_REQUEST for malformed JSON, an unknown type, a missing or invalid field).
Whether the table and split column exist is checked against the source when the request is accepted.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ums.control import ControlMessage, ControlType, from_json, new_control_message, to_json
from ums.errors import BadControlError

FROM = "dbus-cli-fullpull"
TYPE = ControlType.FULL_DATA_INDEPENDENT_PULL_REQ
FINISH = ControlType.FULL_DATA_FINISH_REQ
SINKS = ("KAFKA",)


class PullRejected(Exception):
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


def build(ds: str, schema: str, table: str, *, split_col: str | None = None, shard_size: int | None = None,
          where: str | None = None, result_topic: str | None = None, remark: str = "") -> ControlMessage:
    """The request the CLI sends; ``SEQNO`` = the message id (epoch ms)."""
    probe = new_control_message(TYPE, FROM, {"SCHEMA_NAME": schema})
    payload = {"DBUS_DATASOURCE_ID": ds, "SCHEMA_NAME": schema, "TABLE_NAME": table, "PHYSICAL_TABLES": table,
               "INCREASE_VERSION": "false", "INCREASE_BATCH_NO": "true", "SEQNO": str(probe.id),
               "SPLIT_COL": split_col or "", "SPLIT_SHARD_SIZE": "" if shard_size is None else str(shard_size),
               "SPLIT_SHARD_STYLE": "", "INPUT_CONDITIONS": where or "", "PULL_REMARK": remark,
               "SPLIT_BOUNDING_QUERY": "", "PULL_TARGET_COLS": "", "SCN_NO": "", "SINK_TYPE": "KAFKA",
               "resultTopic": result_topic or "", "POS": "", "OP_TS": "", "OGG_OP_TS": ""}
    return ControlMessage(probe.id, TYPE, probe.timestamp, FROM, payload)


def to_record(message: ControlMessage) -> tuple[bytes, bytes]:
    """Kafka key and value of a control message."""
    return message.type.value.encode(), to_json(message).encode()


def is_request(key: bytes | None) -> bool:
    """Whether a ``<ds>_ctrl`` record is for the full puller (other stages' messages share the topic)."""
    return key is not None and key.startswith(b"FULL_DATA_")


def parse(value: bytes | None, ds: str) -> PullRequest:
    """A ``<ds>_ctrl`` record whose key is for the full puller -> the request; PullRejected otherwise."""
    try:
        message = from_json(value or b"")
    except BadControlError as e:
        raise PullRejected("FULLPULL_BAD_REQUEST", f"not a control message: {e}", _seqno_of(value)) from None
    if message.type is not TYPE:
        msg = f"control message {message.id}: type {message.type.value} is not {TYPE.value}"
        raise PullRejected("FULLPULL_BAD_REQUEST", msg, message.id)
    p = message.payload
    seqno = _int_field(p, "SEQNO", message.id, default=message.id)

    def need(name: str) -> str:
        text = _text(p, name, seqno)
        if not text:
            raise PullRejected("FULLPULL_BAD_REQUEST", f"request {seqno}: payload.{name} is missing", seqno)
        return text

    source = _text(p, "DBUS_DATASOURCE_ID", seqno)
    if source and source != ds and not source.isdigit():  # the original's keeper sends its numeric ds id
        msg = f"request {seqno}: payload.DBUS_DATASOURCE_ID {source!r} is not this source ({ds!r})"
        raise PullRejected("FULLPULL_BAD_REQUEST", msg, seqno)
    schema, table = need("SCHEMA_NAME"), need("TABLE_NAME")
    physical = _text(p, "PHYSICAL_TABLES", seqno)
    if physical and physical != table:
        msg = f"request {seqno}: payload.PHYSICAL_TABLES {physical!r}: only the table itself ({table!r}) is supported"
        raise PullRejected("FULLPULL_BAD_REQUEST", msg, seqno)
    sink = _text(p, "SINK_TYPE", seqno) or "KAFKA"
    if sink not in SINKS:
        msg = f"request {seqno}: payload.SINK_TYPE {sink!r} is not supported (use KAFKA)"
        raise PullRejected("FULLPULL_BAD_REQUEST", msg, seqno)
    size = _int_field(p, "SPLIT_SHARD_SIZE", seqno, default=None)
    if size is not None and size != -1 and size < 1:
        msg = f"request {seqno}: payload.SPLIT_SHARD_SIZE {size}: must be a positive row count or -1 (one shard)"
        raise PullRejected("FULLPULL_BAD_REQUEST", msg, seqno)
    return PullRequest(seqno, ds, schema, table, _text(p, "SPLIT_COL", seqno) or None, size,
                       _text(p, "INPUT_CONDITIONS", seqno) or None, _text(p, "resultTopic", seqno) or None,
                       message)


def reply(seqno: int | None, status: str, *, ds: str, table: str = "", code: str = "", error: str = "",
          **fields: Any) -> ControlMessage:
    """The ``FULL_DATA_FINISH_REQ`` sent to ``<ds>_callback``: ``STATUS`` ending (done) or abort (rejected
    or failed, with ``ERROR_CODE``/``ERROR_MSG``); ``SEQNO`` names the request ("" when unknown)."""
    payload = {"SEQNO": "" if seqno is None else str(seqno), "DBUS_DATASOURCE_ID": ds, "TABLE": table,
               "STATUS": status, "ERROR_CODE": code, "ERROR_MSG": error,
               **{k: str(v) for k, v in fields.items()}}
    return new_control_message(FINISH, "dbus-fullpuller", payload)


def _text(payload: dict[str, Any], name: str, seqno: int) -> str:
    value = payload.get(name, "")
    if value is None:
        return ""
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        msg = f"request {seqno}: payload.{name} must be a string, got {type(value).__name__}"
        raise PullRejected("FULLPULL_BAD_REQUEST", msg, seqno)
    return str(value).strip()


def _int_field(payload: dict[str, Any], name: str, seqno: int, default: int | None) -> int | None:
    text = _text(payload, name, seqno)
    if not text:
        return default
    try:
        return int(text)
    except ValueError:
        msg = f"request {seqno}: payload.{name} {text!r} is not an integer"
        raise PullRejected("FULLPULL_BAD_REQUEST", msg, seqno) from None


def _seqno_of(value: bytes | None) -> int | None:
    """The id of a record that failed validation, when it is JSON enough to have one."""
    import json

    try:
        obj = json.loads(value or b"")
        seqno = obj.get("id") if isinstance(obj, dict) else None
        return seqno if isinstance(seqno, int) and not isinstance(seqno, bool) else None
    except ValueError:
        return None
