"""dbusclient.checkpoint: the versioned JSON form, its invariants, and the file store (atomic replace)."""

from __future__ import annotations

import json
import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dbusclient.checkpoint import (
    Bootstrap,
    Checkpoint,
    CheckpointError,
    FileCheckpointStore,
    Mode,
    PartitionPosition,
    TablePull,
    from_json,
    to_dict,
    to_json,
)

PULL = TablePull("demo", "shop", "orders", 1704164645123, 1030000012000000, 420001, False)
SNAPSHOT = Checkpoint(
    Mode.BOOTSTRAP_SNAPSHOT,
    (PartitionPosition("demo.shop.result", 0, 1234, 1030000012345678),),
    Bootstrap((PULL,)),
)
GOLDEN = """{
 "format": "dbus-client-checkpoint",
 "version": 1,
 "mode": "BOOTSTRAP_SNAPSHOT",
 "partitions": [
  {
   "topic": "demo.shop.result",
   "partition": 0,
   "offset": 1234,
   "ums_id": "1030000012345678"
  }
 ],
 "bootstrap": {
  "pulls": [
   {
    "ds": "demo",
    "schema": "shop",
    "table": "orders",
    "seqno": "1704164645123",
    "ums_id": "1030000012000000",
    "rows": 420001,
    "ended": false
   }
  ],
  "catchup": []
 }
}
"""

positions = st.builds(
    PartitionPosition,
    st.sampled_from(["demo.shop.result", "demo.crm.result"]),
    st.integers(0, 3),
    st.integers(0, 2**63 - 1),
    st.none() | st.integers(0, 2**63 - 1),
)
ended_pulls = st.builds(
    TablePull,
    st.just("demo"),
    st.sampled_from(["shop", "crm"]),
    st.text(min_size=1, max_size=5),
    st.integers(0, 10**20),
    st.integers(0, 2**63 - 1),
    st.integers(0, 10**9),
    st.just(True),
)


def unique(ps):
    return tuple({(p.topic, p.partition): p for p in ps}.values())


checkpoints = st.one_of(
    st.builds(Checkpoint, st.just(Mode.ONLINE), st.lists(positions).map(unique)),
    st.builds(
        Checkpoint,
        st.just(Mode.BOOTSTRAP_SNAPSHOT),
        st.lists(positions).map(unique),
        st.builds(Bootstrap, st.lists(ended_pulls, min_size=1, max_size=3).map(tuple)),
    ),
    st.builds(
        Checkpoint,
        st.just(Mode.BOOTSTRAP_CATCHUP),
        st.lists(positions).map(unique),
        st.builds(
            Bootstrap,
            st.lists(ended_pulls, min_size=1, max_size=3).map(tuple),
            st.lists(positions).map(unique),
        ),
    ),
)


def test_golden_json_form():
    assert to_json(SNAPSHOT) == GOLDEN
    assert from_json(GOLDEN) == SNAPSHOT


@given(checkpoints)
@settings(max_examples=200, deadline=None)
def test_json_round_trip(cp):
    assert from_json(to_json(cp)) == cp


def test_file_store_round_trip_and_missing_file(tmp_path):
    store = FileCheckpointStore(tmp_path / "orders.checkpoint.json")
    assert store.load() is None
    store.save(SNAPSHOT)
    assert store.load() == SNAPSHOT
    online = Checkpoint().advanced("demo.shop.result", 0, 2000, 1030000099999999)
    store.save(online)
    assert store.load() == online
    assert os.listdir(tmp_path) == ["orders.checkpoint.json"]  # no temporary file left behind


