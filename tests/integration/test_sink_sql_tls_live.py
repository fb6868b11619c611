"""The SQL sink (``dbus replicate --to``) to PostgreSQL over TLS, said in its SQLAlchemy URL
(docs/security.md#mysql-and-mariadb): the stack's PostgreSQL offers TLS with the stack's CA and its account
dbus_tls may connect over TLS only."""

from __future__ import annotations

import os
import subprocess
import uuid
from pathlib import Path

import pytest
import sqlalchemy as sa
from helpers import refused_run, untrusted_ca
from replica_env import HOST, KEYS, V1, T, up

from dbusclient.sink_sql import SqlSink

pytestmark = pytest.mark.integration

CA = Path(__file__).resolve().parents[2] / ".stack" / "tls" / "ca.pem"
SERVER = f"postgresql+psycopg://dbus_tls:dbus_tls@{HOST}:{os.environ.get('POSTGRESQL_PORT', '15432')}"


def tls(database: str, ca: Path = CA, mode: str = "verify-full") -> str:
    return f"{SERVER}/{database}?sslmode={mode}&sslrootcert={ca}"


def test_the_sql_sink_writes_to_postgresql_over_tls_and_plaintext_or_another_ca_is_refused(tmp_path):
    name = f"dbus_test_{uuid.uuid4().hex[:12]}"
    admin = sa.create_engine(tls("dbus"), isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(sa.text(f"CREATE DATABASE {name}"))
    sink = None
    try:
        sink = SqlSink(tls(name), KEYS)
        sink.ensure_table(T, 1, V1)
        assert sink.apply([up(1, 10, "a"), up(2, 11, "b")]).upserts == 2
        with sink.engine.connect() as conn:
            assert conn.execute(sa.text("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()")).scalar()
            assert conn.execute(sa.text("SELECT COUNT(*) FROM orders")).scalar() == 2

        with pytest.raises(sa.exc.OperationalError, match="rejects connection .* no encryption"):
            sa.create_engine(tls(name, mode="disable")).connect()
        subprocess.run(
            ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=other"]
            + ["-keyout", str(tmp_path / "other.key"), "-out", str(tmp_path / "other.pem")],
            check=True,
            capture_output=True,
        )
        with pytest.raises(sa.exc.OperationalError, match="certificate verify failed"):
            sa.create_engine(tls(name, ca=tmp_path / "other.pem")).connect()
    finally:
        if sink is not None:
            sink.engine.dispose()
        with admin.connect() as conn:
            conn.execute(sa.text(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
        admin.dispose()


def test_dbus_replicate_stops_at_once_when_postgresql_refuses_the_login(tmp_path, cfg):
    """A plaintext connection pg_hba.conf rejects, a wrong password and another CA: ``dbus replicate``
    exits 3 with one line ``SINK_AUTH_FAILED`` naming the URL without its password (the time is printed)."""
    other = untrusted_ca(tmp_path)
    port = os.environ.get("POSTGRESQL_PORT", "15432")
    cases = {
        "plaintext": tls("dbus_refused", mode="disable"),
        "a wrong password": f"postgresql+psycopg://dbus_tls:not-the-password@{HOST}:{port}/dbus_refused"
        f"?sslmode=verify-full&sslrootcert={CA}",
        "another CA": tls("dbus_refused", ca=other),
    }
    for case, url in cases.items():
        args = ["replicate", "--source", "demo", "--tables", "shop.orders", "--name", "refused"]
        done, last = refused_run(cfg.path, args, case, env={"DBUS_REPLICATE_TO": url})
        assert "SINK_AUTH_FAILED" in last and "the database refused the login" in last, last
        assert "not-the-password" not in done.stdout + done.stderr
