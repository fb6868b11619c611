"""The binlog edge: python-mysql-replication in, raw change events and transaction boundaries out.

Rows are never decoded here: a rows event is forwarded as bytes with the table map that describes it
(see binlog.rawevent). What comes out, in binlog order:

- ``RawEvent`` of kind ``rows`` for each rows event of a captured table;
- ``RawEvent`` of kind ``ddl`` for each schema change of a captured table (or schema);
- ``Boundary(position)`` after each transaction (Xid, COMMIT, or a DDL's implicit commit): the position
  of the next transaction, the only kind of position the extractor ever commits;
- ``Tick()`` when the server sends a heartbeat on an idle binlog, so the caller can commit and report.
"""

from __future__ import annotations

import logging
import socket
import ssl
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pymysql
from pymysqlreplication import BinLogStreamReader
from pymysqlreplication.event import (
    FormatDescriptionEvent,
    GtidEvent,
    HeartbeatLogEvent,
    MariadbGtidEvent,
    QueryEvent,
    RotateEvent,
    XidEvent,
)
from pymysqlreplication.row_event import DeleteRowsEvent, TableMapEvent, UpdateRowsEvent, WriteRowsEvent

from binlog.rawevent import RawEvent
from dbuslib import mysql
from dbuslib.coltypes import TypeCache, catalog_lookup, library_columns
from dbuslib.config import Source
from dbuslib.errors import EndpointError
from dbuslib.filters import TableFilter
from extractor import capture
from extractor.position import Position

log = logging.getLogger(__name__)
ROWS_EVENTS = (WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent)
EVENTS = [
    *ROWS_EVENTS,
    TableMapEvent,
    XidEvent,
    QueryEvent,
    RotateEvent,
    MariadbGtidEvent,
    GtidEvent,
    FormatDescriptionEvent,
    HeartbeatLogEvent,
]


@dataclass(frozen=True)
class Boundary:
    """The end of a transaction: ``position`` is where the next one starts."""

    position: Position


@dataclass(frozen=True)
class Tick:
    """The binlog is idle (a server heartbeat arrived)."""


class ServerSettingsError(EndpointError):
    """The source's binlog settings would make DBus lose or misread changes."""

    code = "EXTRACTOR_SERVER_SETTINGS"
    retriable = False


# variable -> value DBus needs; a different value would drop or break rows without an error.
REQUIRED_SETTINGS = {
    "log_bin": "ON",
    "binlog_format": "ROW",
    "binlog_row_image": "FULL",
    "binlog_row_metadata": "FULL",
}
FORBIDDEN_SETTINGS = {"log_bin_compress": "ON", "binlog_row_value_options": "PARTIAL_JSON"}


def check_server(db: pymysql.Connection) -> str:
    """Raise ServerSettingsError naming each wrong setting; return the flavor, ``mariadb`` or ``mysql``."""
    names = [*REQUIRED_SETTINGS, *FORBIDDEN_SETTINGS]
    with db.cursor() as cur:
        cur.execute(
            "SHOW GLOBAL VARIABLES WHERE Variable_name IN (" + ",".join(["%s"] * len(names)) + ")", names
        )
        have = {k: str(v).upper() for k, v in cur.fetchall()}
        cur.execute("SELECT VERSION()")
        (version,) = cur.fetchone()
    wrong = [
        f"{k}={have.get(k, 'unset')} (needs {v})" for k, v in REQUIRED_SETTINGS.items() if have.get(k) != v
    ]
    wrong += [f"{k}={v} (must be off)" for k, v in FORBIDDEN_SETTINGS.items() if v in have.get(k, "")]
    if wrong:
        msg = "the source's binlog settings would lose or misread changes: " + "; ".join(wrong)
        raise ServerSettingsError(msg)
    return "mariadb" if "mariadb" in version.lower() else "mysql"


def initial_position(src: Source, db: pymysql.Connection) -> Position:
    """Where to start when nothing was committed: ``extractor.start`` of the source."""
    start = src.extractor.start
    if start == "current":
        end = mysql.binlog_end(db)
        return Position(file=end.file, pos=end.pos, gtid=end.gtid)
    if start == "earliest":
        return Position(file=mysql.binlog_files(db)[0], pos=4)
    if ":" in start:
        return Position.parse(start)
    return Position(file="", pos=0, gtid=start)


