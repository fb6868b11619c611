"""Reconcile then verify on the real stack: UMS messages on a topic -> Parquet snapshot == MariaDB table.

The test is both the source's writer and the pipeline: every change it makes to its table it also
writes as UMS (ums.build, values from ums.values), with a full pull in the middle of the writes.
"""

from __future__ import annotations

import argparse
import random
from datetime import datetime
from decimal import Decimal

import pyarrow as pa
import pyarrow.parquet as pq

from dbuslib import kafka
from fullpuller import reconcile, verify
from ums import (
    ColumnSpec,
    DataRow,
    Namespace,
    Op,
    ProtocolType,
    build_data_messages,
    build_heartbeat_message,
    build_termination_message,
    data_key,
    initial_data_key,
    to_json,
    ums_uid,
)

V0 = (
    ColumnSpec("id", "bigint(20) unsigned", False),
    ColumnSpec("customer", "varchar(40)"),
    ColumnSpec("amount", "decimal(10,2)"),
)
V1 = V0 + (
    ColumnSpec("price", "float"),
    ColumnSpec("paid_at", "datetime(3)"),
    ColumnSpec("balance", "bigint(20)"),
)
DDL = (
    "CREATE TABLE orders (id BIGINT UNSIGNED PRIMARY KEY, customer VARCHAR(40), amount DECIMAL(10,2), "
    "price FLOAT, paid_at DATETIME(3), balance BIGINT)"
)
TS = "2024-01-02 03:04:05.000"


class Writer:
    """Applies changes to MariaDB and records them as UMS tuples (with increasing ums_id_)."""

    def __init__(self, db, ns: Namespace) -> None:
        self.db, self.ns = db, ns
        self.next_id = 9_999_999_000  # crosses 10^10: ids of different text lengths
        self.messages: list[tuple[str, str]] = []

    def change(self, op: Op, values: tuple, columns=V1, ns=None, sql: bool = True) -> None:
        if sql:
            self._sql(op, values)
        at = str(self.next_id)
        self.next_id += 137
        rows = [DataRow(at, TS, op, ums_uid(at, 0), values)]
        ns = ns or self.ns
        for m in build_data_messages(ns, columns, rows):
            self.messages.append((data_key(m.protocol, ns, 1704164645000, "demo"), to_json(m)))

    def _sql(self, op: Op, values: tuple) -> None:
        with self.db.cursor() as cur:
            if op is Op.DELETE:
                cur.execute("DELETE FROM orders WHERE id = %s", (values[0],))
            else:
                cur.execute("REPLACE INTO orders VALUES (%s, %s, %s, %s, %s, %s)", values)

    def full_pull(self, rows: list[tuple]) -> None:
        """data_initial_data of ``rows`` at the current binlog end: one ums_id_ for all, uids differ."""
        at = str(self.next_id)
        self.next_id += 137
        tuples = [DataRow(at, TS, Op.INSERT, str(int(at) * 10**6 + i), r) for i, r in enumerate(rows)]
        for m in build_data_messages(
            self.ns, V1, tuples, batch_id=1, protocol=ProtocolType.DATA_INITIAL_DATA, max_tuples=50
        ):
            self.messages.append((initial_data_key(self.ns, 1704164645000), to_json(m)))


def _row(i: int, rng: random.Random) -> tuple:
    return (
        i,
        f"cust-{rng.randrange(1000)}",
        Decimal(rng.randrange(100000)) / 100,
        rng.choice([1.1, 0.5, None]),
        datetime(2024, 1, 2, 3, 4, 5, rng.randrange(1000) * 1000),  # noqa: DTZ001 (a DATETIME value is naive)
        rng.choice([-(2**63), 2**63 - 1, -1, None]),
    )


