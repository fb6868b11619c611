"""Fixtures for tests on the real local stack (`make stack-up`).

A missing server fails the test with the command that starts it; it never skips. Each test gets its own
topic (``pytest_<test>_<uuid>``) or database (``dbus_test_<uuid>``), removed afterwards.
Set DBUS_CONFIG to point the tests at another configuration (e.g. servers already running elsewhere).

Tests run side by side (``make test``: ``pytest -n 2``). Every integration test holds the stack lock
while it runs, shared; a test marked ``exclusive`` (it stops or restarts a server, purges the binlog, or
takes fixed ports) holds it alone: it waits for the running tests to end, and no test starts while it runs.
The lock files are in ``$STACK_HOME/test-locks`` (default ``.stack/``), so runs of the same stack started
from several shells take turns the same way.
"""

from __future__ import annotations

import fcntl
import os
import re
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pymysql
import pytest
import sqlalchemy.exc

from dbuslib import kafka, mysql
from dbuslib.config import DbusConfig, load_config
from dbuslib.errors import DbusError

pytestmark = pytest.mark.integration
START = "start the local stack with `make stack-up`"
HERE = Path(__file__).resolve().parent
LOCKS = Path(os.environ.get("STACK_HOME", HERE.parents[1] / ".stack")) / "test-locks"
LOCK_WAIT_S = 3600  # the longest test that may run first (its timeout) and an exclusive one queued before


class StackLock:
    """A readers-writer lock over files (flock), one per process: ``stack.lock`` shared by ordinary tests,
    exclusive for an ``exclusive`` one. Everyone passes ``turnstile.lock`` first and an exclusive test
    keeps it while it waits, so a stream of ordinary tests cannot starve it: the one running ends, the next
    waits at the turnstile. Both are released with LOCK_UN, not by closing: a process a test started
    cannot keep them."""

    def __init__(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.turnstile = (folder / "turnstile.lock").open("a")  # close-on-exec: no child inherits them
        self.stack = (folder / "stack.lock").open("a")
        self.shared = 0  # holders of the shared lock in this process: a test, a module fixture (hold_stack)

    @staticmethod
    def _take(file, mode: int, deadline: float) -> bool:
        while True:
            try:
                fcntl.flock(file, mode | fcntl.LOCK_NB)
                return True
            except BlockingIOError:
                if time.monotonic() > deadline:
                    return False
                time.sleep(0.05)

    def acquire(self, exclusive: bool) -> str | None:
        """None once held; else why not (held by others past LOCK_WAIT_S). The shared lock is re-entrant
        in a process: a test of a module whose fixture holds it (hold_stack) takes it again without passing
        the turnstile, where an exclusive test waiting for that fixture's module to end would stop it."""
        if self.shared:
            if exclusive:
                return "an exclusive test while this process holds the stack lock shared (hold_stack)"
            self.shared += 1
            return None
        deadline = time.monotonic() + LOCK_WAIT_S
        if not self._take(self.turnstile, fcntl.LOCK_EX, deadline):
            return f"{self.turnstile.name} still held after {LOCK_WAIT_S}s"
        try:
            mode = fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH
            if not self._take(self.stack, mode, deadline):
                return f"{self.stack.name} still held by other tests after {LOCK_WAIT_S}s"
        finally:
            fcntl.flock(self.turnstile, fcntl.LOCK_UN)
        self.shared = 0 if exclusive else 1
        return None

    def release(self) -> None:
        self.shared = max(0, self.shared - 1)
        if not self.shared:
            fcntl.flock(self.stack, fcntl.LOCK_UN)


# The files `make test-secure` runs on the secure stack (SECURE=1, conf/dbus-secure.yaml: Kafka on
# SASL_SSL only, MariaDB and PostgreSQL over TLS only, ZooKeeper with digest authentication enforced, random
# passwords): every client and stage they start must honour the configuration's security settings. Their
# tests get the marker secure_stack here, one list in one place. `make test` runs them once, on the secure
# stack: the same test on the plain stack proves nothing more (every other integration test runs there), so
# its plain pass deselects them (marker secure_once), but for the files of PLAIN_TOO, which check on the
# plain stack what the secure stack has not (the heartbeat's latency in InfluxDB and the dashboards'
# queries). Run by name with pytest, or by `make test-integration`, they run on the plain stack as before.
SECURE_SUBSET = frozenset(
    {
        "test_kafka.py",
        "test_zookeeper.py",
        "test_metastore.py",
        "test_spark_kafka.py",
        "test_extractor_golden.py",
        "test_dispatcher.py",
        "test_pipeline_order.py",
        "test_heartbeat_e2e.py",
        "test_fullpull_reconcile_verify.py",
        "test_replicate_exact_keys.py",
        "test_rsyslog_ship.py",
        "test_console_secrets_live.py",
        "test_no_secret_leaks_live.py",
        "test_zookeeper_auth_live.py",
    }
)


PLAIN_TOO = frozenset({"test_heartbeat_e2e.py"})


def pytest_itemcollected(item: pytest.Item) -> None:
    if item.path.name in SECURE_SUBSET:
        item.add_marker(pytest.mark.secure_stack)
        if item.path.name not in PLAIN_TOO:
            item.add_marker(pytest.mark.secure_once)


_lock: list[StackLock] = []
NOT_LOCKED = pytest.StashKey[str]()


def stack_lock_of_process() -> StackLock:
    if not _lock:
        _lock.append(StackLock(LOCKS))
    return _lock[0]


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None):
    """The stack lock around the whole test, its fixtures' set-up and teardown included; taken outside
    pytest-timeout's clock, which then times the test, not its wait."""
    if not item.path.is_relative_to(HERE):  # a pytest-xdist worker calls this for the unit tests too
        return (yield)
    lock = stack_lock_of_process()
    why = lock.acquire(item.get_closest_marker("exclusive") is not None)
    if why is not None:
        item.stash[NOT_LOCKED] = why  # the test fails at set-up (stack_lock below), saying so
        return (yield)
    try:
        return (yield)
    finally:
        lock.release()


