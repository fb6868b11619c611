"""dbuslib.retry: what is transient, backoff within the budget, and the error once the budget is spent."""

from __future__ import annotations

import urllib.error

import pymysql
import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st
from kafka.errors import KafkaConnectionError, TopicAuthorizationFailedError
from kazoo.exceptions import ConnectionLoss, NoNodeError, SessionExpiredError
from sqlalchemy.exc import IntegrityError, OperationalError, ProgrammingError

from dbuslib.config import load_config
from dbuslib.errors import ConfigError, EndpointError
from dbuslib.retry import (
    MYSQL_CONNECTION_ERRORS,
    RetriesExhausted,
    RetryPolicy,
    call,
    gave_up_in,
    retrying,
    transient,
)


class FlakyEndpoint:
    """Fails ``failures`` times with ``error``, then answers ``"ok"``."""

    def __init__(self, failures: int, error: Exception) -> None:
        self.failures, self.error, self.calls = failures, error, 0

    def __call__(self) -> str:
        self.calls += 1
        if self.calls <= self.failures:
            raise self.error
        return "ok"


class FakeClock:
    """A clock that only moves when the retry loop sleeps: runs take no real time."""

    def __init__(self) -> None:
        self.now, self.sleeps = 0.0, []

    def sleep(self, s: float) -> None:
        self.sleeps.append(s)
        self.now += s

    def __call__(self) -> float:
        return self.now


LOST = pymysql.err.OperationalError(2013, "Lost connection to server during query")
POLICY = RetryPolicy(budget_s=60.0, initial_backoff_s=0.2, max_backoff_s=5.0)


@pytest.mark.parametrize(
    "err",
    [
        LOST,
        pymysql.err.OperationalError(2003, "Can't connect to MySQL server on '127.0.0.1'"),
        pymysql.err.InterfaceError(0, ""),
        OperationalError("SELECT 1", {}, pymysql.err.OperationalError(2006, "MySQL server has gone away")),
        ConnectionLoss(),
        SessionExpiredError(),
        KafkaConnectionError("broker down"),
        urllib.error.URLError("refused"),
        ConnectionRefusedError(),
        TimeoutError(),
        EndpointError("ZooKeeper at 127.0.0.1:12181 did not answer within 4s"),
    ],
)
def test_endpoint_failures_are_transient(err):
    assert transient(err)


@pytest.mark.parametrize(
    "err",
    [
        pymysql.err.OperationalError(1045, "Access denied for user 'dbus'"),
        # pymysql's 2003 for a certificate DBus refused: not a server that is down
        pymysql.err.OperationalError(
            2003,
            "Can't connect to MySQL server on '127.0.0.1' ([SSL: CERTIFICATE_VERIFY_FAILED] certificate "
            "verify failed: self-signed certificate in certificate chain (_ssl.c:1006))",
        ),
        pymysql.err.ProgrammingError(1064, "You have an error in your SQL syntax"),
        OperationalError("SELECT 1", {}, pymysql.err.OperationalError(1054, "Unknown column 'x'")),
        IntegrityError("INSERT", {}, pymysql.err.IntegrityError(1062, "Duplicate entry")),
        ProgrammingError("SELECT", {}, pymysql.err.ProgrammingError(1146, "Table doesn't exist")),
        NoNodeError(),
        TopicAuthorizationFailedError(),
        ValueError("bad"),
        KeyError("k"),
        ConfigError("conf/dbus.yaml: endpoints.retry.budget_s: bad"),
        RetriesExhausted("meta store: history: still failing"),
    ],
)
def test_other_errors_are_not_retried(err):
    assert not transient(err)
    flaky = FlakyEndpoint(1, err)
    with pytest.raises(type(err)):
        call(POLICY, "x", flaky, sleep=FakeClock().sleep)
    assert flaky.calls == 1


@given(st.sampled_from(sorted(MYSQL_CONNECTION_ERRORS)), st.integers(0, 9))
def test_a_fake_that_fails_n_times_then_succeeds_is_retried_n_times(errno, n):
    clock = FakeClock()
    flaky = FlakyEndpoint(n, pymysql.err.OperationalError(errno, "connection failed"))
    assert call(POLICY, "meta store: history", flaky, sleep=clock.sleep, clock=clock) == "ok"
    assert flaky.calls == n + 1
    assert len(clock.sleeps) == n


@given(st.floats(0.05, 2), st.floats(0.5, 30), st.floats(1, 120))
def test_backoff_grows_to_the_cap_and_the_sleeps_stay_within_the_budget(initial, cap, budget):
    policy = RetryPolicy(budget_s=budget, initial_backoff_s=initial, max_backoff_s=max(cap, initial))
    clock = FakeClock()
    with pytest.raises(RetriesExhausted):
        call(policy, "x", FlakyEndpoint(10**6, LOST), sleep=clock.sleep, clock=clock)
    assert sum(clock.sleeps) <= budget
    assert all(s <= policy.max_backoff_s for s in clock.sleeps)
    doubling = [min(initial * 2**i, policy.max_backoff_s) for i in range(len(clock.sleeps))]
    assert all(base <= s <= base + initial for s, base in zip(clock.sleeps, doubling, strict=True))


