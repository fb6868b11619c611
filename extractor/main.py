"""The extractor: one source's binlog -> first-level topic ``<ds>``.

Usage: python -m extractor [--config conf/dbus.yaml] run --source demo
       python -m extractor [--config conf/dbus.yaml] status --source demo
       python -m extractor [--config conf/dbus.yaml] reset --source demo --to current|earliest|FILE:POS|GTID
(also ``dbus extractor ...``). Run two for one source: one leads, the other waits and takes over.

Exit codes (``dbuslib.errors.exit_code``, docs/errors.md): 0 stopped cleanly (SIGTERM/SIGINT); 2 bad
configuration, or the binlog position was purged (error 1236); 3 MySQL, Kafka or ZooKeeper unreachable for
longer than ``extractor.retry_for_s``; 4 deposed (another extractor leads now); 6 its configuration file
was removed (dbuslib/lifecycle.py).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from collections.abc import Callable

from dbuslib import stagemain
from dbuslib.config import DbusConfig, load_config
from dbuslib.errors import DbusError, exit_code, report
from dbuslib.lifecycle import Lifecycle
from dbuslib.logs import final_line, setup_logging
from extractor.commands import add_commands
from extractor.loop import Extractor
from extractor.reader import BinlogPurgedError

log = logging.getLogger(__name__)


def run(cfg: DbusConfig, ds: str) -> int:
    """Run until stopped; retriable failures are retried with backoff for ``retry_for_s``."""
    src = cfg.source(ds)
    extractor = Extractor(cfg, ds)
    # SIGTERM/SIGINT and a removed config file set extractor.stop; a stop that hangs is ended
    # (dbuslib/lifecycle.py)
    with Lifecycle("extractor", ds, cfg.path, zookeeper=cfg.endpoints.zookeeper) as life:
        life.on_stop(extractor.stop.set)
        code = _run_until_stopped(extractor, src, ds)
    return code or life.code


def _run_until_stopped(extractor: Extractor, src, ds: str) -> int:
    backoff, failing_since = 1.0, None
    while not extractor.stop.is_set():
        try:
            extractor.run()
            return 0
        except DbusError as e:
            if not e.retriable:
                raise
            failing_since = failing_since or time.monotonic()
            if time.monotonic() - failing_since > src.extractor.retry_for_s:
                raise
            log.warning("%s: %s; retrying in %.0fs", ds, e, backoff)
            extractor.stop.wait(backoff)
            backoff = min(backoff * 2, 30.0)
    return 0


def purged_message(ds: str, err: BinlogPurgedError) -> str:
    return (
        f"{ds}: {err}\nThe changes between the stored position and the oldest binlog still on the server "
        f"cannot be read any more. Recover with one of:\n"
        f"  dbus extractor reset --source {ds} --to earliest --full-pull   # resume at the oldest binlog, "
        f"full-pull every captured table\n"
        f"  dbus extractor reset --source {ds} --to current --full-pull    # resume now, "
        f"full-pull every table"
    )


def _parser() -> argparse.ArgumentParser:
    p = stagemain.parser("extractor", "binlog -> first-level Kafka topic", source=None)
    add_commands(p)
    return p


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    setup_logging()
    return dispatch(args)


def dispatch(args: argparse.Namespace) -> int:
    """The parsed command (``commands.add_commands``) run with the configuration of ``args.config``; its exit
    code."""
    try:
        cfg = load_config(args.config)
        return _commands()[args.extractor_command](cfg, args)
    except BinlogPurgedError as e:
        line = f"extractor: {e.code}: {purged_message(args.source, e)}"
        print(final_line(line, stage="extractor", code=e.code), file=sys.stderr)
        return exit_code(e)
    except DbusError as e:
        return report("extractor", e)


def _commands() -> dict[str, Callable[[DbusConfig, argparse.Namespace], int]]:
    return {"run": lambda cfg, args: run(cfg, args.source), "status": _status, "reset": _reset}


def _status(cfg: DbusConfig, args: argparse.Namespace) -> int:
    from extractor import commands

    info = commands.status(cfg, args.source)
    print(json.dumps(info, indent=2) if args.json else commands.format_status(info))
    return 0


def _reset(cfg: DbusConfig, args: argparse.Namespace) -> int:
    from extractor import commands

    print(commands.reset(cfg, args.source, args.to, full_pull=args.full_pull, force=args.force))
    return 0


if __name__ == "__main__":
    sys.exit(main())
