"""The heartbeat writer on MariaDB and ZooKeeper: table created, one row per monitored table and interval,
one writer per source, and failover when the leader's session expires."""

from __future__ import annotations

import json
import threading
import time

import pytest
from helpers import HB_TABLE, heartbeat_config, wait_until
from kazoo.client import KazooClient

from binlog import heartbeat as hbt
from dbuslib import zk
from heartbeat.writer import HeartbeatWriter


@pytest.fixture
def hb_env(tmp_path, writer_db):
    db, database = writer_db
    with db.cursor() as cur:
        cur.execute("CREATE TABLE t1 (id int PRIMARY KEY)")
        cur.execute("CREATE TABLE t2 (id int PRIMARY KEY)")
    ds, cfg = heartbeat_config(tmp_path, database, interval_s=1)
    clients: list[KazooClient] = []
    writers: list[HeartbeatWriter] = []
    threads: list[threading.Thread] = []

    def start(name: str) -> tuple[HeartbeatWriter, KazooClient]:
        client = zk.client(cfg.endpoints.zookeeper)
        clients.append(client)
        w = HeartbeatWriter(cfg, ds, client=client, identifier=name)
        t = threading.Thread(target=w.run, daemon=True)
        t.start()
        writers.append(w)
        threads.append(t)
        return w, client

    yield db, database, ds, cfg, start
    for w in writers:
        w.stop()
    for t in threads:
        t.join(15)
    for c in clients:
        c.stop()
        c.close()
    cleanup = zk.client(cfg.endpoints.zookeeper)
    cleanup.delete(zk.path(cfg.endpoints.zookeeper, "HeartBeat", ds), recursive=True)
    cleanup.stop()
    cleanup.close()


def rows(db, database: str) -> list[tuple]:
    with db.cursor() as cur:
        cur.execute(
            f"SELECT ID, DS_NAME, SCHEMA_NAME, TABLE_NAME, PACKET, CREATE_TIME FROM `{database}`.{HB_TABLE} "
            "ORDER BY ID"
        )
        return list(cur.fetchall())


def batches(db, database: str) -> dict[int, list[str]]:
    """Tables per batch (packet txTime)."""
    out: dict[int, list[str]] = {}
    for _, _, _, table, packet, _ in rows(db, database):
        out.setdefault(hbt.parse_packet(packet).tx_ms, []).append(table)
    return out


def test_writer_creates_the_table_and_writes_one_row_per_table_per_interval(hb_env):
    db, database, ds, _, start = hb_env
    started = time.monotonic()
    writer, _ = start("w1")
    wait_until(lambda: writer.emits >= 4, 20, "four heartbeat batches")
    elapsed = time.monotonic() - started
    all_rows = rows(db, database)
    assert {(r[1], r[2]) for r in all_rows} == {(ds, database)}
    assert all(r[5] is not None for r in all_rows)
    per_batch = batches(db, database)
    assert all(sorted(tables) == ["t1", "t2"] for tables in per_batch.values()), per_batch
    assert 4 <= len(per_batch) <= elapsed + 2  # about one batch a second
    packet = hbt.parse_packet(all_rows[0][4])
    assert (packet.node, packet.type) == (hbt.node(ds, database, "t1"), "checkpoint")
    assert packet.time_ms >= packet.tx_ms


def test_a_new_table_is_monitored_after_the_listing_refresh(hb_env):
    db, database, _, _, start = hb_env
    writer, _ = start("w1")
    wait_until(lambda: writer.emits >= 1, 20, "the first batch")
    with db.cursor() as cur:
        cur.execute("CREATE TABLE t3 (id int PRIMARY KEY)")
    wait_until(lambda: "t3" in {r[3] for r in rows(db, database)}, 20, "heartbeats for t3 (refresh every 10)")


def test_two_writers_only_one_writes(hb_env):
    db, database, _, _, start = hb_env
    a, _ = start("a")
    wait_until(lambda: a.emits >= 1, 20, "a to lead")
    b, client = start("b")
    wait_until(lambda: len(contenders(client, b)) == 2, 20, "b to queue behind a")
    a0 = a.emits
    wait_until(
        lambda: a.emits >= a0 + 4, 20, "four more batches from a"
    )  # b would have written too, if it led
    assert a.leading.is_set() and not b.leading.is_set()
    assert b.emits == 0
    assert all(sorted(t) == ["t1", "t2"] for t in batches(db, database).values())


def contenders(client: KazooClient, writer) -> list[str]:
    """The writers queued in the heartbeat leader election of ``writer``'s source (leader first)."""
    leader = zk.path(writer.cfg.endpoints.zookeeper, "HeartBeat", writer.ds, "leader")
    return client.get_children(leader) if client.exists(leader) else []


def expire_session(client: KazooClient, hosts: str) -> None:
    """End ``client``'s session the way a partition does: another connection takes it over and closes it."""
    impostor = KazooClient(hosts=hosts, client_id=client.client_id)
    impostor.start(timeout=10)
    impostor.stop()
    impostor.close()


def test_the_standby_takes_over_when_the_leader_session_expires(hb_env):
    db, database, _, cfg, start = hb_env
    a, client_a = start("a")
    wait_until(lambda: a.emits >= 1, 20, "a to lead")
    b, client_b = start("b")
    wait_until(lambda: len(contenders(client_b, b)) == 2, 20, "b to queue behind a")
    assert b.emits == 0
    expire_session(client_a, cfg.endpoints.zookeeper.hosts)
    wait_until(lambda: b.emits >= 2, 30, "b to take over and write")
    assert not a.leading.is_set()
    a_emits, b0 = a.emits, b.emits
    wait_until(lambda: b.emits >= b0 + 3, 20, "three more batches from b")
    assert a.emits == a_emits  # the deposed writer waits as a standby now
    leader = zk.path(cfg.endpoints.zookeeper, "HeartBeat", b.ds, "leader")
    children = sorted(client_a.get_children(leader), key=lambda c: c[-10:])
    assert json.loads(client_a.get(f"{leader}/{children[0]}")[0])["id"] == "b"
    assert all(sorted(t) == ["t1", "t2"] for t in batches(db, database).values())


def test_a_dropped_heartbeat_table_is_created_again(hb_env):
    db, database, _, _, start = hb_env
    writer, _ = start("w1")
    wait_until(lambda: writer.emits >= 1, 20, "the first batch")
    with db.cursor() as cur:
        cur.execute(f"DROP TABLE `{database}`.{HB_TABLE}")
    emits = writer.emits
    wait_until(lambda: writer.emits >= emits + 2, 20, "batches after the table was dropped")
    assert rows(db, database)
