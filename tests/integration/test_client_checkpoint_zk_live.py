"""The consumer client's ZooKeeper checkpoint store on the stack's ZooKeeper: the first save creates
``<root>/Client/<name>/checkpoint`` with its parents, a save replaces it, a new store (a restarted
consumer) loads it, and a bad node is CLIENT_BAD_CHECKPOINT naming the path. Each test uses its own
consumer name ``pytest_<uuid>`` and deletes ``<root>/Client/<name>`` afterwards."""

from __future__ import annotations

import uuid

import pytest

from dbusclient.checkpoint import (
    Bootstrap,
    Checkpoint,
    CheckpointError,
    Mode,
    PartitionPosition,
    TablePull,
    from_json,
)
from dbusclient.checkpoint_zk import ZkCheckpointStore
from dbuslib import zk, zkpaths

SNAPSHOT = Checkpoint(
    Mode.BOOTSTRAP_SNAPSHOT,
    (PartitionPosition("demo.shop.result", 0, 1234, 1030000012345678),),
    Bootstrap((TablePull("demo", "shop", "orders", 1704164645123, 1030000012000000, 420001),)),
)


@pytest.fixture
def zk_client(cfg):
    client = zk.client(cfg.endpoints.zookeeper)
    yield client
    client.stop()
    client.close()


@pytest.fixture
def name(cfg, zk_client):
    consumer = f"pytest_{uuid.uuid4().hex[:12]}"
    yield consumer
    zk_client.delete(zkpaths.client(cfg.endpoints.zookeeper.root, consumer), recursive=True)


def test_a_checkpoint_saved_in_zookeeper_is_loaded_by_a_restarted_consumer(cfg, zk_client, name):
    ep = cfg.endpoints.zookeeper
    path = zkpaths.client_checkpoint(ep.root, name)
    store = ZkCheckpointStore.connect(ep, name)
    try:
        assert store.path == path and store.load() is None
        assert not zk_client.exists(zkpaths.client(ep.root, name))  # a load creates nothing
        store.save(SNAPSHOT)
        online = Checkpoint(Mode.ONLINE, (PartitionPosition("demo.shop.result", 0, 5000, 1030000012399999),))
        store.save(online)
    finally:
        store.close()
    data, stat = zk_client.get(path)
    assert from_json(data, path) == online and stat.version == 1  # created once, then one set

    again = ZkCheckpointStore(zk_client, path)  # a restarted consumer, on a client of its own
    assert again.load() == online


def test_a_bad_node_is_named(cfg, zk_client, name):
    path = zkpaths.client_checkpoint(cfg.endpoints.zookeeper.root, name)
    zk_client.create(path, b'{"format": "something else"}', makepath=True)
    with pytest.raises(CheckpointError, match=f"^{path}: format: expected 'dbus-client-checkpoint'"):
        ZkCheckpointStore(zk_client, path).load()
