"""Stage liveness (dbuslib/liveness.py): the announced processes, their state, reading them back from
ZooKeeper (a fake), and the Lifecycle that announces a stage."""

from __future__ import annotations

import json
import os

import pytest
from heartbeat_fakes import FakeZk

from dbuslib import liveness, zkpaths
from dbuslib.config import ZooKeeperEndpoint
from dbuslib.lifecycle import Lifecycle
from dbuslib.liveness import DOWN, RUNNING, Process

HERE, THERE = "vm1", "vm2"


def proc(stage: str = "heartbeat", host: str = HERE, pid: int = 100) -> Process:
    return Process(stage, host, pid, 1_700_000_000.0)


def test_paths_live_beside_the_other_stages_nodes():
    assert zkpaths.live("/DBus", "demo") == "/DBus/Live/demo"
    assert zkpaths.live_process("/DBus", "demo", "appender", "vm1:42") == "/DBus/Live/demo/appender/vm1:42"
    assert zkpaths.live_process("/DBus", "d/s", "x", "a/b:1") == "/DBus/Live/d%2Fs/x/a%2Fb:1"
    assert zkpaths.history_beside(zkpaths.heartbeat_alerts("/DBus", "demo")) == "/DBus/HeartBeat/demo/history"


def test_a_process_round_trips_through_its_node_data():
    p = proc()
    assert json.loads(p.to_json()) == {"host": HERE, "pid": 100, "started_at": 1_700_000_000.0}
    assert Process.from_json("heartbeat", p.to_json()) == p
    with pytest.raises(KeyError):
        Process.from_json("heartbeat", b"{}")


def test_no_process_is_down():
    assert liveness.state([], HERE, lambda pid: True) == DOWN


def test_a_process_of_this_machine_runs_while_its_pid_does():
    assert liveness.state([proc(pid=7)], HERE, lambda pid: pid == 7) == RUNNING
    assert liveness.state([proc(pid=7)], HERE, lambda pid: False) == DOWN  # killed: down at once


def test_a_process_of_another_machine_runs_while_its_node_is_there():
    assert liveness.state([proc(host=THERE)], HERE, lambda pid: False) == RUNNING


def test_one_live_process_of_several_is_enough():
    dead, standby = proc(pid=1), proc(pid=2)
    assert liveness.alive([dead, standby], HERE, lambda pid: pid == 2) == [standby]
    assert liveness.states(
        {"extractor": [dead, standby]}, ["extractor", "appender"], HERE, lambda p: p == 2
    ) == {
        "extractor": RUNNING,
        "appender": DOWN,
    }


def test_pid_alive_of_this_process_and_of_none():
    assert liveness.pid_alive(os.getpid())
    assert not liveness.pid_alive(2**22 + 12345)  # above pid_max: no such process


def test_read_gives_the_processes_by_stage_and_skips_what_is_not_one():
    zk = FakeZk()
    for stage, who, p in [
        ("heartbeat", "vm1:100", proc()),
        ("appender", "vm2:7", proc("appender", THERE, 7)),
    ]:
        zk.create(zkpaths.live_process("/DBus", "demo", stage, who), p.to_json(), makepath=True)
    zk.create(zkpaths.live_process("/DBus", "demo", "appender", "junk"), b"not json", makepath=True)
    assert liveness.read(zk, "/DBus", "demo") == {
        "appender": [proc("appender", THERE, 7)],
        "heartbeat": [proc()],
    }
    assert liveness.read(zk, "/DBus", "other") == {}


class Recorder:
    """Announcer's stand-in: what a Lifecycle starts and stops."""

    made: list[Recorder] = []

    def __init__(self, endpoint, ds, stage, on_refused=None):
        self.args, self.stopped = (endpoint.hosts, ds, stage), False
        Recorder.made.append(self)

    def start(self):
        return self

    def stop(self):
        self.stopped = True


def test_a_lifecycle_announces_its_stage_while_it_runs(monkeypatch):
    monkeypatch.setattr(liveness, "Announcer", Recorder)
    Recorder.made.clear()
    ep = ZooKeeperEndpoint(hosts="127.0.0.1:1")
    life = Lifecycle("appender", "demo", zookeeper=ep, watch_jvm=False)
    life.owns_process = True  # as a stage's own process (under pytest it is not)
    with life:
        assert [r.args for r in Recorder.made] == [("127.0.0.1:1", "demo", "appender")]
        assert not Recorder.made[0].stopped
    assert Recorder.made[0].stopped
    life.owns_process = False  # else its watchdog would end this process
    with Lifecycle("appender", "demo", zookeeper=ep, watch_jvm=False):  # a test's in-process main()
        pass
    assert len(Recorder.made) == 1


