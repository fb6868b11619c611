"""Real-time mode writes avro in the JVM (docs/realtime.md), on the real stack with its registry.

tests/golden/cdc/every_type.sql (every column type MariaDB has) and a workload of 600 rows (inserts in
batches, updates, a primary-key change, deletes, a table without a key) are captured by the extractor and
appended with ``output.format: avro`` twice from the same raw records: in micro-batch mode (the Python
formatter) and in real-time mode (``dbus.jvm.ConfluentAvro`` once the sidecar described each table, drained
with ``available_now``). Each run has its own topics, so its own registry subjects and ids: each table's
topic holds the same records both ways once each 4-byte id is read as the schema the registry holds for it
(key, value, headers byte for byte otherwise); confluent-kafka's ``AvroDeserializer`` with its
``SchemaRegistryClient``, unmodified, reads every record of both runs to the same envelopes; they decode to
the source's row changes; and the JVM wrote most records (``AppendUdf.counts()``).
"""

from __future__ import annotations

import contextlib
import urllib.request

import pytest
import yaml
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer
from confluent_kafka.serialization import MessageField, SerializationContext
from golden_cdc import cases, read_case
from rowformats_live import run_appender

from dbuslib import kafka, topics
from dbuslib.config import load_config
from dbuslib.metastore import MetaStore
from dbuslib.registry import Registry
from ums.formats import decode

pytestmark = pytest.mark.integration

ROWS = 600


@pytest.fixture
def env(extractor_env):
    return extractor_env  # conftest.py: an extractor capturing only this test's database


def config(env, trigger: str):
    raw = yaml.safe_load(env.cfg_path.read_text())
    src = raw["sources"][env.ds]
    src["output"] = {"format": "avro", "topic": "table"}
    src.setdefault("appender", {})["trigger"] = trigger
    src["topics"]["table"] = "{ds}.{schema}.{table}.avro" + trigger
    src["topics"]["events"] = "{ds}.{schema}.events.avro" + trigger
    path = env.cfg_path.with_name(f"dbus-jvm-avro-{trigger}.yaml")
    path.write_text(yaml.safe_dump(raw))
    return load_config(path)


def records_of(endpoint, topic: str) -> list:
    return sorted(kafka.read_range(endpoint, [topic]), key=lambda r: (r.partition, r.offset))


def comparable(records, schema) -> tuple[list, list]:
    """A topic's records as both modes must write them, each id read as its schema's text: keyed records by
    partition in offset order; records without a key sorted (the producer picks their partition)."""

    def framed(data: bytes | None) -> tuple[str, bytes] | None:
        return None if data is None else (schema(int.from_bytes(data[1:5], "big")), data[:1] + data[5:])

    keyed = [(r.partition, framed(r.key), framed(r.value), tuple(r.headers)) for r in records if r.key]
    keyless = sorted(((framed(r.value) or ("", b"")), tuple(r.headers)) for r in records if r.key is None)
    return keyed, keyless


def delete_subjects(url: str, subjects: list[str]) -> None:
    for subject in subjects:
        for query in ("", "?permanent=true"):
            with contextlib.suppress(OSError):
                request = urllib.request.Request(f"{url}/subjects/{subject}{query}", method="DELETE")
                urllib.request.urlopen(request, timeout=10)


def test_realtime_avro_is_written_in_the_jvm(spark, env, writer_db, tmp_path):
    db, name = writer_db
    cfg, cfg_jvm = config(env, "microbatch"), config(env, "realtime")
    every_type = [s.sql for path in cases() if path.name == "every_type.sql" for s in read_case(path)]
    tables = ["orders", "nokey", "cdc_types"]
    table_topics = {
        t: [topics.result_topic(env.ds, c.source(env.ds), name, t) for c in (cfg, cfg_jvm)] for t in tables
    }
    dlq = cfg.source(env.ds).topics.name("dead_letter", env.ds)
    kafka.ensure_topics(env.cfg.endpoints.kafka, [env.topic, dlq])
    registry = Registry.of(cfg)
    url = registry.url.rstrip("/")
    subjects = [f"{t}-{side}" for pair in table_topics.values() for t in pair for side in ("key", "value")]
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
        assert kafka.read_range(cfg.endpoints.kafka, [dlq]) == []

        confluent = SchemaRegistryClient({"url": url})
        deserialize = AvroDeserializer(confluent)
        read = 0
        for table, (mb_topic, rt_topic) in table_topics.items():
            want, got = records_of(cfg.endpoints.kafka, mb_topic), records_of(cfg.endpoints.kafka, rt_topic)
            assert want, table
            assert comparable(got, registry.schema) == comparable(want, registry.schema), table

            def envelopes(records, topic):
                return [
                    (
                        None
                        if r.key is None
                        else deserialize(r.key, SerializationContext(topic, MessageField.KEY)),
                        None
                        if r.value is None
                        else deserialize(r.value, SerializationContext(topic, MessageField.VALUE)),
                    )
                    for r in records
                ]

            jvm_envelopes = envelopes(got, rt_topic)  # AvroDeserializer reads every record the JVM wrote
            read += len(jvm_envelopes)
            if table != "nokey":  # keyed: one partition order both ways
                assert jvm_envelopes == envelopes(want, mb_topic), table
        print(f"{read} records of the real-time run read by confluent-kafka's AvroDeserializer")

        orders = records_of(cfg.endpoints.kafka, table_topics["orders"][1])
        changes = [decode("avro", r.key, r.value, tuple(r.headers), registry.schema) for r in orders]
        ops = [c.op for c in changes if c is not None]
        # 600 inserts, 100 updates, the key change's delete and create, 101 deletes (and their tombstones)
        assert (ops.count("c"), ops.count("u"), ops.count("d")) == (ROWS + 1, 100, 1 + 101)
        created = {c.after[0]: c.after for c in changes if c is not None and c.op == "c"}
        assert created[7] == (7, "7.25", "n7", "2026-11-29 10:00:07.007", "2026-01-01", str(2**63 + 7), 7.5)
    finally:
        kafka.delete_topics(
            env.cfg.endpoints.kafka, [t for pair in table_topics.values() for t in pair] + [dlq]
        )
        delete_subjects(url, subjects)
        store = MetaStore(env.cfg.endpoints.meta_store.url.get_secret_value())
        try:
            with store.engine.begin() as conn:
                conn.exec_driver_sql("DELETE FROM dbus_meta_version WHERE ds = %s", (env.ds,))
        finally:
            store.dispose()
