"""dbusclient.consumer over a fake Kafka: windows, callbacks, checkpoints, retries, rebalances, bootstrap.

The fake broker keeps topics in memory (partitions as lists, an earliest offset per partition for
retention, committed offsets per group). ``FakeKafka`` is the part of kafka-python's KafkaConsumer the
Consumer uses: the rebalance listener runs inside ``poll``, as in kafka-python. The hypothesis test plays
a bootstrap under live writes: increments before the request (skipped: the pull covers them), the pull's
rows at its snapshot position interleaved with increments older and newer than it, duplicates, windows
of random sizes, and kills (a new Consumer from the checkpoint, the sink and its key states kept) at
random windows, after a window's checkpoint or before it (the window is then read again). The sink must
end equal to the source, and no key may go back to an older change.
"""

from __future__ import annotations

import dataclasses
import json
import random
import re
from collections import namedtuple
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka import TopicPartition

from dbusclient.checkpoint import Checkpoint, FileCheckpointStore, Mode, PartitionPosition
from dbusclient.consumer import (
    BootstrapFailed,
    CallbackFailed,
    Consumer,
    ConsumerCallbacks,
    ConsumerConfig,
    ModFilter,
    OffsetsGone,
    RangeFilter,
    Result,
    Topics,
    key_hash,
    parse_key_filter,
)
from dbusclient.decode import BadRowError, RowChange, RowRefused, TableRef
from dbusclient.merge import KeyState
from dbusclient.metrics import ClientMetrics
from ums.control import ControlType
from ums.control import from_json as control_from_json

Record = namedtuple("Record", "topic partition offset key value headers")
T = TableRef("demo", "shop", "orders")
TOPIC, CTRL = "demo.shop.result", "demo_ctrl"
TOPICS = Topics({T: TOPIC}, CTRL)
FIELDS = (
    '{"name":"ums_id_","type":"long","nullable":false,"encoded":false},'
    '{"name":"ums_ts_","type":"datetime","nullable":false,"encoded":false},'
    '{"name":"ums_op_","type":"string","nullable":false,"encoded":false},'
    '{"name":"ums_uid_","type":"string","nullable":false,"encoded":false},'
    '{"name":"id","type":"long","nullable":false,"encoded":false},'
    '{"name":"v","type":"string","nullable":true,"encoded":false}'
)


def message(
    rows: list[tuple[int, str, int, int, str | None]], initial: bool = False, version: int = 0
) -> bytes:
    """A UMS JSON message of shop.orders; rows are (ums_id, op, uid, id, v)."""
    protocol = "data_initial_data" if initial else "data_increment_data"
    tuples = ",".join(
        json.dumps({"tuple": [str(i), "2024-01-02 03:04:05.000", op, str(uid), str(key), v]})
        for i, op, uid, key, v in rows
    )
    return (
        f'{{"protocol":{{"type":"{protocol}","version":"1.3"}},'
        f'"schema":{{"namespace":"mysql.demo.shop.orders.{version}.0.0","fields":[{FIELDS}],'
        f'"batchId":0}},"payload":[{tuples}]}}'
    ).encode()


def marker(kind: str, seqno: int, ums_id: int) -> tuple[bytes, list[tuple[str, bytes]]]:
    headers = [("dbus_fullpull", kind.encode()), ("dbus_fullpull_id", str(seqno).encode())]
    headers.append(("dbus_fullpull_ums_id", str(ums_id).encode()))
    return message([], initial=True), headers


class Broker:
    """Topics in memory: topic -> partitions -> records; earliest offsets; committed offsets per group."""

    def __init__(self, partitions: int = 1) -> None:
        self.topics: dict[str, list[list[Record]]] = {TOPIC: [[] for _ in range(partitions)]}
        self.earliest: dict[TopicPartition, int] = {}
        self.committed: dict[tuple[str, TopicPartition], int] = {}

    def append(self, value: bytes, partition: int = 0, headers: Any = (), topic: str = TOPIC) -> int:
        part = self.topics.setdefault(topic, [[]])[partition]
        part.append(Record(topic, partition, len(part), b"shop.orders", value, list(headers)))
        return len(part) - 1

    def forget_before(self, tp: TopicPartition, offset: int) -> None:
        """Retention: records below ``offset`` are gone."""
        self.earliest[tp] = offset

    def requests(self) -> list[Any]:
        return [control_from_json(r.value) for p in self.topics.get(CTRL, []) for r in p]


