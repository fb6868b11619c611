"""Replica targets and ``dbus replicate`` processes, for the tests of the consumer client's SQL sink.

- ``SERVERS``: the stack's MariaDB and PostgreSQL as SQLAlchemy URLs without a database (account dbus/dbus).
- ``fresh_database(kind)``: a new database ``dbus_test_<hex>`` on one of them, dropped afterwards; yields
  its URL.
- ``forward_only(url, table)``: a trigger on a replica table that refuses an UPDATE moving a row's
  ``(ums_id_, ums_uid_)`` backwards: the statement fails, and so does the replicate that sent it.
- ``T``, ``KEYS``, ``V1``, ``change``, ``up``: one source table (``demo.shop.orders``), its key and first
  version's columns, and row changes of it, for the SQL sink's tests.
- ``ReplicateProcess``: ``dbus replicate`` as a user runs it, in its own process group (``kill()`` is
  ``kill -9``), its output in a log file.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa
from extractor_env import REPO

from cli.stages import stop_group
from dbusclient.decode import RowChange, TableRef
from dbusclient.merge import Upsert
from ums.message import Op, UmsField
from ums.types import UmsType

HOST = "127.0.0.1"

T = TableRef("demo", "shop", "orders")
KEYS = {"shop.orders": ("id",)}
V1 = (
    UmsField("ums_id_", UmsType.LONG, False),
    UmsField("id", UmsType.LONG, False),
    UmsField("name", UmsType.STRING, True),
    UmsField("amount", UmsType.DECIMAL, True),
    UmsField("qty", UmsType.INT, True),
    UmsField("at", UmsType.DATETIME, True),
)


def change(key: int, op: Op, ums_id: int, version: int = 1, **values: object) -> RowChange:
    """A row change of ``T`` at ``ums_id`` (its key ``key``), its other columns null unless given."""
    vals = {"id": str(key), "name": None, "amount": None, "qty": None, "at": None, **values}
    return RowChange(T, version, (key,), op, ums_id, ums_id * 10**6, "2024-01-02 03:04:05.000", vals)


def up(key: int, ums_id: int, name: str, **values: object) -> Upsert:
    return Upsert(change(key, Op.UPDATE, ums_id, name=name, **values))


SERVERS = {
    "mariadb": f"mysql+pymysql://dbus:dbus@{HOST}:{os.environ.get('MARIADB_PORT', '13306')}",
    # the secure stack's (make test-secure) has no password in it: libpq's PGPASSFILE and PGSSLMODE give them
    "postgresql": os.environ.get("STACK_POSTGRESQL_URL")
    or f"postgresql+psycopg://dbus:dbus@{HOST}:{os.environ.get('POSTGRESQL_PORT', '15432')}",
}


@contextlib.contextmanager
def fresh_database(kind: str) -> Iterator[str]:
    """A new database on the stack's MariaDB or PostgreSQL (``kind``): its SQLAlchemy URL."""
    base = SERVERS[kind]
    name = f"dbus_test_{uuid.uuid4().hex[:12]}"
    admin = sa.create_engine(f"{base}/dbus", isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.execute(sa.text(f"CREATE DATABASE {name}"))
    except sa.exc.OperationalError as e:
        pytest.fail(f"{kind} is not available ({e}); start the local stack with `make stack-up`")
    try:
        yield f"{base}/{name}"
    finally:
        with admin.connect() as conn:
            if kind == "postgresql":
                conn.execute(sa.text(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
            else:
                conn.execute(sa.text(f"DROP DATABASE IF EXISTS {name}"))
        admin.dispose()


def forward_only(url: str, table: str) -> None:
    """A BEFORE UPDATE trigger on ``table`` that fails a row's move to an older (ums_id_, ums_uid_)."""
    engine = sa.create_engine(url)
    try:
        with engine.begin() as conn:
            if engine.dialect.name == "postgresql":
                conn.execute(
                    sa.text(
                        "CREATE FUNCTION dbus_forward_only() RETURNS trigger AS $$ BEGIN "
                        "IF (NEW.ums_id_, NEW.ums_uid_) < (OLD.ums_id_, OLD.ums_uid_) THEN "
                        "RAISE EXCEPTION 'replica row % went backwards', OLD; END IF; RETURN NEW; END "
                        "$$ LANGUAGE plpgsql"
                    )
                )
                conn.execute(
                    sa.text(
                        f"CREATE TRIGGER {table}_forward BEFORE UPDATE ON {table} "
                        "FOR EACH ROW EXECUTE FUNCTION dbus_forward_only()"
                    )
                )
            else:
                conn.execute(
                    sa.text(
                        f"CREATE TRIGGER {table}_forward BEFORE UPDATE ON {table} FOR EACH ROW BEGIN "
                        "IF NEW.ums_id_ < OLD.ums_id_ OR (NEW.ums_id_ = OLD.ums_id_ AND NEW.ums_uid_ < "
                        "OLD.ums_uid_) THEN SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = "
                        "'replica row went backwards'; END IF; END"
                    )
                )
    finally:
        engine.dispose()


def scalar(url: str, query: str) -> object:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            return conn.execute(sa.text(query)).scalar()
    except sa.exc.ProgrammingError:
        return None  # the table is not there yet
    finally:
        engine.dispose()


def checkpoint_mode(url: str, name: str) -> str | None:
    """The mode of the replicate's checkpoint row ``name`` in the target (None: none yet)."""
    text = scalar(url, f"SELECT checkpoint FROM dbus_client_checkpoint WHERE name = '{name}'")
    return None if text is None else str(json.loads(str(text))["mode"])


def checkpoint_partitions(url: str, name: str) -> list[dict]:
    text = scalar(url, f"SELECT checkpoint FROM dbus_client_checkpoint WHERE name = '{name}'")
    return [] if text is None else list(json.loads(str(text))["partitions"])


class ReplicateProcess:
    """``dbus --config CFG replicate ARGS`` in its own process group, output appended to ``log``."""

    def __init__(self, cfg_path: Path, log: Path, *args: str) -> None:
        self.cfg_path, self.log, self.args = cfg_path, log, args
        self.proc: subprocess.Popen | None = None
        self.starts = 0
        self.down = False  # stopped or killed by the test: not expected to be alive

    def start(self) -> ReplicateProcess:
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with self.log.open("ab") as out:
            out.write(f"---- start {self.starts + 1}\n".encode())
            out.flush()
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "cli.main", "--config", str(self.cfg_path), "replicate", *self.args],
                cwd=REPO,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.starts += 1
        self.down = False
        return self

    def check_alive(self) -> None:
        assert self.proc is not None
        if not self.down and self.proc.poll() is not None:
            tail = self.log.read_text(errors="replace")[-4000:]
            msg = f"dbus replicate exited with {self.proc.returncode}; the end of {self.log}:\n{tail}"
            raise AssertionError(msg)

    def kill(self) -> None:
        """``kill -9`` of the process group, and wait until it is gone."""
        assert self.proc is not None
        self.down = True
        stop_group(self.proc, signal.SIGKILL)

    def stop(self, timeout: float = 90) -> int:
        """SIGTERM; the exit code (the process finishes its window first)."""
        assert self.proc is not None
        self.down = True
        if stop_group(self.proc, timeout=timeout) == -signal.SIGKILL:
            msg = f"dbus replicate did not stop within {timeout:.0f}s of SIGTERM; see {self.log}"
            raise AssertionError(msg)
        return self.proc.returncode

    def output(self) -> str:
        return self.log.read_text(errors="replace")
