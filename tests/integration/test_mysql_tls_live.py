"""``sources.<ds>.mysql.tls`` against the stack's MariaDB (TLS with the stack's CA; the account dbus_tls
must use it: conf/stack/mariadb-init.sql): pymysql and the extractor's binlog connection over TLS, and
each refusal (a plaintext client, an untrusted CA, a wrong password) as MYSQL_AUTH_FAILED at once."""

from __future__ import annotations

import time

import pytest
import yaml
from binlog_truth import binlog_truth
from extractor_env import REPO, cleanup, covered, make_env, start_of, wait_for_log
from helpers import untrusted_ca

from dbuslib import mysql
from dbuslib.config import MysqlConnection, load_config, raw_config
from dbuslib.errors import exit_code
from dbuslib.mysql import MysqlAuthFailed
from dbuslib.retry import RetryPolicy

CA = REPO / ".stack" / "tls" / "ca.pem"


def changed(conn: MysqlConnection, **update: object) -> MysqlConnection:
    """``conn`` with ``update`` over its settings, validated as the configuration is."""
    return MysqlConnection.model_validate({**conn.model_dump(), **update})


def over_tls(conn: MysqlConnection, **tls: object) -> MysqlConnection:
    """``conn`` as the TLS-only account dbus_tls, with ``mysql.tls`` (the stack's CA unless ``tls`` says)."""
    return changed(conn, user="dbus_tls", password="dbus_tls", tls={"ca": str(CA), **tls})


def test_pymysql_over_tls_and_each_refusal(source, tmp_path):
    conn = over_tls(source.mysql)
    db = mysql.connect(conn)
    try:
        with db.cursor() as cur:
            cur.execute("SHOW STATUS LIKE 'Ssl_cipher'")
            assert cur.fetchone()[1]  # a cipher: this connection is TLS
    finally:
        db.close()
    # by the name the certificate carries too (SAN localhost), the host name checked
    mysql.connect(changed(conn, host="localhost")).close()

    retry = RetryPolicy(budget_s=120)  # a refusal is not retried: it comes at once all the same
    # without mysql.tls pymysql still uses TLS when the server offers it (unverified): ssl_disabled is
    # the plaintext client
    cases = {
        "plaintext": (changed(conn, tls=None), {"ssl_disabled": True}, r"refused 'dbus_tls': Access denied"),
        "untrusted CA": (
            over_tls(source.mysql, ca=str(untrusted_ca(tmp_path))),
            {},
            "CERTIFICATE_VERIFY_FAILED",
        ),
        "wrong password": (changed(conn, password="not-it"), {}, r"over TLS refused 'dbus_tls'"),
    }
    for case, (bad, extra, says) in cases.items():
        started = time.monotonic()
        with pytest.raises(MysqlAuthFailed, match=says) as e:
            mysql.connect(bad, retry=retry, **extra)
        took = time.monotonic() - started
        print(f"\n{case}: {e.value.code} after {took:.2f} s: {e.value}")
        assert exit_code(e.value) == 3 and not e.value.retriable
        assert "not-it" not in str(e.value)


def test_the_extractor_reads_the_binlog_over_tls_and_stops_at_once_on_an_untrusted_ca(
    source, writer_db, tmp_path, kafka_up
):
    db, name = writer_db
    env = make_env(tmp_path, name)
    raw = raw_config(env.cfg_path)
    raw["sources"][env.ds]["mysql"].update(
        {"user": "dbus_tls", "password": "dbus_tls", "tls": {"ca": str(CA)}}
    )
    env.cfg_path.write_text(yaml.safe_dump(raw))
    env.cfg = load_config(env.cfg_path)
    try:
        with db.cursor() as cur:
            cur.execute("CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(32))")
        env.spawn()
        wait_for_log(env, 0, "leading with epoch")
        with db.cursor() as cur:
            for i in range(20):
                cur.execute("INSERT INTO t VALUES (%s, %s), (%s, %s)", (2 * i, "a", 2 * i + 1, "b"))
            cur.execute("UPDATE t SET v = 'c' WHERE id < 10")
            cur.execute("DELETE FROM t WHERE id >= 30")
        db.commit()
        truth = binlog_truth(source, start_of(env), name, server_id=97011)
        env.records(covered(truth), timeout=120)
        check = mysql.connect(source.mysql, as_writer=True)  # dbus: sees every thread
        with check.cursor() as cur:
            cur.execute("SELECT COMMAND FROM information_schema.PROCESSLIST WHERE USER = 'dbus_tls'")
            commands = {row[0] for row in cur.fetchall()}
        check.close()
        assert "Binlog Dump" in commands  # the account can only connect over TLS: the dump is TLS
        env.stop_all()

        raw["sources"][env.ds]["mysql"]["tls"] = {"ca": str(untrusted_ca(tmp_path))}
        env.cfg_path.write_text(yaml.safe_dump(raw))
        started = time.monotonic()
        proc = env.spawn("untrusted")
        rc = proc.wait(120)
        took = time.monotonic() - started
        log = env.log_paths[-1].read_text()
        print(
            f"\nextractor with an untrusted CA: exit {rc} after {took:.1f} s: {log.strip().splitlines()[-1]}"
        )
        assert rc == 3
        assert "MYSQL_AUTH_FAILED" in log and "CERTIFICATE_VERIFY_FAILED" in log
        assert "retrying" not in log.lower()
    finally:
        cleanup(env)
