"""The skeleton every stage's ``main`` shares: its command line (``--config``, ``--source``, a positive
``--max-offsets-per-trigger``, ``--available-now``), logging set up once, the configuration loaded once, and
an error reported as the stage's last line with its documented exit code (``dbuslib.errors.report``).

A stage's ``main.py`` keeps only what is its own: its arguments beyond these and the body it runs::

    def main(argv=None):
        p = stagemain.parser("appender", __doc__.splitlines()[0])
        p.add_argument("--schema", action="append", help="...")
        return stagemain.run("appender", p, argv, lambda cfg, args: run(cfg, args.source, args.schema))
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence

from dbuslib.config import CONFIG_HELP, DbusConfig, load_config
from dbuslib.errors import DbusError, report
from dbuslib.logs import setup_logging

Body = Callable[[DbusConfig, argparse.Namespace], int]


def parser(
    prog: str, description: str, *, source: str | None = "source name under 'sources'"
) -> argparse.ArgumentParser:
    """The stage's parser: ``--config`` and, unless ``source`` is None, a required ``--source`` (``source``
    its help)."""
    p = argparse.ArgumentParser(prog=prog, description=description)
    p.add_argument("--config", help=CONFIG_HELP)
    if source is not None:
        p.add_argument("--source", required=True, help=source)
    return p


def positive(text: str) -> int:
    """An argparse type: an integer above 0 (argparse exits 2, ``EXIT_CONFIG``, naming the option)."""
    try:
        value = int(text)
    except ValueError:
        msg = f"{text!r} is not an integer"
        raise argparse.ArgumentTypeError(msg) from None
    if value < 1:
        msg = f"{value} must be > 0"
        raise argparse.ArgumentTypeError(msg)
    return value


def add_max_offsets(p: argparse.ArgumentParser, default_from: str) -> None:
    """``--max-offsets-per-trigger``: back pressure; unset, the source's ``default_from`` setting."""
    p.add_argument(
        "--max-offsets-per-trigger",
        type=positive,
        default=None,
        help=f"records read per micro-batch at most: back pressure (default: the source's {default_from})",
    )


def add_available_now(p: argparse.ArgumentParser, what: str) -> None:
    """``--available-now``: ``what`` the input holds now, then stop (a catch-up or test run)."""
    p.add_argument("--available-now", action="store_true", help=f"{what} what the topic holds now, then stop")


def run(
    stage: str,
    p: argparse.ArgumentParser,
    argv: Sequence[str] | None,
    body: Body,
    errors: tuple[type[Exception], ...] = (DbusError,),
) -> int:
    """Parse ``argv``, set up logging, load the configuration and run ``body``: its exit code, or one of
    ``errors`` reported as ``<stage>: ...`` with the exit code it documents."""
    args = p.parse_args(argv)
    setup_logging()
    try:
        return body(load_config(args.config), args)
    except errors as e:
        return report(stage, e)
