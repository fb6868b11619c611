"""What the integration tests share: one way to wait, the receivers an alert goes to, the heartbeat source.

- ``wait_until(check, timeout, what, alive=[stage])``: poll until ``check()`` is truthy and return its value;
  fails naming ``what`` and the timeout, or at once when a stage in ``alive`` has died.
- ``Receiver``: a webhook receiver (every POSTed JSON body, with the time it arrived).
- ``Mailbox``: a real SMTP server (aiosmtpd) on a free local port; ``messages`` holds what arrived.
- ``delete_zk_tree(endpoint, "Extractor", ds)``: a test's ZooKeeper subtree removed (gone already: fine).
- ``heartbeat_config(tmp_path, database, interval_s=1, ...)``: a throwaway source capturing ``database``,
  whose heartbeat table lives there too.

A test module never imports another test module: what two tests share lives here or in a named workload
module (every_type.py, dashboards.py).
"""

from __future__ import annotations

import json
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from email import message_from_bytes
from email.message import Message
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Protocol, TypeVar

import yaml
from aiosmtpd.controller import Controller
from kazoo.exceptions import NoNodeError

from dbuslib import zk
from dbuslib.config import DbusConfig, ZooKeeperEndpoint, load_config

T = TypeVar("T")
HB_TABLE = "db_heartbeat_monitor"


class Alive(Protocol):
    def check_alive(self) -> None:
        """Raise (naming the stage and its log) if the stage has exited."""


def wait_until(
    check: Callable[[], T], timeout: float, what: str, *, alive: Iterable[Alive] = (), interval: float = 0.2
) -> T:
    """Poll ``check()`` until it returns a truthy value and return that value.

    Between polls it sleeps ``interval`` or as long as the check itself took, whichever is longer, so a
    check that reads a whole topic does not keep a core busy. Every stage in ``alive`` must still run.
    """
    deadline = time.monotonic() + timeout
    while True:
        began = time.monotonic()
        got = check()
        if got:
            return got
        for stage in alive:
            stage.check_alive()
        took = time.monotonic() - began
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout:g}s")
        time.sleep(max(interval, took))


class Receiver(ThreadingHTTPServer):
    """A webhook receiver on a free local port: every POSTed JSON body, with the time it arrived."""

    def __init__(self) -> None:
        self.bodies: list[tuple[float, dict]] = []
        bodies = self.bodies

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                bodies.append((time.time(), json.loads(body)))
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        super().__init__(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.serve_forever, daemon=True).start()

    @property
    def port(self) -> int:
        return self.server_address[1]

    @property
    def hooks(self) -> list[dict]:
        return [b for _, b in self.bodies]

    def events(self, kind: str) -> list[tuple[float, dict]]:
        return [(t, b) for t, b in self.bodies if b.get("event") == kind]

    def close(self) -> None:
        self.shutdown()
        self.server_close()


class Mailbox:
    """A real SMTP server (aiosmtpd) on a free local port; ``messages`` holds each mail it accepted."""

    def __init__(self) -> None:
        self.messages: list[Message] = []
        messages = self.messages

        class Handler:
            async def handle_DATA(self, server, session, envelope) -> str:
                messages.append(message_from_bytes(envelope.original_content))
                return "250 Message accepted for delivery"

        with socket.socket() as probe:  # a free port: the controller checks its own start by connecting
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.controller = Controller(Handler(), hostname="127.0.0.1", port=self.port)
        self.controller.start()

    def close(self) -> None:
        self.controller.stop()


def heartbeat_config(tmp_path, database: str, **heartbeat: Any) -> tuple[str, DbusConfig]:
    """A throwaway source capturing only ``database``, whose heartbeat table lives in that database too."""
    from extractor_env import make_env  # extractor_env uses this module

    env = make_env(tmp_path, database)
    raw = yaml.safe_load(env.cfg_path.read_text())
    raw["sources"][env.ds]["heartbeat"] = {"schema": database, "table": HB_TABLE, **heartbeat}
    env.cfg_path.write_text(yaml.safe_dump(raw))
    return env.ds, load_config(env.cfg_path)


def delete_zk_tree(endpoint: ZooKeeperEndpoint, *parts: str) -> None:
    """Remove ``zk.path(endpoint, *parts)`` and everything below it, with a client of its own."""
    client = zk.client(endpoint)
    try:
        client.delete(zk.path(endpoint, *parts), recursive=True)
    except NoNodeError:
        pass
    finally:
        client.stop()
        client.close()


