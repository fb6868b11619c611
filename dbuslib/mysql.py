"""The MySQL/MariaDB edge: pymysql connections and the settings python-mysql-replication needs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pymysql

from dbuslib.config import MysqlConnection
from dbuslib.errors import EndpointError
from dbuslib.retry import RetryPolicy, retrying


@dataclass(frozen=True)
class BinlogPosition:
    """Where the server's binlog ends now: ``{"file": "mysql-bin.000003", "pos": 1234, "gtid": "0-1-42"}``."""

    file: str
    pos: int
    gtid: str = ""


def connection_settings(conn: MysqlConnection, database: str | None = None) -> dict[str, Any]:
    """pymysql keyword arguments (also BinLogStreamReader's ``connection_settings``)."""
    settings = {
        "host": conn.host,
        "port": conn.port,
        "user": conn.user,
        "password": conn.password.get_secret_value(),
        "charset": conn.charset,
    }
    if database:
        settings["database"] = database
    return settings


def connect(
    conn: MysqlConnection,
    database: str | None = None,
    *,
    as_writer: bool = False,
    retry: RetryPolicy | None = None,
    **extra: Any,
) -> pymysql.Connection:
    """A pymysql connection as the reader account, or as the ``writer`` account when ``as_writer``.
    With a ``retry`` policy a server that is down or restarting is asked again within its budget
    (a refused account is not: it fails at once)."""
    settings = connection_settings(conn, database)
    if as_writer:
        if conn.writer is None:
            msg = f"MySQL at {conn.host}:{conn.port}: no 'writer' account configured under mysql.writer"
            raise EndpointError(msg)
        settings.update(user=conn.writer.user, password=conn.writer.password.get_secret_value())
    try:
        return retrying(retry, f"MySQL at {conn.host}:{conn.port}: connect", pymysql.connect)(
            **settings, autocommit=True, **extra
        )
    except pymysql.err.OperationalError as e:
        msg = f"MySQL at {conn.host}:{conn.port} as {settings['user']!r}: {e.args[-1] if e.args else e}"
        raise EndpointError(msg) from e


def binlog_files(db: pymysql.Connection) -> list[str]:
    """The binlog files the server still has, oldest first (SHOW BINARY LOGS)."""
    with db.cursor() as cur:
        cur.execute("SHOW BINARY LOGS")
        return [row[0] for row in cur.fetchall()]


def binlog_end(db: pymysql.Connection) -> BinlogPosition:
    """The current end of the binlog (SHOW MASTER STATUS) and the server's current GTID position."""
    with db.cursor() as cur:
        cur.execute("SHOW MASTER STATUS")
        row = cur.fetchone()
        if row is None:
            msg = "binary logging is off on this server: DBus needs log_bin and binlog_format=ROW"
            raise EndpointError(msg)
        cur.execute("SELECT @@global.gtid_binlog_pos")
        (gtid,) = cur.fetchone()
    return BinlogPosition(file=row[0], pos=int(row[1]), gtid=gtid or "")


def snapshot_position(db: pymysql.Connection) -> BinlogPosition:
    """The binlog position of a consistent snapshot taken now: every transaction before it is visible to
    any read that starts later. (``binlog_end`` may name a transaction the engine has not made visible
    yet: MariaDB writes the binlog before the storage engine commits.) Reads MariaDB's
    ``binlog_snapshot_file``/``binlog_snapshot_position`` inside START TRANSACTION WITH CONSISTENT
    SNAPSHOT."""
    with db.cursor() as cur:
        cur.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT")
        try:
            cur.execute("SHOW STATUS LIKE 'binlog_snapshot_%'")
            status = {name.lower(): value for name, value in cur.fetchall()}
            cur.execute("SELECT @@global.gtid_binlog_pos")
            (gtid,) = cur.fetchone()
        finally:
            cur.execute("COMMIT")
    if not status.get("binlog_snapshot_file"):
        msg = (
            "the server has no binlog_snapshot_file status (binary logging off, or not MariaDB): full pulls "
            "need MariaDB with log_bin and binlog_format=ROW"
        )
        raise EndpointError(msg)
    return BinlogPosition(
        file=status["binlog_snapshot_file"], pos=int(status["binlog_snapshot_position"]), gtid=gtid or ""
    )