def test_reconcile_then_verify(spark, cfg, writer_db, new_topic, tmp_path):
    db, name = writer_db
    with db.cursor() as cur:
        cur.execute(DDL)
    rng = random.Random(5)
    v0, v1 = Namespace("mysql", "demo", name, "orders", 0), Namespace("mysql", "demo", name, "orders", 1)
    w = Writer(db, v1)
    # before the pull: version-0 increments (no price/paid_at), then the table as the pull reads it
    for i in range(1, 40):
        w.change(Op.INSERT, _row(i, rng)[:3], columns=V0, ns=v0, sql=False)
    w.messages.append((f"x.{v0}", to_json(build_termination_message(v0, TS))))
    table = {i: _row(i, rng) for i in range(1, 301)}
    with db.cursor() as cur:
        cur.executemany("INSERT INTO orders VALUES (%s, %s, %s, %s, %s, %s)", list(table.values()))
    w.full_pull(list(table.values()))
    # after the pull: updates, deletes, re-inserts, new rows
    for _ in range(200):
        i = rng.randrange(1, 330)
        if i in table and rng.random() < 0.3:
            w.change(Op.DELETE, table.pop(i))
        else:
            table[i] = _row(i, rng)
            w.change(Op.UPDATE if i in table else Op.INSERT, table[i])
    w.messages.append((f"x.{v1}", to_json(build_heartbeat_message(v1, str(w.next_id), TS))))
    other = Namespace("mysql", "demo", name, "items", 0)
    w.change(Op.INSERT, _row(1, rng), ns=other, sql=False)  # another table on the same topic
    rng.shuffle(w.messages)  # order across partitions does not matter; ums_id_ decides

    topic = new_topic(partitions=2)
    producer = kafka.producer(cfg.endpoints.kafka)
    for key, value in w.messages:
        producer.send(topic, key=key.encode(), value=value.encode())
    producer.flush()
    producer.close()

    out = str(tmp_path / "orders.parquet")
    result = reconcile.run(spark, cfg, "demo", name, "orders", out, topic=topic)
    assert result.rows == len(table)
    assert result.versions == (0, 1)
    assert result.max_ums_id == w.next_id - 2 * 137  # the last change of orders (items came after)
    snap = pq.read_table(out)
    # a UMS long: int64 for a signed BIGINT, decimal(20,0) for a BIGINT UNSIGNED (up to 2^64-1), by the
    # source's column types (no DBus stage wrote this topic: no version in the meta store)
    assert snap.schema.field("id").type == pa.decimal128(20, 0)
    assert snap.schema.field("balance").type == pa.int64()
    assert snap.schema.field("price").type == "double"
    assert snap.schema.field("amount").type == "string"
    got = {r["id"]: r for r in snap.to_pylist()}
    assert set(got) == set(table)
    some = next(iter(table))
    assert Decimal(got[some]["amount"]) == table[some][2]
    assert {r["balance"] for r in got.values()} == {table[i][5] for i in got}  # 2^63-1 and -2^63 exactly

    jdbc = reconcile.run(
        spark, cfg, "demo", name, "orders", "", fmt="jdbc", jdbc_table=f"{name}.snapshot", topic=topic
    )
    with db.cursor() as cur:
        cur.execute("SELECT id, customer FROM snapshot")
        assert (jdbc.rows, dict(cur.fetchall())) == (
            len(table),
            {r["id"]: r["customer"] for r in got.values()},
        )

    parser = argparse.ArgumentParser()  # the options as `dbus verify` parses them
    parser.add_argument("--config")
    verify.add_arguments(parser)
    args = parser.parse_args(
        ["--config", str(cfg.path), "--source", "demo", "--table", f"{name}.orders", "--snapshot", str(out)]
        + ["--shard-size", "100", "--workers", "2"]
    )
    assert verify.cli(args) == 0

    changed = sorted(table)[len(table) // 2]
    with db.cursor() as cur:
        cur.execute("UPDATE orders SET customer = 'someone else' WHERE id = %s", (changed,))
    comparison = verify.verify(cfg, "demo", name, "orders", out, shard_size=100)
    assert comparison.different == ((str(changed),),)
    assert (comparison.missing_count, comparison.extra_count) == (0, 0)
    assert verify.cli(args) == 1