class BinlogReader:
    """Iterates one source's binlog from ``start`` (blocking: it waits for new events)."""

    def __init__(self, ds: str, src: Source, start: Position, heartbeat_s: float, flavor: str) -> None:
        self.ds = ds
        self.flavor = flavor
        self._filter = TableFilter(src.capture)
        self._tables: dict[int, Any] = {}  # table_id -> latest TableMapEvent (ids are reused after rotate)
        self._gtid = start.gtid
        self._start = start
        self._crc: bool | None = None
        # INET4/INET6/UUID columns look like BINARY(n) in the binlog: their types come from the catalog
        self._types = TypeCache(catalog_lookup(lambda: mysql.connect(src.mysql)))
        self._mysql = src.mysql
        resume: dict[str, Any] = (
            {"log_file": start.file, "log_pos": start.pos, "resume_stream": True}
            if start.file
            else {"auto_position": start.gtid, "is_mariadb": "-" in start.gtid}
        )
        self._stream = BinLogStreamReader(
            connection_settings=mysql.connection_settings(src.mysql),
            server_id=src.mysql.server_id,
            blocking=True,
            only_events=EVENTS,
            slave_heartbeat=heartbeat_s,
            enable_logging=False,  # it would log the start arguments; we log what matters ourselves
            **resume,
        )

    def close(self) -> None:
        self._stream.close()
        self._types.close()

    def quiet(self) -> bool:
        """Whether the binlog has nothing more for us right now: no bytes buffered or waiting on the
        connection (checked without blocking), over TLS too: no decrypted bytes held by the TLS layer and
        no record waiting (pymysql negotiates TLS whenever the server offers it, ``mysql.tls`` or not).
        False whenever it cannot tell (not connected, an error)."""
        conn = getattr(self._stream, "_stream_connection", None)
        sock, rfile = getattr(conn, "_sock", None), getattr(conn, "_rfile", None)
        if sock is None or rfile is None or not isinstance(sock, socket.socket):
            return False
        timeout = sock.gettimeout()
        try:
            if isinstance(sock, ssl.SSLSocket) and sock.pending():
                return False  # decrypted, not yet read
            sock.setblocking(False)
            try:
                return not rfile.peek(1)
            except (BlockingIOError, ssl.SSLWantReadError):
                return True  # nothing on the socket (a TLS record begun but not whole: flushed early)
            finally:
                sock.settimeout(timeout)
        except OSError:
            return False

    @property
    def file(self) -> str:
        return self._stream.log_file

    def __iter__(self) -> Iterator[RawEvent | Boundary | Tick]:
        handlers = {
            TableMapEvent: self._table_map,
            XidEvent: self._boundary,
            QueryEvent: self._query,
            MariadbGtidEvent: self._gtid_event,
            GtidEvent: self._gtid_event,
            HeartbeatLogEvent: lambda e: [Tick()],
        }
        for cls in ROWS_EVENTS:
            handlers[cls] = self._rows
        for event in self._fetch():
            handler = handlers.get(type(event))
            if handler is not None:
                yield from handler(event)

    def _fetch(self) -> Iterator[Any]:
        try:
            yield from self._stream
        except pymysql.err.OperationalError as e:
            raise _translate(e, self._start, self._listed) from e

    def _listed(self) -> list[str] | None:
        """The binlog files the server lists now (SHOW BINARY LOGS); None when it cannot be asked."""
        try:
            db = mysql.connect(self._mysql)
        except (EndpointError, pymysql.err.Error):
            return None
        try:
            return mysql.binlog_files(db)
        except pymysql.err.Error:
            return None
        finally:
            db.close()

    # --- handlers: each returns what the event turns into -------------------------------------------

    def _table_map(self, event: Any) -> list:
        self._tables[event.table_id] = event
        return []

    def _gtid_event(self, event: Any) -> list:
        self._gtid = event.gtid
        return []

    def _rows(self, event: Any) -> list:
        table_map = self._tables.get(event.table_id)
        if table_map is None or not self._filter.allows(table_map.schema, table_map.table):
            return []
        if self._crc is None:
            self._crc = bool(self._stream._BinLogStreamReader__use_checksum)  # set once connected
        types = self._types.types(table_map.schema, table_map.table, library_columns(table_map))
        return [
            capture.raw_rows(self.ds, self.file, table_map, event, self._gtid, self._crc, self.flavor, types)
        ]

    def _boundary(self, event: Any) -> list:
        position = Position(file=self.file, pos=event.packet.log_pos, gtid=self._gtid, ts=event.timestamp)
        return [Boundary(position)]

    def _query(self, event: Any) -> list:
        sql = event.query.strip().upper() if isinstance(event.query, str) else ""
        if sql == "BEGIN":
            return []
        if sql == "COMMIT":
            return self._boundary(event)
        ddl = capture.raw_ddl(self.ds, self.file, event, self._gtid)
        if ddl is None:
            return []
        schema, table = ddl.header.schema, ddl.header.table
        if schema is None or table is None:  # raw_ddl names both (table "*" when the statement names none)
            msg = f"DDL at {ddl.header.where} has no schema or table"
            raise ValueError(msg)
        self._types.forget(schema, table)  # the table's columns may have changed type
        wanted = self._filter.allows(schema, table) if table != "*" else self._filter.allows(schema, "*")
        return [ddl, *self._boundary(event)] if wanted else self._boundary(event)


class BinlogPurgedError(EndpointError):
    """The position to resume from is no longer on the server (MySQL error 1236)."""

    code = "EXTRACTOR_BINLOG_PURGED"
    retriable = False


NOT_IN_INDEX = "Could not find first log file name in binary log index file"  # MySQL's and MariaDB's 1236


def _translate(
    e: pymysql.err.OperationalError, start: Position, listed: Callable[[], list[str] | None]
) -> Exception:
    """The binlog connection's error as DBus's: 1236 is a purged position (exit 2 at once), but for a file
    the server does not find in its index while ``listed`` (SHOW BINARY LOGS, asked now) still names it, or
    cannot say: a server starting again answers so for a moment; that is transient (retried)."""
    code = e.args[0] if e.args else None
    text = str(e.args[-1]) if e.args else str(e)
    if code == 1236:
        if start.file and NOT_IN_INDEX in text:
            files = listed()
            if files is None or start.file in files:
                held = "cannot be asked which files it has" if files is None else f"lists {start.file}"
                return EndpointError(
                    f"binlog connection failed: MySQL error 1236 ({text}), but the server {held}"
                )
        msg = f"the server cannot send the binlog from {start} (MySQL error 1236: {text})"
        return BinlogPurgedError(msg)
    return EndpointError(f"binlog connection failed: {text}")
