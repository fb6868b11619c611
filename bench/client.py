"""The consumer client (docs/client.md): rows/s decoded, merged and called back, and rows/s replicated into
MariaDB through the SQL sink, each beside what a user would write by hand, measured in the same run.

The records: UMS JSON messages as the appender writes them (``ums.build``, ``ums.encoding.to_json``): one
table of 7 columns (a bigint key, int, decimal(12,2), varchar, a nullable varchar with quotes and
backslashes, datetime(3), double), 500 tuples a message, 10 tuples a binlog event; changes over a key space
of 1,000,000 keys, 90% updates, 5% inserts, 5% deletes. BENCH_CLIENT_ROWS rows (default 200000).

consume_rows_per_s: the client's decoding of those records as the consumer does it (``Decoder.read_json``,
the fast path, then ``Decoder.changes``) and a callback per row change (a counter); the median of
``MEASURED`` runs after ``WARM_UPS``. baseline: ``json.loads`` of the same records and a dict of column ->
value per tuple, the least a consumer written by hand does. consume_merged_rows_per_s: the whole
``Consumer`` over an in-memory Kafka of the same records (one partition, windows of ``WINDOW_RECORDS``
records, a checkpoint saved in memory after each): decode, merge (its key states grow to every key seen),
the callbacks of each window, checkpoint; the same baseline.

replicate_rows_per_s: windows of ``REPLICA_WINDOW`` merged changes applied by ``SqlSink.apply`` (every
write guarded by the key's position, tombstones for the deletes, the checkpoint in the same transaction)
into a fresh database of the stack's MariaDB, the table empty at the start; rows are the merged changes
applied; the median of ``MEASURED`` runs, each into a table of its own.
baseline: the same changes, one guarded ``INSERT ... ON DUPLICATE KEY UPDATE`` per change (a delete: one
guarded ``DELETE``), each its own statement, a commit per window: what a user writes without batching.
"""

from __future__ import annotations

import gc
import os
import random
import statistics
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from kafka import TopicPartition

from bench.report import bench_line
from dbusclient.checkpoint import Checkpoint, Mode, PartitionPosition
from dbusclient.consumer import Consumer, ConsumerCallbacks, ConsumerConfig, Result, Topics
from dbusclient.decode import Decoder, RowChange, TableRef
from dbusclient.merge import Effect, Merger, Upsert
from dbuslib.config import DbusConfig
from ums.build import DataRow, build_data_message
from ums.encoding import from_json, to_json
from ums.ids import ums_id, ums_uid
from ums.message import Op
from ums.namespace import Namespace
from ums.types import ColumnSpec

ROWS = int(os.environ.get("BENCH_CLIENT_ROWS", "200000"))
PER_MESSAGE = 500  # tuples a message (ums.tuples_per_message's default)
PER_EVENT = 10  # tuples of one binlog event: one ums_id_
KEYS = 1_000_000
WINDOW_RECORDS = 20  # records a consumer window (10,000 rows)
REPLICA_ROWS = int(os.environ.get("BENCH_REPLICA_ROWS", "100000"))
REPLICA_WINDOW = 10_000  # row changes a window of the sink
BASELINE_WINDOWS = 2  # windows the per-row baseline applies (at ~5,000 rows/s)
WARM_UPS = 2
MEASURED = 5
TABLE = TableRef("bench", "shop", "orders")
TOPIC = "bench.shop.result"
COLUMNS = (
    ColumnSpec("id", "bigint(20)", False),
    ColumnSpec("qty", "int(11)", True),
    ColumnSpec("amount", "decimal(12,2)", True),
    ColumnSpec("status", "varchar(32)", True),
    ColumnSpec("note", "varchar(255)", True),
    ColumnSpec("updated_at", "datetime(3)", True),
    ColumnSpec("score", "double", True),
)