class FakeKazoo(FakeZk):
    connected = True

    def stop(self):
        self.connected = False

    def close(self):
        pass


def test_the_announcer_creates_its_node_again_after_a_lost_session(monkeypatch):
    client = FakeKazoo()
    monkeypatch.setattr(liveness.zk, "client", lambda endpoint: client)
    a = liveness.Announcer(ZooKeeperEndpoint(hosts="x:1"), "demo", "heartbeat", every_s=0.01)
    assert a.path == zkpaths.live_process("/DBus", "demo", "heartbeat", liveness.zk.identity())
    a.start()
    try:
        wait_for(lambda: a.path in client.nodes)
        assert Process.from_json("heartbeat", client.nodes[a.path]).pid == os.getpid()
        del client.nodes[a.path]  # the session expired: ZooKeeper removed the ephemeral node
        wait_for(lambda: a.path in client.nodes)
    finally:
        a.stop()
    assert a.path not in client.nodes and not client.connected


def wait_for(condition, timeout: float = 5.0) -> None:
    import time

    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met"
        time.sleep(0.01)


def test_dbus_status_shows_each_stages_processes():
    from cli import status
    from status import readers

    announced = {
        "extractor": [proc("extractor", pid=7), proc("extractor", THERE, 8)],
        "heartbeat": [proc(pid=9)],
    }
    lives = readers.stage_lives(announced, readers.LIVE_STAGES, HERE, lambda pid: pid == 7)
    started = proc("extractor", pid=7).started_at
    assert lives[0] == readers.StageLive("extractor", RUNNING, ("vm1:7", "vm2:8"), started_at=started)
    assert [(x.stage, x.state) for x in lives[1:]] == [
        ("dispatcher", DOWN),
        ("appender", DOWN),
        ("fullpuller", DOWN),
        ("heartbeat", DOWN),  # pid 9 is gone
    ]
    screen = status.render(readers.Snapshot("demo", 1_700_000_000.0, 600, processes=lives))
    assert "  extractor   running  vm1:7, vm2:8" in screen
    assert "  heartbeat   down     no process announced" in screen
    assert json.loads(readers.Snapshot("demo", 0.0, 600, processes=lives[:1]).to_json())["processes"] == [
        {"stage": "extractor", "state": "running", "processes": ["vm1:7", "vm2:8"], "started_at": started}
    ]


def test_a_killed_process_not_reaped_yet_is_not_alive():
    import signal
    import subprocess
    import sys

    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        assert liveness.pid_alive(child.pid)
        os.kill(child.pid, signal.SIGKILL)
        wait_for(lambda: not liveness.pid_alive(child.pid))  # a zombie until wait() below
    finally:
        child.kill()
        child.wait()
    assert not liveness.pid_alive(child.pid)


def test_a_refused_identity_ends_the_announcer_and_reaches_the_stage(monkeypatch):
    from dbuslib.zk import ZooKeeperAuthFailed

    calls = []

    def refuse(endpoint):
        calls.append(endpoint)
        raise ZooKeeperAuthFailed(
            "ZooKeeper at x:1: /DBus may be changed by 'dbus' with another password only"
        )

    monkeypatch.setattr(liveness.zk, "client", refuse)
    refused = []
    a = liveness.Announcer(
        ZooKeeperEndpoint(hosts="x:1"), "demo", "dispatcher", every_s=0.01, on_refused=refused.append
    )
    a.start()
    try:
        wait_for(lambda: refused)
        assert a._thread is not None
        a._thread.join(5)
        assert not a._thread.is_alive() and len(calls) == 1  # not tried again
        assert refused[0].code == "ZOOKEEPER_AUTH_FAILED"
    finally:
        a.stop()


def test_a_lifecycle_stops_its_stage_with_the_refusal_and_exit_3(monkeypatch):
    from dbuslib.zk import ZooKeeperAuthFailed

    life = Lifecycle("dispatcher", "demo", watch_jvm=False)
    life._refused(ZooKeeperAuthFailed("ZooKeeper at x:1 refused a session without authentication"))
    assert life.stopping.is_set() and life.code == 3
    assert (
        life.refusal
        == "dispatcher: ZOOKEEPER_AUTH_FAILED: ZooKeeper at x:1 refused a session without authentication"
    )
