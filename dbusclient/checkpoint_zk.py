"""A consumer's checkpoint in ZooKeeper: the checkpoint JSON (``dbusclient.checkpoint.to_json``) in one node.

The node is ``zkpaths.client_checkpoint(root, name)``, ``/DBus/Client/<name>/checkpoint`` by default, one per
consumer that saves a checkpoint (members of one group each keep their own partitions' positions, so each
has its own ``name``). ``save`` sets the node's data, which ZooKeeper replaces atomically: a reader sees
the old checkpoint or the new one, never a mix; the node and its parents are created on the first save.
Once ``save`` returns, a quorum of the ensemble holds the checkpoint. ``load`` gives None when the node
does not exist; a node whose data is not a checkpoint is ``CLIENT_BAD_CHECKPOINT`` naming the path and
the field, as the file store names its file. ZooKeeper unreachable (or a call longer than ``timeout_s``)
is ``ENDPOINT_UNREACHABLE`` naming the path. ZooKeeper keeps at most ``jute.maxbuffer`` bytes in a node
(1 MB by default): some thousands of partitions.
"""

from __future__ import annotations

from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import NodeExistsError, NoNodeError

from dbusclient.checkpoint import Checkpoint, from_json, to_json
from dbuslib import zk, zkpaths
from dbuslib.config import ZooKeeperEndpoint
from dbuslib.errors import EndpointError


class ZkCheckpointStore:
    """A ``CheckpointStore`` (``load``/``save``) over node ``path`` of a started kazoo client; each call
    waits at most ``timeout_s`` seconds. ``connect`` makes the client from the config and the node from the
    consumer's ``name``; ``close`` stops a client it made."""

    def __init__(self, client: Any, path: str, timeout_s: float = 10.0) -> None:
        self.zk, self.path, self.timeout_s = client, path, timeout_s
        self._own: KazooClient | None = None

    @classmethod
    def connect(cls, cfg: ZooKeeperEndpoint, name: str) -> ZkCheckpointStore:
        """The store of consumer ``name`` under ``cfg.root``, on a client of its own (``dbuslib.zk``)."""
        client = zk.client(cfg)
        store = cls(client, zkpaths.client_checkpoint(cfg.root, name), cfg.timeout_s)
        store._own = client
        return store

    def close(self) -> None:
        """Stop the client ``connect`` made (a client given to the constructor is the caller's)."""
        if self._own is not None:
            self._own.stop()
            self._own.close()
            self._own = None

    def load(self) -> Checkpoint | None:
        try:
            data, _stat = self._wait(self.zk.get_async(self.path), "read")
        except NoNodeError:
            return None
        return from_json(data or b"", self.path)

    def save(self, checkpoint: Checkpoint) -> None:
        data = to_json(checkpoint).encode()
        try:
            self._wait(self.zk.set_async(self.path, data), "save")
            return
        except NoNodeError:
            pass
        try:  # the first save: the node and its parents
            self._wait(self.zk.create_async(self.path, data, makepath=True), "create")
        except NodeExistsError:  # created meanwhile (another process of the same name): ours replaces it
            self._wait(self.zk.set_async(self.path, data), "save")

    def _wait(self, result: Any, what: str) -> Any:
        """The value of a kazoo async call; EndpointError naming the path when ZooKeeper is unreachable."""
        try:
            return result.get(timeout=self.timeout_s)
        except zk.UNREACHABLE as e:
            msg = f"{self.path}: cannot {what} the checkpoint: ZooKeeper unreachable ({e!r})"
            raise EndpointError(msg) from e
