"""Records for the appender's unit tests (not a test module: tests import from here).

``golden_record`` reads a captured raw record of tests/golden/records/. ``heartbeat`` builds heartbeat
records from a captured one (``HEARTBEAT_ONE`` of tests/unit/records.py, heartbeat table
``dbus_unit_dispatcher.db_heartbeat_monitor``) with other rows in its rows event, ``beat_row`` one of those
rows for a table of the captured data records' schema ``dbus_unit_rowdecode``
(test_appender_heartbeat, test_appender_rowformats, test_appender_process).
"""

from __future__ import annotations

import json
import struct
from dataclasses import replace
from pathlib import Path

from records import HEARTBEAT_ONE, sealed

from binlog import rawevent

RECORDS_DIR = Path(__file__).resolve().parents[1] / "golden" / "records"

HB_SCHEMA, HB_TABLE = "dbus_unit_dispatcher", "db_heartbeat_monitor"
DATA = "dbus_unit_rowdecode"  # the schema of the captured data records (table orders)
NOW = 1_795_356_400_000
BASE = rawevent.decode(HEARTBEAT_ONE)
_TM, _ROWS = BASE.table_map_bytes(), BASE.rows_event_bytes()
_DATETIME = bytes.fromhex("99bb6cf000")  # CREATE_TIME / UPDATE_TIME as captured


def golden_record(name: str) -> bytes:
    """The raw record of tests/golden/records/``name`` (hex, ``#`` lines are comments)."""
    text = (RECORDS_DIR / name).read_text()
    return bytes.fromhex("".join(line for line in text.splitlines() if not line.startswith("#")))


def packet(time_ms: int = NOW - 1500, tx_ms: int | None = None, **extra: object) -> str:
    return json.dumps(
        {
            "node": f"/DBus/HeartBeat/Monitor/demo/{DATA}/orders/0",
            "time": time_ms,
            "type": "checkpoint",
            "txTime": time_ms if tx_ms is None else tx_ms,
            **extra,
        }
    )


def heartbeat(*rows: tuple, pos: int = 25208496) -> bytes:
    """A heartbeat insert record with ``rows`` of (DS_NAME, SCHEMA_NAME, TABLE_NAME, PACKET), None = NULL."""

    def varchar(v: str) -> bytes:
        b = v.encode()
        return struct.pack("<H", len(b)) + b

    body = b""
    for n, row in enumerate(rows, start=1):
        nulls = 0x80 | sum(1 << i for i, v in enumerate(row, start=1) if v is None)
        body += (
            bytes([nulls])
            + struct.pack("<q", n)
            + b"".join(varchar(v) for v in row if v is not None)
            + _DATETIME * 2
        )
    event = sealed(_ROWS[:29] + body + b"\0\0\0\0")  # header, table id, flags, width, columns bitmap
    return rawevent.encode(replace(BASE, header=replace(BASE.header, pos=pos), body=_TM + event))


def beat_row(table: str = "orders", **packet_args: object) -> tuple:
    return ("demo", DATA, table, packet(**packet_args))
