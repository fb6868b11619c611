"""The heartbeat table at the source: its DDL, its rows' PACKET (built once, parsed once) and what a
heartbeat insert is (pure). The writer (heartbeat/writer.py), the dispatcher and the appender all read
this one contract.

The table is the original's (spec section 2.7), ``dbus.db_heartbeat_monitor`` by default
(``heartbeat.schema`` / ``heartbeat.table``). One row per monitored table and interval, by example::

    {"ID": 42, "DS_NAME": "demo", "SCHEMA_NAME": "shop", "TABLE_NAME": "orders",
     "PACKET": "{\"node\":\"/DBus/HeartBeat/Monitor/demo/shop/orders/0\",\"time\":1714564800123,
                 \"type\":\"checkpoint\",\"txTime\":1714564800100}", "CREATE_TIME": ..., "UPDATE_TIME": ...}

``time`` is when the row was emitted and ``txTime`` when its batch started, both epoch milliseconds; the
last path element of ``node`` is the source partition (always 0 for MySQL). Every beat is a checkpoint,
as with the original's default ``checkPointPerHeartBeatCnt`` of 1.

The parser is lenient, as the original's readers are: ``node`` and ``type`` are optional and ``txTime``
defaults to ``time``. A row that cannot be used raises ``BadHeartbeat``, whose ``code`` is the dead-letter
code the appender writes.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from binlog.rawevent import RawHeader
from dbuslib.config import HeartbeatSettings
from dbuslib.errors import DbusError

NODE_PREFIX = "/DBus/HeartBeat/Monitor"
PACKET_MAX = 256  # PACKET is varchar(256)
WRITE_ROWS_EVENTS = frozenset({23, 30})  # WRITE_ROWS_EVENT_V1 (MariaDB), WRITE_ROWS_EVENT_V2 (MySQL)
MEASUREMENT = "dbus_heartbeat"  # InfluxDB: one point per heartbeat measured at the appender
LOOKBACK_S = 86_400  # how far back readers look for a table's last heartbeat point (one day)
BAD_HEARTBEAT = "APPENDER_BAD_HEARTBEAT"  # PACKET not a JSON object with epoch-ms ``time``; a name empty


class BadHeartbeat(DbusError, ValueError):
    """A heartbeat row that cannot be used; ``code`` is its dead-letter code (``BAD_HEARTBEAT`` unless
    the caller names another), the message names the column or PACKET field, never the text."""

    code = BAD_HEARTBEAT

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class Packet:
    """The PACKET column: ``time_ms`` (emit, epoch ms), ``tx_ms`` (the writer's batch start, epoch ms),
    and ``type``/``node`` when the writer gave them as strings."""

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


def is_insert(header: RawHeader) -> bool:
    """Whether a raw event header is a rows event of inserts (the writer's; its purge is a delete)."""
    return header.kind == "rows" and header.event_type in WRITE_ROWS_EVENTS


@dataclass(frozen=True)
class HeartbeatTable:
    """Where heartbeats are written at the source, and the input topic of a schema (``topics.schema``)."""

    schema: str
    table: str
    schema_topic: Callable[[str], str]  # "shop" -> "demo.shop"

    def holds(self, header: RawHeader) -> bool:
        """Whether the event is of the heartbeat table (an insert, its purge or a DDL)."""
        return header.schema == self.schema and header.table == self.table

    def inserted(self, header: RawHeader) -> bool:
        """Whether the event is a heartbeat insert (what the dispatcher and the appender act on)."""
        return self.holds(header) and is_insert(header)


def _q(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def qualified(hb: HeartbeatSettings) -> str:
    """`` `dbus`.`db_heartbeat_monitor` `` from the settings."""
    return f"{_q(hb.schema_)}.{_q(hb.table)}"


def create_database_sql(hb: HeartbeatSettings) -> str:
    return f"CREATE DATABASE IF NOT EXISTS {_q(hb.schema_)}"


def create_table_sql(hb: HeartbeatSettings) -> str:
    """The original's DDL (init-mysql-dbus/2_db_heartbeat_monitor.sql), IF NOT EXISTS."""
    return (
        f"CREATE TABLE IF NOT EXISTS {qualified(hb)} (\n"
        "  `ID` bigint NOT NULL AUTO_INCREMENT,\n"
        "  `DS_NAME` varchar(64) NOT NULL,\n"
        "  `SCHEMA_NAME` varchar(64) NOT NULL,\n"
        "  `TABLE_NAME` varchar(64) NOT NULL,\n"
        "  `PACKET` varchar(256) NOT NULL,\n"
        "  `CREATE_TIME` datetime DEFAULT NULL,\n"
        "  `UPDATE_TIME` datetime DEFAULT NULL,\n"
        "  PRIMARY KEY (`ID`)\n"
        ") ENGINE=InnoDB DEFAULT CHARSET=utf8mb4"
    )


def insert_sql(hb: HeartbeatSettings, rows: int) -> str:
    """One multi-row INSERT of ``rows`` heartbeats; parameters per row: DS_NAME, SCHEMA_NAME, TABLE_NAME,
    PACKET (the times are the server's NOW(), which the original sets from the writer's clock)."""
    if rows < 1:
        msg = f"an INSERT of heartbeats needs at least one row, got {rows}"
        raise ValueError(msg)
    values = ", ".join(["(%s, %s, %s, %s, NOW(), NOW())"] * rows)
    return (
        f"INSERT INTO {qualified(hb)} (DS_NAME, SCHEMA_NAME, TABLE_NAME, PACKET, CREATE_TIME, UPDATE_TIME) "
        f"VALUES {values}"
    )


def node(ds: str, schema: str, table: str, partition: int = 0) -> str:
    return f"{NODE_PREFIX}/{ds}/{schema}/{table}/{partition}"


def build_packet(
    ds: str, schema: str, table: str, time_ms: int, tx_time_ms: int, type_: str = "checkpoint"
) -> str:
    """The PACKET text, compact JSON in the original's key order; ValueError when over 256 characters."""
    text = json.dumps(
        {"node": node(ds, schema, table), "time": int(time_ms), "type": type_, "txTime": int(tx_time_ms)},
        separators=(",", ":"),
        ensure_ascii=False,
    )
    if len(text) > PACKET_MAX:
        msg = f"{ds}: {schema}.{table}: heartbeat packet is {len(text)} characters, PACKET holds {PACKET_MAX}"
        raise ValueError(msg)
    return text


def parse_packet(text: Any) -> Packet:
    """``{"node": ..., "time": <ms>, "type": ..., "txTime": <ms>}`` -> Packet; ``txTime`` defaults to
    ``time``. Raises BadHeartbeat (APPENDER_BAD_HEARTBEAT) naming what is wrong, never the text."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    if not isinstance(text, str):
        raise BadHeartbeat(BAD_HEARTBEAT, f"PACKET is {type(text).__name__}, not JSON text")
    try:
        d = json.loads(text)
    except json.JSONDecodeError as e:
        raise BadHeartbeat(BAD_HEARTBEAT, f"PACKET is not JSON ({e.msg} at {e.pos})") from None
    except (ValueError, RecursionError) as e:  # a number past Python's digit limit, nesting too deep
        raise BadHeartbeat(BAD_HEARTBEAT, f"PACKET is not JSON ({str(e)[:80]})") from None
    if not isinstance(d, dict):
        raise BadHeartbeat(BAD_HEARTBEAT, f"PACKET is a JSON {type(d).__name__}, not an object")
    time_ms = _epoch_ms(d.get("time"), "time")
    tx_ms = _epoch_ms(d.get("txTime", time_ms), "txTime")
    kind, path = (v if isinstance(v, str) else None for v in (d.get("type"), d.get("node")))
    return Packet(time_ms, tx_ms, kind, path)


def _epoch_ms(value: Any, name: str) -> int:
    if value is None:
        raise BadHeartbeat(BAD_HEARTBEAT, f"PACKET has no {name!r}")
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise BadHeartbeat(BAD_HEARTBEAT, f"PACKET {name!r} is not epoch milliseconds")
    return value


def owner(image: Mapping[str, Any], ds: str, topic: str, hb: HeartbeatTable) -> bool:
    """Whether the row is this appender's to handle on ``topic``: not another source's (a non-empty
    DS_NAME other than ``ds``) and not another schema's (a non-empty SCHEMA_NAME whose topic is not
    ``topic``). Rows with empty names are ours: they are dead-lettered where they arrive."""
    row_ds, schema = image.get("DS_NAME"), image.get("SCHEMA_NAME")
    if isinstance(row_ds, str) and row_ds and row_ds != ds:
        return False
    return not (isinstance(schema, str) and schema and hb.schema_topic(schema) != topic)


def heartbeat_of(image: Mapping[str, Any]) -> Heartbeat:
    """The validated heartbeat of one row image (column names as in spec 2.7); BadHeartbeat otherwise."""
    names = []
    for column in ("DS_NAME", "SCHEMA_NAME", "TABLE_NAME"):
        value = image.get(column)
        if not isinstance(value, str) or not value.strip():
            raise BadHeartbeat(BAD_HEARTBEAT, f"{column} is {'NULL' if value is None else 'empty'}")
        names.append(value)
    ds, schema, table = names
    return Heartbeat(ds, schema, table, parse_packet(image.get("PACKET")))
