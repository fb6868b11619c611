"""The ``dbus`` command.

Usage: dbus [--config conf/dbus.yaml] <command> [...]   (every command has --help)

The configuration file: ``--config FILE``, else ``$DBUS_CONFIG``, else ``./conf/dbus.yaml``, else the source
checkout's conf/dbus.yaml (``dbuslib.config.find_config``); ``dbus config sample`` prints a sample.

The stages add their own commands (``add_parsers`` in extractor/, appender/, fullpuller/ and heartbeat/
``commands.py``); this module only assembles them.

Exit codes (``dbuslib.errors.exit_code``, docs/errors.md): 0 success, 1 a check failed (e.g. a server is
down), 2 bad configuration or arguments, 3 an endpoint could not be reached, 7 the command needs the
server extra, which is not installed (cli/extras.py: every command but those marked ``without_server``).
"""

from __future__ import annotations

import argparse
import logging
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from cli import extras
from dbuslib.config import CONFIG_HELP, SAMPLE_CONFIG, DbusConfig, find_config, load_config
from dbuslib.errors import ConfigError, DbusError, StackError, report
from dbuslib.logs import setup_logging
from ums.errors import UmsError

REPO = Path(__file__).resolve().parent.parent
STACK_SH = REPO / "stack" / "stack.sh"
log = logging.getLogger(__name__)


def _stack(args: argparse.Namespace) -> int:
    if not STACK_SH.is_file():
        msg = (
            f"dbus stack needs a source checkout: {STACK_SH} is not there (this dbus is installed from a "
            "package); in a clone of the repository, `make stack-up` starts the local stack"
        )
        raise StackError(msg)
    return subprocess.call(["bash", str(STACK_SH), args.action, *args.services])


def _config_sample(args: argparse.Namespace) -> int:
    sys.stdout.write(SAMPLE_CONFIG.read_text(encoding="utf-8"))
    return 0


def _jvm_build(args: argparse.Namespace) -> int:
    from binlog import jvmjar

    print(jvmjar.build(Path(args.out), Path(args.kafka_jars) if args.kafka_jars else None))
    return 0


def _config_check(args: argparse.Namespace) -> int:
    from dbuslib import kafka, topics

    cfg = _load(args)
    kafka.check_client_extras(cfg.endpoints.kafka)  # kafka-python's options: not known at load
    print(f"{cfg.path}: valid")
    for name, src in sorted(cfg.sources.items()):
        print(
            f"  source {name}: {src.type} {src.mysql.host}:{src.mysql.port}, "
            f"include {list(src.capture.include)}, exclude {list(src.capture.exclude)}, "
            f"{sum(len(c) for c in src.masking.values())} masked column(s)"
        )
        print(f"    appender: {topics.describe_subscription(cfg, name)}")
        print(f"    appender: {topics.describe_outputs(name, src)}")
        if pattern := topics.appender_subscription(cfg, name).pattern:
            print(f"    appender's topic pattern: {pattern}")
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
    """One argument per line, for ``mapfile -t``: a word may hold spaces (``-XX:... -XX:...``)."""
    from cli import sparkjars
    from dbuslib import ship, spark

    cfg = _load(args)
    sparkjars.ensure(cfg)
    if args.stage:
        from cli import submit

        if not args.source:
            msg = "dbus spark args: --stage needs --source"
            raise ConfigError(msg)
        tasks = submit.stage_tasks(cfg, args.stage, args.source)
        argv = spark.submit_args(cfg, args.stage, tasks, py_files=str(ship.code_zip()))
    else:
        argv = spark.submit_args(cfg)
    print("\n".join(argv))
    return 0


def _spark_cds(args: argparse.Namespace) -> int:
    from cli import sparkjars
    from dbuslib import sparkcds

    cfg = _load(args)
    sparkjars.ensure(cfg)
    if not cfg.spark.class_data_sharing:
        print("dbus spark cds: spark.class_data_sharing is off: no archive made", file=sys.stderr)
        return 0
    for path in sparkcds.build(cfg, say=sparkjars.tell):
        print(path)
    return 0


def _spark_jars(args: argparse.Namespace) -> int:
    from cli import sparkjars

    print(",".join(sparkjars.ensure(_load(args))))
    return 0


def _submit(args: argparse.Namespace) -> int:
    from cli import submit

    return submit.run(_load(args), args)


def _demo(args: argparse.Namespace) -> int:
    from cli import demo

    return demo.run(_load(args), args.source)


def _load(args: argparse.Namespace) -> DbusConfig:
    return load_config(args.config)


_WITHOUT_CONFIG = {_stack, _config_sample, _jvm_build}  # commands that run without a configuration file
# commands that run on the base install, the consumer client's, without the server extra (cli/extras.py);
# a handler elsewhere says so with ``handler.without_server = True`` (dbus replicate)
_WITHOUT_SERVER = {_stack, _config_sample, _config_check, _topics_create, _topics_list}


Handler = Callable[[argparse.Namespace], int]


