"""Real-time mode writes debezium-json and canal-json in the JVM (docs/realtime.md), on the real stack.

tests/golden/cdc/every_type.sql (every column type MariaDB has) and a workload of 600 rows (inserts in
batches, updates, a primary-key change, deletes, a table without a key) are captured by the extractor and
appended in each format twice from the same raw records: in micro-batch mode (the Python formatter) and in
real-time mode (``dbus.jvm.DebeziumJson``, ``dbus.jvm.CanalJson`` once the sidecar described each table,
drained with ``available_now``). Each table's topic holds the same records both ways, byte for byte (key,
value, headers), they decode to the source's row changes, and the JVM wrote most records
(``AppendUdf.counts()``: only each table version's first record and the DDL took the sidecar). Canal's own
``FlatMessage`` (tests/integration/canal_reader.py) parses every canal-json record the JVM wrote.
"""

from __future__ import annotations

import canal_reader
import pytest
import yaml
from golden_cdc import cases, read_case
from rowformats_live import run_appender

from dbuslib import kafka, topics
from dbuslib.config import load_config
from dbuslib.metastore import MetaStore
from ums.formats import decode

pytestmark = pytest.mark.integration

ROWS = 600


@pytest.fixture
def env(extractor_env):
    return extractor_env  # conftest.py: an extractor capturing only this test's database


def config(env, trigger: str, fmt: str):
    raw = yaml.safe_load(env.cfg_path.read_text())
    src = raw["sources"][env.ds]
    src["output"] = {"format": fmt, "topic": "table"}
    src.setdefault("appender", {})["trigger"] = trigger
    src["topics"]["table"] = "{ds}.{schema}.{table}.jvm" + trigger
    src["topics"]["events"] = "{ds}.{schema}.events.jvm" + trigger
    path = env.cfg_path.with_name(f"dbus-jvm-{fmt}-{trigger}.yaml")
    path.write_text(yaml.safe_dump(raw))
    return load_config(path)


def read_all(endpoint, topic: str, n: int) -> list:
    consumer = kafka.consumer(
        endpoint, topic, auto_offset_reset="earliest", enable_auto_commit=False, group_id=None,
        consumer_timeout_ms=5000,
    )  # fmt: skip
    got = []
    try:
        for m in consumer:
            got.append(m)
            if len(got) >= n:
                break
    finally:
        consumer.close()
    return sorted(got, key=lambda r: (r.partition, r.offset))


def comparable(records) -> tuple[list, list]:
    """A topic's records as both modes must write them: keyed records by partition in offset order; records
    without a key (a table without a primary key) sorted, since the producer picks their partition."""
    keyed = [(r.partition, r.key, r.value, tuple(r.headers)) for r in records if r.key is not None]
    keyless = sorted((r.value or b"", tuple(r.headers)) for r in records if r.key is None)
    return keyed, keyless


