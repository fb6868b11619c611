"""The ``dbus`` command.

Usage: dbus [--config conf/dbus.yaml] <command> [...]   (every command has --help)

Exit codes: 0 success, 1 a check failed (e.g. a server is down), 2 bad configuration or arguments,
3 an endpoint could not be reached.
"""

from __future__ import annotations

import argparse
import logging
import shlex
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from dbuslib.config import DEFAULT_CONFIG, DbusConfig, load_config
from dbuslib.errors import ConfigError, DbusError, EndpointError

REPO = Path(__file__).resolve().parent.parent
STACK_SH = REPO / "stack" / "stack.sh"
log = logging.getLogger("dbus")


def _stack(args: argparse.Namespace) -> int:
    return subprocess.call(["bash", str(STACK_SH), args.action, *args.services])


def _config_check(args: argparse.Namespace) -> int:
    cfg = _load(args)
    print(f"{cfg.path}: valid")
    for name, src in sorted(cfg.sources.items()):
        print(
            f"  source {name}: {src.type} {src.mysql.host}:{src.mysql.port}, "
            f"include {list(src.capture.include)}, exclude {list(src.capture.exclude)}, "
            f"{sum(len(c) for c in src.masking.values())} masked column(s)"
        )
    return 0


def _topics_create(args: argparse.Namespace) -> int:
    from dbuslib import kafka, topics

    cfg = _load(args)
    src = cfg.source(args.source)
    names = topics.source_topics(args.source, src, args.schema or None)
    created = kafka.ensure_topics(
        cfg.endpoints.kafka, names, src.topics.partitions, src.topics.replication_factor
    )
    for name in names:
        print(f"{name}\t{'created' if name in created else 'exists'}")
    return 0


def _topics_list(args: argparse.Namespace) -> int:
    from dbuslib import kafka

    client = kafka.admin(_load(args).endpoints.kafka)
    try:
        for name in sorted(client.list_topics()):
            print(name)
    finally:
        client.close()
    return 0


def _spark_args(args: argparse.Namespace) -> int:
    from dbuslib import spark

    print(shlex.join(spark.submit_args(_load(args))))
    return 0


def _demo(args: argparse.Namespace) -> int:
    from cli import demo

    return demo.run(_load(args), args.source)


def _extractor(args: argparse.Namespace) -> int:
    from extractor.main import main as extractor_main

    return extractor_main(["--config", args.config, *args.rest])


def _reload(args: argparse.Namespace) -> int:
    """Validate the file, then ask the appender of the source to reload it (APPENDER_RELOAD_CONFIG)."""
    import time

    from appender import rules
    from dbuslib import kafka, zk
    from ums.control import ControlType, control_key, new_control_message, to_json

    cfg, masking = rules.load_rules(args.config, args.source)  # ConfigError (exit 2): nothing is sent
    src = cfg.source(args.source)
    topic = src.topics.name("ctrl", args.source)
    message = new_control_message(
        ControlType.APPENDER_RELOAD_CONFIG,
        "dbus-cli-reload",
        {"ds": args.source, "reason": args.reason or "dbus reload"},
    )
    producer = kafka.producer(cfg.endpoints.kafka, max_block_ms=15_000)
    try:
        producer.send(topic, key=control_key(message).encode(), value=to_json(message).encode()).get(30)
    except Exception as e:
        msg = f"could not send APPENDER_RELOAD_CONFIG to {topic} on {cfg.endpoints.kafka.bootstrap_servers}: {e}"
        raise EndpointError(msg) from e
    finally:
        producer.close()
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


def _load(args: argparse.Namespace) -> DbusConfig:
    return load_config(args.config)


Handler = Callable[[argparse.Namespace], int]


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="dbus", description="DBus: MySQL/MariaDB binlog -> Kafka UMS, on Spark.")
    p.add_argument("--config", default=str(DEFAULT_CONFIG), help="configuration file (default: %(default)s)")
    p.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    st = sub.add_parser("stack", help="the local stack: MariaDB, ZooKeeper, Kafka, InfluxDB, Spark jars")
    st.add_argument("action", choices=["up", "down", "status", "install"], help="what to do")
    st.add_argument("services", nargs="*", help="only these (mariadb zookeeper kafka influxdb spark)")
    st.set_defaults(handler=_stack)

    cf = sub.add_parser("config", help="configuration").add_subparsers(dest="action", required=True)
    cf.add_parser("check", help="load and validate the configuration, print a summary").set_defaults(
        handler=_config_check
    )

    tp = sub.add_parser("topics", help="Kafka topics").add_subparsers(dest="action", required=True)
    tc = tp.add_parser("create", help="create a source's topics (auto-creation is off)")
    tc.add_argument("--source", required=True, help="source name under 'sources'")
    tc.add_argument(
        "--schema",
        action="append",
        help="schema to create topics for (repeatable; "
        "default: every schema named literally in capture.include)",
    )
    tc.set_defaults(handler=_topics_create)
    tp.add_parser("list", help="list the broker's topics").set_defaults(handler=_topics_list)

    sp = sub.add_parser("spark", help="Spark helpers").add_subparsers(dest="action", required=True)
    sp.add_parser(
        "args", help="print the spark-submit arguments (master, connector jars, conf)"
    ).set_defaults(handler=_spark_args)

    ex = sub.add_parser("extractor", add_help=False, help="binlog reader: run | status | reset (see --help)")
    ex.add_argument("rest", nargs=argparse.REMAINDER)
    ex.set_defaults(handler=_extractor)

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
    rl.set_defaults(handler=_reload)

    from fullpuller import cli as fullpull_cli

    fullpull_cli.add_parsers(sub)  # fullpull request|status, reconcile, verify

    from cli import status
    from heartbeat import cli as heartbeat_cli

    heartbeat_cli.add_parsers(sub)  # heartbeat run|monitor
    status.add_parsers(sub)  # status --source DS

    dm = sub.add_parser("demo", help="run the demo on the local stack (make demo)")
    dm.add_argument("--source", default="demo", help="source name (default: %(default)s)")
    dm.set_defaults(handler=_demo)
    return p


EXIT_CODES: dict[type[DbusError], int] = {ConfigError: 2, EndpointError: 3}


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    if not args.verbose:
        for noisy in ("kafka", "kazoo", "py4j", "pymysqlreplication"):
            logging.getLogger(noisy).setLevel(logging.WARNING)
    handler: Handler = args.handler
    try:
        return handler(args)
    except DbusError as e:
        print(f"dbus: {e.code}: {e}", file=sys.stderr)
        if e.exit_code is not None:
            return e.exit_code
        return next((c for t, c in EXIT_CODES.items() if isinstance(e, t)), 1)


if __name__ == "__main__":
    sys.exit(main())
