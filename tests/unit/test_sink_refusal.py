"""``dbusclient.sink_refusal.refusal``: a replica database's refusal of the login told from an outage."""

from __future__ import annotations

import pymysql
import pytest
import sqlalchemy as sa

from dbusclient.sink_refusal import refusal


def wrapped(orig: BaseException) -> sa.exc.OperationalError:
    return sa.exc.OperationalError("SELECT 1", {}, orig)


@pytest.mark.parametrize(
    ("orig", "found"),
    [
        (Exception('connection failed: FATAL:  password authentication failed for user "dbus"'), True),
        (
            Exception(
                'FATAL:  pg_hba.conf rejects connection for host "127.0.0.1", user "dbus", no encryption'
            ),
            True,
        ),
        (Exception("connection failed: server does not support SSL, but SSL was required"), True),
        (Exception("SSL error: certificate verify failed"), True),
        (pymysql.err.OperationalError(1045, "Access denied for user 'dbus'@'127.0.0.1'"), True),
        (pymysql.err.OperationalError(2003, "Can't connect to MySQL server on '127.0.0.1'"), False),
        (
            Exception(
                'connection failed: connection to server at "127.0.0.1", port 1 failed: Connection refused'
            ),
            False,
        ),
    ],
)
def test_a_refused_login_is_told_from_an_unreachable_database(orig, found) -> None:
    line = refusal(wrapped(orig))
    assert (line is not None) == found
    if line is not None:
        assert "\n" not in line
