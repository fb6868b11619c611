"""A compacted per-row topic keeps each key's last state (issue #30, acceptance 3), on the real stack.

The table's own topic (``output: {format: <fmt>, topic: table}``: ``debezium-json``, and ``avro`` through
the stack's registry; tombstones on) is created first with ``cleanup.policy=compact``, one partition,
``segment.ms`` of a second (segments roll while the appender writes), ``min.cleanable.dirty.ratio`` near 0
and ``delete.retention.ms=0`` (a tombstone may go at a later cleaning), so the broker's cleaner
(conf/stack/kafka-server.properties: the default backoff of 15 s) takes it. MariaDB gets inserts, updates,
primary-key changes, deletes and keys inserted again after their delete; the extractor captures them and
the appender writes them (in this process, ``available_now``).
A last insert of a new key, once a segment's time has passed, rolls the segment that holds the changes,
which the cleaner may then compact: the test waits until no key is in the topic twice (the compaction
ran), then reads the topic from its start, applies each record per key (a tombstone or a delete removes
the key) and compares with ``SELECT``, typed: 0 differences, one record per key.
"""

from __future__ import annotations

import contextlib
import time
import urllib.request
from collections import Counter
from decimal import Decimal
from typing import Any

import pytest
from helpers import wait_until
from rowformats_live import per_row_config, run_appender

from dbuslib import kafka, topics
from dbuslib.config import DbusConfig
from dbuslib.metastore import MetaStore
from dbuslib.registry import Registry
from ums.formats import decode

pytestmark = pytest.mark.integration

COMPACTED = {
    "cleanup.policy": "compact",
    "segment.ms": "1000",
    "min.cleanable.dirty.ratio": "0.001",
    "delete.retention.ms": "0",
    "min.compaction.lag.ms": "0",
}
ROWS = 1000


def read_topic(cfg: DbusConfig, topic: str) -> list[Any]:
    """Every record of ``topic`` from its start to its end offsets now, in offset order."""
    return sorted(kafka.read_range(cfg.endpoints.kafka, [topic]), key=lambda r: (r.partition, r.offset))


def applied(fmt: str, records: list[Any], schemas: Any) -> dict[int, tuple[Any, ...]]:
    """The table the records give, by id: each record applied in offset order, per key."""
    table: dict[bytes, tuple[Any, ...]] = {}
    for r in records:
        change = None if r.value is None else decode(fmt, r.key, r.value, tuple(r.headers), schemas)
        if change is None or change.after is None:  # a tombstone, a delete (a key change's too)
            table.pop(r.key, None)
        else:
            table[r.key] = change.after
    return {int(after[0]): tuple(after) for after in table.values()}


def source_rows(db) -> dict[int, tuple[Any, ...]]:
    """SELECT of the table, each value as the UMS wire value the records carry (DECIMAL as its text)."""
    with db.cursor() as cur:
        cur.execute("SELECT id, qty, price, note FROM items")
        rows = cur.fetchall()
    return {int(r[0]): tuple(str(v) if isinstance(v, Decimal) else v for v in r) for r in rows}


def captured(env, table: str, n: int = 1):
    """Wait until the extractor has written ``n`` rows events of ``table`` (a marker after the workload)."""
    env.records(lambda got: sum(x.event.header.table == table for x in got) >= n, timeout=120)


