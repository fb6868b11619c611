"""Heartbeat rows in the appender (pure): a heartbeat -> a UMS heartbeat and a measurement.

The heartbeat table and its PACKET are binlog.heartbeat's (the one parser, ``heartbeat_of`` and
``owner``). The dispatcher sends an insert into it to the topic of the schema it monitors (``<ds>.shop``),
so it reaches the appender behind that schema's earlier data. There each row of that schema becomes:

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

from dataclasses import dataclass
from typing import Any

from binlog.heartbeat import BAD_HEARTBEAT, MEASUREMENT, Heartbeat

UNKNOWN_TABLE = "APPENDER_HEARTBEAT_UNKNOWN_TABLE"  # no data ever seen, not captured or not at the source
REASONS = (BAD_HEARTBEAT, UNKNOWN_TABLE)
TABLE_STATUS = "ok"  # the key's <tableStatus>; the original writes "abort" only for a full pull's halt
BAD_MEASUREMENT = "dbus_heartbeat_bad"


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


def measure(hb: Heartbeat, now_ms: float, rows: int) -> Beat:
    """The beat of ``hb`` seen at ``now_ms`` after ``rows`` rows of its table."""
    p = hb.packet
    return Beat(hb.ds, hb.schema, hb.table, float(now_ms - p.time_ms), rows, p.time_ms, p.tx_ms)
