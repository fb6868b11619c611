"""The appender's per-row formats on the real stack (docs/appender.md, Per-row formats).

A source with ``output: {format: debezium-json, topic: table}``: rows written to MariaDB, captured by the
extractor, appended in micro-batch mode (Python) and in real-time mode (the JVM record path and its
sidecar, drained with ``available_now`` as tests/integration/test_appender_golden.py drains it), and with
``avro`` through the stack's registry in micro-batch mode; then read back from the table's own topic and
decoded with ``ums.formats.decode``: the row changes are the source's, keyed by the primary key (a table
without one: no key), a delete followed by its tombstone, a primary-key change a delete and a create;
the table's UMS terminations go to ``{ds}.{schema}.events``, nothing to the dead letters. With avro, a
column retyped INT -> VARCHAR is a schema the registry refuses (BACKWARD): that row is one dead letter
``REGISTRY_SCHEMA_REFUSED`` and the next table's rows still flow.
"""

from __future__ import annotations

import pytest
from rowformats_live import forget_table_versions, per_row_config, run_appender

from dbuslib import kafka, topics
from dbuslib.deadletter import DeadLetter
from dbuslib.registry import Registry
from ums import from_json
from ums.formats import decode

pytestmark = pytest.mark.integration


@pytest.fixture
def env(extractor_env):
    return extractor_env  # conftest.py: an extractor capturing only this test's database


def read_all(endpoint, topic: str) -> list:
    """Every record of ``topic`` up to its end offsets now (the appender has stopped: nothing more comes)."""
    return kafka.read_range(endpoint, [topic])


# per primary key, its records in order (op, before, after), a tombstone as ("tombstone", None, None); values
# as UMS wire values of (id INT, total DECIMAL(10,2), note VARCHAR(20)[, extra INT]). Kafka keeps the order
# of one key (one partition), not across keys.
EXPECTED = {
    1: [
        ("c", None, [1, "9.50", "a"]),
        ("u", [1, "9.50", "a"], [1, "9.50", "c"]),
        ("d", [1, "9.50", "c"], None),  # UPDATE ... SET id = 3: the old key goes
        ("tombstone", None, None),
    ],
    2: [("c", None, [2, None, "b"]), ("d", [2, None, "b"], None), ("tombstone", None, None)],
    3: [("c", None, [3, "9.50", "c"])],  # and the new one comes
    4: [("c", None, [4, "1.00", "d", 7])],  # after ALTER TABLE: version 1
}


@pytest.mark.parametrize(
    ("fmt", "trigger"),
    [("debezium-json", "microbatch"), ("debezium-json", "realtime"), ("avro", "microbatch")],
)
def test_per_row_records_per_table_keyed_by_primary_key(spark, env, writer_db, tmp_path, fmt, trigger):
    db, name = writer_db
    cfg = per_row_config(env, fmt, trigger)
    schemas = Registry.of(cfg).schema if fmt == "avro" else None  # the stack's registry (Apicurio)
    src = cfg.source(env.ds)
    table_topic = topics.result_topic(env.ds, src, name, "orders")
    events = topics.events_topic(env.ds, src, name)
    dlq = src.topics.name("dead_letter", env.ds)
    assert table_topic == f"{env.ds}.{name}.orders.{trigger}"
    kafka.ensure_topics(env.cfg.endpoints.kafka, [env.topic, dlq])
    try:
        with db.cursor() as cur:
            cur.execute("CREATE TABLE orders (id INT PRIMARY KEY, total DECIMAL(10,2), note VARCHAR(20))")
            cur.execute("INSERT INTO orders VALUES (1, 9.50, 'a'), (2, NULL, 'b')")
            cur.execute("UPDATE orders SET note = 'c' WHERE id = 1")
            cur.execute("DELETE FROM orders WHERE id = 2")
            cur.execute("UPDATE orders SET id = 3 WHERE id = 1")
            cur.execute("ALTER TABLE orders ADD COLUMN extra INT")  # the next rows open version 1
            cur.execute("INSERT INTO orders VALUES (4, 1.00, 'd', 7)")
            if fmt == "avro":  # INT -> VARCHAR: a schema BACKWARD refuses (Avro reads no int as a string)
                cur.execute("ALTER TABLE orders MODIFY extra VARCHAR(10)")
                cur.execute("INSERT INTO orders VALUES (5, 2.00, 'e', 'x')")
            cur.execute("CREATE TABLE nokey (a INT, b VARCHAR(5))")  # and the stream goes on
            cur.execute("INSERT INTO nokey VALUES (1, 'x')")
        env.spawn()
        rows_events = 7 if fmt == "avro" else 6
        env.records(lambda r: sum(x.event.kind == "rows" for x in r) >= rows_events, timeout=120)
        run_appender(spark, cfg, env.ds, env.topic, str(tmp_path / f"ckpt-{trigger}"))

        n = sum(len(v) for v in EXPECTED.values())
        records = read_all(cfg.endpoints.kafka, table_topic)
        assert len(records) == n
        by_key: dict[bytes, list] = {}  # the record key's bytes -> its records in order
        ids: dict[bytes, int] = {}  # the record key's bytes -> the id its changes carry
        for r in sorted(records, key=lambda r: (r.partition, r.offset)):
            change = decode(fmt, r.key, r.value, tuple(r.headers), schemas)
            if change is None:
                assert r.value is None, "a tombstone: the key and a null value"
                by_key.setdefault(r.key, []).append(("tombstone", None, None))
                continue
            assert change.table.primary_key == ("id",) and change.table.table == "orders"
            before = list(change.before) if change.before is not None else None
            after = list(change.after) if change.after is not None else None
            by_key.setdefault(r.key, []).append((change.op, before, after))
            assert ids.setdefault(r.key, (after or before)[0]) == (after or before)[0], "one id per key"
            assert dict(r.headers)["ums_key"].startswith(b"data_increment_data.mysql.")
        assert {ids[k]: v for k, v in by_key.items()} == EXPECTED
        # one ums_uid_ per row change: the key change's delete and create are one change, tombstones none
        assert len({dict(r.headers)["ums_uid_"] for r in records if r.value is not None}) == n - 2 - 1

        [keyless] = read_all(cfg.endpoints.kafka, topics.result_topic(env.ds, src, name, "nokey"))
        change = decode(fmt, keyless.key, keyless.value, tuple(keyless.headers), schemas)
        assert keyless.key is None and change.table.primary_key == () and list(change.after) == [1, "x"]

        versions = 2 if fmt == "avro" else 1  # each version change ends the version before it
        ums = [from_json(m.value) for m in read_all(cfg.endpoints.kafka, events)]
        assert [m.protocol.value for m in ums] == ["data_increment_termination"] * versions
        assert [str(m.schema.namespace) for m in ums] == [
            f"mysql.{env.ds}.{name}.orders.{v}.0.0" for v in range(versions)
        ]
        letters = [DeadLetter.from_json(m.value) for m in read_all(cfg.endpoints.kafka, dlq)]
        if fmt == "avro":  # the refused row: one dead letter, its coordinates and the registry's reason
            assert [(d.code, d.topic, d.stage) for d in letters] == [
                ("REGISTRY_SCHEMA_REFUSED", env.topic, "appender")
            ]
            assert f"{name}.orders" in letters[0].error and table_topic in letters[0].error
        else:
            assert letters == []
    finally:
        nokey = topics.result_topic(env.ds, src, name, "nokey")
        kafka.delete_topics(env.cfg.endpoints.kafka, [table_topic, nokey, events, dlq])
        forget_table_versions(env)