def messages(rows: int, seed: int = 17) -> list[bytes]:
    """The record values of ``rows`` changes (module docstring), in binlog order."""
    rnd = random.Random(seed)
    ns = Namespace("mysql", TABLE.ds, TABLE.schema, TABLE.table, 1)
    start = datetime(2026, 11, 25, 8, 0, 0)  # noqa: DTZ001 (a source's local time, as binlog rows carry it)
    out, batch = [], []
    for i in range(rows):
        event_id = ums_id("mysql-bin.000103", 4 + 1000 * (i // PER_EVENT))
        at = start + timedelta(milliseconds=i)
        r = rnd.random()
        op = Op.DELETE if r < 0.05 else Op.INSERT if r < 0.10 else Op.UPDATE
        key = rnd.randrange(KEYS)
        note = None if rnd.random() < 0.3 else f'note {key}: it\'s "quoted" \\ {i}'
        values = (
            key,
            rnd.randrange(1000),
            Decimal(rnd.randrange(10**8)) / 100,
            rnd.choice(("new", "paid", "shipped", "done")),
            note,
            at,
            rnd.random() * 1000,
        )
        ts = at.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]
        batch.append(DataRow(event_id, ts, op, ums_uid(event_id, i % PER_EVENT), values))
        if len(batch) == PER_MESSAGE or i == rows - 1:
            out.append(to_json(build_data_message(ns, COLUMNS, batch)).encode())
            batch = []
    return out


# ---------------------------------------------------------------- consume_rows_per_s


@dataclass(frozen=True)
class _Record:
    topic: str
    partition: int
    offset: int
    key: bytes
    value: bytes
    headers: list[tuple[str, bytes]]


class _Kafka:
    """One partition of prebuilt records, read from offset 0 (the ``KafkaPort`` the consumer needs)."""

    def __init__(self, values: list[bytes]) -> None:
        self.tp = TopicPartition(TOPIC, 0)
        self.records = [_Record(TOPIC, 0, i, b"shop.orders", v, []) for i, v in enumerate(values)]
        self.position = 0

    def partitions_for_topic(self, topic: str) -> set[int]:
        return {0}

    def subscribe(self, topics: Any, listener: Any) -> None:
        pass

    def committed(self, partition: Any) -> int | None:
        return None

    def commit(self, offsets: Any) -> None:
        pass

    def assign(self, partitions: Any) -> None:
        pass

    def assignment(self) -> set[Any]:
        return {self.tp}

    def beginning_offsets(self, partitions: Any) -> dict[Any, int]:
        return {self.tp: 0}

    def end_offsets(self, partitions: Any) -> dict[Any, int]:
        return {self.tp: len(self.records)}

    def seek(self, partition: Any, offset: int) -> None:
        self.position = offset

    def poll(self, timeout_ms: int, max_records: int) -> dict[Any, list[_Record]]:
        records = self.records[self.position : self.position + max_records]
        self.position += len(records)
        return {self.tp: records} if records else {}

    def close(self) -> None:
        pass


class _Counter(ConsumerCallbacks):
    def __init__(self) -> None:
        self.rows = 0

    def on_data_event(self, change: RowChange) -> Result:
        self.rows += 1
        return Result.SUCCESS


class _Store:
    def __init__(self) -> None:
        self.checkpoint = Checkpoint(Mode.ONLINE, (PartitionPosition(TOPIC, 0, 0),))

    def load(self) -> Checkpoint:
        return self.checkpoint

    def save(self, checkpoint: Checkpoint) -> None:
        self.checkpoint = checkpoint


def consume(values: list[bytes]) -> tuple[float, int]:
    """Seconds a Consumer takes over ``values``, and the row changes it called back."""
    config = ConsumerConfig(
        "bench", {"shop.orders": ("id",)}, max_records=WINDOW_RECORDS, bootstrap=False, retries=0
    )
    counter = _Counter()
    consumer = Consumer(config, counter, _Store(), _Kafka(values), Topics({TABLE: TOPIC}, "bench_ctrl"))
    began = time.perf_counter()
    consumer.start()
    while consumer.poll_once():
        pass
    return time.perf_counter() - began, counter.rows


def decode(values: list[bytes]) -> tuple[float, int]:
    """Seconds the consumer's decoding (``Decoder.read_json``, ``changes``) and a callback per row change
    take over ``values``, and the row changes."""
    decoder, counter = Decoder({"shop.orders": ("id",)}), _Counter()
    began = time.perf_counter()
    for offset, value in enumerate(values):
        for change in decoder.changes(decoder.read_json(value, f"{TOPIC}/0@{offset}")):
            counter.on_data_event(change)
    return time.perf_counter() - began, counter.rows


def by_hand(values: list[bytes]) -> tuple[float, int]:
    """Seconds ``json.loads`` and a dict per tuple take over ``values``, and the tuples."""
    import json

    began, rows = time.perf_counter(), 0
    for value in values:
        msg = json.loads(value)
        names = [f["name"] for f in msg["schema"]["fields"]]
        for item in msg["payload"]:
            row = dict(zip(names, item["tuple"], strict=True))
            rows += row is not None
    return time.perf_counter() - began, rows


def rate(measure: Any, values: list[bytes]) -> float:
    """Median rows/s of ``MEASURED`` runs of ``measure`` after ``WARM_UPS`` (the first runs of a process
    are slower: its allocator's arenas grow)."""
    for _ in range(WARM_UPS):
        measure(values)
    runs = []
    for _ in range(MEASURED):
        gc.collect()  # what a run left in cycles (a Consumer, its key states) is not scanned in the next
        seconds, rows = measure(values)
        runs.append(rows / seconds)
    return statistics.median(runs)


# ---------------------------------------------------------------- replicate_rows_per_s


def windows(values: list[bytes]) -> list[list[Effect]]:
    """The merged effects of windows of ``REPLICA_WINDOW`` row changes."""
    decoder, merger, out = Decoder({"shop.orders": ("id",)}), Merger(), []
    per = REPLICA_WINDOW // PER_MESSAGE
    for i in range(0, len(values), per):
        changes = [c for v in values[i : i + per] for c in decoder.from_json(v)]
        out.append(list(merger.merge(changes).effects))
    return out


def replicate(cfg: DbusConfig, values: list[bytes]) -> tuple[float, float]:
    """rows/s of ``SqlSink.apply`` and of the per-row upsert, into a fresh database of the stack's
    MariaDB (dropped afterwards)."""
    import sqlalchemy as sa

    from dbusclient.sink_sql import SqlSink

    my = cfg.source("demo").mysql
    if my.writer is None:
        msg = "bench client: sources.demo.mysql.writer (an account that may create a database) is not set"
        raise ValueError(msg)
    base = f"mysql+pymysql://{my.writer.user}:{my.writer.password.get_secret_value()}@{my.host}:{my.port}"
    name = f"dbus_bench_{uuid.uuid4().hex[:12]}"
    admin = sa.create_engine(f"{base}/mysql", isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(sa.text(f"CREATE DATABASE {name}"))
    try:
        effects = windows(values)
        schema = from_json(values[0]).schema
        runs = []
        for run in range(MEASURED):  # each into a table of its own, empty at the start
            sink = SqlSink(f"{base}/{name}", {"shop.orders": ("id",)}, names={"shop.orders": f"orders{run}"})
            sink.ensure_schema(schema)
            checkpoint = Checkpoint(Mode.ONLINE, (PartitionPosition(TOPIC, 0, 0),))
            gc.collect()
            began = time.perf_counter()
            for n, window in enumerate(effects):
                sink.apply(window, checkpoint.advanced(TOPIC, 0, n + 1))
            runs.append(sum(map(len, effects)) / (time.perf_counter() - began))
            sink.engine.dispose()
        with admin.connect() as conn:
            conn.execute(sa.text(f"CREATE TABLE {name}.naive LIKE {name}.orders0"))
        slow = per_row(f"{base}/{name}", effects[:BASELINE_WINDOWS])
    finally:
        with admin.connect() as conn:
            conn.execute(sa.text(f"DROP DATABASE IF EXISTS {name}"))
        admin.dispose()
    return statistics.median(runs), slow


def per_row(url: str, effects: list[list[Effect]]) -> float:
    """rows/s of one guarded statement per change (an upsert, or a delete), a commit per window."""
    import sqlalchemy as sa

    names = [c.name for c in COLUMNS]
    cols = ", ".join([*names, "ums_id_", "ums_uid_"])
    newer = "(ums_id_, ums_uid_) < (VALUES(ums_id_), VALUES(ums_uid_))"
    # the position columns last: each assignment sees the ones before it (sink_sql._upsert says why)
    update = ", ".join(f"{c} = IF({newer}, VALUES({c}), {c})" for c in [*names[1:], "ums_uid_", "ums_id_"])
    marks = ", ".join(["%s"] * (len(names) + 2))
    upsert = f"INSERT INTO naive ({cols}) VALUES ({marks}) ON DUPLICATE KEY UPDATE {update}"
    delete = "DELETE FROM naive WHERE id = %s AND (ums_id_, ums_uid_) < (%s, %s)"
    engine = sa.create_engine(url)
    raw: Any = engine.raw_connection()
    try:
        began = time.perf_counter()
        with raw.cursor() as cur:
            for window in effects:
                for e in window:
                    c = e.change
                    if isinstance(e, Upsert):
                        cur.execute(upsert, [*(c.values[n] for n in names), c.ums_id, c.ums_uid])
                    else:
                        cur.execute(delete, [c.key[0], c.ums_id, c.ums_uid])
                raw.commit()
        return sum(map(len, effects)) / (time.perf_counter() - began)
    finally:
        raw.close()
        engine.dispose()


def run(cfg: DbusConfig) -> Iterator[str]:
    values = messages(ROWS)
    baseline = rate(by_hand, values)
    yield bench_line("consume_rows_per_s", rate(decode, values), "rows/s", baseline)
    yield bench_line("consume_merged_rows_per_s", rate(consume, values), "rows/s", baseline)
    fast, slow = replicate(cfg, values[: REPLICA_ROWS // PER_MESSAGE])
    yield bench_line("replicate_rows_per_s", fast, "rows/s", slow)
