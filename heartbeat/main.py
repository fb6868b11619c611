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

from dbuslib.config import CONFIG_HELP, DbusConfig, load_config
from dbuslib.errors import DbusError, report
from dbuslib.lifecycle import Lifecycle
from dbuslib.logs import setup_logging


def run(cfg: DbusConfig, ds: str, monitor: bool = True) -> int:
    """Write heartbeats (and, with ``monitor``, run the monitor on a thread) until stopped."""
    from heartbeat.monitor import Monitor
    from heartbeat.writer import HeartbeatWriter

    if ds in cfg.log_sources and ds not in cfg.sources:
        return run_log(cfg, ds, monitor)
    cfg.source(ds)  # ConfigError before any connection
    writer = HeartbeatWriter(cfg, ds)
    watcher = Monitor(cfg, ds) if monitor else None
    thread = None
    if watcher is not None:
        thread = threading.Thread(target=watcher.run, name=f"heartbeat-monitor-{ds}", daemon=True)
        thread.start()

    def stop() -> None:
        writer.stop()
        if watcher is not None:
            watcher.stop()

    # SIGTERM/SIGINT, a removed config file; the process announced while it runs (dbuslib/liveness.py)
    zookeeper = cfg.endpoints.zookeeper
    with Lifecycle("heartbeat", ds, cfg.path, zookeeper=zookeeper) as life:
        life.on_stop(stop)
        try:
            writer.run()
        finally:
            stop()
            if thread is not None:
                thread.join(10)
    return life.code


def run_log(cfg: DbusConfig, ds: str, monitor: bool = True) -> int:
    """A log source's heartbeat lines (heartbeat/logbeats.py) until stopped, and with ``monitor`` the
    monitor on a thread (per host and table, heartbeat/logmonitor.py); no leader election: every writer
    appends to its own host's file."""
    from heartbeat.logbeats import LogHeartbeatWriter
    from heartbeat.monitor import Monitor

    writer = LogHeartbeatWriter(cfg, ds)  # ConfigError when heartbeat.file is not set
    watcher = Monitor(cfg, ds) if monitor else None
    thread = None
    if watcher is not None:
        thread = threading.Thread(target=watcher.run, name=f"heartbeat-monitor-{ds}", daemon=True)
        thread.start()

    def stop() -> None:
        writer.stop()
        if watcher is not None:
            watcher.stop()

    with Lifecycle("heartbeat", ds, cfg.path, zookeeper=cfg.endpoints.zookeeper) as life:
        life.on_stop(stop)
        try:
            writer.run()
        finally:
            stop()
            if thread is not None:
                thread.join(10)
    return life.code


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

    p = argparse.ArgumentParser(prog="heartbeat", description=__doc__.splitlines()[0])
    p.add_argument("--config", help=CONFIG_HELP)
    commands.add_actions(p.add_subparsers(dest="action", required=True, metavar="COMMAND"))
    return p


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    setup_logging()
    try:
        cfg = load_config(args.config)
        if args.action == "run":
            return run(cfg, args.source, monitor=not args.no_monitor)
        return monitor(cfg, args.source)
    except DbusError as e:
        return report("heartbeat", e)


if __name__ == "__main__":
    sys.exit(main())
