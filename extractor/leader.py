"""One active extractor per source: a ZooKeeper lock, an epoch counter and a ``deposed`` flag.

Nodes of one source (``root`` is ``endpoints.zookeeper.root``, "/DBus" by default; built by dbuslib.zkpaths)::

    <root>/Extractor/<ds>/leader      kazoo Lock: one ephemeral sequential child per contender, lowest leads;
                                      the leader's child holds
                                      {"id": "db1:4242", "epoch": 7, "since": "2024-05-01T12:00:00+00:00"}
                                      (a standby's holds {"id": "db2:777", "epoch": null, "since": null})
    <root>/Extractor/<ds>/epoch       "7": bumped by each new leader and by `dbus extractor reset`
    <root>/Extractor/<ds>/position    the committed position, JSON (extractor/store.py)

A new leader takes its epoch in one ZooKeeper transaction that also rewrites its own lock child: if the
session was lost in between, the child is gone and the transaction fails, so only a live lock holder can
take an epoch. Positions carry the epoch that wrote them, and the store refuses a commit from a lower
epoch: that is what keeps a deposed leader from committing.

Session states (kazoo): SUSPENDED (connection lost, e.g. ZooKeeper restarting) does not depose: the
session and its lock child live on the server until the session times out, so no one else can lead
meanwhile. LOST (session expired, reported by kazoo only once it reconnects; or the client was closed)
sets ``deposed``.
"""

from __future__ import annotations

import json
import logging
import threading
from datetime import datetime, timezone

from kazoo.client import KazooClient
from kazoo.exceptions import (
    BadVersionError,
    KazooException,
    LockTimeout,
    NodeExistsError,
    NoNodeError,
)
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.protocol.states import KazooState

from dbuslib import zkpaths
from dbuslib.errors import EndpointError
from dbuslib.zk import UNREACHABLE, identity
from extractor.errors import DeposedError, NotLeaderError

__all__ = [
    "DeposedError",
    "Leadership",
    "NotLeaderError",
    "bump_epoch",
    "epoch_at",
    "identity",
    "read_epoch",
]

log = logging.getLogger(__name__)

_LOCK_MARK = "__lock__"  # kazoo Lock child names: <uuid>__lock__<10-digit sequence>


def _epoch_of(data: bytes, path: str) -> int:
    text = data.decode("utf-8", "replace").strip() or "0"
    if not text.isdigit():
        msg = f"{path}: expected a decimal epoch, got {text!r}"
        raise DeposedError(msg)
    return int(text)


def _read_epoch_node(zk: KazooClient, path: str, timeout_s: float) -> tuple[int, int]:
    """``(epoch, node version)``; creates the node with "0" when missing."""
    while True:
        try:
            data, stat = zk.get_async(path).get(timeout=timeout_s)
            return _epoch_of(data, path), stat.version
        except NoNodeError:
            try:
                zk.create_async(path, b"0", makepath=True).get(timeout=timeout_s)
            except NodeExistsError:
                pass


def epoch_at(zk: KazooClient, epoch_path: str, timeout_s: float = 10.0) -> int:
    """The last epoch taken at ``epoch_path`` (0 when none was)."""
    try:
        data, _ = zk.get_async(epoch_path).get(timeout=timeout_s)
    except NoNodeError:
        return 0
    return _epoch_of(data, epoch_path)


def read_epoch(zk: KazooClient, root: str, ds: str, timeout_s: float = 10.0) -> int:
    """The last epoch taken for ``ds`` (0 when none was)."""
    return epoch_at(zk, zkpaths.extractor_epoch(root, ds), timeout_s)


def bump_epoch(zk: KazooClient, epoch_path: str, timeout_s: float = 10.0) -> int:
    """Compare-and-set the counter at ``epoch_path`` to the next value and return it (``reset`` uses it)."""
    while True:
        current, version = _read_epoch_node(zk, epoch_path, timeout_s)
        try:
            zk.set_async(epoch_path, str(current + 1).encode(), version=version).get(timeout=timeout_s)
            return current + 1
        except BadVersionError:
            continue  # another writer took one meanwhile: read again


def _contender_data(ident: str, epoch: int | None) -> bytes:
    since = datetime.now(timezone.utc).isoformat(timespec="seconds") if epoch is not None else None
    return json.dumps({"id": ident, "epoch": epoch, "since": since}).encode()


