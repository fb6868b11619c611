"""Leader election and committed positions on the real ZooKeeper, including a ZooKeeper restart.

Each test uses its own source name ``pytest_<uuid>`` and deletes ``<root>/Extractor/<ds>`` afterwards.
"""

from __future__ import annotations

import subprocess
import threading
import time
import uuid
from pathlib import Path

import pytest
from helpers import wait_until
from kazoo.client import KazooClient

from dbuslib import zk, zkpaths
from extractor.errors import DeposedError, PositionError
from extractor.leader import Leadership, read_epoch
from extractor.position import Position
from extractor.store import PositionStore, read_file

REPO = Path(__file__).resolve().parents[2]


def stack(command: str) -> None:
    subprocess.run(
        ["bash", str(REPO / "stack" / "stack.sh"), command, "zookeeper"],
        check=True,
        timeout=120,
        capture_output=True,
    )


@pytest.fixture
def zk_cfg(cfg):
    return cfg.endpoints.zookeeper


@pytest.fixture
def ds(zk_cfg):
    name = f"pytest_{uuid.uuid4().hex[:12]}"
    yield name
    cleaner = zk.client(zk_cfg)
    try:
        cleaner.delete(zkpaths.extractor(zk_cfg.root, name), recursive=True)
    finally:
        cleaner.stop()
        cleaner.close()


@pytest.fixture
def clients(zk_cfg):
    """A factory of connected clients, each with its own session; all closed at teardown."""
    made: list[KazooClient] = []

    def make() -> KazooClient:
        made.append(zk.client(zk_cfg))
        return made[-1]

    yield make
    for c in made:
        c.stop()
        c.close()


def store(client, zk_cfg, ds, tmp_path, name="host") -> PositionStore:
    return PositionStore(client, zkpaths.extractor_position(zk_cfg.root, ds), tmp_path / name / f"{ds}.json")


def node(client, zk_cfg, ds) -> Position:
    data, _ = client.get(zkpaths.extractor_position(zk_cfg.root, ds))
    return Position.from_json(data)


def acquire_in_thread(leadership: Leadership, timeout: float) -> tuple[threading.Thread, list]:
    result: list = []
    thread = threading.Thread(target=lambda: result.append(leadership.acquire(timeout)), daemon=True)
    thread.start()
    return thread, result


def contenders(client, zk_cfg, ds) -> int:
    return len(client.get_children(zkpaths.extractor_leader(zk_cfg.root, ds)))


def expire_session(client: KazooClient, hosts: str) -> None:
    """Expire ``client``'s session the way a partition would: another connection takes it over and ends it."""
    impostor = KazooClient(hosts=hosts, client_id=client.client_id)
    impostor.start(timeout=10)
    impostor.stop()
    impostor.close()


def test_standby_waits_until_the_leader_releases(clients, zk_cfg, ds):
    a = Leadership(clients(), zk_cfg.root, ds, "host-a:1")
    b = Leadership(clients(), zk_cfg.root, ds, "host-b:2")
    first = a.acquire(timeout=10)
    thread, result = acquire_in_thread(b, timeout=30)
    wait_until(lambda: contenders(clients(), zk_cfg, ds) == 2, 10, "the standby to queue")
    assert thread.is_alive() and a.current_leader() == b.current_leader() == "host-a:1"
    a.release()
    thread.join(15)
    assert result == [first + 1]
    assert b.current_leader() == "host-b:2"
    assert b.leader_info()["epoch"] == first + 1 == read_epoch(clients(), zk_cfg.root, ds)
    b.release()
    assert a.current_leader() is None


def test_standby_takes_over_when_the_leader_session_closes(clients, zk_cfg, ds):
    client_a = clients()
    a = Leadership(client_a, zk_cfg.root, ds, "host-a:1")
    b = Leadership(clients(), zk_cfg.root, ds, "host-b:2")
    first = a.acquire(timeout=10)
    thread, result = acquire_in_thread(b, timeout=30)
    wait_until(lambda: contenders(clients(), zk_cfg, ds) == 2, 10, "the standby to queue")
    client_a.stop()  # kazoo reports a closed session as LOST too
    thread.join(15)
    assert result == [first + 1]
    assert a.deposed.is_set() and not b.deposed.is_set()


