"""The root of every DBus error, and one subclass per edge.

Each class has a stable ``code`` (listed in docs/errors.md) and a ``retriable`` flag: retry loops ask
``err.retriable`` instead of parsing messages.
"""

from __future__ import annotations


class DbusError(Exception):
    """Root of DBus errors."""

    code = "DBUS_ERROR"
    retriable = False
    exit_code: int | None = None  # the `dbus` command's exit code for this error, when not the default 1


class ConfigError(DbusError):
    """The configuration file is missing, unreadable or invalid; the message names file and key."""

    code = "CONFIG_INVALID"


class StackError(DbusError):
    """A server of the local stack is not running or not healthy."""

    code = "STACK_DOWN"
    retriable = True


class EndpointError(DbusError):
    """Kafka, ZooKeeper, MySQL or the time-series server cannot be reached."""

    code = "ENDPOINT_UNREACHABLE"
    retriable = True
