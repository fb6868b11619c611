"""Control messages on ``<ds>_ctrl`` (spec 2): ``{id, type, timestamp, from, payload[, project]}``.

Kafka key = the type name. JSON example (a full-pull request, spec 2.2)::

    {"id":1704164645123,"type":"FULL_DATA_INDEPENDENT_PULL_REQ","timestamp":"2024-01-02 03:04:05.123",
     "from":"full-pull-request-from-project","payload":{"SCHEMA_NAME":"shop","TABLE_NAME":"orders"}}
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, tzinfo
from enum import Enum
from typing import Any, NoReturn

from ums.encoding import dumps_compact, loads
from ums.errors import BadControlError
from ums.timefmt import epoch_ms, ums_ts


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
        if isinstance(self.id, bool) or not isinstance(self.id, int) or self.id <= 0:
            _fail(f"id {self.id!r}: must be a positive int")
        if not isinstance(self.type, ControlType):
            _fail(f"type {self.type!r} of id {self.id}: not a ControlType")
        for name in ("timestamp", "from_"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value:
                _fail(f"{name.rstrip('_')} {value!r} of {self.type.value} {self.id}: must be non-empty")
        if not isinstance(self.payload, dict) or not self.payload:
            _fail(f"payload of {self.type.value} {self.id}: must be a non-empty object")
        if self.project is not None and not isinstance(self.project, dict):
            _fail(f"project of {self.type.value} {self.id}: must be an object")


def new_control_message(control_type: ControlType, from_: str, payload: dict[str, Any],
                        now: datetime | None = None, tz: tzinfo = UTC,
                        project: dict[str, Any] | None = None) -> ControlMessage:
    """A message stamped ``now`` (aware; default: the current time): id = epoch ms."""
    moment = now if now is not None else datetime.now(UTC)
    return ControlMessage(epoch_ms(moment), control_type, ums_ts(moment, tz), from_, payload, project)


def control_key(message: ControlMessage) -> str:
    """Kafka record key: the type name, e.g. ``FULL_DATA_INDEPENDENT_PULL_REQ``."""
    return message.type.value


def to_json(message: ControlMessage) -> str:
    """Compact JSON in the order id, type, timestamp, from, payload[, project]."""
    obj: dict[str, Any] = {"id": message.id, "type": message.type.value,
                           "timestamp": message.timestamp, "from": message.from_,
                           "payload": message.payload}
    if message.project is not None:
        obj["project"] = message.project
    return dumps_compact(obj)


def from_json(text: str | bytes) -> ControlMessage:
    """Parse and validate; unknown types and missing keys raise ``BadControlError``."""
    obj = loads(text, BadControlError, "control message")
    if not isinstance(obj, dict):
        _fail(f"control message: expected a JSON object, got {type(obj).__name__}")
    missing = [k for k in ("id", "type", "timestamp", "from", "payload") if k not in obj]
    if missing:
        _fail(f"control message {obj.get('id')!r}: missing {', '.join(missing)}")
    return ControlMessage(obj["id"], _control_type(obj["type"], obj["id"]), obj["timestamp"],
                          obj["from"], obj["payload"], obj.get("project"))


def _control_type(value: object, message_id: object) -> ControlType:
    try:
        return ControlType(value)
    except ValueError:
        _fail(f"control message {message_id!r}: unknown type {value!r}")


def _fail(text: str) -> NoReturn:
    raise BadControlError(text)
