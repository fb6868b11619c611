"""Fixtures for tests on the real local stack (`make stack-up`).

A missing server fails the test with the command that starts it; it never skips. Each test gets its own
topic (``pytest_<test>_<uuid>``) or database (``dbus_test_<uuid>``), removed afterwards.
Set DBUS_CONFIG to point the tests at another configuration (e.g. servers already running elsewhere).
"""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Iterator

import pymysql
import pytest

from dbuslib import kafka, mysql
from dbuslib.config import DbusConfig, load_config
from dbuslib.errors import DbusError

pytestmark = pytest.mark.integration
START = "start the local stack with `make stack-up`"


@pytest.fixture(scope="session")
def cfg() -> DbusConfig:
    return load_config(os.environ.get("DBUS_CONFIG"))


@pytest.fixture(scope="session")
def source(cfg):
    return cfg.source("demo")


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

    from dbuslib import spark as dspark

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # Python workers run the venv's interpreter
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
