"""Heartbeat rows in the appender (pure): a row of the heartbeat table -> a UMS heartbeat and a measurement.

``dbus heartbeat run`` inserts into ``<heartbeat.schema>.<heartbeat.table>`` (``dbus.db_heartbeat_monitor``,
spec 2.7) one row per monitored table, by example::

    {"ID": 42, "DS_NAME": "demo", "SCHEMA_NAME": "shop", "TABLE_NAME": "orders",
     "PACKET": "{\"node\":\"/DBus/HeartBeat/Monitor/demo/shop/orders/0\",\"time\":1795356395000,
                 \"type\":\"checkpoint\",\"txTime\":1795356395000}", "CREATE_TIME": ..., "UPDATE_TIME": ...}

The dispatcher sends the insert to the topic of the schema it monitors (``<ds>.shop``), so it reaches
the appender behind that schema's earlier data. There each row of that schema becomes:

- a ``data_increment_heartbeat`` message (spec 1.13 C: one tuple ``[ums_id_, ums_ts_]`` of the insert's
  binlog position and time) under the monitored table's namespace and version, on the table's result
  topic, key ``<schema>.<table>`` (the table's partition, behind its data), header ``ums_key`` =
  ``data_increment_heartbeat.<namespace>.<time>|<txTime>|ok|<ds>.wh_placeholder`` (spec 1.12);
- a ``Beat``: the end-to-end latency (now at the appender minus the packet's ``time``) and the rows of
  the table converted since its previous heartbeat, written to InfluxDB as measurement ``dbus_heartbeat``.

A row that cannot be trusted is a dead letter with one of ``REASONS``; a row of another source
(``DS_NAME`` not this one: several sources may capture one server's heartbeat table) or of another
schema (a multi-row insert is sent to each schema's topic) is left to its owner.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

BAD_HEARTBEAT = "APPENDER_BAD_HEARTBEAT"  # PACKET not a JSON object with epoch-ms ``time``; a name empty
UNKNOWN_TABLE = "APPENDER_HEARTBEAT_UNKNOWN_TABLE"  # no data ever seen, not captured or not at the source
REASONS = (BAD_HEARTBEAT, UNKNOWN_TABLE)
TABLE_STATUS = "ok"  # the key's <tableStatus>; the original writes "abort" only for a full pull's halt
WRITE_ROWS_EVENTS = frozenset({23, 30})  # WRITE_ROWS_EVENT_V1 (MariaDB), WRITE_ROWS_EVENT_V2 (MySQL)
MEASUREMENT = "dbus_heartbeat"
BAD_MEASUREMENT = "dbus_heartbeat_bad"


class BadHeartbeat(ValueError):
    """A heartbeat row that cannot be used; ``code`` is its dead-letter reason."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class HeartbeatTable:
    """Where heartbeats are written at the source, and the input topic of a schema (``topics.schema``)."""

    schema: str
    table: str
    schema_topic: Callable[[str], str]  # "shop" -> "demo.shop"

    def holds(self, header: dict[str, Any]) -> bool:
        return header.get("schema") == self.schema and header.get("table") == self.table

    @staticmethod
    def is_insert(header: dict[str, Any]) -> bool:
        return header.get("event_type") in WRITE_ROWS_EVENTS


@dataclass(frozen=True)
class Packet:
    """The PACKET column: ``time`` (emit, epoch ms), ``txTime`` (the writer's batch start, epoch ms)."""

    time_ms: int
    tx_ms: int
    type: str | None = None
    node: str | None = None


@dataclass(frozen=True)
class Heartbeat:
    """One heartbeat row, validated."""

    ds: str
    schema: str
    table: str
    packet: Packet


