"""The demo's replica step: ``dbus replicate`` of ``shop.orders`` into the stack's PostgreSQL.

Started right after the stages, so that its bootstrap (a full pull it requests by itself) runs under the
demo's workload; the demo waits until it is online while the stages still run, then, with the stages
stopped, until it has read everything and exits (``--until-idle``), and compares the replica with the
table in MariaDB (``dbus verify --replica``): 0 differences. The replica database is made anew each run.
Its output goes to ``replicate.log`` beside the stages' logs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from cli.stages import Stages, stop_group
from dbuslib.config import DbusConfig

PORT = os.environ.get("POSTGRESQL_PORT", "15432")  # the stack's PostgreSQL (stack/env.sh)
# The secure stack's (`make demo SECURE=1`) has no password in it: libpq's PGPASSFILE, PGSSLMODE and
# PGSSLROOTCERT, set by the Makefile, give it and the TLS settings (no secret on replicate's command line).
SERVER = os.environ.get("STACK_POSTGRESQL_URL") or f"postgresql+psycopg://dbus:dbus@127.0.0.1:{PORT}"
DATABASE = "dbus_demo_replica"
URL = f"{SERVER}/{DATABASE}"
NAME = "demo"  # the replicate's checkpoint row
IDLE_S = 5  # --until-idle: online, and nothing read for this long once the stages stopped


class DemoReplica:
    def __init__(self, cfg: DbusConfig, ds: str, table: str, log_dir: Path) -> None:
        self.cfg, self.ds, self.table = cfg, ds, table
        self.log = log_dir / "replicate.log"
        self.proc: subprocess.Popen | None = None
        self.argv: list[str] = []
        self.exited_early = False  # set by wait_online: the replicate ended before every change arrived

    def start(self) -> None:
        """A fresh replica database, then ``dbus replicate`` in its own process group."""
        admin = sa.create_engine(f"{SERVER}/dbus", isolation_level="AUTOCOMMIT")
        try:
            with admin.connect() as conn:
                conn.execute(sa.text(f"DROP DATABASE IF EXISTS {DATABASE} WITH (FORCE)"))
        finally:
            admin.dispose()
        self.log.parent.mkdir(parents=True, exist_ok=True)
        command = [sys.executable, "-m", "cli.main", "--config", str(self.cfg.path), "replicate"]
        args = ["--source", self.ds, "--tables", self.table, "--to", URL, "--name", NAME]
        self.argv = [*command, *args, "--until-idle", str(IDLE_S)]
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(
                self.argv,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                cwd=Path(__file__).resolve().parent.parent,
            )

    def _alive(self) -> None:
        assert self.proc is not None
        if self.proc.poll() is not None:
            tail = self.log.read_text(errors="replace")[-2000:]
            msg = f"dbus replicate exited with {self.proc.returncode}; the end of {self.log}:\n{tail}"
            raise RuntimeError(msg)

    def mode(self) -> str | None:
        engine = sa.create_engine(URL)
        try:
            with engine.connect() as conn:
                text = conn.execute(
                    sa.text("SELECT checkpoint FROM dbus_client_checkpoint WHERE name = :n"), {"n": NAME}
                ).scalar()
        except sa.exc.SQLAlchemyError:
            return None  # the database or the table is not there yet
        finally:
            engine.dispose()
        return None if text is None else str(json.loads(text)["mode"])

    def wait_online(self, stages: Stages, timeout: float = 600) -> str:
        """Until the bootstrap ended (checkpoint ONLINE), with the stages still running."""
        deadline = time.monotonic() + timeout
        while self.mode() != "ONLINE":
            stages.check_alive()
            self._alive()
            if time.monotonic() > deadline:
                msg = f"dbus replicate of {self.table} not online after {timeout:.0f}s; see {self.log}"
                raise TimeoutError(msg)
            time.sleep(0.5)
        # every row change is in the result topic by now (the demo's step 4): a replicate that already
        # exited went idle while the stages still wrote (a stall of IDLE_S, e.g. on a busy machine)
        self.exited_early = self.proc is not None and self.proc.poll() is not None
        return "online: the bootstrap (its own full pull, merged with the increments) ended"

    def finish_and_verify(self, timeout: float = 300) -> bool:
        """Wait for the replicate's exit (idle: it read everything), then verify the replica."""
        from fullpuller import verify

        assert self.proc is not None
        summary = self._summary(self.proc.wait(timeout))
        if self.exited_early:
            print(
                f"   dbus replicate went idle for {IDLE_S}s before every change was written "
                f"({summary['upserts']} upserts): run again, it resumes at its checkpoint"
            )
            with self.log.open("ab") as out:
                rc = subprocess.run(
                    self.argv,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    timeout=timeout,
                    check=False,
                    cwd=Path(__file__).resolve().parent.parent,
                ).returncode
            more = self._summary(rc)
            summary = {k: summary[k] + more[k] for k in ("windows", "upserts", "deletes")}
        print(
            f"   dbus replicate: {summary['windows']} windows, {summary['upserts']} upserts, "
            f"{summary['deletes']} deletes into {DATABASE}.{self.table.split('.')[1]} (PostgreSQL)"
        )
        schema, table = self.table.split(".")
        comparison = verify.verify(self.cfg, self.ds, schema, table, replica=URL)
        for line in verify.report(comparison, self.table):
            print(f"   verify --replica: {line}")
        return comparison.equal

    def _summary(self, rc: int) -> dict[str, Any]:
        """The summary line a replicate run that exited with ``rc`` ended its log with; RuntimeError
        when it failed."""
        lines = self.log.read_text(errors="replace").strip().splitlines()
        if rc != 0 or not lines:
            msg = f"dbus replicate exited with {rc}; see {self.log}"
            raise RuntimeError(msg)
        return dict(json.loads(lines[-1]))

    def stop(self) -> None:
        """On a failure: the process group, if it still runs (SIGTERM, SIGKILL after 30 s)."""
        if self.proc is not None and self.proc.poll() is None:
            stop_group(self.proc, timeout=30)
