"""The heartbeat monitor counts a fresh source's dead letters on the real stack: letters of every shape
(the contract's JSON, the dispatcher's ``reason`` shape, garbage, a null value) written to ``<ds>.dlq``
become ``dbus_dead_letter`` points, one incident per (stage, code) at the webhook with the newest
coordinates, the "dead letters" section of ``dbus status``; a restarted monitor does not count them again,
and an incident clears after the quiet period."""

from __future__ import annotations

import json
import time

import pytest
from dashboards import influxql
from helpers import forget_dead_letters, heartbeat_config, wait_until

from cli import status
from dbuslib import kafka, zk
from dbuslib.deadletter import DeadLetter
from heartbeat import deadletters
from heartbeat.monitor import Monitor, alerts_path
from status import readers

QUIET_S = 5


@pytest.fixture
def dlq_env(tmp_path, writer_db, receivers):
    _, database = writer_db
    hook, _ = receivers
    ds, cfg = heartbeat_config(
        tmp_path,
        database,
        check_interval_s=1,
        dead_letter_quiet_s=QUIET_S,
        webhook_url=f"http://127.0.0.1:{hook.port}/alerts",
        webhook_timeout_s=5,
    )
    topic = cfg.source(ds).topics.name("dead_letter", ds)
    kafka.ensure_topics(cfg.endpoints.kafka, [topic], partitions=2)
    client = zk.client(cfg.endpoints.zookeeper)
    try:
        yield ds, cfg, topic, client, hook
    finally:
        client.delete(zk.path(cfg.endpoints.zookeeper, "HeartBeat", ds), recursive=True)
        client.stop()
        client.close()
        kafka.delete_topics(cfg.endpoints.kafka, [topic])
        forget_dead_letters(cfg, ds)


def produce(cfg, topic: str, records: list[tuple[int, bytes | None, bytes | None]]) -> None:
    """(partition, key, value) in order."""
    p = kafka.producer(cfg.endpoints.kafka)
    try:
        for partition, key, value in records:
            p.send(topic, key=key, value=value, partition=partition).get(timeout=30)
    finally:
        p.close()


def appender_letter(ds: str, table: str, offset: int) -> bytes:
    return (
        DeadLetter(
            "RAW_UNDECODABLE",
            f"shop.{table} at f:1: bad",
            f"{ds}.shop",
            0,
            offset,
            f"shop.{table}".encode(),
            b"raw",
            "appender",
        )
        .to_json()
        .encode()
    )


def sums(cfg, ds: str) -> dict[str, int]:
    series = influxql(
        cfg,
        f'SELECT sum("count") FROM "{deadletters.MEASUREMENT}" WHERE "ds" = \'{ds}\' '
        f'GROUP BY "stage", "code"',
    )
    return {f"{s['tags']['stage']}/{s['tags']['code']}": s["values"][0][1] for s in series}


def checks_until(monitor: Monitor, done) -> list:
    """The notes of the monitor's checks until ``done(notes)``: a check that is still joining the
    consumer group counts nothing and decides nothing."""
    notes: list = []
    wait_until(lambda: done(notes.__iadd__(monitor.check())), 60, "a check that read the dead letters")
    return notes


def test_dead_letters_are_counted_once_alerted_shown_and_cleared(dlq_env):
    ds, cfg, topic, client, receiver = dlq_env
    dispatcher_letter = {
        "reason": "RAW_BAD_RECORD",
        "error": "bad magic",
        "topic": ds,
        "partition": 0,
        "offset": 7,
        "key": None,
        "value_base64": "Z2FyYmFnZQ==",
    }
    produce(
        cfg,
        topic,
        [
            (0, b"shop.orders", appender_letter(ds, "orders", 41)),
            (1, b"shop.items", appender_letter(ds, "items", 42)),
            (0, None, json.dumps(dispatcher_letter).encode()),
            (1, None, b"\x00garbage"),
            (1, b"shop.orders", None),
        ],
    )
    monitor = Monitor(cfg, ds, client=client, list_tables=lambda: [])
    try:
        notes = checks_until(monitor, lambda notes: notes)  # the first checks may still be joining
    finally:
        monitor.close()
    keys = {
        f"appender.RAW_UNDECODABLE.{deadletters.KIND}",
        f"dispatcher.RAW_BAD_RECORD.{deadletters.KIND}",
        f"unknown.{deadletters.UNREADABLE}.{deadletters.KIND}",
    }
    assert {(n.event, n.alert.key) for n in notes} == {("alert", k) for k in keys}
    assert sums(cfg, ds) == {
        "appender/RAW_UNDECODABLE": 2,
        "dispatcher/RAW_BAD_RECORD": 1,
        "unknown/DLQ_UNREADABLE": 2,
    }

    wait_until(lambda: len(receiver.hooks) == 3, 10, "three dead-letter alerts at the webhook")
    hook = next(h for h in receiver.hooks if h["code"] == "RAW_UNDECODABLE")
    assert (hook["event"], hook["kind"], hook["stage"], hook["count"]) == (
        "alert",
        "dead_letter",
        "appender",
        2,
    )
    assert (hook["topic"], hook["partition"], hook["offset"], hook["origin"]) == (
        f"{ds}.shop",
        0,
        42,
        "shop.items",
    )
    assert f"in {topic} partition 1 offset 0" in hook["message"]
    assert set(client.get_children(alerts_path(cfg.endpoints.zookeeper.root, ds))) == keys

    snap = readers.collect(cfg, ds)
    got = {
        (d.stage, d.code): (d.count, d.origin, d.topic, d.offset, d.dlq_partition, d.dlq_offset)
        for d in snap.dead_letters
    }
    assert got == {
        ("appender", "RAW_UNDECODABLE"): (2, "shop.items", f"{ds}.shop", 42, 1, 0),
        ("dispatcher", "RAW_BAD_RECORD"): (1, "", ds, 7, 0, 1),
        ("unknown", "DLQ_UNREADABLE"): (2, "shop.orders", "", -1, 1, 2),
    }
    screen = status.render(snap)
    assert f"RAW_UNDECODABLE        2   {ds}.shop partition 0 offset 42 (shop.items), in {topic}" in screen

    # a restarted monitor reads on from the committed offsets: one new letter, counted once; 10 s later
    # the two (stage, code) without a new letter are quiet for longer than QUIET_S and clear
    produce(cfg, topic, [(0, b"shop.orders", appender_letter(ds, "orders", 43))])
    again = Monitor(cfg, ds, client=client, list_tables=lambda: [], clock=lambda: time.time() + 2 * QUIET_S)
    try:
        notes = checks_until(again, lambda notes: notes)
    finally:
        again.close()
    assert {(n.event, n.alert.key) for n in notes} == {
        ("recovery", k) for k in keys if not k.startswith("appender.")
    }
    assert sums(cfg, ds) == {
        "appender/RAW_UNDECODABLE": 3,
        "dispatcher/RAW_BAD_RECORD": 1,
        "unknown/DLQ_UNREADABLE": 2,
    }
    open_ = json.loads(
        client.get(
            f"{alerts_path(cfg.endpoints.zookeeper.root, ds)}/appender.RAW_UNDECODABLE.{deadletters.KIND}"
        )[0]
    )
    assert (open_["count"], open_["offset"], open_["origin"]) == (3, 43, "shop.orders")
    wait_until(lambda: len(receiver.hooks) == 5, 10, "two recoveries at the webhook")
    assert sorted(h["code"] for h in receiver.hooks[3:]) == ["DLQ_UNREADABLE", "RAW_BAD_RECORD"]