class FakeKafka:
    """A KafkaConsumer of one group member; ``move(assignment)`` makes the next poll rebalance (eager:
    every partition is revoked, then the new assignment is given, at the group's committed offsets)."""

    def __init__(self, broker: Broker, group: str | None = "g") -> None:
        self.broker, self.group = broker, group
        self.positions: dict[TopicPartition, int] = {}
        self.listener: Any = None
        self.pending: list[TopicPartition] | None = None
        self.closed = False

    def all_partitions(self) -> list[TopicPartition]:
        return [TopicPartition(TOPIC, p) for p in range(len(self.broker.topics[TOPIC]))]

    def subscribe(self, topics: Any, listener: Any) -> None:
        self.listener = listener
        if self.pending is None:
            self.pending = self.all_partitions()

    def move(self, assignment: list[TopicPartition]) -> None:
        self.pending = assignment

    def assign(self, partitions: Any) -> None:
        self.positions = {tp: self._start(tp) for tp in partitions}

    def partitions_for_topic(self, topic: str) -> set[int] | None:
        parts = self.broker.topics.get(topic)
        return None if parts is None else set(range(len(parts)))

    def _start(self, tp: TopicPartition) -> int:
        committed = self.committed(tp)
        return committed if committed is not None else self.broker.earliest.get(tp, 0)

    def poll(self, timeout_ms: int, max_records: int) -> dict[TopicPartition, list[Record]]:
        if self.pending is not None:  # kafka-python's eager protocol: revoke all, assign all anew
            new, self.pending = self.pending, None
            self.listener.on_partitions_revoked(list(self.positions))
            self.positions = {tp: self._start(tp) for tp in new}
            self.listener.on_partitions_assigned(list(new))
        out: dict[TopicPartition, list[Record]] = {}
        for tp, pos in sorted(self.positions.items()):
            pos = max(pos, self.broker.earliest.get(tp, 0))
            records = self.broker.topics[tp.topic][tp.partition][pos : pos + max_records]
            if records:
                out[tp] = records
                max_records -= len(records)
                self.positions[tp] = pos + len(records)
        return out

    def seek(self, tp: TopicPartition, offset: int) -> None:
        assert tp in self.positions, f"seek of {tp}, not assigned"
        self.positions[tp] = offset

    def beginning_offsets(self, partitions: Any) -> dict[TopicPartition, int]:
        return {tp: self.broker.earliest.get(tp, 0) for tp in partitions}

    def end_offsets(self, partitions: Any) -> dict[TopicPartition, int]:
        return {tp: len(self.broker.topics[tp.topic][tp.partition]) for tp in partitions}

    def committed(self, tp: TopicPartition) -> int | None:
        return self.broker.committed.get((str(self.group), tp))

    def commit(self, offsets: Any) -> None:
        for tp, meta in offsets.items():
            assert tp in self.positions, f"commit of {tp}, owned by another member"
            self.broker.committed[(str(self.group), tp)] = meta.offset

    def assignment(self) -> set[TopicPartition]:
        return set(self.positions)

    def close(self) -> None:
        self.closed = True


class FakeProducer:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker

    def send(
        self, topic: str, key: bytes | None = None, value: bytes | None = None, headers: Any = None
    ) -> None:
        self.broker.append(value or b"", 0, headers or (), topic=topic)

    def flush(self, timeout: float | None = None) -> None:
        pass


class Sink(ConsumerCallbacks):
    """An in-memory replica: key -> values, with every call logged; ``fail`` gives results to return."""

    def __init__(self) -> None:
        self.rows: dict[tuple[Any, ...], dict[str, Any]] = {}
        self.applied: dict[tuple[Any, ...], tuple[int, int]] = {}
        self.calls: list[str] = []
        self.fail: list[object] = []
        self.states: dict[Any, KeyState] = {}
        self.crash_before_checkpoint = False

    def on_start_data_event_sequence(self, ums_id: int) -> Result:
        self.calls.append("start")
        return Result.SUCCESS

    def on_data_event(self, change: RowChange) -> Result:
        if self.fail:
            result = self.fail.pop(0)
            if isinstance(result, Exception):
                raise result
            if result is not Result.SUCCESS:
                return result  # type: ignore[return-value]
        # a retried window applies its changes again: equal is fine, older is not
        assert change.position >= self.applied.get(change.key, (-1, -1)), f"{change.key} went backwards"
        self.applied[change.key] = change.position
        self.calls.append(f"data {change.key[0]} {change.op.value}")
        if change.gone:
            self.rows.pop(change.key, None)
        else:
            self.rows[change.key] = dict(change.values)
        return Result.SUCCESS

    def on_end_data_event_sequence(self, ums_id: int) -> Result:
        self.calls.append("end")
        return Result.SUCCESS

    def on_schema_change(self, table: TableRef, old: int | None, new: int, schema: Any) -> Result:
        assert schema.namespace.version == new
        self.calls.append(f"schema {old}->{new}")
        return Result.SUCCESS

    def on_start_bootstrap(self, pulls: Any) -> Result:
        self.calls.append(f"start_bootstrap {len(pulls)}")
        return Result.SUCCESS

    def on_end_bootstrap(self, pulls: Any) -> Result:
        self.calls.append("end_bootstrap")
        return Result.SUCCESS

    def on_rollback(self, checkpoint: Checkpoint) -> Result:
        self.calls.append("rollback")
        return Result.SUCCESS

    def on_checkpoint(self, checkpoint: Checkpoint) -> Result:
        if self.crash_before_checkpoint:
            self.crash_before_checkpoint = False
            raise Crash
        return Result.SUCCESS


