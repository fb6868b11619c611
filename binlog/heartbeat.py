"""The heartbeat table at the source, its rows' packet, and which tables get heartbeats (pure).

The table is the original's (spec section 2.7), ``dbus.db_heartbeat_monitor`` by default
(``heartbeat.schema`` / ``heartbeat.table``). One row per monitored table and interval; its PACKET::

    {"node":"/DBus/HeartBeat/Monitor/demo/shop/orders/0","time":1714564800123,"type":"checkpoint",
     "txTime":1714564800100}

``time`` is when the row was emitted and ``txTime`` when its batch started, both epoch milliseconds; the
last path element of ``node`` is the source partition (always 0 for MySQL). Every beat is a checkpoint,
as with the original's default ``checkPointPerHeartBeatCnt`` of 1.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from dbuslib.config import HeartbeatSettings, Source
from dbuslib.errors import DbusError
from dbuslib.filters import TableFilter

NODE_PREFIX = "/DBus/HeartBeat/Monitor"
PACKET_TYPES = ("checkpoint", "heartbeat")
PACKET_MAX = 256  # PACKET is varchar(256)
PURGE_EVERY = 1000  # emits between purges (the original's)
PURGE_KEEP = 10_000  # rows kept by a purge: delete where ID < max(ID) - PURGE_KEEP
SYSTEM_SCHEMAS = frozenset({"mysql", "information_schema", "performance_schema", "sys"})

LIST_TABLES_SQL = (
    "SELECT table_schema, table_name FROM information_schema.tables "
    "WHERE table_type = 'BASE TABLE' ORDER BY 1, 2"
)


class PacketError(DbusError):
    """A heartbeat row's PACKET is not the JSON the writer builds; the message names the field."""

    code = "HEARTBEAT_BAD_PACKET"


@dataclass(frozen=True)
class Packet:
    """A parsed PACKET; ``time_ms`` is the emit time, ``tx_time_ms`` the batch start (epoch ms)."""

    ds: str
    schema: str
    table: str
    partition: int
    time_ms: int
    type: str
    tx_time_ms: int

    @property
    def node(self) -> str:
        return node(self.ds, self.schema, self.table, self.partition)


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


def max_id_sql(hb: HeartbeatSettings) -> str:
    return f"SELECT MAX(ID) FROM {qualified(hb)}"


def purge_sql(hb: HeartbeatSettings) -> str:
    """Delete rows older than the newest ``PURGE_KEEP``; parameter: MAX(ID) read just before (MySQL cannot
    select from the table it deletes from in one statement)."""
    return f"DELETE FROM {qualified(hb)} WHERE ID < %s - {PURGE_KEEP}"


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


def _field(doc: dict[str, Any], name: str, kind: type, text: str) -> Any:
    value = doc.get(name)
    if not isinstance(value, kind) or isinstance(value, bool):
        msg = f"heartbeat packet field {name!r}: expected {kind.__name__}, got {value!r} in {text[:300]!r}"
        raise PacketError(msg)
    return value


def parse_packet(text: str | bytes) -> Packet:
    """Parse a PACKET; PacketError naming the field when it is not one the writer builds."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    try:
        doc = json.loads(text)
    except (TypeError, ValueError) as e:
        msg = f"heartbeat packet is not JSON ({e}): {str(text)[:300]!r}"
        raise PacketError(msg) from None
    if not isinstance(doc, dict):
        msg = f"heartbeat packet is not a JSON object: {text[:300]!r}"
        raise PacketError(msg)
    path = _field(doc, "node", str, text)
    parts = path.split("/")
    # "", "DBus", "HeartBeat", "Monitor", ds, schema, table, partition
    if (
        not path.startswith(NODE_PREFIX + "/")
        or len(parts) != 8
        or not all(parts[4:7])
        or not parts[7].isdigit()
    ):
        msg = f"heartbeat packet field 'node': expected {NODE_PREFIX}/<ds>/<schema>/<table>/<partition>, got {path!r}"
        raise PacketError(msg)
    type_ = _field(doc, "type", str, text)
    if type_ not in PACKET_TYPES:
        msg = f"heartbeat packet field 'type': expected one of {list(PACKET_TYPES)}, got {type_!r}"
        raise PacketError(msg)
    return Packet(
        ds=parts[4],
        schema=parts[5],
        table=parts[6],
        partition=int(parts[7]),
        time_ms=_field(doc, "time", int, text),
        type=type_,
        tx_time_ms=_field(doc, "txTime", int, text),
    )


def meta_store_database(url: str) -> str | None:
    """The database named by the meta store's SQLAlchemy URL (``.../dbus`` -> ``dbus``), None if none."""
    from sqlalchemy.engine import make_url

    return make_url(url).database or None


class MonitoredTables:
    """Which tables get heartbeats: those the source captures (``capture.include`` minus ``exclude``), less
    the heartbeat table itself, the meta store's database and the server's system schemas.

    ``select([("shop", "orders"), ("dbus", "db_heartbeat_monitor")])`` -> ``[("shop", "orders")]``
    """

    def __init__(self, src: Source, meta_store_db: str | None = None) -> None:
        self._filter = TableFilter(src.capture)
        self._heartbeat = (src.heartbeat.schema_, src.heartbeat.table)
        self._skip_schemas = SYSTEM_SCHEMAS | ({meta_store_db} if meta_store_db else set())

    def allows(self, schema: str, table: str) -> bool:
        return (
            (schema, table) != self._heartbeat
            and schema not in self._skip_schemas
            and self._filter.allows(schema, table)
        )

    def select(self, tables: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
        """The monitored ones among ``tables``, sorted, without duplicates."""
        return sorted({(s, t) for s, t in tables if self.allows(s, t)})
