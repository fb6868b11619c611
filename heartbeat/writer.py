"""The heartbeat writer of one source: one row per monitored table every ``heartbeat.interval_s``.

One writer leads per source, through a kazoo Lock at ``<root>/HeartBeat/<ds>/leader`` (each contender's
child holds ``{"id": "db1:4242", "since": "2024-05-01T12:00:00+00:00"}``); a standby waits. The leader
writes only while its ZooKeeper connection is up: a suspended connection pauses the writes, a lost session
ends the leadership and the writer queues again as a standby (kazoo opens a new session).

As leader it creates ``dbus.db_heartbeat_monitor`` when missing (as the writer account), lists the
monitored tables from information_schema (again every ``REFRESH_EVERY`` intervals), and each interval
inserts one row per table with one multi-row INSERT (one transaction). Every ``PURGE_EVERY`` emits it
deletes all but the newest ``PURGE_KEEP`` rows, as the original does. MySQL errors are logged and retried
at the next interval; they never stop the loop.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Iterable
from datetime import datetime, timezone

import pymysql
from kazoo.client import KazooClient
from kazoo.exceptions import CancelledError, KazooException
from kazoo.protocol.states import KazooState
from kazoo.recipe.lock import Lock

from binlog import heartbeat as hbt
from dbuslib import mysql, zk, zkpaths
from dbuslib.config import DbusConfig, HeartbeatSettings, Source
from dbuslib.errors import EndpointError
from dbuslib.filters import TableFilter
from dbuslib.retry import RetryPolicy
from dbuslib.zk import UNREACHABLE, identity

log = logging.getLogger(__name__)
REFRESH_EVERY = 10  # intervals between two listings of the monitored tables
MYSQL_ERRORS = (pymysql.err.MySQLError, EndpointError)
PURGE_EVERY = 1000  # emits between purges (the original's)
PURGE_KEEP = 10_000  # rows kept by a purge: delete where ID < max(ID) - PURGE_KEEP
SYSTEM_SCHEMAS = frozenset({"mysql", "information_schema", "performance_schema", "sys"})

LIST_TABLES_SQL = (
    "SELECT table_schema, table_name FROM information_schema.tables "
    "WHERE table_type = 'BASE TABLE' ORDER BY 1, 2"
)


def max_id_sql(hb: HeartbeatSettings) -> str:
    return f"SELECT MAX(ID) FROM {hbt.qualified(hb)}"


def purge_sql(hb: HeartbeatSettings) -> str:
    """Delete rows older than the newest ``PURGE_KEEP``; parameter: MAX(ID) read just before (MySQL cannot
    select from the table it deletes from in one statement)."""
    return f"DELETE FROM {hbt.qualified(hb)} WHERE ID < %s - {PURGE_KEEP}"


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


def leader_path(root: str, ds: str) -> str:
    return zkpaths.heartbeat_leader(root, ds)


def list_tables(db: pymysql.Connection) -> list[tuple[str, str]]:
    """Every base table of the server, as (schema, table)."""
    with db.cursor() as cur:
        cur.execute(LIST_TABLES_SQL)
        return [(s, t) for s, t in cur.fetchall()]


def monitored_tables(cfg: DbusConfig, ds: str, db: pymysql.Connection) -> list[tuple[str, str]]:
    """The source's monitored tables as they exist now (see MonitoredTables)."""
    meta_db = meta_store_database(cfg.endpoints.meta_store.url.get_secret_value())
    return MonitoredTables(cfg.source(ds), meta_db).select(list_tables(db))


def ensure_table(db: pymysql.Connection, cfg: DbusConfig, ds: str) -> None:
    """Create the heartbeat database and table when missing."""
    hb = cfg.source(ds).heartbeat
    with db.cursor() as cur:
        cur.execute("SELECT 1 FROM information_schema.schemata WHERE schema_name = %s", (hb.schema_,))
        if cur.fetchone() is None:
            cur.execute(hbt.create_database_sql(hb))
        cur.execute(hbt.create_table_sql(hb))


def heartbeat_rows(ds: str, tables: list[tuple[str, str]], time_ms: int, tx_time_ms: int) -> list[tuple]:
    """INSERT parameters, four per table (pure)."""
    return [(ds, s, t, hbt.build_packet(ds, s, t, time_ms, tx_time_ms)) for s, t in tables]


