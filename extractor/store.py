"""Where the committed position lives: a ZooKeeper node, mirrored to a local file.

Both hold the same JSON (see extractor/position.py)::

    {"file": "mariadb-bin.000003", "pos": 1234, "gtid": "0-1-42", "ts": 1714557600, "epoch": 7}

Rules:
- ``commit`` writes the file first (temp file, fsync, rename, fsync of the folder), then the node with a
  versioned set. While ZooKeeper is unreachable commits go to the file only (one warning per outage) and
  the next commit that reaches ZooKeeper catches it up. One file write and one ZooKeeper round trip per
  commit.
- ``load`` returns whichever of the two has the greater ``(epoch, sort_key)``: a file written while
  ZooKeeper was down wins over the node; the node wins over the file of an older leader.
- A commit from a lower epoch than the node's raises ``DeposedError``, and so does every commit after
  it; a commit behind the last committed (or loaded) position raises ``PositionError``. Only ``reset``
  (the operator's `dbus extractor reset`) moves a position backwards: it takes a new epoch, so a leader
  still running is deposed at its next commit.
"""

from __future__ import annotations

import logging
import os
from dataclasses import replace
from pathlib import Path

from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from dbuslib import zkpaths
from dbuslib.errors import EndpointError
from dbuslib.zk import UNREACHABLE
from extractor.errors import DeposedError, PositionError, PositionFileError
from extractor.leader import bump_epoch, epoch_at
from extractor.position import Position

__all__ = ["DeposedError", "PositionError", "PositionStore", "read_file", "write_file"]

log = logging.getLogger(__name__)
_NO_NODE = -1  # the node does not exist yet: the next write creates it