@pytest.fixture(autouse=True)
def stack_lock(request):
    """Fails a test that could not take the stack lock (see pytest_runtest_protocol)."""
    why = request.node.stash.get(NOT_LOCKED, None)
    if why is not None:
        pytest.fail(f"the stack lock: {why}", pytrace=False)


@pytest.fixture(scope="module")
def hold_stack() -> Iterator[None]:
    """The stack lock, shared, for as long as a module's fixture that uses it lives: a module fixture that
    keeps processes running between its tests (a stage) depends on it first, so no exclusive test (a server
    restart) runs between two tests of that module, under the processes."""
    lock = stack_lock_of_process()
    why = lock.acquire(exclusive=False)
    if why is not None:
        pytest.fail(f"the stack lock: {why}", pytrace=False)
    try:
        yield
    finally:
        lock.release()


@pytest.fixture(scope="session")
def cfg() -> DbusConfig:
    return load_config(os.environ.get("DBUS_CONFIG"))


@pytest.fixture(scope="session")
def source(cfg):
    return cfg.source("demo")


@pytest.fixture(scope="session", autouse=True)
def shared_tables(cfg) -> None:
    """What a fresh stack lacks until the demo or a stage first runs, made once per process before its first
    test, so no test's outcome depends on which tests ran before it: the demo source's schema ``shop``
    (conf/demo/shop.sql, idempotent) and the meta store's tables (a test's clean-up deletes its rows). A
    server that is down is left to the tests that use it: they fail saying how to start it."""
    from cli.demo import create_shop
    from dbuslib.metastore import MetaStore

    try:
        create_shop(cfg.source("demo"))
        store = MetaStore(cfg.endpoints.meta_store.url.get_secret_value())
        try:
            store.create_schema()
        finally:
            store.dispose()
    except (pymysql.err.MySQLError, DbusError, OSError, sqlalchemy.exc.SQLAlchemyError):
        pass


def _fail_down(what: str, err: Exception) -> None:
    pytest.fail(f"{what} is not available ({err}); {START}", pytrace=False)


@pytest.fixture(scope="session")
def kafka_up(cfg):
    try:
        kafka.admin(cfg.endpoints.kafka).close()
    except DbusError as e:
        _fail_down("Kafka", e)
    return cfg.endpoints.kafka


def _safe_name(request: pytest.FixtureRequest) -> str:
    return re.sub(r"[^A-Za-z0-9_]", "_", request.node.name)[:80]


@pytest.fixture
def new_topic(request, kafka_up):
    """A factory of fresh topics named after the test; all are deleted at teardown."""
    made: list[str] = []

    def make(partitions: int = 1) -> str:
        name = f"pytest_{_safe_name(request)}_{uuid.uuid4().hex[:8]}"
        kafka.ensure_topics(kafka_up, [name], partitions=partitions)
        made.append(name)
        return name

    yield make
    kafka.delete_topics(kafka_up, made)


@pytest.fixture
def writer_db(source) -> Iterator[tuple[pymysql.Connection, str]]:
    """A fresh database on the source, as the writer account: (connection, database name)."""
    name = f"dbus_test_{uuid.uuid4().hex[:12]}"
    try:
        db = mysql.connect(source.mysql, as_writer=True)
    except DbusError as e:
        _fail_down("MariaDB", e)
    with db.cursor() as cur:
        cur.execute(f"CREATE DATABASE `{name}`")
    db.select_db(name)
    yield db, name
    with db.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS `{name}`")
    db.close()