class Crash(BaseException):
    """The consumer's process dies (here: after a window's callbacks, before its checkpoint is saved)."""


class MemoryStore:
    def __init__(self, checkpoint: Checkpoint | None = None) -> None:
        self.checkpoint, self.saves = checkpoint, 0

    def load(self) -> Checkpoint | None:
        return self.checkpoint

    def save(self, checkpoint: Checkpoint) -> None:
        self.checkpoint, self.saves = checkpoint, self.saves + 1


def make(
    broker: Broker, sink: Sink, store: Any, kafka: FakeKafka | None = None, **config: Any
) -> tuple[Consumer, list[float]]:
    slept: list[float] = []
    settings_ = {"source": "demo", "tables": {"shop.orders": ("id",)}, "group_id": "g", "max_records": 100}
    consumer = Consumer(
        ConsumerConfig(**{**settings_, "backoff_s": 0.25, **config}),
        sink,
        store,
        kafka or FakeKafka(broker),
        TOPICS,
        FakeProducer(broker),
        states=sink.states,
        sleep=slept.append,
        now_ms=lambda: 1704164645123,
    )
    consumer.start()
    if consumer.config.group_id is not None:
        assert consumer.poll_once() == 0  # joins the group: what it read of new partitions is dropped
    return consumer, slept


def drain(*consumers: Consumer) -> None:
    """Poll until two rounds in a row read nothing (a rebalance costs one empty poll)."""
    idle = 0
    while idle < 2:
        idle = 0 if sum(c.poll_once() for c in consumers) else idle + 1


def online(partitions: int = 1) -> Checkpoint:
    """A checkpoint at the start of every partition: no bootstrap."""
    return Checkpoint(Mode.ONLINE, tuple(PartitionPosition(TOPIC, p, 0) for p in range(partitions)))


def test_a_window_calls_back_in_order_suppresses_duplicates_and_saves_the_checkpoint(tmp_path: Path) -> None:
    broker, sink = Broker(), Sink()
    store = FileCheckpointStore(tmp_path / "cp.json")
    store.save(online())
    inc = message(
        [(101, "i", 101_000000, 1, "a"), (102, "u", 102_000000, 1, "b"), (102, "i", 102_000001, 2, "x")]
    )
    broker.append(inc)
    broker.append(inc)  # delivered twice
    consumer, _ = make(broker, sink, store)
    assert consumer.poll_once() == 2
    assert sink.calls == ["start", "schema None->0", "data 1 i", "data 1 u", "data 2 i", "end"]
    assert sink.rows == {(1,): {"id": "1", "v": "b"}, (2,): {"id": "2", "v": "x"}}
    saved = store.load()
    assert saved is not None and saved.partitions == (PartitionPosition(TOPIC, 0, 2, 102),)
    assert broker.committed[("g", TopicPartition(TOPIC, 0))] == 2
    assert consumer.poll_once() == 0


def test_an_error_is_retried_from_the_last_checkpoint_with_backoff() -> None:
    broker, sink, store = Broker(), Sink(), MemoryStore(online())
    broker.append(message([(101, "i", 101_000000, 1, "a"), (102, "i", 102_000000, 2, "b")]))
    sink.fail = [Result.SUCCESS, Result.ERROR, RuntimeError("sink down")]  # key 1 ok, key 2 fails twice
    consumer, slept = make(broker, sink, store)
    consumer.poll_once()
    assert sink.calls.count("rollback") == 2 and slept == [0.25, 0.5]
    assert sink.rows == {(1,): {"id": "1", "v": "a"}, (2,): {"id": "2", "v": "b"}}
    assert store.saves == 1 and store.checkpoint is not None and store.checkpoint.offsets()[(TOPIC, 0)] == 1


def test_retries_spent_stop_with_a_clear_error_and_a_restart_reads_the_window_again() -> None:
    broker, sink, store = Broker(), Sink(), MemoryStore(online())
    broker.append(message([(101, "i", 101_000000, 1, "a")]))
    sink.fail = [Result.ERROR] * 3
    consumer, _ = make(broker, sink, store, retries=2)
    with pytest.raises(CallbackFailed, match=r"demo.shop.result/0@0..0: the callbacks failed 3 time") as e:
        consumer.poll_once()
    assert e.value.code == "CLIENT_CALLBACK_FAILED" and "on_data_event returned" in str(e.value)
    assert store.saves == 0 and sink.states == {}  # nothing applied, nothing remembered
    again, _ = make(broker, sink, store)
    assert again.poll_once() == 1 and sink.rows == {(1,): {"id": "1", "v": "a"}}


def test_retries_spent_with_a_dead_letter_file_write_the_window_there_and_go_on(tmp_path: Path) -> None:
    broker, sink, store = Broker(), Sink(), MemoryStore(online())
    broker.append(message([(101, "i", 101_000000, 1, "a")]))
    broker.append(b"not json")
    sink.fail = [Result.ERROR]
    dead = tmp_path / "dead.jsonl"
    consumer, _ = make(broker, sink, store, retries=0, dead_letter_file=str(dead))
    consumer.poll_once()
    lines = [json.loads(line) for line in dead.read_text().splitlines()]
    # the bad record is dead-lettered when decoded, then the window whose callback failed
    assert [(d["offset"], d["error"][:20]) for d in lines] == [
        (1, "demo.shop.result/0@1"),
        (0, "on_data_event return"),
    ]
    assert store.checkpoint is not None and store.checkpoint.offsets()[(TOPIC, 0)] == 2 and sink.rows == {}


