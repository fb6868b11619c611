"""``dbus zookeeper secure``: give the nodes under ``endpoints.zookeeper.root`` that were made before
``endpoints.zookeeper.auth`` was set the ACL DBus gives every node it makes now (dbuslib.zk.secured: its
identity all, the world read or nothing), once (docs/security.md#zookeeper)."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from typing import Any

from dbuslib import zk
from dbuslib.config import load_config
from dbuslib.errors import ConfigError


def add_parsers(sub: Any) -> None:
    zp = sub.add_parser("zookeeper", help="ZooKeeper: DBus's nodes").add_subparsers(
        dest="action", required=True
    )
    sp = zp.add_parser(
        "secure",
        help="set DBus's ACL on every node under endpoints.zookeeper.root (nodes made before auth was set)",
        description="Give every node under endpoints.zookeeper.root the ACL of endpoints.zookeeper.auth: "
        "DBus's identity may do anything, other clients read (world_readable) or nothing. Run once after "
        "setting auth.",
    )
    sp.add_argument(
        "--dry-run", action="store_true", help="count the nodes whose ACL would change, change none"
    )
    sp.set_defaults(handler=secure)


def nodes(client: Any, path: str) -> Iterator[str]:
    """``path`` and every node under it, parents before children (a node deleted meanwhile is skipped)."""
    from kazoo.exceptions import NoNodeError

    todo = [path]
    while todo:
        node = todo.pop()
        try:
            children = client.get_children(node)
        except NoNodeError:
            continue
        yield node
        todo.extend(f"{node.rstrip('/')}/{c}" for c in sorted(children, reverse=True))


def secure(args: argparse.Namespace) -> int:
    from kazoo.exceptions import NoAuthError, NoNodeError

    cfg = load_config(args.config)
    endpoint = cfg.endpoints.zookeeper
    wanted = zk.secured(endpoint).get("default_acl")
    if not wanted:
        msg = "dbus zookeeper secure: endpoints.zookeeper.auth is not set: no identity to give the nodes"
        raise ConfigError(msg)
    client = zk.client(endpoint)
    changed = kept = 0
    try:
        if client.exists(endpoint.root) is None:
            print(f"dbus zookeeper secure: {endpoint.root} does not exist: nothing to do")
            return 0
        for node in nodes(client, endpoint.root):
            try:
                acl, _ = client.get_acls(node)
                if sorted(map(str, acl)) == sorted(map(str, wanted)):
                    kept += 1
                    continue
                if not args.dry_run:
                    client.set_acls(node, wanted)
                changed += 1
            except NoNodeError:
                continue
            except NoAuthError:
                msg = f"dbus zookeeper secure: {node}: its ACL does not let this identity change it (ADMIN)"
                raise ConfigError(msg) from None
    finally:
        client.stop()
        client.close()
    verb = "would change" if args.dry_run else "changed"
    print(
        f"dbus zookeeper secure: {endpoint.root}: {verb} the ACL of {changed} node(s), {kept} had it already"
    )
    return 0