@dataclass(frozen=True)
class Beat:
    """One heartbeat measured at the appender; ``to_point`` gives its ``dbus_heartbeat`` point."""

    ds: str
    schema: str
    table: str
    latency_ms: float
    rows: int
    packet_ms: int
    tx_ms: int

    def to_point(self) -> Any:
        """``dbus_heartbeat,ds=demo,schema=shop,table=orders latency_ms=812.0,rows=17i,packet_ms=..i,
        tx_ms=..i <packet time, ms>``: timed at the packet's emit time, so a heartbeat converted again
        after a restart overwrites its point instead of adding one."""
        from influxdb_client import Point, WritePrecision

        return (
            Point(MEASUREMENT)
            .tag("ds", self.ds)
            .tag("schema", self.schema)
            .tag("table", self.table)
            .field("latency_ms", float(self.latency_ms))
            .field("rows", int(self.rows))
            .field("packet_ms", int(self.packet_ms))
            .field("tx_ms", int(self.tx_ms))
            .time(self.packet_ms, WritePrecision.MS)
        )


def bad_point(ds: str, reason: str, count: int, at_ms: int) -> Any:
    """``dbus_heartbeat_bad,ds=demo,reason=APPENDER_BAD_HEARTBEAT count=2i <at, ms>``: dead-lettered rows."""
    from influxdb_client import Point, WritePrecision

    return (
        Point(BAD_MEASUREMENT)
        .tag("ds", ds)
        .tag("reason", reason)
        .field("count", int(count))
        .time(at_ms, WritePrecision.MS)
    )


def parse_packet(text: Any) -> Packet:
    """``{"node": ..., "time": <ms>, "type": ..., "txTime": <ms>}`` -> Packet; ``txTime`` defaults to
    ``time``. Raises BadHeartbeat (APPENDER_BAD_HEARTBEAT) naming what is wrong, never the text."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    if not isinstance(text, str):
        raise BadHeartbeat(BAD_HEARTBEAT, f"PACKET is {type(text).__name__}, not JSON text")
    try:
        d = json.loads(text)
    except ValueError as e:
        raise BadHeartbeat(BAD_HEARTBEAT, f"PACKET is not JSON ({e.msg} at {e.pos})") from None
    if not isinstance(d, dict):
        raise BadHeartbeat(BAD_HEARTBEAT, f"PACKET is a JSON {type(d).__name__}, not an object")
    time_ms = _epoch_ms(d.get("time"), "time")
    tx_ms = _epoch_ms(d.get("txTime", time_ms), "txTime")
    kind, node = (v if isinstance(v, str) else None for v in (d.get("type"), d.get("node")))
    return Packet(time_ms, tx_ms, kind, node)


def _epoch_ms(value: Any, name: str) -> int:
    if value is None:
        raise BadHeartbeat(BAD_HEARTBEAT, f"PACKET has no {name!r}")
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise BadHeartbeat(BAD_HEARTBEAT, f"PACKET {name!r} is not epoch milliseconds")
    return value


def owner(image: dict[str, Any], ds: str, topic: str, hb: HeartbeatTable) -> bool:
    """Whether the row is this appender's to handle on ``topic``: not another source's (a non-empty
    DS_NAME other than ``ds``) and not another schema's (a non-empty SCHEMA_NAME whose topic is not
    ``topic``). Rows with empty names are ours: they are dead-lettered where they arrive."""
    row_ds, schema = image.get("DS_NAME"), image.get("SCHEMA_NAME")
    if isinstance(row_ds, str) and row_ds and row_ds != ds:
        return False
    return not (isinstance(schema, str) and schema and hb.schema_topic(schema) != topic)


def heartbeat_of(image: dict[str, Any]) -> Heartbeat:
    """The validated heartbeat of one row image (column names as in spec 2.7); BadHeartbeat otherwise."""
    names = []
    for column in ("DS_NAME", "SCHEMA_NAME", "TABLE_NAME"):
        value = image.get(column)
        if not isinstance(value, str) or not value.strip():
            raise BadHeartbeat(BAD_HEARTBEAT, f"{column} is {'NULL' if value is None else 'empty'}")
        names.append(value)
    return Heartbeat(*names, parse_packet(image.get("PACKET")))


def measure(hb: Heartbeat, now_ms: float, rows: int) -> Beat:
    """The beat of ``hb`` seen at ``now_ms`` after ``rows`` rows of its table."""
    p = hb.packet
    return Beat(hb.ds, hb.schema, hb.table, float(now_ms - p.time_ms), rows, p.time_ms, p.tx_ms)
