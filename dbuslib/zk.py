"""The ZooKeeper edge: a started kazoo client, chrooted nowhere; paths come from the config root."""

from __future__ import annotations

from kazoo.client import KazooClient
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.retry import KazooRetry

from dbuslib.config import ZooKeeperEndpoint
from dbuslib.errors import EndpointError


def client(cfg: ZooKeeperEndpoint) -> KazooClient:
    """A connected KazooClient; EndpointError when ZooKeeper does not answer within ``timeout_s``."""
    # Reconnect attempts at most 1 s apart, forever: kazoo's default backoff grows without a useful cap,
    # so after an outage of ~30 s it would come back after the server had expired the session.
    zk = KazooClient(hosts=cfg.hosts, timeout=cfg.timeout_s,
                     connection_retry=KazooRetry(max_tries=-1, max_delay=1.0))
    try:
        zk.start(timeout=cfg.timeout_s)
    except KazooTimeoutError as e:
        zk.close()
        msg = f"ZooKeeper at {cfg.hosts} did not answer within {cfg.timeout_s}s"
        raise EndpointError(msg) from e
    return zk


def path(cfg: ZooKeeperEndpoint, *parts: str) -> str:
    """``/DBus/a/b`` from the configured root and parts."""
    return "/".join([cfg.root, *parts])
