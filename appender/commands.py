"""``dbus reload`` (registered by cli/main.py through ``add_parsers``): apply changed masking rules to a
running appender without a restart.

    dbus reload --source demo [--wait SECONDS] [--reason TEXT]

The file is validated first (a bad one exits 2 and nothing is sent), then ``APPENDER_RELOAD_CONFIG`` goes
to ``<ds>_ctrl``; with ``--wait`` the appender's answer decides: 0 applied, 2 rejected, 1 no answer
(appender/rules.py).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any


def add_parsers(sub: Any) -> None:
    rl = sub.add_parser(
        "reload",
        help="apply changed masking rules to a running appender (APPENDER_RELOAD_CONFIG)",
        description="Validate the configuration file, then send APPENDER_RELOAD_CONFIG on the "
        "source's control topic (<ds>_ctrl) and print the message id. The running appender "
        "re-reads its own configuration file and applies the new masking rules from its next "
        "micro-batch, without a restart. A bad file is an error here (exit 2, nothing is "
        "sent) and is refused by the appender (the old rules stay).",
    )
    rl.add_argument("--source", required=True, help="source name under 'sources'")
    rl.add_argument(
        "--config",
        default=argparse.SUPPRESS,
        help="configuration file to validate (default: the global --config)",
    )
    rl.add_argument(
        "--wait",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="wait up to SECONDS for the appender's answer: exit 0 applied, 2 rejected, 1 no answer",
    )
    rl.add_argument("--reason", help="free text carried in the message payload")
    rl.set_defaults(handler=reload_cli)


def reload_cli(args: argparse.Namespace) -> int:
    """Validate the file, then ask the appender of the source to reload it (APPENDER_RELOAD_CONFIG)."""
    import time

    from appender import rules
    from dbuslib import kafka, zk
    from ums.control import ControlType, new_control_message

    cfg, masking = rules.load_rules(args.config, args.source)  # ConfigError (exit 2): nothing is sent
    src = cfg.source(args.source)
    topic = src.topics.name("ctrl", args.source)
    message = new_control_message(
        ControlType.APPENDER_RELOAD_CONFIG,
        "dbus-cli-reload",
        {"ds": args.source, "reason": args.reason or "dbus reload"},
    )
    kafka.send_control(cfg.endpoints.kafka, topic, message)
    print(
        f"{message.id}\tAPPENDER_RELOAD_CONFIG sent to {topic} "
        f"({sum(len(c) for c in masking.values())} masked column(s) in {cfg.path})"
    )
    if args.wait <= 0:
        return 0
    client = zk.client(cfg.endpoints.zookeeper)
    try:
        deadline = time.monotonic() + args.wait
        while time.monotonic() < deadline:
            reply = rules.read_reply(client, cfg, args.source)
            if reply is not None and reply.get("request_id") == message.id:
                if reply.get("status") == "applied":
                    print(f"{message.id}\tapplied: rules generation {reply.get('generation')}")
                    return 0
                print(
                    f"dbus: {reply.get('code')}: the appender rejected the reload, rules generation "
                    f"{reply.get('generation')} stay: {reply.get('reason')}",
                    file=sys.stderr,
                )
                return 2
            time.sleep(0.5)
    finally:
        client.stop()
        client.close()
    print(
        f"dbus: no answer from the appender of {args.source} within {args.wait:g}s "
        f"(is it running? it reads {topic})",
        file=sys.stderr,
    )
    return 1