def without_server(handler: Handler) -> bool:
    """Whether the command of ``handler`` runs on the base install, without the server extra."""
    return handler in _WITHOUT_SERVER or getattr(handler, "without_server", False)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="dbus", description="DBus: MySQL/MariaDB binlog -> Kafka UMS, on Spark.")
    p.add_argument("--config", help=CONFIG_HELP)
    p.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    servers = (
        "MariaDB, PostgreSQL, ZooKeeper, Kafka, the schema registry, rsyslog, InfluxDB, Prometheus, "
        "Spark jars"
    )
    st = sub.add_parser("stack", help=f"the local stack: {servers}")
    st.add_argument("action", choices=["up", "down", "status", "install"], help="what to do")
    st.add_argument(
        "services",
        nargs="*",
        help="only these (mariadb postgresql zookeeper kafka registry rsyslog influxdb prometheus spark "
        "connect)",
    )
    st.set_defaults(handler=_stack)

    cf = sub.add_parser("config", help="configuration").add_subparsers(dest="action", required=True)
    cf.add_parser("check", help="load and validate the configuration, print a summary").set_defaults(
        handler=_config_check
    )
    cf.add_parser(
        "sample", help="print a sample configuration (the local stack's), to start one from"
    ).set_defaults(handler=_config_sample)

    jv = sub.add_parser("jvm", help="the JVM decoder (binlog/jvm)").add_subparsers(
        dest="action", required=True
    )
    jb = jv.add_parser(
        "build",
        help="compile the JVM decoder's jar from the installed sources (needs a JDK 17)",
        description="Compile the JVM decoder (dbus.jvm.*) into JAR, for spark.jars; nothing is done when "
        "JAR is newer than every source. The local stack builds its own (make stack-up).",
    )
    jb.add_argument("--out", required=True, metavar="JAR", help="the jar to write, e.g. ~/.dbus/dbus-jvm.jar")
    jb.add_argument(
        "--kafka-jars",
        metavar="DIR",
        help="a folder holding the kafka-clients jar of Spark's Kafka connector (the appender's own producer "
        "is compiled against it; default: spark/ beside JAR, where the local stack keeps it)",
    )
    jb.set_defaults(handler=_jvm_build)

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
    sa = sp.add_parser(
        "args",
        help="print the spark-submit arguments (master, connector jars, conf), one per line",
        description="Print spark-submit's arguments, one per line: mapfile -t args < <(dbus spark args)",
    )
    sa.add_argument("--stage", choices=["dispatcher", "appender", "fullpuller"], help="with a stage's sizing")
    sa.add_argument("--source", help="the source whose stage (with --stage)")
    sa.set_defaults(handler=_spark_args)
    sj = sp.add_parser(
        "jars",
        help="make the jars of the Spark stages ready and print them (without spark.jars_file: Spark's "
        "connectors resolved into the user cache, DBus's JVM jar built beside them)",
        description="Print the Spark stages' jars, comma-separated; when spark.jars_file does not exist, "
        "resolve Spark's connectors (Apache Ivy, Maven Central) into $DBUS_CACHE or ~/.cache/dbus and "
        "build DBus's JVM jar (a JDK 17) first, once",
    )
    sj.set_defaults(handler=_spark_jars)
    sc = sp.add_parser(
        "cds",
        help="make the Spark drivers' class archives (once; a stage then starts in about half the time)",
        description="Make the archive of the classes a Spark stage's driver loads, for each set of JVM "
        "options the configured stages use, beside the stages' jars, and print their paths; an archive that "
        "exists is kept (docs/performance.md, Spark's start)",
    )
    sc.set_defaults(handler=_spark_cds)

    from cli import submit

    submit.add_parser(sub).set_defaults(handler=_submit)

    from appender import commands as appender_commands
    from cli import logrules, logs, metrics, replicate, status, zookeeper
    from extractor import commands as extractor_commands
    from fullpuller import commands as fullpuller_commands
    from heartbeat import commands as heartbeat_commands

    extractor_commands.add_parsers(sub)  # extractor run|status|reset
    appender_commands.add_parsers(sub)  # reload
    fullpuller_commands.add_parsers(sub)  # fullpull request|status, reconcile, verify
    heartbeat_commands.add_parsers(sub)  # heartbeat run|monitor
    status.add_parsers(sub)  # status --source DS
    logs.add_parsers(sub)  # logs shipper-conf
    logrules.add_parsers(sub)  # logrules tables|add-table|import|export|show|group|test|publish|reload
    replicate.add_parsers(sub)  # replicate (the consumer client into MariaDB/PostgreSQL)
    metrics.add_parsers(sub)  # metrics exporter (Prometheus)
    zookeeper.add_parsers(sub)  # zookeeper secure (ACLs of nodes made before auth)

    from console import commands as console_commands

    console_commands.add_parsers(sub)  # console [hash-password] (the web console)

    dm = sub.add_parser("demo", help="run the demo on the local stack (make demo)")
    dm.add_argument("--source", default="demo", help="source name (default: %(default)s)")
    dm.set_defaults(handler=_demo)
    return p


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    passed: list[str] = []  # after "--": spark-submit's own arguments (dbus submit)
    if "--" in argv:
        argv, passed = argv[: argv.index("--")], argv[argv.index("--") + 1 :]
    parser = _parser()
    args = parser.parse_args(argv)
    if passed and args.command != "submit":
        parser.error(f"arguments after -- are for dbus submit only: {' '.join(passed)}")
    args.spark_args = passed
    setup_logging(verbose=args.verbose)
    handler: Handler = args.handler
    try:
        if not without_server(handler):
            extras.check(args.command)
        needs_config = handler not in _WITHOUT_CONFIG and not getattr(handler, "without_config", False)
        if args.config is None and needs_config:  # each command gets the file's path
            args.config = str(find_config(None))
        return handler(args)
    except (DbusError, UmsError) as e:
        return report("dbus", e)
    except ModuleNotFoundError as e:  # a command marked without_server that needed the extra after all
        missing = extras.explain(args.command, e)
        if missing is None:
            raise
        return report("dbus", missing)


if __name__ == "__main__":
    sys.exit(main())