def test_a_bad_record_without_a_dead_letter_stops_naming_its_offset() -> None:
    broker, sink, store = Broker(), Sink(), MemoryStore(online())
    broker.append(b"{}")
    consumer, _ = make(broker, sink, store)
    with pytest.raises(Exception, match=r"demo.shop.result/0@0: ") as e:
        consumer.poll_once()
    assert getattr(e.value, "code", None) == "CLIENT_BAD_ROW"


class ApplyingSink(Sink):
    """A sink that applies a window in its checkpoint store's ``save``, as the Replicator does: a change
    whose ``v`` is ``bad`` does not decode there (``RowRefused``); with ``refuse_early`` its
    ``on_data_event`` refuses it instead."""

    def __init__(self, refuse_early: bool = False) -> None:
        super().__init__()
        self.pending: list[RowChange] = []
        self.checkpoint: Checkpoint | None = online()
        self.saves, self.refuse_early = 0, refuse_early

    def on_data_event(self, change: RowChange) -> Result:
        if self.refuse_early and change.values.get("v") == "bad":
            raise RowRefused(f"key {list(change.key)}: v does not decode", change)
        self.pending.append(change)
        return Result.SUCCESS

    def on_rollback(self, checkpoint: Checkpoint) -> Result:
        self.pending.clear()
        return super().on_rollback(checkpoint)

    def load(self) -> Checkpoint | None:
        return self.checkpoint

    def save(self, checkpoint: Checkpoint) -> None:
        for c in self.pending:
            if c.values.get("v") == "bad":
                raise RowRefused(f"key {list(c.key)}: v does not decode", c)
        for c in self.pending:
            self.rows[c.key] = dict(c.values)
        self.pending.clear()
        self.checkpoint, self.saves = checkpoint, self.saves + 1


def refused_window(broker: Broker) -> None:
    broker.append(message([(101, "i", 101_000000, 1, "a")]))
    broker.append(message([(102, "u", 102_000000, 1, "bad"), (102, "i", 102_000001, 2, "x")]))
    broker.append(message([(103, "i", 103_000000, 3, "c")]))


@pytest.mark.parametrize("refuse_early", [False, True], ids=["in-save", "in-callback"])
def test_a_change_that_does_not_decode_sets_its_record_aside_and_the_rest_of_the_window_applies(
    tmp_path: Path, refuse_early: bool
) -> None:
    broker, sink = Broker(), ApplyingSink(refuse_early)
    refused_window(broker)
    dead = tmp_path / "dead.jsonl"
    consumer, slept = make(broker, sink, sink, dead_letter_file=str(dead))
    assert consumer.poll_once() == 3
    lines = [json.loads(line) for line in dead.read_text().splitlines()]
    assert [(d["topic"], d["partition"], d["offset"], d["code"]) for d in lines] == [
        (TOPIC, 0, 1, "CLIENT_BAD_ROW")
    ]
    assert "key [1]: v does not decode" in lines[0]["error"]
    # the valid change before it (key 1's insert) is applied, the offset moves past the bad record
    assert sink.rows == {(1,): {"id": "1", "v": "a"}, (3,): {"id": "3", "v": "c"}}
    assert sink.checkpoint is not None and sink.checkpoint.offsets()[(TOPIC, 0)] == 3
    assert slept == [] and sink.saves == 1  # not retried: the same values would not decode again
    assert consumer.poll_once() == 0 and len(dead.read_text().splitlines()) == 1


def test_a_change_that_does_not_decode_without_a_dead_letter_stops_with_nothing_applied() -> None:
    broker, sink = Broker(), ApplyingSink()
    refused_window(broker)
    consumer, _ = make(broker, sink, sink)
    with pytest.raises(RowRefused, match="v does not decode") as e:
        consumer.poll_once()
    assert e.value.code == "CLIENT_BAD_ROW" and sink.saves == 0 and sink.rows == {}
    assert sink.states == {}  # the merge's states of the window are put back: a restart reads it again


def test_on_checkpoint_error_skips_saving_only() -> None:
    broker, sink, store = Broker(), Sink(), MemoryStore(online())
    broker.append(message([(101, "i", 101_000000, 1, "a")]))
    sink.on_checkpoint = lambda cp: Result.ERROR  # type: ignore[method-assign]
    consumer, _ = make(broker, sink, store)
    consumer.poll_once()
    assert store.saves == 0 and sink.rows == {(1,): {"id": "1", "v": "a"}}
    assert consumer.checkpoint.offsets()[(TOPIC, 0)] == 1