@pytest.mark.parametrize("fmt", ["debezium-json", "avro"])
def test_compacted_topic_read_from_its_start_equals_the_source(
    spark, extractor_env, writer_db, tmp_path, fmt
):
    env = extractor_env
    db, name = writer_db
    cfg = per_row_config(env, fmt, "microbatch")
    registry = Registry.of(cfg) if fmt == "avro" else None  # the stack's registry (Apicurio)
    schemas = registry.schema if registry is not None else None
    src = cfg.source(env.ds)
    topic = topics.result_topic(env.ds, src, name, "items")
    dlq = src.topics.name("dead_letter", env.ds)
    events = topics.events_topic(env.ds, src, name)
    kafka.ensure_topics(cfg.endpoints.kafka, [env.topic, dlq])
    kafka.ensure_topics(cfg.endpoints.kafka, [topic], partitions=1, configs=COMPACTED)
    checkpoint = str(tmp_path / "ckpt")
    t0 = time.monotonic()
    try:
        with db.cursor() as cur:
            cur.execute(
                "CREATE TABLE items "
                "(id INT PRIMARY KEY, qty INT NOT NULL, price DECIMAL(10,2), note VARCHAR(40))"
            )
            cur.execute("CREATE TABLE marker (id INT PRIMARY KEY)")
            for lo in range(1, ROWS + 1, 250):
                cur.execute(
                    "INSERT INTO items VALUES "
                    + ",".join(f"({i}, {i % 17}, {i}.25, 'row {i}')" for i in range(lo, lo + 250))
                )
            cur.execute("UPDATE items SET qty = qty + 1 WHERE id % 3 = 0")
            cur.execute("UPDATE items SET note = CONCAT(note, ' again'), price = NULL WHERE id % 5 = 0")
            cur.execute("UPDATE items SET qty = qty * 2 WHERE id % 7 = 0")
            cur.execute("UPDATE items SET id = id + 10000 WHERE id % 50 = 0")  # key changes
            cur.execute("DELETE FROM items WHERE id % 11 = 0")
            cur.execute(
                "INSERT INTO items VALUES (11, 1, 1.00, 'back'), (22, 2, NULL, 'back')"
            )  # after tombstones
            cur.execute("UPDATE items SET note = 'moved twice', id = 20000 WHERE id = 10100")
            cur.execute("INSERT INTO marker VALUES (1)")
        env.spawn()
        captured(env, "marker")
        run_appender(spark, cfg, env.ds, env.topic, checkpoint)
        written = read_topic(cfg, topic)
        keys = Counter(r.key for r in written)
        assert applied(fmt, written, schemas) == source_rows(db), (
            "the topic as written already gives the table"
        )
        assert keys.most_common(1)[0][1] > 1, "keys written more than once: something to compact"

        # a new key once a segment's time has passed since the last record: the segment of the changes rolls
        last_ms = max(r.timestamp for r in written)
        wait_until(lambda: time.time() * 1000 > last_ms + 1500, 10, "a segment's time after the last record")
        with db.cursor() as cur:
            cur.execute("INSERT INTO items VALUES (30000, 3, 3.00, 'rolls the segment')")
            cur.execute("INSERT INTO marker VALUES (2)")
        captured(env, "marker", 2)
        run_appender(spark, cfg, env.ds, env.topic, checkpoint)

        def compacted() -> list[Any] | None:
            got = read_topic(cfg, topic)
            return got if max(Counter(r.key for r in got).values()) == 1 else None

        after = wait_until(compacted, 150, f"{topic} compacted: every key once", interval=2)
        want = source_rows(db)
        got = applied(fmt, after, schemas)
        differences = [
            f"id {k}: source {want.get(k)!r}, topic {got.get(k)!r}"
            for k in sorted(set(want) | set(got))
            if want.get(k) != got.get(k)
        ]
        assert not differences, f"{len(differences)} differences:\n" + "\n".join(differences[:20])
        live = [
            r
            for r in after
            if r.value is not None and decode(fmt, r.key, r.value, tuple(r.headers), schemas).after
        ]
        assert len(live) == len(want), "one live record per row of the table"
        assert [r for r in read_topic(cfg, dlq)] == []
        print(
            f"\ncompaction: {len(written) + 1} records written for {len(keys) + 1} keys, {len(after)} left "
            f"({len(live)} live, {len(want)} source rows), 0 differences; {time.monotonic() - t0:.0f}s"
        )
    finally:
        if registry is not None:
            registry.close()
            for subject in (f"{topic}-key", f"{topic}-value"):  # the test's subjects
                with contextlib.suppress(OSError):
                    urllib.request.urlopen(
                        urllib.request.Request(
                            f"{registry.url.rstrip('/')}/subjects/{subject}", method="DELETE"
                        )
                    )
        kafka.delete_topics(
            cfg.endpoints.kafka, [topic, events, dlq, topics.result_topic(env.ds, src, name, "marker")]
        )
        store = MetaStore(cfg.endpoints.meta_store.url.get_secret_value())
        try:
            with store.engine.begin() as conn:
                conn.exec_driver_sql("DELETE FROM dbus_meta_version WHERE ds = %s", (env.ds,))
        finally:
            store.dispose()