def test_expired_leader_is_deposed_and_its_commit_refused(clients, zk_cfg, ds, tmp_path):
    client_a, client_b = clients(), clients()
    a = Leadership(client_a, zk_cfg.root, ds, "host-a:1")
    b = Leadership(client_b, zk_cfg.root, ds, "host-b:2")
    store_a, store_b = store(client_a, zk_cfg, ds, tmp_path, "a"), store(client_b, zk_cfg, ds, tmp_path, "b")
    epoch_a = a.acquire(timeout=10)
    assert store_a.load() is None
    store_a.commit(Position("mariadb-bin.000001", 100, epoch=epoch_a))

    expire_session(client_a, zk_cfg.hosts)
    epoch_b = b.acquire(timeout=30)
    assert epoch_b == epoch_a + 1
    assert store_b.load() == Position("mariadb-bin.000001", 100, epoch=epoch_a)
    store_b.commit(Position("mariadb-bin.000001", 200, epoch=epoch_b))
    wait_until(a.deposed.is_set, 30, "kazoo to report the expired session as LOST")
    wait_until(lambda: client_a.connected, 30, "kazoo to open a new session")

    with pytest.raises(DeposedError, match=f"epoch {epoch_b} committed"):
        store_a.commit(Position("mariadb-bin.000001", 300, epoch=epoch_a))
    with pytest.raises(DeposedError, match="commits no more"):
        store_a.commit(Position("mariadb-bin.000001", 400, epoch=epoch_a))
    assert node(client_b, zk_cfg, ds) == Position("mariadb-bin.000001", 200, epoch=epoch_b)


def test_own_write_with_a_lost_reply_is_adopted(clients, zk_cfg, ds, tmp_path):
    client = clients()
    s = store(client, zk_cfg, ds, tmp_path)
    s.load()
    s.commit(Position("mariadb-bin.000001", 100, epoch=3))
    # the same epoch wrote the node once more behind the store's back, as when a reply is lost
    behind_its_back = Position("mariadb-bin.000001", 150, epoch=3).to_json().encode()
    client.set(zkpaths.extractor_position(zk_cfg.root, ds), behind_its_back)
    s.commit(Position("mariadb-bin.000001", 200, epoch=3))
    assert node(client, zk_cfg, ds) == Position("mariadb-bin.000001", 200, epoch=3)


def test_reset_deposes_a_running_leader(clients, zk_cfg, ds, tmp_path):
    client = clients()
    epoch = Leadership(client, zk_cfg.root, ds, "host-a:1").acquire(timeout=10)
    running = store(client, zk_cfg, ds, tmp_path, "a")
    running.load()
    running.commit(Position("mariadb-bin.000002", 500, epoch=epoch))
    reset = store(clients(), zk_cfg, ds, tmp_path, "operator").reset(Position("mariadb-bin.000001", 4))
    assert reset == Position("mariadb-bin.000001", 4, epoch=epoch + 1)
    with pytest.raises(DeposedError):
        running.commit(Position("mariadb-bin.000002", 600, epoch=epoch))
    assert store(clients(), zk_cfg, ds, tmp_path, "a").load() == reset  # ZooKeeper beats the older file


def test_reset_under_an_epoch_taken_by_the_operator(clients, zk_cfg, ds, tmp_path):
    client = clients()
    operator = Leadership(client, zk_cfg.root, ds, "reset")
    stale, epoch = operator.bump_epoch(), operator.bump_epoch()
    s = store(client, zk_cfg, ds, tmp_path)
    with pytest.raises(PositionError, match=f"epoch {epoch} was taken since"):
        s.reset(Position("mariadb-bin.000001", 4, epoch=stale))
    gtid_only = Position("", 0, gtid="0-1-42", epoch=epoch)
    assert s.reset(gtid_only) == gtid_only
    assert s.read_zk() == s.read_file() == gtid_only
    assert store(client, zk_cfg, ds, tmp_path).load() == gtid_only


@pytest.mark.exclusive  # stops and starts the stack's ZooKeeper
def test_zookeeper_restart_commits_go_to_the_file_then_catch_up(clients, zk_cfg, ds, tmp_path):
    client = clients()
    leadership = Leadership(client, zk_cfg.root, ds, "host-a:1")
    epoch = leadership.acquire(timeout=10)
    s = store(client, zk_cfg, ds, tmp_path)
    s.load()
    s.commit(Position("mariadb-bin.000001", 100, epoch=epoch))
    try:
        stack("down")
        wait_until(lambda: not client.connected, 30, "kazoo to notice ZooKeeper is down")
        for pos in (200, 300, 400):
            started = time.monotonic()
            s.commit(Position("mariadb-bin.000001", pos, epoch=epoch))
            assert time.monotonic() - started < 1
        assert s.zk_behind
        assert read_file(tmp_path / "host" / f"{ds}.json") == Position("mariadb-bin.000001", 400, epoch=epoch)
    finally:
        stack("up")
    wait_until(lambda: client.connected, 90, "kazoo to reconnect")
    assert not leadership.deposed.is_set()  # SUSPENDED, then the same session again
    s.commit(Position("mariadb-bin.000001", 500, epoch=epoch))
    assert not s.zk_behind
    assert node(clients(), zk_cfg, ds) == Position("mariadb-bin.000001", 500, epoch=epoch)
    assert leadership.current_leader() == "host-a:1"
