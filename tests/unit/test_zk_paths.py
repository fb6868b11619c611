"""ZooKeeper paths (dbuslib/zk.py): one function escapes every name, so no name is a relative or nested path,
ordinary names keep today's paths, and the full puller's progress nodes read their names back."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kazoo.protocol.paths import normpath

from dbuslib import zk, zkpaths
from dbuslib.config import ZooKeeperEndpoint
from fullpuller.progress import Progress, ProgressStore

CFG = ZooKeeperEndpoint(hosts="127.0.0.1:12181")


def zk_refuses(c: str) -> bool:
    """ZooKeeper's PathUtils.validatePath, per UTF-16 unit as Java sees it."""
    units = [c] if ord(c) <= 0xFFFF else ["\ud800"]  # a pair of surrogates
    return any(
        u == "\x00"
        or "\x00" < u <= "\x1f"
        or "\x7f" <= u <= "\x9f"
        or "\ud800" <= u <= "\uf8ff"
        or u >= "\ufff0"
        for u in units
    )


@pytest.mark.parametrize(
    "parts",
    [
        ("FullPuller", "demo"),
        ("Appender", "demo", "rules"),
        ("HeartBeat", "demo", "alerts", "shop.quiet.stale"),
        ("FullPuller", "demo", "t.dot", "shöp", "日本", "a b", "$x-y_z"),
    ],
)
def test_ordinary_names_give_todays_paths_byte_for_byte(parts):
    assert zk.path(CFG, *parts) == "/".join(["/DBus", *parts])


@pytest.mark.parametrize(
    ("name", "escaped"),
    [
        ("..", "%2E%2E"),
        (".", "%2E"),
        ("a/b", "a%2Fb"),
        ("../x", "..%2Fx"),
        ("50%", "50%25"),
        ("a\x00", "a%00"),
        ("t\x7f", "t%7F"),
        ("\ue000", "%EE%80%80"),
        ("\U0001f600", "%F0%9F%98%80"),
        ("...", "..."),
    ],
)
def test_names_that_would_break_a_path_are_escaped(name, escaped):
    assert zk.escape(name) == escaped and zk.unescape(escaped) == name
    assert normpath(zk.path(CFG, "FullPuller", name)) == f"/DBus/FullPuller/{escaped}"  # kazoo takes it


@given(st.text(min_size=1, max_size=70))
def test_every_name_is_one_legal_component_and_comes_back(name):
    part = zk.escape(name)
    assert "/" not in part and part not in (".", "..") and not any(zk_refuses(c) for c in part)
    assert zk.unescape(part) == name
    normpath(zk.path(CFG, "FullPuller", "demo", name))  # no 'relative paths not allowed'


def test_an_empty_part_is_a_caller_bug():
    with pytest.raises(ValueError, match="non-empty"):
        zk.escape("")


def test_unescape_keeps_what_it_did_not_make():
    assert zk.unescape("100%") == "100%" and zk.unescape("%zz") == "%zz"


class ChildrenZk:
    """get/get_children over a dict of nodes."""

    def __init__(self, nodes: dict[str, bytes]):
        self.nodes = nodes

    def get(self, path):
        from kazoo.exceptions import NoNodeError

        if path not in self.nodes:
            raise NoNodeError
        return self.nodes[path], None

    def get_children(self, path):
        from kazoo.exceptions import NoNodeError

        found = {p[len(path) + 1 :].split("/")[0] for p in self.nodes if p.startswith(path + "/")}
        if not found and path not in self.nodes:
            raise NoNodeError
        return sorted(found)


