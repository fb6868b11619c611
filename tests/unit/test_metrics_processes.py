"""``dbus_process_up`` (cli/metrics.py): the stages of each configured source announced in ZooKeeper that
run, as ``dbus status`` counts them; a ZooKeeper that does not answer leaves it out and says so."""

from __future__ import annotations

import os

from kazoo.exceptions import NoNodeError
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from cli import metrics
from dbuslib import liveness, zkpaths
from dbuslib.config import load_config
from status.readers import LIVE_STAGES


class FakeZk:
    """get_children/get over a dict of path -> data (children derived from the paths)."""

    def __init__(self, nodes: dict[str, bytes]) -> None:
        self.nodes = nodes

    def get_children(self, path: str) -> list[str]:
        prefix = path.rstrip("/") + "/"
        kids = {p[len(prefix) :].split("/")[0] for p in self.nodes if p.startswith(prefix)}
        if not kids and path not in self.nodes:
            raise NoNodeError
        return sorted(kids)

    def get(self, path: str) -> tuple[bytes, None]:
        if path not in self.nodes:
            raise NoNodeError
        return self.nodes[path], None

    def stop(self) -> None:
        pass


def scrape(collector) -> dict[tuple[str, tuple], float]:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    text = generate_latest(registry).decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for f in text_string_to_metric_families(text)
        for s in f.samples
    }


def test_each_stage_of_each_source_with_its_running_processes(monkeypatch):
    cfg = load_config()
    root, host = cfg.endpoints.zookeeper.root, liveness.this_host()
    me = liveness.Process("extractor", host, os.getpid(), 1.0)
    gone = liveness.Process("appender", host, 2**22 + 12345, 1.0)  # this host, a pid that does not run
    elsewhere = liveness.Process("dispatcher", "other-host", 42, 1.0)  # counts while its node is there
    nodes = {
        zkpaths.live_process(root, "demo", p.stage, f"{p.host}:{p.pid}"): p.to_json()
        for p in (me, gone, elsewhere)
    }
    monkeypatch.setattr("dbuslib.zk.client", lambda endpoint: FakeZk(nodes))
    got = scrape(metrics.Processes(cfg))
    up = {
        dict(k[1])["stage"]: v
        for k, v in got.items()
        if k[0] == "dbus_process_up" and dict(k[1])["ds"] == "demo"
    }
    assert up == {**{s: 0.0 for s in LIVE_STAGES}, "extractor": 1.0, "dispatcher": 1.0}
    assert got[("dbus_exporter_zookeeper_up", ())] == 1


def test_zookeeper_down_leaves_the_stages_out_and_says_so(monkeypatch):
    def refuse(endpoint):
        raise OSError("connection refused")

    monkeypatch.setattr("dbuslib.zk.client", refuse)
    got = scrape(metrics.Processes(load_config()))
    assert not [k for k in got if k[0] == "dbus_process_up"]
    assert got[("dbus_exporter_zookeeper_up", ())] == 0
