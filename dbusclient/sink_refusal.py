"""A replica's database refused DBus's account: told from an unreachable one, so ``dbus replicate`` stops at
once (exit 3) instead of retrying a password that cannot work."""

from __future__ import annotations

from dbuslib.errors import EndpointError, certificate_refused

# What PostgreSQL (libpq, through psycopg) says when it refuses a login: a wrong password, an address or
# account pg_hba.conf rejects (a plaintext connection to a TLS-only server among them), TLS a server or
# client requires that the other side does not speak.
_POSTGRESQL = (
    "password authentication failed",
    "pg_hba.conf rejects",
    "no pg_hba.conf entry",
    "SSL was required",
    "server does not support SSL",
)
# MySQL/MariaDB (pymysql): access denied (1045), no rights on the database (1044), insecure transport
# refused by require_secure_transport (3159 in MySQL, 1045 or 4151 in MariaDB)
_MYSQL_CODES = (1044, 1045, 3159, 4151)


class SinkAuthFailed(EndpointError):
    """The replica's database refused DBus's account or DBus refused its certificate (``dbus replicate
    --to``): not transient, exit 3."""

    code = "SINK_AUTH_FAILED"
    retriable = False


def refusal(err: BaseException) -> str | None:
    """The line of ``err`` (a SQLAlchemy error, or the driver's own) that says the database refused the
    login or its certificate was refused; None when it says no such thing."""
    orig = getattr(err, "orig", None) or err
    args = getattr(orig, "args", ())
    if args and isinstance(args[0], int) and args[0] in _MYSQL_CODES:
        return f"({args[0]}) {args[-1] if len(args) > 1 else ''}".strip()
    for line in str(orig).splitlines():
        if any(r in line for r in _POSTGRESQL) or certificate_refused(line):
            return line.strip()
    return None
