"""dbusclient.consumer on the stack's Kafka: a bootstrap under live writes, a crash, a restart.

The test plays the source and the full puller on two fresh topics (the result topic, two partitions,
and a control topic): increments written before the consumer starts (covered by the pull, skipped), the
consumer's pull request read from the control topic, then the pull's start marker, its rows at the
snapshot position, increments older and newer than it, duplicates, and its end marker. The consumer
(a real kafka-python group member, FileCheckpointStore) crashes after the callbacks of its third window
and before that window's checkpoint; a new Consumer from the checkpoint finishes. The in-memory sink must
end equal to the source's table, no key may go back, and only one pull may be requested.
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

from dbusclient.checkpoint import Checkpoint, FileCheckpointStore, Mode
from dbusclient.consumer import Consumer, ConsumerCallbacks, ConsumerConfig, Result, Topics
from dbusclient.decode import RowChange, TableRef
from dbusclient.merge import KeyState
from dbuslib import kafka
from ums.control import from_json as control_from_json

T = TableRef("demo", "shop", "orders")
FIELDS = (
    '{"name":"ums_id_","type":"long","nullable":false,"encoded":false},'
    '{"name":"ums_ts_","type":"datetime","nullable":false,"encoded":false},'
    '{"name":"ums_op_","type":"string","nullable":false,"encoded":false},'
    '{"name":"ums_uid_","type":"string","nullable":false,"encoded":false},'
    '{"name":"id","type":"long","nullable":false,"encoded":false},'
    '{"name":"v","type":"string","nullable":true,"encoded":false}'
)


def message(rows: list[tuple[int, str, int, int, str]], initial: bool = False) -> bytes:
    """UMS JSON of shop.orders; rows are (ums_id, op, uid, id, v)."""
    protocol = "data_initial_data" if initial else "data_increment_data"
    tuples = ",".join(
        json.dumps({"tuple": [str(i), "2024-01-02 03:04:05.000", op, str(uid), str(k), v]})
        for i, op, uid, k, v in rows
    )
    return (
        f'{{"protocol":{{"type":"{protocol}","version":"1.3"}},'
        f'"schema":{{"namespace":"mysql.demo.shop.orders.0.0.0","fields":[{FIELDS}],'
        f'"batchId":0}},"payload":[{tuples}]}}'
    ).encode()


class Crash(BaseException):
    """The consumer process dies (after a window's callbacks, before its checkpoint): not an Exception,
    which on_checkpoint would turn into "skip this checkpoint"."""


class Sink(ConsumerCallbacks):
    def __init__(self) -> None:
        self.rows: dict[int, str] = {}
        self.applied: dict[int, tuple[int, int]] = {}
        self.states: dict[Any, KeyState] = {}
        self.crash_at_window: int | None = None
        self.windows = 0
        self.bootstraps: list[str] = []

    def on_data_event(self, change: RowChange) -> Result:
        key = change.key[0]
        assert change.position > self.applied.get(key, (-1, -1)), f"key {key} went backwards"
        self.applied[key] = change.position
        if change.gone:
            self.rows.pop(key, None)
        else:
            self.rows[key] = str(change.values["v"])
        return Result.SUCCESS

    def on_checkpoint(self, checkpoint: Checkpoint) -> Result:
        self.windows += 1
        if self.windows == self.crash_at_window:
            raise Crash
        return Result.SUCCESS

    def on_start_bootstrap(self, pulls: Any) -> Result:
        self.bootstraps.append("start")
        return Result.SUCCESS

    def on_end_bootstrap(self, pulls: Any) -> Result:
        self.bootstraps.append("end")
        return Result.SUCCESS


def test_bootstrap_crash_and_restart_converge_on_real_kafka(kafka_up, new_topic, tmp_path):
    result, ctrl = new_topic(2), new_topic()
    producer = kafka.producer(kafka_up)

    def send(partition: int, value: bytes, headers: list[tuple[str, bytes]] | None = None) -> None:
        producer.send(result, key=b"shop.orders", value=value, partition=partition, headers=headers or [])

    # the source: writes 1..40 to keys 0..9; key k is deleted at write 20 + k for k < 5
    s = 25  # the pull's snapshot: the table after write 25
    source: dict[int, str] = {}
    snapshot: dict[int, str] = {}
    writes: list[tuple[int, bytes]] = []
    for n in range(1, 41):
        key = n % 10
        op = "d" if n > 20 and key < 5 and n == 20 + key else ("u" if key in source else "i")
        if op == "d":
            source.pop(key, None)
        else:
            source[key] = f"v{n}"
        ums_id = 1000 + 2 * n
        writes.append((n, message([(ums_id, op, ums_id * 10**6, key, source.get(key, "gone"))])))
        if n == s:
            snapshot = dict(source)
    s_id = 1000 + 2 * s + 1
    for _n, value in writes[:10]:  # on the topic before the consumer starts: covered by the pull
        send(0, value)
    producer.flush()

    sink = Sink()
    sink.crash_at_window = 3
    store = FileCheckpointStore(tmp_path / "orders.checkpoint.json")
    config = ConsumerConfig(
        source="demo",
        tables={"shop.orders": ("id",)},
        group_id=f"pytest-client-{uuid.uuid4().hex[:8]}",
        poll_timeout_ms=200,
        max_records=4,
    )

    def consumer() -> Consumer:
        client = kafka.consumer(
            kafka_up, group_id=config.group_id, enable_auto_commit=False, auto_offset_reset="earliest"
        )
        c = Consumer(config, sink, store, client, Topics({T: result}, ctrl), producer, states=sink.states)
        c.start()
        return c

    first = consumer()
    deadline = time.monotonic() + 30
    while not kafka.read_range(kafka_up, [ctrl]):
        assert time.monotonic() < deadline, "no pull request on the control topic"
        first.poll_once()
    (request,) = [control_from_json(r.value) for r in kafka.read_range(kafka_up, [ctrl])]
    seqno = int(request.payload["SEQNO"])
    cp = store.load()
    assert cp is not None and cp.mode is Mode.BOOTSTRAP_SNAPSHOT

    # the full puller and the appender, interleaved: increments 11..40 (those up to 25 older than the pull)
    marker = [("dbus_fullpull_id", str(seqno).encode()), ("dbus_fullpull_ums_id", str(s_id).encode())]
    send(0, message([], initial=True), [("dbus_fullpull", b"start"), *marker])
    later = [value for n, value in writes[10:]]
    pulled = [message([(s_id, "i", s_id * 10**21 + k, k, v)], initial=True) for k, v in snapshot.items()]
    for i, value in enumerate(later):
        send(0, value)
        if i < len(pulled):
            send(0, pulled[i])
        if i % 7 == 0:
            send(0, value)  # delivered twice
    for value in pulled[len(later) :]:
        send(0, value)
    send(0, message([], initial=True), [("dbus_fullpull", b"end"), *marker])
    send(1, message([(2000, "i", 2000 * 10**6, 99, "other partition")]))
    producer.flush()
    source[99] = "other partition"

    crashed = False
    deadline = time.monotonic() + 30
    try:
        while time.monotonic() < deadline:
            first.poll_once()
    except Crash:
        crashed = True
    finally:
        first.kafka.close()  # the process is gone: leave the group now rather than after its session timeout
    assert crashed

    second = consumer()
    deadline = time.monotonic() + 30
    try:
        while sink.rows != source or second.checkpoint.mode is not Mode.ONLINE:
            assert time.monotonic() < deadline, f"not converged: {sink.rows} != {source}"
            second.poll_once()
    finally:
        second.close()
        producer.close()
    assert len(kafka.read_range(kafka_up, [ctrl])) == 1  # resumed, not requested again
    assert sink.bootstraps == ["start", "start", "end"]
    final = store.load()
    ends = {(0, 10 + 2 + 30 + 5 + len(snapshot)), (1, 1)}  # old, markers, increments, twice, pull
    assert final is not None and final.mode is Mode.ONLINE
    assert {(p.partition, p.offset) for p in final.partitions} == ends
