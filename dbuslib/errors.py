"""The root of every DBus error, one subclass per edge, and the one exit-code map.

Each class has a stable ``code`` (listed in docs/errors.md) and a ``retriable`` flag: retry loops ask
``err.retriable`` instead of parsing messages. Every stage's ``main()`` and the ``dbus`` command end an
error the same way::

    except DbusError as e:
        return report("appender", e)   # "appender: CONFIG_INVALID: conf/dbus.yaml: ..." on stderr, 2

``exit_code(err)`` reads ``EXIT_CODES`` (docs/errors.md#exit-codes-of-dbus-and-the-stages): the first of
the error's own ``code`` and its classes' codes (most specific first) found there decides, so
``KAFKA_MESSAGE_LIMIT`` (a ``ConfigError``) exits 2 and ``ENDPOINT_RETRIES_EXHAUSTED`` (an
``EndpointError``) exits 3. Anything else exits 1.
"""

from __future__ import annotations

import sys

from ums.errors import UmsError

# Exit codes of `dbus` and the stages: the only home of these numbers.
EXIT_STOPPED = 0  # success, or stopped by SIGTERM/SIGINT
EXIT_FAILED = 1  # a check failed, a query failed, an error with no code below
EXIT_CONFIG = 2  # bad configuration or arguments
EXIT_UNREACHABLE = 3  # an endpoint could not be reached, or stayed down past its retries
EXIT_DEPOSED = 4  # the extractor was deposed
EXIT_JVM_GONE = 5  # a Spark stage's driver lost its JVM
EXIT_CONFIG_GONE = 6  # a stage's configuration file was removed while it ran
EXIT_MISSING_EXTRA = 7  # a dbus command needs the server extra, not installed (cli/extras.py)

EXIT_CODES: dict[str, int] = {
    "CONFIG_INVALID": EXIT_CONFIG,
    "UMS_ERROR": EXIT_CONFIG,  # a bad namespace, mask or control message from the configuration or arguments
    "EXTRACTOR_SERVER_SETTINGS": EXIT_CONFIG,  # the server must be reconfigured (binlog_format=ROW, ...)
    "EXTRACTOR_BINLOG_PURGED": EXIT_CONFIG,  # error 1236: `dbus extractor reset` is needed
    "RECONCILE_NO_PRIMARY_KEY": EXIT_CONFIG,
    "VERIFY_FAILED": EXIT_CONFIG,  # 1 means "compared, and different"
    "LOG_RULE_INVALID": EXIT_CONFIG,  # dbus logrules: a rule or rule file that does not check
    "LOG_PUBLISH_REFUSED": EXIT_CONFIG,
    "LOG_RULES_NOT_FOUND": EXIT_CONFIG,
    "LOG_RULES_BAD_NAME": EXIT_CONFIG,
    "LOG_RULES_CONFLICT": EXIT_CONFIG,
    "LOG_FILE_UNREADABLE": EXIT_CONFIG,
    "ENDPOINT_UNREACHABLE": EXIT_UNREACHABLE,
    "EXTRACTOR_DEPOSED": EXIT_DEPOSED,
    "STAGE_JVM_GONE": EXIT_JVM_GONE,
    "STAGE_CONFIG_GONE": EXIT_CONFIG_GONE,
    "MISSING_EXTRA": EXIT_MISSING_EXTRA,
}


# What a refused certificate reads like in Python's ssl module (kafka-python, pymysql) and in Java's
CERTIFICATE_REFUSALS = (
    "CERTIFICATE_VERIFY_FAILED",
    "certificate verify failed",
    "PKIX path building failed",
    "SSLHandshakeException",
)


def certificate_refused(text: str) -> bool:
    """Whether an error's text says a TLS certificate was refused (untrusted, expired, another host's)."""
    return any(r in text for r in CERTIFICATE_REFUSALS)


class DbusError(Exception):
    """Root of DBus errors."""

    code = "DBUS_ERROR"
    retriable = False

    @property
    def exit_code(self) -> int:
        """The exit code of a stage or of `dbus` that ends with this error (``exit_code(self)``)."""
        return exit_code(self)


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


def exit_code(err: BaseException) -> int:
    """The exit code for ``err``: by its codes in ``EXIT_CODES``, 1 when none is there (or not an error
    of DBus or UMS)."""
    if not isinstance(err, (DbusError, UmsError)):
        return EXIT_FAILED
    own = getattr(err, "code", None)  # a code given per instance (SplitError, PullRejected)
    codes = [own] + [cls.__dict__.get("code") for cls in type(err).__mro__]
    return next((EXIT_CODES[c] for c in codes if c in EXIT_CODES), EXIT_FAILED)


def error_code(err: BaseException) -> str:
    """A DBus error's (or UmsError's) ``code``, else the exception's class name."""
    return getattr(err, "code", type(err).__name__)


def error_line(prog: str, err: BaseException) -> str:
    """``<prog>: <CODE>: <message>``, the first line a failing stage or command prints on stderr."""
    code = error_code(err)
    text = str(err)
    if text.startswith(f"{code}: "):  # a UmsError's (or SplitError's) text carries its code already
        text = text[len(code) + 2 :]
    return f"{prog}: {code}: {text}"


def report(prog: str, err: BaseException) -> int:
    """Print ``error_line(prog, err)`` on stderr (a JSON line when ``logging.format`` is ``json``:
    dbuslib.logs.final_line) and return ``exit_code(err)``."""
    from dbuslib.logs import final_line

    print(final_line(error_line(prog, err), stage=prog, code=error_code(err)), file=sys.stderr)
    return exit_code(err)