def test_a_rebalance_moves_a_partition_without_loss_or_double_apply() -> None:
    broker = Broker(partitions=2)
    for p in (0, 1):
        for n in range(3):
            i = 100 + 10 * p + n
            broker.append(message([(i, "i", i * 10**6, 10 * p + n, "v")]), partition=p)
    sink_a, sink_b = Sink(), Sink()
    a, _ = make(broker, sink_a, MemoryStore(online(2)), max_records=4)
    a.poll_once()  # reads p0 offsets 0-2 and p1 offset 0
    # b joins: p1 moves to it, from the offset a committed
    kafka_b = FakeKafka(broker)
    kafka_b.pending = [TopicPartition(TOPIC, 1)]
    b, _ = make(broker, sink_b, MemoryStore(None), kafka=kafka_b)
    assert isinstance(a.kafka, FakeKafka)
    a.kafka.move([TopicPartition(TOPIC, 0)])
    drain(a, b)
    assert set(sink_a.rows) == {(0,), (1,), (2,), (10,)} and set(sink_b.rows) == {(11,), (12,)}
    assert [p.partition for p in a.checkpoint.partitions] == [0]  # p1 is no longer a's
    assert b.checkpoint.offsets() == {(TOPIC, 1): 3} and broker.requests() == []


def test_a_member_bootstraps_a_partition_without_position_not_one_with_a_committed_offset() -> None:
    broker = Broker(partitions=2)
    broker.append(message([(100, "i", 100 * 10**6, 1, "v")]), partition=1)
    broker.committed[("g", TopicPartition(TOPIC, 1))] = 1
    kafka_b = FakeKafka(broker)
    kafka_b.pending = [TopicPartition(TOPIC, 0), TopicPartition(TOPIC, 1)]
    b, _ = make(broker, Sink(), MemoryStore(None), kafka=kafka_b)
    b.poll_once()
    assert [r.payload["SEQNO"] for r in broker.requests()] == ["1704164645123"]  # p0 had no position
    assert b.checkpoint.mode is Mode.BOOTSTRAP_SNAPSHOT
    assert kafka_b.positions[TopicPartition(TOPIC, 1)] == 1


def test_key_filters_keep_a_slice_of_the_keys() -> None:
    broker, sink = Broker(), Sink()
    broker.append(message([(100 + k, "i", (100 + k) * 10**6, k, "v") for k in range(8)]))
    consumer, _ = make(broker, sink, MemoryStore(online()), key_filter=ModFilter(4, frozenset({1, 2})))
    consumer.poll_once()
    assert sorted(sink.rows) == [(1,), (2,), (5,), (6,)]
    assert key_hash(("abc",)) == key_hash(("abc",)) and key_hash((-7,)) == 7
    assert RangeFilter(2, 4).allows((3,)) and not RangeFilter(2, 4).allows((4,))
    with pytest.raises(ValueError, match="each must be in"):
        ModFilter(2, frozenset({2}))


def test_gone_offsets_bootstrap_or_stop_when_bootstrap_is_off() -> None:
    broker = Broker()
    for n in range(5):
        broker.append(message([(100 + n, "i", (100 + n) * 10**6, n, "v")]))
    broker.forget_before(TopicPartition(TOPIC, 0), 3)
    with pytest.raises(
        OffsetsGone, match=r"demo.shop.result/0: the checkpointed offset 0 is below the earliest"
    ):
        make(broker, Sink(), MemoryStore(online()), bootstrap=False, group_id=None)
    sink = Sink()
    consumer, _ = make(broker, sink, MemoryStore(online()), group_id=None)
    assert len(broker.requests()) == 1 and consumer.checkpoint.mode is Mode.BOOTSTRAP_SNAPSHOT
    assert consumer.checkpoint.offsets()[(TOPIC, 0)] == 5 and consumer.poll_once() == 0


def test_bootstrap_requests_a_pull_follows_its_markers_and_goes_online() -> None:
    broker, sink, store = Broker(), Sink(), MemoryStore(None)
    broker.append(
        message([(90, "i", 90 * 10**6, 1, "old"), (91, "i", 91 * 10**6, 2, "old")])
    )  # before: skipped
    consumer, _ = make(broker, sink, store)
    consumer.poll_once()  # assignment: no position -> bootstrap
    (request,) = broker.requests()
    assert request.type is ControlType.FULL_DATA_INDEPENDENT_PULL_REQ
    assert request.payload["SCHEMA_NAME"] == "shop" and request.payload["TABLE_NAME"] == "orders"
    assert request.payload["resultTopic"] == TOPIC
    seqno = int(request.payload["SEQNO"])
    assert store.checkpoint is not None and store.checkpoint.mode is Mode.BOOTSTRAP_SNAPSHOT
    assert store.checkpoint.offsets() == {(TOPIC, 0): 1}
    s = 95  # the snapshot position: key 2 deleted at 93, key 1 updated at 94, key 3 inserted at 97
    value, headers = marker("start", seqno, s)
    broker.append(value, headers=headers)
    broker.append(message([(97, "i", 97 * 10**6, 3, "new")]))
    broker.append(message([(s, "i", s * 10**21 + 1, 1, "snap")], initial=True))
    broker.append(message([(93, "d", 93 * 10**6, 2, "old"), (94, "u", 94 * 10**6, 1, "mid")]))  # appender lag
    value, headers = marker("end", seqno, s)
    broker.append(value, headers=headers)
    consumer.poll_once()
    assert sink.rows == {(1,): {"id": "1", "v": "snap"}, (3,): {"id": "3", "v": "new"}}
    assert sink.calls[0] == "start_bootstrap 1" and "end_bootstrap" in sink.calls
    assert store.checkpoint.mode is Mode.ONLINE and store.checkpoint.offsets() == {(TOPIC, 0): 6}