def test_budget_exhausted_raises_the_documented_code_and_exit_code():
    clock = FakeClock()
    flaky = FlakyEndpoint(10**6, LOST)
    with pytest.raises(RetriesExhausted) as info:
        call(
            RetryPolicy(budget_s=10),
            "meta store at 127.0.0.1:13306: history",
            flaky,
            sleep=clock.sleep,
            clock=clock,
        )
    err = info.value
    assert (err.code, err.exit_code, err.retriable) == ("ENDPOINT_RETRIES_EXHAUSTED", 3, False)
    assert isinstance(err, EndpointError)
    assert "meta store at 127.0.0.1:13306: history" in str(err) and "budget_s = 10s" in str(err)
    assert "Lost connection" in str(err) and err.__cause__ is LOST
    assert flaky.calls == len(clock.sleeps) + 1 >= 5


def test_the_budget_counts_wall_clock_too():
    """A call that itself hangs (a connect timeout) spends the budget without sleeping much."""
    clock = FakeClock()

    def hangs_then_fails():
        clock.now += 20  # e.g. a 20 s connect timeout
        raise LOST

    with pytest.raises(RetriesExhausted, match="3 attempts"):
        call(RetryPolicy(budget_s=60), "x", hangs_then_fails, sleep=clock.sleep, clock=clock)


def test_retrying_without_a_policy_is_the_function_itself():
    def f():
        return 1

    assert retrying(None, "x", f) is f
    flaky = FlakyEndpoint(2, ConnectionLoss())
    wrapped = retrying(RetryPolicy(initial_backoff_s=0.001, max_backoff_s=0.001), "zk", flaky)
    assert wrapped() == "ok" and flaky.calls == 3


def test_the_policy_comes_from_endpoints_retry(tmp_path):
    cfg = load_config()
    r = cfg.endpoints.retry
    assert RetryPolicy.of(cfg) == RetryPolicy(r.budget_s, r.initial_backoff_s, r.max_backoff_s)
    raw = yaml.safe_load(cfg.path.read_text())
    raw["endpoints"]["retry"] = {"budget_s": 0}
    bad = tmp_path / "dbus.yaml"
    bad.write_text(yaml.safe_dump(raw).replace("../.stack", str(cfg.path.parent.parent / ".stack")))
    with pytest.raises(ConfigError, match="endpoints.retry.budget_s"):
        load_config(bad)


def test_a_wrapped_give_up_is_recognised():
    worker = (
        "org.apache.spark.api.python.PythonException: Traceback (most recent call last):\n"
        '  File "appender/job.py", line 90, in process_batches\n'
        "dbuslib.retry.RetriesExhausted: meta store at 127.0.0.1:13306: history: still failing"
    )
    assert gave_up_in(RetriesExhausted("x")) and gave_up_in(worker)
    assert not gave_up_in(EndpointError("Kafka at 127.0.0.1:19092 is not reachable"))
    assert not gave_up_in("TypeError: object of type 'NoneType' has no len()")


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


SHORT = RetryPolicy(budget_s=1.5, initial_backoff_s=0.1, max_backoff_s=0.4)


def test_the_meta_store_gives_up_on_a_dead_server_after_the_budget():
    from dbuslib.metastore import MetaStore

    store = MetaStore(f"mysql+pymysql://dbus:dbus@127.0.0.1:{closed_port()}/dbus", retry=SHORT)
    try:
        with pytest.raises(RetriesExhausted, match=r"meta store at 127\.0\.0\.1:\d+: history: still failing"):
            store.history("demo", "shop", "orders")
    finally:
        store.dispose()
    plain = MetaStore(f"mysql+pymysql://dbus:dbus@127.0.0.1:{closed_port()}/dbus")  # the CLI's: no retry
    with pytest.raises(OperationalError):
        plain.history("demo", "shop", "orders")


def test_zookeeper_and_mysql_connects_give_up_after_the_budget():
    from dbuslib import mysql, zk
    from dbuslib.config import MysqlConnection, ZooKeeperEndpoint

    with pytest.raises(RetriesExhausted, match="ZooKeeper at .*: connect: still failing"):
        zk.client(ZooKeeperEndpoint(hosts=f"127.0.0.1:{closed_port()}", timeout_s=0.3), retry=SHORT)
    conn = MysqlConnection(host="127.0.0.1", port=closed_port(), user="u", password="p", server_id=1)
    with pytest.raises(RetriesExhausted, match="MySQL at .*: connect: still failing"):
        mysql.connect(conn, retry=SHORT, connect_timeout=1)
    with pytest.raises(EndpointError) as plain:
        mysql.connect(conn, connect_timeout=1)
    assert not isinstance(plain.value, RetriesExhausted)
