"""Control messages on ``<ds>_ctrl`` (spec 2): ``{id, type, timestamp, from, payload[, project]}``.

Kafka key = the type name. JSON example (a full-pull request, spec 2.2)::

    {"id":1704164645123,"type":"FULL_DATA_INDEPENDENT_PULL_REQ","timestamp":"2024-01-02 03:04:05.123",
     "from":"full-pull-request-from-project","payload":{"SCHEMA_NAME":"shop","TABLE_NAME":"orders"}}
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime, tzinfo
from enum import Enum
from typing import Any, NoReturn

from ums.encoding import JsonLimits, dumps_compact, loads
from ums.errors import BadControlError
from ums.timefmt import epoch_ms, ums_ts

MAX_BYTES = 1_048_576  # a control record over this many bytes is refused unread (a request is ~600 bytes)
LIMITS = JsonLimits(max_number_chars=64, max_depth=32)  # numbers and nesting a control message may have
MAX_ID = 2**63 - 1  # ids are Java longs in the original (epoch ms in practice)
MAX_IDENTIFIER_CHARS = 64  # MariaDB's limit for schema, table and column names


class ControlType(Enum):
    """The original's ``ControlType`` (dbus-commons) plus the full puller's extra keys."""

    DISPATCHER_RELOAD_CONFIG = "DISPATCHER_RELOAD_CONFIG"
    DISPATCHER_PAUSE_DATA = "DISPATCHER_PAUSE_DATA"
    DISPATCHER_RESUME_DATA = "DISPATCHER_RESUME_DATA"
    DISPATCHER_START_DEBUG = "DISPATCHER_START_DEBUG"
    DISPATCHER_STOP_DEBUG = "DISPATCHER_STOP_DEBUG"
    FULL_DATA_PULL_REQ = "FULL_DATA_PULL_REQ"
    LOG_PROCESSOR_RELOAD_CONFIG = "LOG_PROCESSOR_RELOAD_CONFIG"
    APPENDER_TOPIC_RESUME = "APPENDER_TOPIC_RESUME"
    APPENDER_RELOAD_CONFIG = "APPENDER_RELOAD_CONFIG"
    MONITOR_ALARM = "MONITOR_ALARM"
    G_META_SYNC_WARNING = "G_META_SYNC_WARNING"
    G_MAAS_APPENDER_EVENT = "G_MAAS_APPENDER_EVENT"
    COMMON_EMAIL_MESSAGE = "COMMON_EMAIL_MESSAGE"
    KEEPER_PROJECT_EXPIRE = "KEEPER_PROJECT_EXPIRE"
    EXTRACTOR_RELOAD_CONF = "EXTRACTOR_RELOAD_CONF"
    MONGO_EXTRACTOR_RELOAD_CONFIG = "MONGO_EXTRACTOR_RELOAD_CONFIG"
    ROUTER_RELOAD = "ROUTER_RELOAD"
    ROUTER_TOPOLOGY_RERUN = "ROUTER_TOPOLOGY_RERUN"
    ROUTER_TOPOLOGY_EFFECT = "ROUTER_TOPOLOGY_EFFECT"
    ROUTER_TOPOLOGY_TABLE_EFFECT = "ROUTER_TOPOLOGY_TABLE_EFFECT"
    ROUTER_TOPOLOGY_TABLE_START = "ROUTER_TOPOLOGY_TABLE_START"
    ROUTER_TOPOLOGY_TABLE_STOP = "ROUTER_TOPOLOGY_TABLE_STOP"
    SINKER_RELOAD_CONFIG = "SINKER_RELOAD_CONFIG"
    SINKER_DRAG_BACK_RUN_AGAIN = "SINKER_DRAG_BACK_RUN_AGAIN"
    FULL_DATA_INDEPENDENT_PULL_REQ = "FULL_DATA_INDEPENDENT_PULL_REQ"
    FULL_DATA_PULL_RELOAD_CONF = "FULL_DATA_PULL_RELOAD_CONF"
    FULL_DATA_FINISH_REQ = "FULL_DATA_FINISH_REQ"


@dataclass(frozen=True)
class ControlMessage:
    """One control message; valid by construction, as the keeper's ``validate`` demands.

    ``from_`` is written as ``from``; ``project`` (tenant pulls) is omitted when None.
    ``payload`` and ``project`` are plain dicts: treat them as read-only.
    """

    id: int
    type: ControlType
    timestamp: str
    from_: str
    payload: dict[str, Any]
    project: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        if isinstance(self.id, bool) or not isinstance(self.id, int) or not 0 < self.id <= MAX_ID:
            _fail(f"id {show(self.id)}: must be a positive int of at most 64 bits")
        if not isinstance(self.type, ControlType):
            _fail(f"type {show(self.type)} of id {self.id}: not a ControlType")
        for name in ("timestamp", "from_"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value:
                _fail(f"{name.rstrip('_')} {show(value)} of {self.type.value} {self.id}: must be non-empty")
        if not isinstance(self.payload, dict) or not self.payload:
            _fail(f"payload of {self.type.value} {self.id}: must be a non-empty object")
        if self.project is not None and not isinstance(self.project, dict):
            _fail(f"project of {self.type.value} {self.id}: must be an object")


def new_control_message(
    control_type: ControlType,
    from_: str,
    payload: dict[str, Any],
    now: datetime | None = None,
    tz: tzinfo = UTC,
    project: dict[str, Any] | None = None,
) -> ControlMessage:
    """A message stamped ``now`` (aware; default: the current time): id = epoch ms."""
    moment = now if now is not None else datetime.now(UTC)
    return ControlMessage(epoch_ms(moment), control_type, ums_ts(moment, tz), from_, payload, project)


PULL_REQUEST_FROM = "dbus-cli-fullpull"  # ``from`` of a request by default (the CLI's)


def full_pull_request(
    ds: str,
    schema: str,
    table: str,
    *,
    split_col: str | None = None,
    shard_size: int | None = None,
    where: str | None = None,
    result_topic: str | None = None,
    remark: str = "",
    seqno: int | None = None,
    from_: str = PULL_REQUEST_FROM,
    now: datetime | None = None,
) -> ControlMessage:
    """The one ``FULL_DATA_INDEPENDENT_PULL_REQ`` every sender builds (``dbus fullpull``, the extractor's
    reset, the appender's re-pull, the demo), with the original keeper's payload keys, all strings::

        {"DBUS_DATASOURCE_ID":"demo","SCHEMA_NAME":"shop","TABLE_NAME":"orders","PHYSICAL_TABLES":"orders",
         "INCREASE_VERSION":"false","INCREASE_BATCH_NO":"false","SEQNO":"1704164645123","SPLIT_COL":"",...}

    ``SEQNO`` and the message id are ``seqno``, by default the message's time (epoch ms), stamped ``now``
    (aware; default: the current time). ``INCREASE_VERSION`` and ``INCREASE_BATCH_NO`` are "false", as the
    original keeper sends an independent pull (``FullPullService.buildPayload``); the full puller ignores
    both (docs/fullpull.md)."""
    moment = now if now is not None else datetime.now(UTC)
    ident = epoch_ms(moment) if seqno is None else seqno
    payload = {
        "DBUS_DATASOURCE_ID": ds,
        "SCHEMA_NAME": schema,
        "TABLE_NAME": table,
        "PHYSICAL_TABLES": table,
        "INCREASE_VERSION": "false",
        "INCREASE_BATCH_NO": "false",
        "SEQNO": str(ident),
        "SPLIT_COL": split_col or "",
        "SPLIT_SHARD_SIZE": "" if shard_size is None else str(shard_size),
        "SPLIT_SHARD_STYLE": "",
        "INPUT_CONDITIONS": where or "",
        "PULL_REMARK": remark,
        "SPLIT_BOUNDING_QUERY": "",
        "PULL_TARGET_COLS": "",
        "SCN_NO": "",
        "SINK_TYPE": "KAFKA",
        "resultTopic": result_topic or "",
        "POS": "",
        "OP_TS": "",
        "OGG_OP_TS": "",
    }
    return ControlMessage(ident, ControlType.FULL_DATA_INDEPENDENT_PULL_REQ, ums_ts(moment), from_, payload)


def control_key(message: ControlMessage) -> str:
    """Kafka record key: the type name, e.g. ``FULL_DATA_INDEPENDENT_PULL_REQ``."""
    return message.type.value


def to_json(message: ControlMessage) -> str:
    """Compact JSON in the order id, type, timestamp, from, payload[, project]."""
    obj: dict[str, Any] = {
        "id": message.id,
        "type": message.type.value,
        "timestamp": message.timestamp,
        "from": message.from_,
        "payload": message.payload,
    }
    if message.project is not None:
        obj["project"] = message.project
    return dumps_compact(obj)


def from_json(text: str | bytes | None) -> ControlMessage:
    """Parse and validate a record value before anything else touches it; anything wrong raises
    ``BadControlError`` naming the field: no value (a null record), over ``MAX_BYTES``, not UTF-8, not
    JSON, numbers or nesting over ``LIMITS``, not an object, a missing key, an unknown type, a bad id."""
    if text is None:
        _fail("control message: the record has no value (null)")
    size = len(text) if isinstance(text, bytes) else len(text.encode("utf-8", "surrogatepass"))
    if size > MAX_BYTES:
        _fail(f"control message: {size} bytes, over the {MAX_BYTES} a control message may have")
    obj = loads(text, BadControlError, "control message", LIMITS)
    if not isinstance(obj, dict):
        _fail(f"control message: expected a JSON object, got {_json_kind(obj)}")
    missing = [k for k in ("id", "type", "timestamp", "from", "payload") if k not in obj]
    if missing:
        _fail(f"control message {show(obj.get('id'))}: missing {', '.join(missing)}")
    return ControlMessage(
        obj["id"],
        _control_type(obj["type"], obj["id"]),
        obj["timestamp"],
        obj["from"],
        obj["payload"],
        obj.get("project"),
    )


def peek(text: str | bytes | None) -> tuple[int | None, str | None]:
    """(id, type) that a record refused by ``from_json`` claims, each None when it does not say, so that a
    refusal can name the request: a record with a bad field elsewhere (a 5000-digit number in the payload)
    still has its id. Never raises."""
    if not isinstance(text, (bytes, str)) or len(text) > MAX_BYTES:
        return None, None
    try:  # lenient: numbers too long for a control message become None
        raw = text.decode("utf-8") if isinstance(text, bytes) else text
        obj = json.loads(raw, parse_int=lambda s: int(s) if len(s) <= LIMITS.max_number_chars else None)
    except (ValueError, RecursionError):
        return None, None
    if not isinstance(obj, dict):
        return None, None
    mid, kind = obj.get("id"), obj.get("type")
    valid = isinstance(mid, int) and not isinstance(mid, bool) and 0 < mid <= MAX_ID
    return (mid if valid else None), (kind if isinstance(kind, str) else None)


def identifier_problem(name: object) -> str | None:
    """Why ``name`` cannot be a MariaDB schema, table or column name, or None when it can: 1 to 64
    characters of the Basic Multilingual Plane, no NUL, no trailing space. Any other character is legal
    in a quoted identifier (``t.dot``, ``..``): such names must be escaped where they become paths or
    topic names, never refused there."""
    if not isinstance(name, str):
        return f"must be a string, got {_json_kind(name)}"
    if not name:
        return "is empty"
    if len(name) > MAX_IDENTIFIER_CHARS:
        return f"has {len(name)} characters (MariaDB names have at most {MAX_IDENTIFIER_CHARS})"
    if "\x00" in name:
        return "contains a NUL character"
    outside = next((c for c in name if ord(c) > 0xFFFF or 0xD800 <= ord(c) <= 0xDFFF), None)
    if outside is not None:
        return f"contains U+{ord(outside):04X}, outside the characters MariaDB names may have"
    if name.endswith(" "):
        return "ends with a space"
    return None


def show(value: object, limit: int = 80) -> str:
    """``repr(value)`` cut to ``limit`` characters: a hostile value never makes an error message large."""
    text = repr(value)
    return text if len(text) <= limit else f"{text[: limit - 3]}..."


def _json_kind(value: object) -> str:
    kinds = {dict: "an object", list: "an array", str: "a string", bool: "a boolean", type(None): "null"}
    return kinds.get(type(value), "a number")


def _control_type(value: object, message_id: object) -> ControlType:
    try:
        return ControlType(value)
    except (ValueError, TypeError):
        _fail(f"control message {show(message_id)}: unknown type {show(value)}")


def _fail(text: str) -> NoReturn:
    raise BadControlError(text)