def test_a_consumer_killed_mid_bootstrap_resumes_the_pending_pull() -> None:
    broker, sink, store = Broker(), Sink(), MemoryStore(None)
    first, _ = make(broker, sink, store)
    first.poll_once()
    seqno = int(broker.requests()[0].payload["SEQNO"])
    value, headers = marker("start", seqno, 50)
    broker.append(value, headers=headers)
    broker.append(message([(50, "i", 50 * 10**21, 1, "snap")], initial=True))
    first.poll_once()
    assert store.checkpoint is not None and store.checkpoint.bootstrap is not None
    (pull,) = store.checkpoint.bootstrap.pulls
    assert (pull.ums_id, pull.rows, pull.ended) == (50, 1, False)
    value, headers = marker("end", seqno, 50)
    broker.append(value, headers=headers)
    again, _ = make(broker, sink, store)  # killed: a new consumer from the checkpoint
    drain(again)
    assert len(broker.requests()) == 1 and store.checkpoint.mode is Mode.ONLINE
    assert sink.calls.count("start_bootstrap 1") == 2 and sink.calls[-1] == "end_bootstrap"


def test_an_aborted_pull_is_requested_again_then_the_consumer_stops_with_the_pullers_error() -> None:
    broker, sink, store = Broker(), Sink(), MemoryStore(None)
    consumer, _ = make(broker, sink, store)
    consumer.poll_once()
    first = int(broker.requests()[0].payload["SEQNO"])
    value, headers = marker("start", first, 50)
    broker.append(value, headers=headers)
    broker.append(message([(50, "i", 50 * 10**21, 1, "partial")], initial=True))
    value, headers = marker("abort", first, 50)
    broker.append(value, headers=[*headers, ("dbus_fullpull_error", b"FULLPULL_FAILED: shard 2 failed")])
    consumer.poll_once()
    assert len(broker.requests()) == 2  # requested again at once
    second = int(broker.requests()[1].payload["SEQNO"])
    assert store.checkpoint is not None and store.checkpoint.bootstrap is not None
    assert [p.seqno for p in store.checkpoint.bootstrap.pulls] == [second]  # the aborted one left
    assert sink.rows == {(1,): {"id": "1", "v": "partial"}}  # its rows stay: valid, only not all
    value, headers = marker("start", second, 60)
    broker.append(value, headers=headers)
    broker.append(message([(60, "i", 60 * 10**21, 2, "snap")], initial=True))
    value, headers = marker("end", second, 60)
    broker.append(value, headers=headers)
    consumer.poll_once()
    assert store.checkpoint.mode is Mode.ONLINE and sink.calls[-1] == "end_bootstrap"
    # another consumer (bootstrap_attempts 2): two aborts of the table in a row stop it, naming the error
    broker2, store2 = Broker(), MemoryStore(None)
    stubborn, _ = make(broker2, Sink(), store2, bootstrap_attempts=2)
    stubborn.poll_once()
    for n in (0, 1):
        seqno = int(broker2.requests()[n].payload["SEQNO"])
        value, headers = marker("abort", seqno, 50)
        broker2.append(value, headers=[*headers, ("dbus_fullpull_error", b"FULLPULL_UNKNOWN_TABLE: gone")])
        if n == 0:
            stubborn.poll_once()
    with pytest.raises(
        BootstrapFailed, match=r"aborted pull \d+ of demo.shop.orders: FULLPULL_UNKNOWN_TABLE"
    ):
        stubborn.poll_once()
    assert len(broker2.requests()) == 2


def test_a_rebalance_during_a_bootstrap_keeps_the_pull_and_the_position() -> None:
    broker, sink, store = Broker(), Sink(), MemoryStore(None)
    broker.append(message([(90, "i", 90 * 10**6, 1, "old")]))
    consumer, _ = make(broker, sink, store)
    consumer.poll_once()
    seqno = int(broker.requests()[0].payload["SEQNO"])
    value, headers = marker("start", seqno, 95)
    broker.append(value, headers=headers)
    consumer.poll_once()
    assert isinstance(consumer.kafka, FakeKafka)
    consumer.kafka.move([TopicPartition(TOPIC, 0)])  # the same partition, revoked and assigned again
    value, headers = marker("end", seqno, 95)
    broker.append(value, headers=headers)
    drain(consumer)
    assert len(broker.requests()) == 1 and sink.calls[-1] == "end_bootstrap"
    assert store.checkpoint is not None and store.checkpoint.offsets() == {(TOPIC, 0): 3}


