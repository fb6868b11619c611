"""``dbus logs``: the log sources' commands that are not a stage's.

``dbus logs shipper-conf [--config PATH] [--work-dir DIR] [--log FILE] [--create-topics]`` prints the rsyslog
configuration that ships every log source's ``shipper.files`` to its raw topic (logprocessor/shipper.py,
docs/logs.md, The shipper); the local stack's rsyslog runs it (stack/services/rsyslog.sh).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

DEFAULT_WORK_DIR = "/var/spool/rsyslog/dbus"  # under the Debian package's own work directory


def add_parsers(sub: Any) -> None:
    lg = sub.add_parser("logs", help="log sources: the shipper's configuration").add_subparsers(
        dest="action", required=True
    )
    config = argparse.ArgumentParser(add_help=False)  # --config also after the command
    config.add_argument("--config", default=argparse.SUPPRESS, help="configuration file")
    sc = lg.add_parser(
        "shipper-conf",
        parents=[config],
        help="print the rsyslog configuration that ships the log sources' files to their raw topics",
        description="Print an rsyslog configuration for a private rsyslogd (rsyslogd -n -f FILE -i "
        "PIDFILE): imfile inputs for each log source's shipper.files, omkafka to its raw topic, one JSON "
        "record per line (docs/logs.md, The shipper).",
    )
    sc.add_argument(
        "--work-dir",
        default=DEFAULT_WORK_DIR,
        metavar="DIR",
        help="rsyslog's work directory: read positions, queues, failed and oversize lines; it must exist "
        "(default: %(default)s)",
    )
    sc.add_argument("--log", metavar="FILE", help="rsyslogd's own messages (default: DIR/rsyslogd.log)")
    sc.add_argument(
        "--create-topics",
        action="store_true",
        help="first create the raw topics that do not exist (Kafka must be up): rsyslog only writes",
    )
    sc.set_defaults(handler=shipper_conf)


def shipper_conf(args: argparse.Namespace) -> int:
    from dbuslib import kafka
    from dbuslib.config import load_config
    from logprocessor import shipper

    cfg = load_config(args.config)
    work_dir = Path(args.work_dir).absolute()
    text = shipper.rsyslog_conf(cfg, work_dir, Path(args.log).absolute() if args.log else None)
    if args.create_topics:
        for name, src in shipper.shipped_sources(cfg).items():
            kafka.ensure_topics(
                cfg.endpoints.kafka,
                [src.topics.name("raw", name)],
                src.topics.partitions,
                src.topics.replication_factor,
            )
    sys.stdout.write(text)
    return 0
