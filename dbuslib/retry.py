"""Retry with backoff within a budget: the one home of DBus's answer to a transient endpoint failure.

A MariaDB, ZooKeeper, Kafka or InfluxDB restart must cost latency, not a stage. Long-running stages call
their endpoints through ``call`` (or a function wrapped by ``retrying``): a failure that ``transient``
recognises (a lost or refused connection, a timeout, an EndpointError) is retried with exponential
backoff and jitter, ``initial_backoff_s`` doubling up to ``max_backoff_s`` between attempts, for at most
``budget_s`` (``endpoints.retry`` in the configuration, by example
``{"budget_s": 60, "initial_backoff_s": 0.2, "max_backoff_s": 5}``). When the budget is spent the call
raises ``RetriesExhausted`` (code ``ENDPOINT_RETRIES_EXHAUSTED``, exit code 3) naming what was called and
the last error. Any other error (a bad query, a missing node, a refused record) is raised at once:
retrying it would only delay the same answer.

The loop itself is tenacity's; this module decides what is transient and what the budget means.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from tenacity import RetryCallState, RetryError, Retrying, retry_if_exception, wait_exponential_jitter

from dbuslib.errors import DbusError, EndpointError, certificate_refused

log = logging.getLogger("dbus.retry")
T = TypeVar("T")

# MySQL/MariaDB client and server error numbers that mean "the connection, not the statement, failed":
# 1040 too many connections, 1053 server shutdown in progress, 1077 normal shutdown, 1927 connection
# killed, 2002/2003 cannot connect, 2006 server has gone away, 2013 lost connection during query,
# 2055 lost connection at system error, 4031 disconnected by the server for inactivity.
MYSQL_CONNECTION_ERRORS = frozenset({1040, 1053, 1077, 1927, 2002, 2003, 2006, 2013, 2055, 4031})


class RetriesExhausted(EndpointError):
    """An endpoint kept failing for longer than ``endpoints.retry.budget_s``: the stage gives up."""

    code = "ENDPOINT_RETRIES_EXHAUSTED"
    retriable = False  # the budget is spent: an outer loop must not start another one
    exit_code = 3


@dataclass(frozen=True)
class RetryPolicy:
    """``budget_s``: the longest a call keeps being retried (wall clock, and backoff slept); backoff
    from ``initial_backoff_s`` doubling to ``max_backoff_s``, with up to ``initial_backoff_s`` of jitter."""

    budget_s: float = 60.0
    initial_backoff_s: float = 0.2
    max_backoff_s: float = 5.0

    @classmethod
    def of(cls, cfg: Any) -> RetryPolicy:
        """The policy of a DbusConfig (``endpoints.retry``)."""
        r = cfg.endpoints.retry
        return cls(r.budget_s, r.initial_backoff_s, r.max_backoff_s)


def transient(err: BaseException) -> bool:
    """Whether ``err`` is an endpoint failure worth retrying (pure: decided on the exception alone)."""
    if isinstance(err, DbusError):
        return err.retriable
    for kind in _KINDS:
        verdict = kind(err)
        if verdict is not None:
            return verdict
    return isinstance(err, (ConnectionError, TimeoutError))  # socket-level: refused, reset, timed out


def _mysql(err: BaseException) -> bool | None:
    import pymysql

    if isinstance(err, pymysql.err.InterfaceError):
        return True  # a closed or broken connection object
    if isinstance(err, pymysql.err.OperationalError):  # pymysql reports a refused certificate as 2003
        return bool(err.args) and err.args[0] in MYSQL_CONNECTION_ERRORS and not certificate_refused(str(err))
    return None


def _sqlalchemy(err: BaseException) -> bool | None:
    from sqlalchemy import exc

    if isinstance(err, exc.DBAPIError):
        return bool(err.connection_invalidated) or (err.orig is not None and transient(err.orig))
    if isinstance(err, (exc.DisconnectionError, exc.TimeoutError)):
        return True  # TimeoutError: no pooled connection came free in time
    return None


def _kazoo(err: BaseException) -> bool | None:
    from kazoo.exceptions import ConnectionLoss, OperationTimeoutError, SessionExpiredError
    from kazoo.handlers.threading import KazooTimeoutError

    if isinstance(err, (ConnectionLoss, OperationTimeoutError, SessionExpiredError, KazooTimeoutError)):
        return True  # SessionExpiredError includes ConnectionClosedError
    return None


def _kafka(err: BaseException) -> bool | None:
    from kafka.errors import KafkaError

    return bool(err.retriable) if isinstance(err, KafkaError) else None


def _http(err: BaseException) -> bool | None:
    """influxdb-client (urllib3) and urllib: connection failures and 5xx answers."""
    import urllib.error

    import urllib3.exceptions

    if isinstance(err, urllib.error.HTTPError):
        return err.code >= 500
    if isinstance(err, (urllib.error.URLError, urllib3.exceptions.HTTPError)):
        return True
    status = getattr(err, "status", None)
    if type(err).__name__ == "ApiException" and isinstance(status, int):
        return status >= 500
    return None


_KINDS = (_mysql, _sqlalchemy, _kazoo, _kafka, _http)


def _budget_spent(policy: RetryPolicy, clock: Callable[[], float], start: float):
    """tenacity stop: the wall clock since the first attempt, or the backoff slept plus the next one,
    would pass the budget (the second makes the budget hold with a test's fake ``sleep``)."""

    def stop(state: RetryCallState) -> bool:
        return max(clock() - start, state.idle_for + (state.upcoming_sleep or 0)) >= policy.budget_s

    return stop


def call(
    policy: RetryPolicy,
    what: str,
    fn: Callable[..., T],
    *args: Any,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
    **kwargs: Any,
) -> T:
    """``fn(*args, **kwargs)``, retried on transient failures within ``policy``; ``what`` names the call
    in the log and in RetriesExhausted (e.g. ``"meta store: history of shop.orders"``)."""

    def note(state: RetryCallState) -> None:
        assert state.outcome is not None, "tenacity calls before_sleep after an attempt, with its outcome"
        err = state.outcome.exception()
        log.warning(
            "%s failed (%s: %s); attempt %d, retrying in %.1fs",
            what,
            type(err).__name__,
            str(err).splitlines()[0][:300] if str(err) else "",
            state.attempt_number,
            state.upcoming_sleep or 0.0,
        )

    start = clock()
    backoff = wait_exponential_jitter(
        multiplier=policy.initial_backoff_s, max=policy.max_backoff_s, jitter=policy.initial_backoff_s
    )
    retrying = Retrying(
        retry=retry_if_exception(transient),
        wait=backoff,
        stop=_budget_spent(policy, clock, start),
        sleep=sleep,
        before_sleep=note,
    )
    try:
        return retrying(fn, *args, **kwargs)
    except RetryError as e:
        last = e.last_attempt.exception()
        msg = (
            f"{what}: still failing after {e.last_attempt.attempt_number} attempts in "
            f"{clock() - start:.1f}s (budget endpoints.retry.budget_s = {policy.budget_s:g}s): "
            f"{type(last).__name__}: {last}"
        )
        raise RetriesExhausted(msg) from last


def retrying(policy: RetryPolicy | None, what: str, fn: Callable[..., T]) -> Callable[..., T]:
    """``fn`` wrapped by ``call`` (``policy`` None: ``fn`` itself, no retries)."""
    if policy is None:
        return fn

    def wrapped(*args: Any, **kwargs: Any) -> T:
        return call(policy, what, fn, *args, **kwargs)

    wrapped.__name__ = getattr(fn, "__name__", "retrying")
    return wrapped


def gave_up_in(failure: BaseException | str) -> bool:
    """Whether a failure was a RetriesExhausted, also when it arrives wrapped: a Spark stage's
    StreamingQueryException carries the Python worker's traceback as text. Such a stage should exit 3
    with ENDPOINT_RETRIES_EXHAUSTED rather than with its ``*_FAILED`` code (docs/errors.md)."""
    text = str(failure)
    return isinstance(failure, RetriesExhausted) or any(
        m in text for m in ("RetriesExhausted", RetriesExhausted.code)
    )