def test_a_pull_another_member_read_past_is_not_awaited_and_a_member_without_partitions_is_online() -> None:
    broker = Broker(partitions=2)
    store_a = MemoryStore(None)
    a, _ = make(broker, Sink(), store_a)  # joins alone: both partitions, no position -> a pull
    a.poll_once()
    assert a.checkpoint.mode is Mode.BOOTSTRAP_SNAPSHOT
    seqno = int(broker.requests()[0].payload["SEQNO"])
    assert isinstance(a.kafka, FakeKafka)
    a.kafka.move([])  # b joins and takes both partitions: a has none left
    a.poll_once()
    assert a.checkpoint.mode is Mode.ONLINE and a.checkpoint.partitions == ()
    kafka_b = FakeKafka(broker)
    kafka_b.pending = [TopicPartition(TOPIC, 0), TopicPartition(TOPIC, 1)]
    sink_b = Sink()
    b, _ = make(broker, sink_b, MemoryStore(None), kafka=kafka_b)
    for kind in ("start", "end"):  # b reads the whole pull, past a's checkpoint
        value, headers = marker(kind, seqno, 95)
        broker.append(value, headers=headers)
    broker.append(message([(96, "i", 96 * 10**6, 1, "v")]))
    drain(b)
    assert sink_b.rows == {(1,): {"id": "1", "v": "v"}}
    # b goes; a gets the partitions back at b's committed offsets and a checkpoint still pending the pull
    a2, _ = make(broker, Sink(), MemoryStore(store_a.checkpoint))
    drain(a2)
    assert a2.checkpoint.mode is Mode.ONLINE and len(broker.requests()) == 1


def test_a_callback_may_request_a_bootstrap_of_a_table_that_joins_the_windows_checkpoint() -> None:
    broker, store = Broker(), MemoryStore(online())
    broker.append(message([(101, "i", 101 * 10**6, 1, "a")], version=1))
    requested: list[Any] = []

    class Rebootstrap(Sink):
        def on_schema_change(self, table: TableRef, old: int | None, new: int, schema: Any) -> Result:
            requested.append(consumer.request_bootstrap(table))
            return Result.SUCCESS

    sink = Rebootstrap()
    consumer, _ = make(broker, sink, store)
    consumer.poll_once()
    (pull,) = requested
    (request,) = broker.requests()
    assert request.payload["SEQNO"] == str(pull.seqno) and request.payload["TABLE_NAME"] == "orders"
    assert store.checkpoint is not None and store.checkpoint.mode is Mode.BOOTSTRAP_SNAPSHOT
    assert store.checkpoint.bootstrap is not None and store.checkpoint.bootstrap.pulls == (pull,)
    for kind in ("start", "end"):
        value, headers = marker(kind, pull.seqno, 150)
        broker.append(value, headers=headers)
    drain(consumer)
    assert store.checkpoint.mode is Mode.ONLINE and sink.calls[-1] == "end_bootstrap"
    assert len(broker.requests()) == 1


def test_an_avro_record_of_an_unknown_schema_is_a_bad_row_named_by_its_offset() -> None:
    broker = Broker()
    broker.append(b"\x00avro", headers=[("ums_avro_schema", b"f00d")])
    consumer, _ = make(broker, Sink(), MemoryStore(online()))
    consumer.avro_schemas = lambda fingerprint: None  # the store does not know it
    with pytest.raises(BadRowError, match=r"demo.shop.result/0@0: an Avro record of schema f00d, which"):
        consumer.poll_once()


class PointList:
    def __init__(self) -> None:
        self.points: list[Any] = []

    def put(self, point: Any) -> None:
        self.points.append(point)

    def flush(self, timeout_s: float = 5.0) -> bool:
        return True


def test_metrics_get_each_windows_figures_the_lag_and_the_errors() -> None:
    broker, sink = Broker(), Sink()
    broker.append(message([(100, "i", 100 * 10**6, 1, "a"), (100, "i", 100 * 10**6, 1, "a")]))
    broker.append(message([(101, "u", 101 * 10**6, 1, "b")]))
    now = [0.0]
    points = PointList()
    metrics = ClientMetrics("demo", "orders-replica", points, interval_s=10, clock=lambda: now[0])
    consumer, _ = make(broker, sink, MemoryStore(online()), max_records=1)
    consumer.metrics = metrics
    consumer.poll_once()  # two tuples of one key, the same: one applied, one duplicate
    consumer.poll_once()
    now[0] = 10.0
    consumer.poll_once()  # nothing to read; the flush is due, with the lag
    lines = [p.to_line_protocol() for p in points.points]
    (client,) = [ln for ln in lines if ln.startswith("dbus_client,")]
    assert "rows_read=2i" in client and "applied=2i" in client and "duplicates=1i" in client, client
    (lag,) = [ln for ln in lines if ln.startswith("dbus_client_lag,")]
    assert "lag_records=0i" in lag, lag
    broker.append(message([(102, "u", 102 * 10**6, 1, "c")]))
    sink.fail = [Result.ERROR] * 4
    with pytest.raises(CallbackFailed):
        consumer.poll_once()
    consumer.close()
    later = [p.to_line_protocol() for p in points.points[len(lines) :]]
    (error,) = [ln for ln in later if ln.startswith("dbus_client_error,")]
    assert "CLIENT_CALLBACK_FAILED" in error, error


