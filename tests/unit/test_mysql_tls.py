"""``sources.<ds>.mysql.tls``: the one block spelled for pymysql (and python-mysql-replication, which passes
it on), for MariaDB Connector/J, and the refusals it leads to."""

from __future__ import annotations

from pathlib import Path

import pymysql
import pytest
import yaml

from dbuslib import mysql
from dbuslib.config import DEFAULT_CONFIG, load_config
from dbuslib.errors import ConfigError, EndpointError, exit_code


def source_with(tmp_path: Path, tls: dict | None):
    raw = yaml.safe_load(DEFAULT_CONFIG.read_text())
    if tls is not None:
        raw["sources"]["demo"]["mysql"]["tls"] = tls
    path = tmp_path / "conf" / "dbus.yaml"
    path.parent.mkdir(exist_ok=True)
    path.write_text(yaml.safe_dump(raw))
    return load_config(path).source("demo").mysql


def test_no_tls_block_is_the_plain_settings_of_before(tmp_path):
    conn = source_with(tmp_path, None)
    settings = mysql.connection_settings(conn)
    assert not any(k.startswith("ssl") for k in settings)
    assert mysql.jdbc_url(conn, "shop") == f"jdbc:mysql://{conn.host}:{conn.port}/shop?permitMysqlScheme"


def test_tls_paths_are_made_absolute_against_the_files_folder(tmp_path):
    conn = source_with(tmp_path, {"ca": "tls/ca.pem", "cert": "/abs/client.pem", "key": "tls/client.key"})
    settings = mysql.connection_settings(conn, "shop")
    assert settings["ssl_ca"] == str(tmp_path / "conf" / "tls" / "ca.pem")
    assert settings["ssl_cert"] == "/abs/client.pem"
    assert settings["ssl_key"] == str(tmp_path / "conf" / "tls" / "client.key")
    assert settings["ssl_verify_cert"] is True and settings["ssl_verify_identity"] is True
    assert settings["database"] == "shop"


def test_an_empty_tls_block_still_requires_tls_and_verifies_against_the_systems_cas(tmp_path):
    settings = mysql.connection_settings(source_with(tmp_path, {}))
    # pymysql turns TLS on (and requires it) only when one of these is given: ssl_verify_cert always is
    assert settings["ssl_verify_cert"] is True
    assert "ssl_ca" not in settings


def test_check_hostname_false_verifies_the_chain_only(tmp_path):
    conn = source_with(tmp_path, {"ca": "/ca.pem", "check_hostname": False})
    assert mysql.connection_settings(conn)["ssl_verify_identity"] is False
    assert mysql.jdbc_url(conn, "db").endswith("&sslMode=verify-ca&serverSslCert=/ca.pem")


def test_the_jdbc_url_verifies_the_server_and_names_the_ca(tmp_path):
    conn = source_with(tmp_path, {"ca": "/etc/my ca/ca.pem"})
    assert mysql.jdbc_url(conn, "db") == (
        f"jdbc:mysql://{conn.host}:{conn.port}/db?permitMysqlScheme&sslMode=verify-full"
        "&serverSslCert=/etc/my%20ca/ca.pem"
    )


def test_a_client_certificate_is_refused_for_jdbc_rather_than_left_out(tmp_path):
    conn = source_with(tmp_path, {"ca": "/ca.pem", "cert": "/c.pem", "key": "/c.key"})
    with pytest.raises(ConfigError, match=r"mysql.tls.cert .*Java keystore"):
        mysql.jdbc_url(conn, "db")


def test_cert_without_key_is_a_config_error_naming_the_key(tmp_path):
    with pytest.raises(ConfigError, match=r"sources.demo.mysql.tls.*cert and key go together"):
        source_with(tmp_path, {"cert": "/c.pem"})


@pytest.mark.parametrize(
    ("err", "refused"),
    [
        (pymysql.err.OperationalError(1045, "Access denied for user 'dbus_tls'@'127.0.0.1'"), True),
        (pymysql.err.OperationalError(1044, "Access denied for user 'x' to database 'y'"), True),
        (
            pymysql.err.OperationalError(
                2003, "Can't connect ([SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed)"
            ),
            True,
        ),
        (
            pymysql.err.OperationalError(2003, "Can't connect to MySQL server on '127.0.0.1' ([Errno 111])"),
            False,
        ),
        (pymysql.err.OperationalError(2013, "Lost connection to server during query"), False),
    ],
)
def test_refusals_are_mysql_auth_failed_exit_3_not_retried(tmp_path, err, refused):
    conn = source_with(tmp_path, {"ca": "/ca.pem"})
    got = mysql.refusal(conn, "dbus_tls", err)
    if not refused:
        assert got is None
        return
    assert isinstance(got, EndpointError) and got.code == "MYSQL_AUTH_FAILED"
    assert not got.retriable and exit_code(got) == 3
    assert f"MySQL at {conn.host}:{conn.port} over TLS refused 'dbus_tls'" in str(got)
