"""The heartbeat: a writer of heartbeat rows at the source (one leads per source) and the monitor that
alerts on stale or slow tables (docs/monitoring.md).

Usage: python -m heartbeat [--config conf/dbus.yaml] run --source demo [--no-monitor]
       python -m heartbeat [--config conf/dbus.yaml] run --source applog [--no-monitor]
           (a log source: heartbeat lines to its heartbeat.file, and the monitor per host and table)
       python -m heartbeat [--config conf/dbus.yaml] monitor --source demo|applog
(also ``dbus heartbeat run|monitor``, heartbeat/commands.py).

Exit codes (``dbuslib.errors.exit_code``, docs/errors.md): 0 stopped cleanly (SIGTERM/SIGINT); 2 bad
configuration; 3 ZooKeeper or the source unreachable; 6 its configuration file was removed
(dbuslib/lifecycle.py).
"""

from __future__ import annotations

import argparse
import sys
import threading
from collections.abc import Callable
from typing import Any

from dbuslib import stagemain
from dbuslib.config import DbusConfig
from dbuslib.errors import DbusError
from dbuslib.lifecycle import Lifecycle


class _MonitorThread:
    """The monitor beside a writer, on a thread: an error no later check can mend (not ``retriable``: Kafka
    refused DBus's identity) stops the writer too, and ``join`` raises it in the main thread, so the
    process ends with its code instead of writing heartbeats nobody checks."""

    def __init__(self, watcher: Any, ds: str, stop: Callable[[], None]) -> None:
        self.watcher, self.stop = watcher, stop
        self.error: DbusError | None = None
        self.thread = threading.Thread(target=self._run, name=f"heartbeat-monitor-{ds}", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            self.watcher.run()
        except DbusError as e:
            self.error = e
            self.stop()

    def join(self) -> None:
        self.thread.join(10)
        if self.error is not None:
            raise self.error


def _run_with_monitor(ds: str, writer: Any, watcher: Any, cfg: DbusConfig) -> int:
    """``writer`` until stopped, with ``watcher`` (the monitor, or None) on a thread beside it."""

    def stop() -> None:
        writer.stop()
        if watcher is not None:
            watcher.stop()

    beside = _MonitorThread(watcher, ds, stop) if watcher is not None else None
    # SIGTERM/SIGINT, a removed config file; the process announced while it runs (dbuslib/liveness.py)
    with Lifecycle("heartbeat", ds, cfg.path, zookeeper=cfg.endpoints.zookeeper) as life:
        life.on_stop(stop)
        try:
            writer.run()
        finally:
            stop()
            if beside is not None:
                beside.join()
    return life.code


def run(cfg: DbusConfig, ds: str, monitor: bool = True) -> int:
    """Write heartbeats (and, with ``monitor``, run the monitor on a thread) until stopped."""
    from heartbeat.monitor import Monitor
    from heartbeat.writer import HeartbeatWriter

    if ds in cfg.log_sources and ds not in cfg.sources:
        return run_log(cfg, ds, monitor)
    cfg.source(ds)  # ConfigError before any connection
    writer = HeartbeatWriter(cfg, ds)
    return _run_with_monitor(ds, writer, Monitor(cfg, ds) if monitor else None, cfg)


def run_log(cfg: DbusConfig, ds: str, monitor: bool = True) -> int:
    """A log source's heartbeat lines (heartbeat/logbeats.py) until stopped, and with ``monitor`` the
    monitor on a thread (per host and table, heartbeat/logmonitor.py); no leader election: every writer
    appends to its own host's file."""
    from heartbeat.logbeats import LogHeartbeatWriter
    from heartbeat.monitor import Monitor

    writer = LogHeartbeatWriter(cfg, ds)  # ConfigError when heartbeat.file is not set
    return _run_with_monitor(ds, writer, Monitor(cfg, ds) if monitor else None, cfg)


def monitor(cfg: DbusConfig, ds: str) -> int:
    """Run the monitor only, until stopped (a database source or a log source)."""
    from heartbeat.deadletters import settings_of
    from heartbeat.monitor import Monitor

    settings_of(cfg, ds)  # ConfigError before any connection
    watcher = Monitor(cfg, ds)
    with Lifecycle("heartbeat", ds, cfg.path, zookeeper=cfg.endpoints.zookeeper) as life:
        life.on_stop(watcher.stop)
        watcher.run()
    return life.code


def _parser() -> argparse.ArgumentParser:
    from heartbeat import commands

    p = stagemain.parser("heartbeat", __doc__.splitlines()[0], source=None)
    commands.add_actions(p.add_subparsers(dest="action", required=True, metavar="COMMAND"))
    return p


def main(argv: list[str] | None = None) -> int:
    def body(cfg: DbusConfig, args: argparse.Namespace) -> int:
        if args.action == "run":
            return run(cfg, args.source, monitor=not args.no_monitor)
        return monitor(cfg, args.source)

    return stagemain.run("heartbeat", _parser(), argv, body)


if __name__ == "__main__":
    sys.exit(main())