def untrusted_ca(folder: Path) -> Path:
    """A CA of its own (not the stack's), made with openssl in ``folder``: no server of the stack has a
    certificate it signed."""
    import subprocess

    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1"]
        + [
            "-subj",
            "/CN=not the stack",
            "-keyout",
            str(folder / "other-ca.key"),
            "-out",
            str(folder / "other-ca.pem"),
        ],
        check=True,
        capture_output=True,
    )
    return folder / "other-ca.pem"


def forget_dead_letters(cfg: DbusConfig, ds: str) -> None:
    """What counting ``ds``'s dead letters left: the monitor's consumer group and the points it wrote."""
    from dbuslib import influx, kafka
    from heartbeat import deadletters

    admin = kafka.admin(cfg.endpoints.kafka)
    try:
        admin.delete_groups([deadletters.group_id(ds)])
    except Exception:
        pass
    finally:
        admin.close()
    if cfg.endpoints.influxdb.url is None:
        return  # on Prometheus alone: a throwaway source's series expire from the exporter by themselves
    for measurement in (deadletters.MEASUREMENT, "dbus_alert"):
        influx.influxql(cfg.endpoints.influxdb, f'DROP SERIES FROM "{measurement}" WHERE "ds" = \'{ds}\'')


@contextmanager
def metrics_exporter(cfg: DbusConfig, log: Path) -> Iterator[subprocess.Popen | None]:
    """``dbus metrics exporter`` on ``prometheus.listen`` while the block runs, when the configuration has
    no InfluxDB (the exporter is then where every point goes, and Prometheus where they are read back);
    None otherwise. Waits until it answers ``/ping``."""
    import sys
    import urllib.request

    if cfg.endpoints.influxdb.url is not None or not cfg.endpoints.influxdb.exporter:
        yield None
        return
    url = f"{cfg.endpoints.influxdb.exporter.rstrip('/')}/ping"
    with log.open("ab") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "cli.main", "--config", str(cfg.path), "metrics", "exporter"],
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def answers() -> bool:
        try:
            with urllib.request.urlopen(url, timeout=2) as resp:
                return resp.status == 204
        except OSError:
            return False

    try:
        wait_until(
            lambda: proc.poll() is None and answers(), 30, f"dbus metrics exporter at {url} (log {log})"
        )
        yield proc
    finally:
        proc.terminate()
        proc.wait(30)


def spark_app_config(tmp_path: Path, change: Callable[[dict[str, Any]], None]) -> Path:
    """The active configuration ($DBUS_CONFIG, else conf/dbus.yaml) with its Spark jars, ``change`` applied
    to its raw dict, written to ``tmp_path/dbus.yaml``: for a test that runs a small application with
    spark-submit."""
    from dbuslib.config import raw_config

    active = load_config()
    raw = raw_config(active.path)
    raw.setdefault("spark", {})["jars_file"] = str(active.resolve(active.spark.jars_file))  # a default too
    change(raw)
    path = tmp_path / "dbus.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def spark_submit_env() -> dict[str, str]:
    """spark-submit's environment for such an application: the driver and its workers run this Python."""
    import os
    import sys

    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    env["PATH"] = f"{os.path.dirname(sys.executable)}:{env['PATH']}"
    return env


def refused_run(
    cfg_path: Path, args: list[str], case: str, env: dict[str, str] | None = None
) -> tuple[subprocess.CompletedProcess, str]:
    """``dbus --config cfg_path <args>`` as a user runs it (``env`` added to the environment), for a stage
    that must stop at once: asserts exit 3 and prints the time it took; returns the process and its last
    line on stderr."""
    import os
    import sys

    started = time.monotonic()
    done = subprocess.run(
        [str(Path(sys.executable).with_name("dbus")), "--config", str(cfg_path), *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=Path(__file__).resolve().parents[2],
        env={**os.environ, **(env or {})},
        check=False,
    )
    took = time.monotonic() - started
    last = done.stderr.strip().splitlines()[-1] if done.stderr.strip() else ""
    print(f"\n{case}: dbus {' '.join(args[:2])}: exit {done.returncode} after {took:.1f} s: {last}")
    assert done.returncode == 3, done.stdout[-2000:] + done.stderr[-3000:]
    return done, last
