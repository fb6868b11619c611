"""The MySQL/MariaDB edge: pymysql connections and the settings python-mysql-replication needs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import pymysql

from dbuslib.config import MysqlConnection, Tls
from dbuslib.errors import ConfigError, EndpointError, certificate_refused
from dbuslib.retry import RetryPolicy, retrying


@dataclass(frozen=True)
class BinlogPosition:
    """Where the server's binlog ends now: ``{"file": "mysql-bin.000003", "pos": 1234, "gtid": "0-1-42"}``."""

    file: str
    pos: int
    gtid: str = ""


class MysqlAuthFailed(EndpointError):
    """The server refused DBus's account (a wrong password, an account that must use TLS) or DBus refused
    the server's certificate (``mysql.tls``). Retrying cannot help: exits 3 at once, as Kafka's and the
    registry's refusals do."""

    code = "MYSQL_AUTH_FAILED"
    retriable = False


# The server's answers that refuse the account: access denied (1045; also an account REQUIREs TLS the
# connection lacks), to a database (1044), a user without the right to connect over plain TCP under
# require_secure_transport (MariaDB's 3159, MySQL's too)
MYSQL_REFUSALS = frozenset({1044, 1045, 3159})


def tls_settings(tls: Tls) -> dict[str, Any]:
    """pymysql's TLS arguments for ``mysql.tls``: always verifying the server's certificate (against
    ``ca``, else the system's), its host name unless ``check_hostname`` is false; TLS is then required."""
    settings: dict[str, Any] = {"ssl_verify_cert": True, "ssl_verify_identity": tls.check_hostname}
    for key, path in (("ssl_ca", tls.ca), ("ssl_cert", tls.cert), ("ssl_key", tls.key)):
        if path is not None:
            settings[key] = str(path)
    if tls.key_password is not None:
        settings["ssl_key_password"] = tls.key_password.get_secret_value()
    return settings


def connection_settings(conn: MysqlConnection, database: str | None = None) -> dict[str, Any]:
    """pymysql keyword arguments (also BinLogStreamReader's ``connection_settings``), with ``mysql.tls``."""
    settings = {
        "host": conn.host,
        "port": conn.port,
        "user": conn.user,
        "password": conn.password.get_secret_value(),
        "charset": conn.charset,
        **(tls_settings(conn.tls) if conn.tls is not None else {}),
    }
    if database:
        settings["database"] = database
    return settings


def jdbc_url(conn: MysqlConnection, database: str) -> str:
    """MariaDB Connector/J's URL of ``database`` on the server, with ``mysql.tls`` (``sslMode`` verify-full,
    or verify-ca when ``check_hostname`` is false; ``serverSslCert`` the CA). A client certificate would need
    a Java keystore, which ``mysql.tls`` does not make: refused (``ConfigError``) rather than left out."""
    url = f"jdbc:mysql://{conn.host}:{conn.port}/{database}?permitMysqlScheme"
    tls = conn.tls
    if tls is None:
        return url
    if tls.cert is not None:
        msg = (
            f"MySQL at {conn.host}:{conn.port}: mysql.tls.cert (a client certificate) cannot reach the JDBC "
            "driver (MariaDB Connector/J takes it only from a Java keystore); use a password account over TLS"
        )
        raise ConfigError(msg)
    url += f"&sslMode={'verify-full' if tls.check_hostname else 'verify-ca'}"
    return url + (f"&serverSslCert={quote(str(tls.ca), safe='/')}" if tls.ca is not None else "")


def refusal(conn: MysqlConnection, user: str, err: BaseException) -> MysqlAuthFailed | None:
    """``MysqlAuthFailed`` naming the server, the account and the reason when ``err`` (pymysql's) says the
    server refused the account or its certificate was refused; None for any other failure."""
    code = err.args[0] if isinstance(err, pymysql.err.OperationalError) and err.args else None
    if code in MYSQL_REFUSALS or certificate_refused(str(err)):
        how = " over TLS" if conn.tls is not None else ""
        reason = err.args[-1] if err.args else err
        return MysqlAuthFailed(f"MySQL at {conn.host}:{conn.port}{how} refused {user!r}: {reason}")
    return None


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
        refused = refusal(conn, settings["user"], e)
        if refused is not None:
            raise refused from e
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
