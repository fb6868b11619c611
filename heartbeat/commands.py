"""``dbus heartbeat run|monitor`` (registered by cli/main.py through ``add_parsers``; the same commands as
``python -m heartbeat``, heartbeat/main.py).

    dbus heartbeat run --source demo [--no-monitor]    writer (one leads per source) + monitor thread
    dbus heartbeat run --source applog [--no-monitor]  a log source: heartbeat lines to its heartbeat.file
                                                       + monitor thread (per host and table)
    dbus heartbeat monitor --source demo|applog         the monitor only

Both run until SIGTERM or SIGINT and exit 0 (6 when their configuration file is removed,
dbuslib/lifecycle.py); a bad configuration exits 2 and an unreachable ZooKeeper 3
(``dbuslib.errors.exit_code``).
"""

from __future__ import annotations

import argparse
from typing import Any


def add_parsers(sub: Any) -> None:
    hb = sub.add_parser("heartbeat", help="heartbeat writer and monitor: run | monitor").add_subparsers(
        dest="action", required=True
    )
    add_actions(hb)


def add_actions(hb: Any) -> None:
    """``run`` and ``monitor`` under ``hb`` (``dbus heartbeat`` or ``python -m heartbeat``)."""
    config = argparse.ArgumentParser(add_help=False)  # --config also after the command
    config.add_argument("--config", default=argparse.SUPPRESS, help="configuration file")
    rn = hb.add_parser(
        "run",
        parents=[config],
        help="write heartbeat rows at the source (one writer leads per "
        "source, others wait) and run the monitor",
    )
    rn.add_argument(
        "--source",
        required=True,
        help="source name under 'sources', or under 'log_sources' (heartbeat lines to its heartbeat.file)",
    )
    rn.add_argument("--no-monitor", action="store_true", help="write heartbeats only, no alerts")
    rn.set_defaults(handler=run_cli)
    mn = hb.add_parser(
        "monitor", parents=[config], help="alert on stale or slow tables (log, webhook, email)"
    )
    mn.add_argument("--source", required=True, help="source name under 'sources' or 'log_sources'")
    mn.set_defaults(handler=monitor_cli)


def run_cli(args: argparse.Namespace) -> int:
    from dbuslib.config import load_config
    from heartbeat import main

    return main.run(load_config(args.config), args.source, monitor=not args.no_monitor)


def monitor_cli(args: argparse.Namespace) -> int:
    from dbuslib.config import load_config
    from heartbeat import main

    return main.monitor(load_config(args.config), args.source)
