"""The file side of the position store: atomic mirror, newest wins, never backwards, ZooKeeper absent."""

import os

import pytest

from extractor import store as store_module
from extractor.errors import DeposedError, PositionError, PositionFileError
from extractor.position import Position
from extractor.store import PositionStore, read_file, write_file

P1 = Position("mariadb-bin.000003", 400, "0-1-41", 1714557600, 2)
P2 = Position("mariadb-bin.000004", 4, "0-1-42", 1714557601, 2)


@pytest.fixture
def path(tmp_path):
    return tmp_path / "state" / "demo.position.json"


def file_store(path):
    return PositionStore(None, "/DBus/Extractor/demo/position", path)


class Disconnected:
    """A KazooClient that lost its connection: every call would block, so none may be made."""

    connected = False

    def __getattr__(self, name):
        msg = f"ZooKeeper call {name} while not connected"
        raise AssertionError(msg)


def test_commit_then_load_round_trips(path):
    s = file_store(path)
    assert s.load() is None
    assert s.commit(P1) == P1
    assert read_file(path) == P1
    assert file_store(path).load() == P1


@pytest.mark.parametrize("broken", ["fsync", "replace"])
def test_failed_write_leaves_the_old_file_and_no_temp(path, monkeypatch, broken):
    write_file(path, P1.to_json().encode())

    def fail(*args):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(store_module.os, broken, fail)
    with pytest.raises(PositionFileError, match="No space left"):
        file_store(path).commit(P2)
    assert read_file(path) == P1
    assert os.listdir(path.parent) == [path.name]


@pytest.mark.parametrize(
    ("committed", "later", "error"),
    [
        (P2, P1, PositionError),  # behind the last commit
        (P1, Position("mariadb-bin.000003", 399, epoch=2), PositionError),
        (
            P1,
            Position("", 0, gtid="0-1-50", epoch=2),
            PositionError,
        ),  # GTID-only positions are never committed
        (P1, Position("mariadb-bin.000009", 4, epoch=1), DeposedError),  # older epoch
    ],
)
def test_commit_refuses(path, committed, later, error):
    s = file_store(path)
    s.commit(committed)
    with pytest.raises(error):
        s.commit(later)
    assert read_file(path) == committed


def test_same_position_may_be_committed_again(path):
    s = file_store(path)
    s.commit(P1)
    s.commit(P1)
    assert read_file(path) == P1


def test_load_sets_the_floor(path):
    file_store(path).commit(P2)
    s = file_store(path)
    assert s.load() == P2
    with pytest.raises(PositionError, match="behind the committed mariadb-bin.000004:4"):
        s.commit(P1)


def test_reset_moves_backwards_under_a_new_epoch(path):
    s = file_store(path)
    s.commit(P2)
    assert s.reset(Position("mariadb-bin.000001", 4)) == Position("mariadb-bin.000001", 4, epoch=3)
    assert file_store(path).load() == Position("mariadb-bin.000001", 4, epoch=3)
    s.commit(Position("mariadb-bin.000001", 90, epoch=3))


def test_reset_to_a_gtid_then_commit_a_file_position(path):
    s = file_store(path)
    assert s.reset(Position("", 0, gtid="0-1-42")) == Position("", 0, gtid="0-1-42", epoch=1)
    s.commit(Position("mariadb-bin.000001", 90, "0-1-43", epoch=1))
    assert s.read_file() == Position("mariadb-bin.000001", 90, "0-1-43", epoch=1)


@pytest.mark.parametrize(
    ("local", "remote", "newest"),
    [
        (P2, P1, P2),  # written while ZooKeeper was down
        (P1, P2, P2),
        (Position("mariadb-bin.000009", 4, epoch=1), P1, P1),  # an older leader's file loses
        (None, P1, P1),
        (P1, None, P1),
        (None, None, None),
    ],
)
def test_newest_by_epoch_then_sort_key(local, remote, newest):
    assert store_module._newest(local, remote) == newest


def test_corrupt_file_is_named(path):
    path.parent.mkdir(parents=True)
    path.write_text('{"file": "mariadb-bin.000003"}')
    with pytest.raises(PositionError, match=f"^{path}: missing key 'pos'$"):
        file_store(path).load()


def test_disconnected_zookeeper_commits_to_the_file_without_calls(path):
    s = PositionStore(Disconnected(), "/DBus/Extractor/demo/position", path)
    s.commit(P1)
    s.commit(P2)
    assert read_file(path) == P2
    assert s.zk_behind