class Leadership:
    """Leader election of one source. ``acquire`` blocks until this process leads and returns its epoch;
    ``deposed`` is set when the ZooKeeper session is lost while leading."""

    def __init__(
        self, zk: KazooClient, root: str, ds: str, identifier: str | None = None, timeout_s: float = 10.0
    ) -> None:
        self.ds = ds
        self.identifier = identifier or identity()
        self.deposed = threading.Event()
        self.epoch = 0
        self._zk, self._timeout = zk, timeout_s
        self._leader_path = zkpaths.extractor_leader(root, ds)
        self._epoch_path = zkpaths.extractor_epoch(root, ds)
        self._lock_node: str | None = None

    def acquire(self, timeout: float | None = None) -> int:
        """Wait (as a standby) until this process leads, take the next epoch and return it.

        ``timeout`` in seconds, None = forever; NotLeaderError when it passes."""
        self.deposed.clear()
        lock = self._zk.Lock(self._leader_path, _contender_data(self.identifier, None).decode())
        try:
            got = lock.acquire(blocking=True, timeout=timeout)
        except LockTimeout:
            got = False
        except UNREACHABLE as e:
            msg = f"{self.ds}: ZooKeeper unreachable while waiting to lead: {e!r}"
            raise EndpointError(msg) from e
        if not got:
            other = self.current_leader() if self._zk.connected else None
            msg = f"{self.ds}: {other or 'another extractor'} still leads after {timeout}s"
            raise NotLeaderError(msg)
        self._lock_node = f"{self._leader_path}/{lock.node}"
        self._zk.add_listener(self._on_state)
        try:
            self.epoch = self._take_epoch()
        except BaseException:
            self.release()
            raise
        log.info("%s: %s leads with epoch %d", self.ds, self.identifier, self.epoch)
        return self.epoch

    def _take_epoch(self) -> int:
        """Bump the epoch and label our lock child with it, atomically: fails if the child is gone."""
        assert self._lock_node is not None
        while True:
            try:
                current, version = _read_epoch_node(self._zk, self._epoch_path, self._timeout)
                tx = self._zk.transaction()
                tx.set_data(self._epoch_path, str(current + 1).encode(), version=version)
                tx.set_data(self._lock_node, _contender_data(self.identifier, current + 1))
                results = tx.commit_async().get(timeout=self._timeout)
            except UNREACHABLE as e:
                msg = f"{self.ds}: ZooKeeper unreachable while taking an epoch: {e!r}"
                raise EndpointError(msg) from e
            if not any(isinstance(r, Exception) for r in results):
                return current + 1
            if isinstance(results[1], NoNodeError):
                msg = f"{self.ds}: the session expired before this extractor could take an epoch"
                raise DeposedError(msg)
            if not isinstance(results[0], (BadVersionError, NoNodeError)):
                msg = f"{self.ds}: cannot take an epoch at {self._epoch_path}: {results[0]!r}"
                raise DeposedError(msg)
            # `dbus extractor reset` took an epoch meanwhile: read it again

    def bump_epoch(self) -> int:
        """Take a new epoch without leading: `dbus extractor reset` does, so a running leader is deposed
        at its next commit."""
        try:
            return bump_epoch(self._zk, self._epoch_path, self._timeout)
        except UNREACHABLE as e:
            msg = f"{self.ds}: ZooKeeper unreachable while taking an epoch: {e!r}"
            raise EndpointError(msg) from e

    def _on_state(self, state: str) -> None:
        """kazoo's connection thread calls this: no ZooKeeper calls, no blocking."""
        if state == KazooState.LOST:
            log.error("%s: ZooKeeper session lost: no longer the leader (epoch %d)", self.ds, self.epoch)
            self.deposed.set()
        elif state == KazooState.SUSPENDED:
            log.warning("%s: ZooKeeper connection lost; still leading while the session lives", self.ds)
        elif not self.deposed.is_set():
            log.info("%s: ZooKeeper connection back, session kept: still leading", self.ds)

    def release(self) -> None:
        """Stop leading: delete our lock child so a standby takes over. Never blocks on a dead ZooKeeper
        (the child then goes when the session ends)."""
        self._zk.remove_listener(self._on_state)
        node, self._lock_node = self._lock_node, None
        if node is None or not self._zk.connected:
            return
        try:
            self._zk.delete_async(node).get(timeout=self._timeout)
        except NoNodeError:
            pass
        except (KazooException, KazooTimeoutError) as e:
            log.warning("%s: could not delete %s (%r); it goes when the session ends", self.ds, node, e)

    def leader_info(self) -> dict | None:
        """The leader's lock data, ``{"id", "epoch", "since"}``; None when no one leads or waits."""
        try:
            children = self._zk.get_children_async(self._leader_path).get(timeout=self._timeout)
        except NoNodeError:
            return None
        except UNREACHABLE as e:
            msg = f"{self.ds}: ZooKeeper unreachable: {e!r}"
            raise EndpointError(msg) from e
        for child in sorted((c for c in children if _LOCK_MARK in c), key=lambda c: c[-10:]):
            try:
                data, _ = self._zk.get_async(f"{self._leader_path}/{child}").get(timeout=self._timeout)
            except NoNodeError:
                continue  # it went while we looked: the next one leads
            try:
                return json.loads(data)
            except ValueError:
                return {"id": data.decode("utf-8", "replace"), "epoch": None, "since": None}
        return None

    def current_leader(self) -> str | None:
        """Identifier (``<host>:<pid>``) of the extractor leading this source, None when none does."""
        info = self.leader_info()
        return info.get("id") if info else None