def write_file(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` atomically: after a crash it holds the old or the new bytes."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        folder = os.open(path.parent, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
        try:
            os.fsync(folder)
        finally:
            os.close(folder)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        msg = f"{path}: cannot write the position mirror: {e}"
        raise PositionFileError(msg) from e


def read_file(path: Path) -> Position | None:
    """The position in ``path``; None when there is no file."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as e:
        msg = f"{path}: cannot read the position mirror: {e}"
        raise PositionFileError(msg) from e
    return Position.from_json(data, str(path))


def _newest(*candidates: Position | None) -> Position | None:
    found = [p for p in candidates if p is not None]
    return max(found, key=lambda p: (p.epoch, p.sort_key())) if found else None


class PositionStore:
    """The committed position of one source: ZooKeeper node ``zk_path`` (None = file only) and the local
    mirror ``file_path``. ``timeout_s`` bounds each ZooKeeper call of a commit (seconds)."""

    def __init__(self, zk: KazooClient | None, zk_path: str, file_path: Path, timeout_s: float = 5.0) -> None:
        self._zk, self._path, self._file, self._timeout = zk, zk_path, Path(file_path), timeout_s
        self._epoch_path = zkpaths.epoch_beside(zk_path)
        self._version: int | None = None  # of the node, as last read or written; None = not read yet
        self._node_epoch = 0  # highest epoch seen on the node
        self._last: Position | None = None  # last committed or loaded: commits never go behind it
        self._deposed = False
        self._zk_behind = False

    @property
    def zk_behind(self) -> bool:
        """True while the file holds a position ZooKeeper has not got yet."""
        return self._zk_behind

    @property
    def last(self) -> Position | None:
        return self._last

    # ------------------------------------------------------------------ reading

    def _connected(self) -> KazooClient:
        """The client, if connected: a call made while kazoo reconnects would wait until it has."""
        if self._zk is None or not self._zk.connected:
            msg = f"{self._path}: ZooKeeper not connected"
            raise EndpointError(msg)
        return self._zk

    def _read_node(self) -> tuple[Position | None, int]:
        """``(position, version)`` of the node; raises kazoo's errors when ZooKeeper is unreachable."""
        try:
            data, stat = self._connected().get_async(self._path).get(timeout=self._timeout)
        except NoNodeError:
            return None, _NO_NODE
        found = Position.from_json(data, self._path) if data else None
        if found is not None:
            self._node_epoch = max(self._node_epoch, found.epoch)
        return found, stat.version

    def read_file(self) -> Position | None:
        """The local mirror's position, None when there is none."""
        return read_file(self._file)

    def read_zk(self) -> Position | None:
        """The node's position, None when there is none (or no ZooKeeper); EndpointError if unreachable."""
        if self._zk is None:
            return None
        try:
            return self._read_node()[0]
        except UNREACHABLE as e:
            msg = f"{self._path}: ZooKeeper unreachable: {e!r}"
            raise EndpointError(msg) from e

    def load(self) -> Position | None:
        """The newer of the node and the file, by ``(epoch, sort_key)``; None when neither exists.
        With ZooKeeper unreachable it is the file's (and a warning)."""
        local = read_file(self._file)
        remote = None
        if self._zk is not None:
            try:
                remote, self._version = self._read_node()
            except (EndpointError, *UNREACHABLE) as e:
                log.warning(
                    "%s: ZooKeeper unreachable (%r): using the local mirror %s", self._path, e, self._file
                )
                self._zk_behind = True
            else:
                self._zk_behind = local is not None and _newest(local, remote) != remote
                if self._zk_behind:
                    log.info(
                        "%s: the local mirror %s is ahead (%s); the next commit catches up",
                        self._path,
                        self._file,
                        local,
                    )
        self._last = _newest(local, remote)
        return self._last

    # ------------------------------------------------------------------ committing

    def commit(self, p: Position) -> Position:
        """Make ``p`` the committed position (``p.epoch`` = the leader epoch committing it)."""
        self._check(p)
        write_file(self._file, p.to_json().encode())
        self._last = p
        if self._zk is not None:
            self._commit_node(p)
        return p

    def _check(self, p: Position) -> None:
        if self._deposed:
            msg = f"{self._path}: this extractor was deposed; it commits no more"
            raise DeposedError(msg)
        floor = max(self._node_epoch, self._last.epoch if self._last else 0)
        if p.epoch < floor:
            self._deposed = True
            msg = f"{self._path}: epoch {p.epoch} is older than epoch {floor} of the committed position"
            raise DeposedError(msg)
        if not p.file:
            msg = f"{self._path}: cannot commit {p}: a committed position needs a binlog file"
            raise PositionError(msg)
        if self._last is not None and p.sort_key() < self._last.sort_key():
            msg = f"{self._path}: {p} is behind the committed {self._last} (use `dbus extractor reset`)"
            raise PositionError(msg)

    def _commit_node(self, p: Position) -> None:
        try:
            self._connected()
            self._write_node(p)
        except (EndpointError, *UNREACHABLE) as e:
            if not self._zk_behind:
                log.warning(
                    "%s: ZooKeeper unreachable (%r): positions go to %s until it is back",
                    self._path,
                    e,
                    self._file,
                )
            self._zk_behind = True
            return
        if self._zk_behind:
            log.info("%s: ZooKeeper caught up at %s", self._path, p)
        self._zk_behind = False

    def _write_node(self, p: Position) -> None:
        if self._version is None:  # commit without load: learn the version once
            self._adopt(p)
        data = p.to_json().encode()
        for _ in range(2):
            try:
                self._version = self._set(data)
                self._node_epoch = max(self._node_epoch, p.epoch)
                return
            except (BadVersionError, NoNodeError, NodeExistsError):
                self._adopt(p)  # deposed, or our own write whose reply was lost: adopt its version
        self._deposed = True
        msg = f"{self._path}: the node changed twice during one commit of epoch {p.epoch}: a second writer"
        raise DeposedError(msg)

    def _set(self, data: bytes) -> int:
        assert self._zk is not None and self._version is not None
        if self._version == _NO_NODE:
            self._zk.create_async(self._path, data, makepath=True).get(timeout=self._timeout)
            return 0
        return self._zk.set_async(self._path, data, version=self._version).get(timeout=self._timeout).version

    def _adopt(self, p: Position) -> None:
        """Re-read the node: DeposedError if a higher epoch wrote it, else take its version."""
        found, version = self._read_node()
        if found is not None and found.epoch > p.epoch:
            self._deposed = True
            msg = f"{self._path}: epoch {found.epoch} committed {found}; epoch {p.epoch} was deposed"
            raise DeposedError(msg)
        if found is not None and found.epoch < p.epoch and self._version is not None:
            log.warning("%s: overwriting %s of the older epoch %d", self._path, found, found.epoch)
        self._version = version

    # ------------------------------------------------------------------ operator

    def reset(self, p: Position) -> Position:
        """Move the committed position to ``p`` unconditionally, under a new epoch (run it while no
        extractor runs: one that still leads is deposed at its next commit). ``p.epoch`` is one just taken
        with ``Leadership.bump_epoch``, or 0 to take one here. ``p`` may be GTID-only (``file`` ""): the
        extractor then starts from the GTID. Returns the stored position."""
        if self._zk is None:
            old = read_file(self._file)
            p = replace(p, epoch=p.epoch or (old.epoch if old else 0) + 1)
            write_file(self._file, p.to_json().encode())
        else:
            p = self._reset_node(p)
        self._last, self._node_epoch, self._deposed, self._zk_behind = p, p.epoch, False, False
        return p

    def _reset_node(self, p: Position) -> Position:
        try:
            zk = self._connected()
            newest = epoch_at(zk, self._epoch_path, self._timeout)
            if p.epoch and p.epoch < newest:
                msg = f"{self._path}: cannot reset under epoch {p.epoch}: epoch {newest} was taken since"
                raise PositionError(msg)
            p = replace(p, epoch=p.epoch or bump_epoch(zk, self._epoch_path, self._timeout))
            write_file(self._file, p.to_json().encode())
            data = p.to_json().encode()
            try:
                self._version = zk.set_async(self._path, data).get(timeout=self._timeout).version
            except NoNodeError:
                zk.create_async(self._path, data, makepath=True).get(timeout=self._timeout)
                self._version = 0
        except (EndpointError, *UNREACHABLE) as e:
            msg = f"{self._path}: ZooKeeper unreachable, not reset there (run the reset again): {e!r}"
            raise EndpointError(msg) from e
        return p
