"""``dbus console``: serve the web console; ``dbus console hash-password``: a ``console.users`` hash."""

from __future__ import annotations

import argparse
import getpass
import logging
import sys
from typing import Any

from dbuslib.config import load_config, parse_listen
from dbuslib.errors import ConfigError

log = logging.getLogger("dbus.console")


def add_parsers(sub: Any) -> None:
    co = sub.add_parser(
        "console",
        help="the web console (docs/console.md)",
        description="Serve the web console: every source's topology and lag, tables, full pulls, dead "
        "letters, alerts and log rules. Users and roles come from the configuration's console.users.",
    )
    co.add_argument("--listen", metavar="HOST:PORT", help="where to serve (default: console.listen)")
    co.add_argument("--threads", type=int, default=8, help="request threads (default: %(default)s)")
    co.set_defaults(handler=serve)
    actions = co.add_subparsers(dest="console_action", metavar="ACTION")
    hp = actions.add_parser(
        "hash-password",
        help="print the password_hash of a console.users entry",
        description="Read a password (asked twice on a terminal, or one line from stdin with "
        "--password-stdin) and print its hash for console.users[].password_hash.",
    )
    hp.add_argument("--password-stdin", action="store_true", help="read the password from stdin")
    hp.set_defaults(handler=hash_password)


def hash_password(args: argparse.Namespace) -> int:
    from console.auth import hash_password as make

    if args.password_stdin:
        password = sys.stdin.readline().rstrip("\n")
    else:
        password = getpass.getpass("password: ")
        if getpass.getpass("again: ") != password:
            msg = "dbus console hash-password: the two passwords differ"
            raise ConfigError(msg)
    if not password:
        msg = "dbus console hash-password: an empty password"
        raise ConfigError(msg)
    print(make(password))
    return 0


hash_password.without_config = True  # type: ignore[attr-defined]


def serve(args: argparse.Namespace) -> int:
    import waitress

    from console.app import create_app
    from console.rules import budget_of

    cfg = load_config(args.config)
    host, port = parse_listen(args.listen or cfg.console.listen, "--listen / console.listen")
    usable = [u.name for u in cfg.console.users if u.password_hash.get_secret_value()]
    if not usable:
        log.warning(
            "dbus console: no user of console.users has a password_hash: nobody can log in "
            "(`dbus console hash-password`, docs/console.md)"
        )
    app = create_app(cfg)
    budget_of(app)  # the previews' forkserver imports the rule engine now, not in a user's first preview
    try:
        server = waitress.create_server(app, host=host, port=port, threads=args.threads, ident="dbus-console")
    except OSError as e:
        msg = f"dbus console: cannot listen on {host}:{port}: {e.strerror or e}"
        raise ConfigError(msg) from None
    who = ", ".join(usable) or "none"
    print(f"dbus console: serving on http://{host}:{port}/ (users: {who})", flush=True)
    server.run()
    return 0
