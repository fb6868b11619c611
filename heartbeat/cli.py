"""``dbus heartbeat run|monitor`` (registered by cli/main.py through ``add_parsers``).

    dbus heartbeat run --source demo [--no-monitor]    writer (one leads per source) + monitor thread
    dbus heartbeat monitor --source demo                the monitor only

Both run until SIGTERM or SIGINT and exit 0 (6 when their configuration file is removed,
dbuslib/lifecycle.py); a bad configuration exits 2 and an unreachable ZooKeeper 3 (cli/main.py maps the
errors).
"""

from __future__ import annotations

import argparse
import logging
import threading
from typing import Any

from dbuslib.lifecycle import Lifecycle

log = logging.getLogger(__name__)


def add_parsers(sub: Any) -> None:
    hb = sub.add_parser("heartbeat", help="heartbeat writer and monitor: run | monitor").add_subparsers(
        dest="action", required=True
    )
    config = argparse.ArgumentParser(add_help=False)  # --config also after the command
    config.add_argument("--config", default=argparse.SUPPRESS, help="configuration file")
    rn = hb.add_parser(
        "run",
        parents=[config],
        help="write heartbeat rows at the source (one writer leads per "
        "source, others wait) and run the monitor",
    )
    rn.add_argument("--source", required=True, help="source name under 'sources'")
    rn.add_argument("--no-monitor", action="store_true", help="write heartbeats only, no alerts")
    rn.set_defaults(handler=run_cli)
    mn = hb.add_parser(
        "monitor", parents=[config], help="alert on stale or slow tables (log, webhook, email)"
    )
    mn.add_argument("--source", required=True, help="source name under 'sources'")
    mn.set_defaults(handler=monitor_cli)


def run_cli(args: argparse.Namespace) -> int:
    from dbuslib.config import load_config
    from heartbeat.monitor import Monitor
    from heartbeat.writer import HeartbeatWriter

    cfg = load_config(args.config)
    cfg.source(args.source)  # ConfigError before any connection
    writer = HeartbeatWriter(cfg, args.source)
    monitor = None if args.no_monitor else Monitor(cfg, args.source)
    thread = None
    if monitor is not None:
        thread = threading.Thread(target=monitor.run, name=f"heartbeat-monitor-{args.source}", daemon=True)
        thread.start()

    def stop() -> None:
        writer.stop()
        if monitor is not None:
            monitor.stop()

    with Lifecycle("heartbeat", args.source, cfg.path) as life:  # SIGTERM/SIGINT, a removed config file
        life.on_stop(stop)
        try:
            writer.run()
        finally:
            stop()
            if thread is not None:
                thread.join(10)
    return life.code


def monitor_cli(args: argparse.Namespace) -> int:
    from dbuslib.config import load_config
    from heartbeat.monitor import Monitor

    cfg = load_config(args.config)
    cfg.source(args.source)
    monitor = Monitor(cfg, args.source)
    with Lifecycle("heartbeat", args.source, cfg.path) as life:
        life.on_stop(monitor.stop)
        monitor.run()
    return life.code