class HeartbeatWriter:
    """``run()`` until ``stop()``: wait to lead, then write heartbeats while leading.

    ``emits`` counts the batches written by this process; ``leading`` is set while it leads."""

    def __init__(
        self,
        cfg: DbusConfig,
        ds: str,
        *,
        client: KazooClient | None = None,
        identifier: str | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.cfg, self.ds = cfg, ds
        self.src = cfg.source(ds)
        self.identifier = identifier or identity()
        self.stop_event = threading.Event()
        self.leading = threading.Event()
        self.emits = 0
        self._clock = clock
        self._own_client = client is None
        self._zk = client or zk.client(cfg.endpoints.zookeeper, retry=RetryPolicy.of(cfg))
        self._lost = threading.Event()
        self._lock: Lock | None = None  # kazoo's leader lock, while queued or leading
        self._db: pymysql.Connection | None = None
        self._tables: list[tuple[str, str]] = []
        self._intervals_since_listing = REFRESH_EVERY

    # ---------------------------------------------------------------- lifecycle

    def stop(self) -> None:
        self.stop_event.set()
        lock = self._lock
        if lock is not None:
            lock.cancel()

    def run(self) -> None:
        self._zk.add_listener(self._on_state)
        try:
            while not self.stop_event.is_set():
                if not self._acquire():
                    continue
                try:
                    self._write_while_leading()
                finally:
                    self._release()
        finally:
            self._zk.remove_listener(self._on_state)
            self._close_db()
            if self._own_client:
                self._zk.stop()
                self._zk.close()

    def _on_state(self, state: str) -> None:
        """kazoo's connection thread: no ZooKeeper calls here."""
        if state == KazooState.LOST:
            self._lost.set()

    def _acquire(self) -> bool:
        """Wait as a standby until this process leads; False when stopped or ZooKeeper failed (retry)."""
        since = datetime.now(timezone.utc).isoformat(timespec="seconds")
        self._lock = self._zk.Lock(
            leader_path(self.cfg.endpoints.zookeeper.root, self.ds),
            json.dumps({"id": self.identifier, "since": since}),
        )
        if self.stop_event.is_set():
            return False
        try:
            self._lost.clear()
            self._lock.acquire(blocking=True)
        except CancelledError:
            return False
        except (*UNREACHABLE, KazooException) as e:
            log.warning("%s: heartbeat writer could not queue for leadership (%r); retrying", self.ds, e)
            self.stop_event.wait(1.0)
            return False
        if self._lost.is_set() or self.stop_event.is_set():
            self._release()
            return False
        log.info("%s: heartbeat writer %s leads", self.ds, self.identifier)
        self.leading.set()
        return True

    def _release(self) -> None:
        self.leading.clear()
        lock, self._lock = self._lock, None
        if lock is None:
            return
        try:
            lock.release()
        except (*UNREACHABLE, KazooException) as e:
            log.info("%s: heartbeat lock not released (%r); it goes with the session", self.ds, e)

    def _write_while_leading(self) -> None:
        interval = self.src.heartbeat.interval_s
        due = time.monotonic()
        self._intervals_since_listing = REFRESH_EVERY
        while not self.stop_event.is_set():
            if self._lost.is_set():
                log.error(
                    "%s: ZooKeeper session lost: heartbeat writer %s no longer leads",
                    self.ds,
                    self.identifier,
                )
                return
            if self._zk.state == KazooState.CONNECTED:
                self.write_once()
            else:
                log.warning("%s: ZooKeeper connection suspended: heartbeats paused", self.ds)
            due += interval
            self.stop_event.wait(max(0.0, due - time.monotonic()))
            if time.monotonic() - due > interval:
                due = time.monotonic()  # far behind (a long MySQL stall): do not burst

    # ---------------------------------------------------------------- MySQL

    def _connection(self) -> pymysql.Connection:
        if self._db is None:
            self._db = mysql.connect(self.src.mysql, as_writer=True)
            ensure_table(self._db, self.cfg, self.ds)
            self._intervals_since_listing = REFRESH_EVERY
        return self._db

    def _close_db(self) -> None:
        db, self._db = self._db, None
        if db is not None:
            try:
                db.close()
            except pymysql.err.Error:
                pass

    def write_once(self) -> int:
        """Write one batch now: one row per monitored table. Returns the rows written (0 on an error,
        which is logged; the next call reconnects)."""
        tx_ms = int(self._clock() * 1000)
        try:
            db = self._connection()
            if self._intervals_since_listing >= REFRESH_EVERY:
                self._tables = monitored_tables(self.cfg, self.ds, db)
                self._intervals_since_listing = 0
            self._intervals_since_listing += 1
            if not self._tables:
                log.warning("%s: no monitored table: no heartbeat written", self.ds)
                return 0
            rows = heartbeat_rows(self.ds, self._tables, int(self._clock() * 1000), tx_ms)
            with db.cursor() as cur:
                cur.execute(hbt.insert_sql(self.src.heartbeat, len(rows)), [v for row in rows for v in row])
            self.emits += 1
            if self.emits % PURGE_EVERY == 0:
                self._purge(db)
            return len(rows)
        except MYSQL_ERRORS as e:
            log.warning("%s: heartbeats not written (%s); retrying at the next interval", self.ds, e)
            self._close_db()
            return 0

    def _purge(self, db: pymysql.Connection) -> None:
        hb = self.src.heartbeat
        with db.cursor() as cur:
            cur.execute(max_id_sql(hb))
            (max_id,) = cur.fetchone()
            if max_id is not None:
                deleted = cur.execute(purge_sql(hb), (max_id,))
                log.info("%s: purged %d old heartbeat rows", self.ds, deleted)