@st.composite
def histories(draw: Any) -> dict[str, Any]:
    """Random writes to keys 0-4 at ums_id 1..n, a pull at a random position, an interleaving."""
    n = draw(st.integers(1, 30))
    writes = [(draw(st.integers(0, 4)), draw(st.sampled_from("iud"))) for _ in range(n)]
    before = draw(st.integers(0, n))  # writes on the topic before the request
    s = draw(st.integers(before, n)) + 0.5  # the snapshot position, between writes
    seed = draw(st.integers(0, 2**32 - 1))
    windows = draw(st.lists(st.integers(1, 6), min_size=1, max_size=8))
    kills = draw(st.lists(st.sampled_from(["none", "after", "before"]), min_size=1, max_size=8))
    return {"writes": writes, "before": before, "s": s, "seed": seed, "windows": windows, "kills": kills}


@settings(max_examples=150, deadline=None)
@given(histories())
def test_any_interleaving_of_a_bootstrap_and_increments_ends_equal_to_the_source(h: dict[str, Any]) -> None:
    rng = random.Random(h["seed"])
    table: dict[int, str] = {}
    increments: list[tuple[int, bytes]] = []
    snapshot: dict[int, str] = {}
    for n, (key, op) in enumerate(h["writes"], start=1):
        ums_id = 1000 + 2 * n
        op = op if op != "i" or key not in table else "u"
        op = "i" if op == "u" and key not in table else op
        if op == "d" and key not in table:
            continue
        if op == "d":
            del table[key]
        else:
            table[key] = f"v{n}"
        increments.append((n, message([(ums_id, op, ums_id * 10**6, key, table.get(key, "x"))])))
        if n < h["s"]:
            snapshot = dict(table)
    s_id = 1000 + int(2 * h["s"])  # odd: between two writes
    broker, sink, store = Broker(), Sink(), MemoryStore(None)
    for n, value in increments:
        if n <= h["before"]:
            broker.append(value)
    consumer, _ = make(broker, sink, store)
    consumer.poll_once()
    seqno = int(broker.requests()[0].payload["SEQNO"])
    later = [value for n, value in increments if n > h["before"]]
    pull = [
        message([(s_id, "i", s_id * 10**21 + k, k, v)], initial=True) for k, v in sorted(snapshot.items())
    ]
    rng.shuffle(pull)
    events: list[tuple[bytes, Any]] = [(v, ()) for v in later + rng.sample(later, len(later) // 2)]
    order = sorted(events + [(v, ()) for v in pull], key=lambda _: rng.random())
    start_value, start_headers = marker("start", seqno, s_id)
    end_value, end_headers = marker("end", seqno, s_id)
    last_pull = max((order.index((v, ())) for v in pull), default=-1)
    order.insert(last_pull + 1, (end_value, end_headers))
    order.insert(0, (start_value, start_headers))
    for value, headers in order:
        broker.append(value, headers=headers)
    i = 0
    while True:
        size = h["windows"][i % len(h["windows"])]
        consumer.config = dataclasses.replace(consumer.config, max_records=size)
        kill = h["kills"][i] if i < len(h["kills"]) else "none"  # not cycled: a crash before every
        # checkpoint would read the same window for ever
        sink.crash_before_checkpoint = kill == "before"
        try:
            if not consumer.poll_once():
                break
        except Crash:
            pass  # the window was applied, its checkpoint not saved: read again, suppressed as duplicates
        if kill != "none":
            consumer, _ = make(broker, sink, store, max_records=size)
        i += 1
    assert {k[0]: v["v"] for k, v in sink.rows.items()} == table
    assert store.checkpoint is not None and store.checkpoint.mode is Mode.ONLINE
    assert len(broker.requests()) == 1


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("mod:4:1", ModFilter(4, frozenset({1}))),
        (" mod:8:0,7 ", ModFilter(8, frozenset({0, 7}))),
        ("range:0:1000000", RangeFilter(0, 1_000_000)),
        ("range:-5:5", RangeFilter(-5, 5)),
    ],
)
def test_a_key_filter_from_its_text(text: str, expected: Any) -> None:
    assert parse_key_filter(text) == expected


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("mod:4", "expected mod:BUCKETS"),
        ("mod:4:x", "expected mod:BUCKETS"),
        ("mod:4:4", "each must be in [0, buckets)"),
        ("range:5:5", "LOW < HIGH"),
        ("hash:1:2", "expected mod:BUCKETS"),
        ("", "expected mod:BUCKETS"),
    ],
)
def test_a_bad_key_filter_is_refused_with_its_text(text: str, words: str) -> None:
    with pytest.raises(ValueError, match=re.escape(words)):
        parse_key_filter(text)