@pytest.fixture(scope="session")
def spark(cfg):
    import sys

    from pyspark import SparkContext

    from dbuslib import spark as dspark

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # Python workers run the venv's interpreter
    active = SparkContext._active_spark_context
    if active is not None:  # a unit test's session in this worker (tests/unit/jvm_jar.py: its JVM has the
        active.stop()  # connectors too), made without DBus's settings: getOrCreate would hand it back
    try:
        session = dspark.session(cfg, "dbus-tests")
    except DbusError as e:
        _fail_down("Spark's Kafka connector", e)
    yield session
    session.stop()


@pytest.fixture
def extractor_env(tmp_path, writer_db, kafka_up):
    """An extractor setup that captures only this test's database (see extractor_env.py)."""
    from extractor_env import cleanup, make_env

    env = make_env(tmp_path, writer_db[1])
    yield env
    cleanup(env)


@pytest.fixture
def receivers():
    """``(hook, mail)``: a webhook receiver and a real SMTP server on free local ports (see helpers.py)."""
    from helpers import Mailbox, Receiver

    hook, mail = Receiver(), Mailbox()
    yield hook, mail
    hook.close()
    mail.close()


@pytest.fixture(scope="session")
def browser():
    """Debian's Chromium, headless, for the whole session, driven by Playwright (console_env.py).
    ``--no-sandbox``: the tests may run as root, where Chromium's sandbox does not start."""
    from console_env import CHROMIUM
    from playwright.sync_api import sync_playwright

    if not os.access(CHROMIUM, os.X_OK):
        pytest.fail(f"{CHROMIUM} is missing; `make browser` installs it", pytrace=False)
    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
        yield chromium
        chromium.close()


PAGE_ERRORS = pytest.StashKey[list[str]]()


@pytest.fixture
def page(browser, request):
    """A fresh browser context (no cookies) and a page in it, 1280x800; each wait gives up after 10 s. The
    page's script errors are kept: a failed test's report shows them, with the page's address and a
    screenshot of it (pytest_runtest_makereport below)."""
    from console_env import VIEWPORT

    context = browser.new_context(viewport=VIEWPORT)
    context.set_default_timeout(10_000)
    errors = request.node.stash[PAGE_ERRORS] = []
    opened = context.new_page()
    opened.on("pageerror", lambda e: errors.append(f"uncaught: {e}"))

    def logged(m) -> None:
        if m.type == "error":
            errors.append(f"console.error: {m.text} ({m.location.get('url')})")

    opened.on("console", logged)
    yield opened
    context.close()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    """A browser test that failed: its page as it was (console_env.page_state) and the end of the console's
    log, each in a section of the report."""
    report = yield
    funcargs = getattr(item, "funcargs", {})
    opened, server = funcargs.get("page"), funcargs.get("console_server")
    if report.failed and report.when == "call":
        if opened is not None and PAGE_ERRORS in item.stash:
            from console_env import page_state

            report.sections.append(("browser", page_state(opened, item.stash[PAGE_ERRORS], item.name)))
        if server is not None and hasattr(server, "tail"):
            report.sections.append((f"dbus console ({server.log})", server.tail()))
    return report


@pytest.fixture(scope="module")
def console_server(hold_stack, cfg, tmp_path_factory):
    """``dbus console`` over the test configuration on a free port, for a module's tests (console_env.py):
    ``.url``, ``.passwords[role]``; stopped at the module's end."""
    from console_env import ConsoleServer

    server = ConsoleServer(cfg.path, tmp_path_factory.mktemp("console"))
    try:
        yield server.start()
    finally:
        server.stop()


@pytest.fixture
def logged_in(console_server):
    """``logged_in(page, role)``: log ``page`` in as the user of ``role`` (operator or viewer) through the
    login form; returns the page, on the page the login led to."""

    def login(page, role: str):
        page.goto(f"{console_server.url}/login")
        page.fill("#username", role)
        page.fill("#password", console_server.passwords[role])
        with page.expect_navigation():
            page.click("#login")
        assert "/login" not in page.url, f"login as {role} failed: {page.inner_text('main')}"
        return page

    return login


@pytest.fixture
def screenshot():
    """``screenshot(page, name)``: the whole page at 1280x800 into <name>.png (its path): docs/console/ under
    `make screenshots`, a temporary folder otherwise (console_env.SCREENSHOTS)."""
    from console_env import SCREENSHOTS, VIEWPORT

    def take(page, name: str) -> Path:
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        page.set_viewport_size(VIEWPORT)
        path = SCREENSHOTS / f"{name}.png"
        page.screenshot(path=str(path), full_page=True)
        return path

    return take