@pytest.mark.parametrize(
    ("schema", "table"), [("shop", "orders"), ("..", ".."), ("a/b", "t.dot"), ("%", " x")]
)
def test_progress_nodes_escape_names_and_list_them_back(schema, table):
    root = zk.path(CFG, "FullPuller", "demo")
    store = ProgressStore(None, root)
    node = store.node(schema, table, 42)
    assert (
        node == f"/DBus/FullPuller/demo/{zk.escape(schema)}/{zk.escape(table)}/42" and normpath(node) == node
    )
    store.zk = ChildrenZk({node: Progress(42, schema, table).to_bytes()})
    assert store.get(schema, table, 42) == Progress(42, schema, table)
    [found] = store.all()
    assert (found.SeqNo, found.Schema, found.Table) == (42, schema, table)


def test_every_node_dbus_uses_keeps_its_path_for_an_ordinary_name():
    """dbuslib/zkpaths.py: the paths a deployed ZooKeeper tree already has, byte for byte."""
    r = "/DBus"
    pulls, alerts = zkpaths.fullpuller(r, "demo"), zkpaths.heartbeat_alerts(r, "demo")
    assert {
        "extractor": zkpaths.extractor(r, "demo"),
        "leader": zkpaths.extractor_leader(r, "demo"),
        "epoch": zkpaths.extractor_epoch(r, "demo"),
        "position": zkpaths.extractor_position(r, "demo"),
        "beside": zkpaths.epoch_beside("/DBus/Extractor/demo/position"),
        "rules": zkpaths.appender_rules(r, "demo"),
        "reload": zkpaths.appender_reload(r, "demo"),
        "log_reload": zkpaths.logprocessor_reload(r, "applog"),
        "pulls": pulls,
        "pull": zkpaths.pull(pulls, "shop", "orders", 1704164645123),
        "shards": zkpaths.pull_shards(pulls, "shop", "orders", 1704164645123),
        "shard": zkpaths.pull_shard(pulls, "shop", "orders", 1704164645123, 0),
        "hb_leader": zkpaths.heartbeat_leader(r, "demo"),
        "alerts": alerts,
        "alert": zkpaths.alert(alerts, "shop.orders.stale"),
        "client": zkpaths.client(r, "orders-replica"),
        "client_checkpoint": zkpaths.client_checkpoint(r, "orders-replica"),
    } == {
        "extractor": "/DBus/Extractor/demo",
        "leader": "/DBus/Extractor/demo/leader",
        "epoch": "/DBus/Extractor/demo/epoch",
        "position": "/DBus/Extractor/demo/position",
        "beside": "/DBus/Extractor/demo/epoch",
        "rules": "/DBus/Appender/demo/rules",
        "reload": "/DBus/Appender/demo/reload",
        "log_reload": "/DBus/LogProcessor/applog/reload",
        "pulls": "/DBus/FullPuller/demo",
        "pull": "/DBus/FullPuller/demo/shop/orders/1704164645123",
        "shards": "/DBus/FullPuller/demo/shop/orders/1704164645123/shards",
        "shard": "/DBus/FullPuller/demo/shop/orders/1704164645123/shards/0",
        "hb_leader": "/DBus/HeartBeat/demo/leader",
        "alerts": "/DBus/HeartBeat/demo/alerts",
        "alert": "/DBus/HeartBeat/demo/alerts/shop.orders.stale",
        "client": "/DBus/Client/orders-replica",
        "client_checkpoint": "/DBus/Client/orders-replica/checkpoint",
    }


def test_the_stages_build_their_nodes_with_zkpaths():
    cfg = CFG.model_copy(update={"root": "/other"})
    assert zkpaths.extractor_position(cfg.root, "d.s") == "/other/Extractor/d.s/position"
    assert zkpaths.heartbeat_leader("/DBus", "a/b") == "/DBus/HeartBeat/a%2Fb/leader"
    assert zkpaths.client_checkpoint(cfg.root, "..") == "/other/Client/%2E%2E/checkpoint"
    assert (
        ProgressStore(None, zkpaths.fullpuller("/DBus", "demo")).shard_path(Progress(7, "..", "t"), 3)
        == "/DBus/FullPuller/demo/%2E%2E/t/7/shards/3"
    )
