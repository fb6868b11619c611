"""The ZooKeeper edge: a started kazoo client, chrooted nowhere; paths come from the config root."""

from __future__ import annotations

import os
import socket
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import (
    AuthFailedError,
    ConnectionLoss,
    NoNodeError,
    OperationTimeoutError,
    SessionClosedRequireSaslError,
    SessionExpiredError,
)
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.retry import KazooRetry
from kazoo.security import Permissions, make_acl, make_digest_acl, make_digest_acl_credential

from dbuslib.config import ZooKeeperEndpoint
from dbuslib.errors import EndpointError
from dbuslib.retry import RetryPolicy
from dbuslib.retry import call as retry_call

# What kazoo raises when ZooKeeper cannot be reached. SessionExpiredError includes ConnectionClosedError.
UNREACHABLE = (ConnectionLoss, SessionExpiredError, OperationTimeoutError, KazooTimeoutError)


class ZooKeeperAuthFailed(EndpointError):
    """ZooKeeper refused DBus's session (it requires every client to authenticate, and
    ``endpoints.zookeeper.auth`` is not set or was refused), or DBus's identity may not change its own root
    node (another password made it: the digest scheme takes any password at login and refuses the first
    write). Retrying cannot help; exits 3 as ``KAFKA_AUTH_FAILED`` does."""

    code = "ZOOKEEPER_AUTH_FAILED"
    retriable = False


def identity() -> str:
    """``<host>:<pid>`` of this process (a leader's name in ZooKeeper)."""
    return f"{socket.gethostname()}:{os.getpid()}"


def secured(cfg: ZooKeeperEndpoint) -> dict[str, Any]:
    """kazoo's settings for ``endpoints.zookeeper.auth``: the ``digest`` identity the session adds, and the
    ACL of every node it creates (this identity may do anything, the world only read, or nothing)."""
    if cfg.auth is None:
        return {}
    user, password = cfg.auth.username, cfg.auth.password.get_secret_value()
    acl = [make_digest_acl(user, password, all=True)]
    if cfg.auth.world_readable:
        acl.append(make_acl("world", "anyone", read=True))
    return {"auth_data": [("digest", f"{user}:{password}")], "default_acl": acl}


def client(cfg: ZooKeeperEndpoint, retry: RetryPolicy | None = None) -> KazooClient:
    """A connected KazooClient; EndpointError when ZooKeeper does not answer within ``timeout_s``, or,
    with a ``retry`` policy (long-running stages), RetriesExhausted once its budget is spent."""
    if retry is not None:
        return retry_call(retry, f"ZooKeeper at {cfg.hosts}: connect", client, cfg)
    # Reconnect attempts at most 1 s apart, forever: kazoo's default backoff grows without a useful cap,
    # so after an outage of ~30 s it would come back after the server had expired the session.
    zk = KazooClient(
        hosts=cfg.hosts,
        timeout=cfg.timeout_s,
        connection_retry=KazooRetry(max_tries=-1, max_delay=1.0),
        **secured(cfg),
    )
    try:
        zk.start(timeout=cfg.timeout_s)
    except KazooTimeoutError as e:
        zk.close()
        msg = f"ZooKeeper at {cfg.hosts} did not answer within {cfg.timeout_s}s"
        raise EndpointError(msg) from e
    try:
        _check_identity(zk, cfg)
    except BaseException:
        zk.stop()
        zk.close()
        raise
    return zk


def _check_identity(zk: KazooClient, cfg: ZooKeeperEndpoint) -> None:
    """The session's first request (the root's ACL): ZooKeeperAuthFailed when the server closes a session
    that has not authenticated, refuses DBus's identity, or when the root exists and only another digest
    identity may change it (a wrong password)."""
    try:
        acls, _ = zk.get_acls(cfg.root)
    except NoNodeError:
        return
    except (SessionClosedRequireSaslError, AuthFailedError) as e:
        how = "DBus's identity" if cfg.auth else "a session without authentication (endpoints.zookeeper.auth)"
        msg = f"ZooKeeper at {cfg.hosts} refused {how}: {type(e).__name__}"
        raise ZooKeeperAuthFailed(msg) from None
    if cfg.auth is None:
        return
    mine = make_digest_acl_credential(cfg.auth.username, cfg.auth.password.get_secret_value())
    change = Permissions.WRITE | Permissions.CREATE
    if any(
        a.perms & change and (a.id.scheme == "world" or (a.id.scheme == "digest" and a.id.id == mine))
        for a in acls
    ):
        return
    others = sorted({a.id.id.split(":", 1)[0] for a in acls if a.id.scheme == "digest" and a.perms & change})
    msg = (
        f"ZooKeeper at {cfg.hosts}: {cfg.root} may be changed by the digest identity of "
        f"{', '.join(repr(o) for o in others) or 'nobody'} with another password only, not by "
        f"endpoints.zookeeper.auth's ({cfg.auth.username!r}): a wrong password?"
    )
    raise ZooKeeperAuthFailed(msg)


def path(cfg: ZooKeeperEndpoint, *parts: str) -> str:
    """``/DBus/a/b`` from the configured root and parts, each part escaped (``escape``): the one way a
    name (source, schema, table...) becomes a ZooKeeper path. Ordinary names stay as they are."""
    return "/".join([cfg.root, *(escape(p) for p in parts)])


# What ZooKeeper refuses in a node name (PathUtils.validatePath), besides "/" and the names "." and "..":
# controls, U+D800..U+F8FF (surrogates and private use), U+FFF0..U+FFFF; and what Java sees as surrogate
# pairs (above U+FFFF). "%" is escaped too, so that escaping can be undone.
def _refused(c: str) -> bool:
    n = ord(c)
    return c in "/%" or n <= 0x1F or 0x7F <= n <= 0x9F or 0xD800 <= n <= 0xF8FF or n >= 0xFFF0


def escape(part: str) -> str:
    """One path component that no name can turn into something else: each character ZooKeeper refuses,
    ``/`` and ``%`` become ``%XX`` per UTF-8 byte, and the names ``.`` and ``..`` become ``%2E`` and
    ``%2E%2E``. Ordinary names (``shop``, ``t.dot``, ``é``) are unchanged. ValueError on an empty part
    (names are validated before they get here)."""
    if not isinstance(part, str) or not part:
        msg = f"ZooKeeper path component {part!r}: must be a non-empty string"
        raise ValueError(msg)
    if part in (".", ".."):
        return "%2E" * len(part)
    if not any(_refused(c) for c in part):
        return part
    return "".join(_percent(c) if _refused(c) else c for c in part)


def unescape(part: str) -> str:
    """The name ``escape`` made ``part`` from (a child's name read back from ZooKeeper); a ``%`` not
    followed by two hex digits (a node made by something else) is kept as it is."""
    if "%" not in part:
        return part
    out, raw, i = [], bytearray(), 0
    while i < len(part):
        code = part[i + 1 : i + 3]
        if part[i] == "%" and len(code) == 2 and all(c in "0123456789abcdefABCDEF" for c in code):
            raw.append(int(code, 16))
            i += 3
            continue
        if raw:
            out.append(_decoded(raw))
            raw.clear()
        out.append(part[i])
        i += 1
    if raw:
        out.append(_decoded(raw))
    return "".join(out)


def _decoded(raw: bytearray) -> str:
    try:
        return raw.decode("utf-8", "surrogatepass")
    except UnicodeDecodeError:
        return raw.decode("utf-8", "surrogateescape")


def _percent(c: str) -> str:
    return "".join(f"%{b:02X}" for b in c.encode("utf-8", "surrogatepass"))
