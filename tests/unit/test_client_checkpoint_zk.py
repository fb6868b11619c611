"""dbusclient.checkpoint_zk: the checkpoint JSON in one ZooKeeper node, over a fake kazoo client (the
few async calls the store makes, in memory). On the stack: test_client_checkpoint_zk_live.py."""

from __future__ import annotations

import pytest
from kazoo.exceptions import ConnectionLoss, NodeExistsError, NoNodeError

from dbusclient.checkpoint import (
    Bootstrap,
    Checkpoint,
    CheckpointError,
    Mode,
    PartitionPosition,
    TablePull,
    to_json,
)
from dbusclient.checkpoint_zk import ZkCheckpointStore
from dbuslib import zkpaths
from dbuslib.errors import EndpointError

PATH = zkpaths.client_checkpoint("/DBus", "orders-replica")
SNAPSHOT = Checkpoint(
    Mode.BOOTSTRAP_SNAPSHOT,
    (PartitionPosition("demo.shop.result", 0, 1234, 1030000012345678),),
    Bootstrap((TablePull("demo", "shop", "orders", 1704164645123),)),
)
ONLINE = Checkpoint(Mode.ONLINE, (PartitionPosition("demo.shop.result", 0, 2000, 1030000012399999),))


class Done:
    """What a kazoo ``*_async`` call returns, already answered: ``get`` gives the value or raises."""

    def __init__(self, value=None, error: Exception | None = None):
        self.value, self.error = value, error

    def get(self, timeout=None):
        if self.error is not None:
            raise self.error
        return self.value


class FakeZk:
    """Nodes in a dict; ``create`` without makepath needs the parent; ``down`` makes every call fail as
    an unreachable ZooKeeper does; ``race`` creates the node between a save's set and its create."""

    def __init__(self, nodes: dict[str, bytes] | None = None):
        self.nodes = dict(nodes or {})
        self.down = False
        self.race: bytes | None = None
        self.calls: list[str] = []

    def _call(self, name, fn):
        self.calls.append(name)
        if self.down:
            return Done(error=ConnectionLoss())
        try:
            return Done(fn())
        except Exception as e:
            return Done(error=e)

    def get_async(self, path):
        def get():
            if path not in self.nodes:
                raise NoNodeError
            return self.nodes[path], object()

        return self._call("get", get)

    def set_async(self, path, data, version=-1):
        def set_():
            if path not in self.nodes:
                if self.race is not None:
                    self.nodes[path], self.race = self.race, None
                raise NoNodeError
            self.nodes[path] = data

        return self._call("set", set_)

    def create_async(self, path, value=b"", makepath=False):
        def create():
            if path in self.nodes:
                raise NodeExistsError
            parent = path.rsplit("/", 1)[0]
            if not makepath and parent and parent not in self.nodes:
                raise NoNodeError
            node = ""
            for part in path.split("/")[1:-1]:
                node += "/" + part
                self.nodes.setdefault(node, b"")
            self.nodes[path] = value

        return self._call("create", create)


def test_no_node_is_no_checkpoint():
    assert ZkCheckpointStore(FakeZk(), PATH).load() is None


def test_the_first_save_creates_the_node_and_its_parents():
    zk = FakeZk()
    store = ZkCheckpointStore(zk, PATH)
    store.save(SNAPSHOT)
    assert zk.nodes[PATH] == to_json(SNAPSHOT).encode()
    assert {"/DBus", "/DBus/Client", "/DBus/Client/orders-replica"} <= set(zk.nodes)
    assert store.load() == SNAPSHOT


def test_a_save_replaces_the_node_with_one_set():
    zk = FakeZk({PATH: to_json(SNAPSHOT).encode()})
    store = ZkCheckpointStore(zk, PATH)
    store.save(ONLINE)
    assert zk.calls == ["set"] and store.load() == ONLINE


def test_a_node_created_meanwhile_is_replaced():
    zk = FakeZk()
    zk.race = to_json(SNAPSHOT).encode()
    store = ZkCheckpointStore(zk, PATH)
    store.save(ONLINE)
    assert zk.calls == ["set", "create", "set"] and store.load() == ONLINE


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        (b"", "not JSON"),
        (b"{nope", "not JSON"),
        (b'{"format": "dbus-client-checkpoint", "version": 2}', "version: 2 is not supported"),
        (
            to_json(ONLINE).replace('"offset": 2000', '"offset": -1').encode(),
            "partitions[0].offset: expected a non-negative integer, got -1",
        ),
    ],
)
def test_a_bad_node_is_a_bad_checkpoint_naming_the_path_and_field(data, problem):
    with pytest.raises(CheckpointError, match=r"^/DBus/Client/orders-replica/checkpoint: ") as e:
        ZkCheckpointStore(FakeZk({PATH: data}), PATH).load()
    assert problem in str(e.value) and e.value.code == "CLIENT_BAD_CHECKPOINT"


@pytest.mark.parametrize("call", ["load", "save"])
def test_zookeeper_unreachable_is_an_endpoint_error_naming_the_path(call):
    zk = FakeZk({PATH: to_json(ONLINE).encode()})
    zk.down = True
    store = ZkCheckpointStore(zk, PATH)
    with pytest.raises(EndpointError, match=f"^{PATH}: cannot .* the checkpoint: ZooKeeper unreachable") as e:
        store.load() if call == "load" else store.save(SNAPSHOT)
    assert e.value.retriable and e.value.code == "ENDPOINT_UNREACHABLE"
    zk.down = False
    assert store.load() == ONLINE  # a failed save left the node as it was


def test_the_node_is_named_after_the_consumer_and_escaped():
    assert PATH == "/DBus/Client/orders-replica/checkpoint"
    assert zkpaths.client_checkpoint("/x", "a/b") == "/x/Client/a%2Fb/checkpoint"