def test_file_store_save_replaces_by_rename(tmp_path, monkeypatch):
    path = tmp_path / "cp.json"
    store = FileCheckpointStore(path)
    store.save(SNAPSHOT)
    calls = []
    real_replace = os.replace

    def failing_replace(src, dst):
        calls.append((os.path.basename(src), os.path.basename(dst)))
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", failing_replace)
    with pytest.raises(CheckpointError, match=r"cp\.json: cannot save the checkpoint: No space left"):
        store.save(Checkpoint())
    monkeypatch.setattr(os, "replace", real_replace)
    assert calls == [(f".cp.json.{os.getpid()}.tmp", "cp.json")]
    assert store.load() == SNAPSHOT  # the old checkpoint is intact
    assert os.listdir(tmp_path) == ["cp.json"]


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("", "not JSON"),
        ('{"format": "dbus-client-checkpoint", "version": 1, "mode": "ONLINE", "partitions": [', "not JSON"),
        ("[]", r"\$: expected an object, got list"),
        ('{"format": "x", "version": 1}', "format: expected 'dbus-client-checkpoint', got 'x'"),
        ('{"format": "dbus-client-checkpoint", "version": 2}', "version: 2 is not supported"),
        ('{"format": "dbus-client-checkpoint", "version": 1, "partitions": []}', "mode: missing"),
        (
            '{"format": "dbus-client-checkpoint", "version": 1, "mode": "ONLINE", "partitions": [], "x": 1}',
            r"\$: unknown key\(s\) \['x'\]",
        ),
    ],
)
def test_corrupt_file_names_the_file_and_field(tmp_path, text, error):
    path = tmp_path / "cp.json"
    path.write_text(text)
    with pytest.raises(CheckpointError, match=f"^{path}: {error}"):
        FileCheckpointStore(path).load()


def _with(**changes):
    obj = to_dict(SNAPSHOT)
    for dotted, value in changes.items():
        target = obj
        *parents, last = dotted.split("__")
        for part in parents:
            target = target[int(part)] if part.isdigit() else target[part]
        target[last] = value
    return json.dumps(obj)


@pytest.mark.parametrize(
    ("text", "error"),
    [
        (_with(mode="SNAPSHOT"), "mode: 'SNAPSHOT' is not one of"),
        (_with(partitions__0__offset=-1), r"partitions\[0\]\.offset: expected a non-negative integer"),
        (_with(partitions__0__offset="12"), r"partitions\[0\]\.offset: expected a non-negative integer"),
        (
            _with(partitions__0__ums_id=1030000012345678),
            r"partitions\[0\]\.ums_id: expected a decimal integer",
        ),
        (_with(partitions__0__topic=""), r"partitions\[0\]\.topic: expected a non-empty string"),
        (_with(bootstrap__pulls__0__seqno="12a"), r"bootstrap\.pulls\[0\]\.seqno: expected a decimal"),
        (_with(bootstrap__pulls__0__ended="no"), r"bootstrap\.pulls\[0\]\.ended: expected true or false"),
        (_with(bootstrap__pulls=[]), "bootstrap.pulls: mode BOOTSTRAP_SNAPSHOT needs at least one pull"),
        (_with(bootstrap=None), "bootstrap.pulls: mode BOOTSTRAP_SNAPSHOT needs at least one pull"),
        (_with(mode="ONLINE"), "bootstrap: must be null in mode ONLINE"),
        (_with(mode="BOOTSTRAP_CATCHUP"), r"bootstrap\.pulls\[0\]: mode BOOTSTRAP_CATCHUP needs every pull"),
        (
            _with(partitions=[to_dict(SNAPSHOT)["partitions"][0]] * 2),
            r"partitions\[1\]: demo\.shop\.result partition 0 is listed twice",
        ),
    ],
)
def test_bad_fields_and_broken_invariants_are_named(text, error):
    with pytest.raises(CheckpointError, match=f"^state.json: {error}"):
        from_json(text, "state.json")


def test_advanced_moves_one_partition_and_keeps_the_last_ums_id():
    cp = Checkpoint().advanced("t", 1, 10, 500).advanced("t", 0, 3).advanced("t", 1, 12)
    assert cp.partitions == (PartitionPosition("t", 0, 3, None), PartitionPosition("t", 1, 12, 500))
    assert cp.offsets() == {("t", 0): 3, ("t", 1): 12}