@pytest.mark.parametrize("fmt", ["debezium-json", "canal-json"])
def test_realtime_per_row_format_is_written_in_the_jvm(spark, env, writer_db, tmp_path, fmt):
    db, name = writer_db
    cfg, cfg_jvm = config(env, "microbatch", fmt), config(env, "realtime", fmt)
    every_type = [s.sql for path in cases() if path.name == "every_type.sql" for s in read_case(path)]
    tables = ["orders", "nokey", "cdc_types"]
    table_topics = {
        t: [topics.result_topic(env.ds, c.source(env.ds), name, t) for c in (cfg, cfg_jvm)] for t in tables
    }
    dlq = cfg.source(env.ds).topics.name("dead_letter", env.ds)
    kafka.ensure_topics(env.cfg.endpoints.kafka, [env.topic, dlq])
    try:
        with db.cursor() as cur:
            cur.execute(
                "CREATE TABLE orders (id INT PRIMARY KEY, total DECIMAL(10,2), note VARCHAR(20), "
                "at DATETIME(3), d DATE, big BIGINT UNSIGNED, f DOUBLE)"
            )
            cur.execute("CREATE TABLE nokey (a INT, b VARCHAR(5))")
            for start in range(0, ROWS, 50):
                values = ", ".join(
                    f"({i}, {i}.25, 'n{i}', '2026-11-29 10:00:{i % 60:02d}.{i % 1000:03d}', '2026-01-01', "
                    f"{2**63 + i}, {i}.5)"
                    for i in range(start, start + 50)
                )
                cur.execute(f"INSERT INTO orders VALUES {values}")
            cur.execute("UPDATE orders SET note = 'u' WHERE id < 100")
            cur.execute("UPDATE orders SET id = 10000 WHERE id = 5")
            cur.execute("DELETE FROM orders WHERE id >= 500")
            cur.execute("INSERT INTO nokey VALUES (1, 'x'), (2, 'y')")
            for sql in every_type:
                cur.execute(sql)
            cur.execute("INSERT INTO nokey VALUES (3, 'end')")  # the last event: all before it are in
        env.spawn()

        def marker(records) -> bool:
            whole = env.whole_events(records)
            return sum(x.event.kind == "rows" and x.event.header.table == "nokey" for x in whole) >= 2

        env.records(marker, timeout=120)
        run_appender(spark, cfg, env.ds, env.topic, str(tmp_path / "ckpt-mb"))
        before = list(spark._jvm.dbus.jvm.AppendUdf.counts())  # local mode: the executors are this JVM
        run_appender(spark, cfg_jvm, env.ds, env.topic, str(tmp_path / "ckpt-rt"))
        in_jvm, in_python = (
            a - b for a, b in zip(spark._jvm.dbus.jvm.AppendUdf.counts(), before, strict=True)
        )
        print(f"records written in the JVM: {in_jvm}, by the sidecar: {in_python}")
        assert in_jvm >= 0.8 * (in_jvm + in_python), (in_jvm, in_python)

        for table, (mb_topic, rt_topic) in table_topics.items():
            want = read_all(cfg.endpoints.kafka, mb_topic, 10_000)
            got = read_all(cfg.endpoints.kafka, rt_topic, 10_000)
            assert want, table
            assert comparable(got) == comparable(want), table
        orders = read_all(cfg.endpoints.kafka, table_topics["orders"][1], 10_000)
        changes = [decode(fmt, r.key, r.value, tuple(r.headers)) for r in orders]
        ops = [c.op for c in changes if c is not None]
        # 600 inserts, 100 updates, the key change's delete and create, 101 deletes (and their tombstones)
        assert (ops.count("c"), ops.count("u"), ops.count("d")) == (ROWS + 1, 100, 1 + 101)
        created = {c.after[0]: c.after for c in changes if c is not None and c.op == "c"}
        assert created[7] == (7, "7.25", "n7", "2026-11-29 10:00:07.007", "2026-01-01", str(2**63 + 7), 7.5)
        assert read_all(cfg.endpoints.kafka, dlq, 1) == []
        if fmt == "canal-json":  # every record the JVM wrote, as Canal's own class parses it
            for table, (_, rt_topic) in table_topics.items():
                parsed = canal_reader.messages(cfg.endpoints.kafka.bootstrap_servers, rt_topic)
                written = read_all(cfg.endpoints.kafka, rt_topic, 10_000)
                assert len(parsed) == len(written), table
                rows = [m for m in parsed if not m.get("tombstone")]
                assert {(m["database"], m["table"], m["isDdl"]) for m in rows} == {(name, table, False)}
                assert all(len(m["data"]) == 1 for m in rows), table
    finally:
        kafka.delete_topics(
            env.cfg.endpoints.kafka, [t for pair in table_topics.values() for t in pair] + [dlq]
        )
        store = MetaStore(env.cfg.endpoints.meta_store.url.get_secret_value())
        try:
            with store.engine.begin() as conn:
                conn.exec_driver_sql("DELETE FROM dbus_meta_version WHERE ds = %s", (env.ds,))
        finally:
            store.dispose()
