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
from rowformats_live import (
    append_workload_both_ways,
    check_workload_orders,
    forget_table_versions,
    per_row_config,
)

from dbuslib import kafka, topics
from ums.formats import decode

pytestmark = pytest.mark.integration


@pytest.fixture
def env(extractor_env):
    return extractor_env  # conftest.py: an extractor capturing only this test's database


def read_all(endpoint, topic: str) -> list:
    """Every record of ``topic`` up to its end offsets now (the appender has stopped: nothing more comes)."""
    return kafka.read_range(endpoint, [topic])


def comparable(records) -> tuple[list, list]:
    """A topic's records as both modes must write them: keyed records by partition in offset order; records
    without a key (a table without a primary key) sorted, since the producer picks their partition."""
    keyed = [(r.partition, r.key, r.value, tuple(r.headers)) for r in records if r.key is not None]
    keyless = sorted((r.value or b"", tuple(r.headers)) for r in records if r.key is None)
    return keyed, keyless


@pytest.mark.parametrize("fmt", ["debezium-json", "canal-json"])
def test_realtime_per_row_format_is_written_in_the_jvm(spark, env, writer_db, tmp_path, fmt):
    db, name = writer_db
    cfg, cfg_jvm = (per_row_config(env, fmt, trigger, "jvm") for trigger in ("microbatch", "realtime"))
    tables = ["orders", "nokey", "cdc_types"]
    table_topics = {
        t: [topics.result_topic(env.ds, c.source(env.ds), name, t) for c in (cfg, cfg_jvm)] for t in tables
    }
    dlq = cfg.source(env.ds).topics.name("dead_letter", env.ds)
    kafka.ensure_topics(env.cfg.endpoints.kafka, [env.topic, dlq])
    try:
        in_jvm, in_python = append_workload_both_ways(spark, env, db, cfg, cfg_jvm, tmp_path)
        assert in_jvm >= 0.8 * (in_jvm + in_python), (in_jvm, in_python)

        for table, (mb_topic, rt_topic) in table_topics.items():
            want = read_all(cfg.endpoints.kafka, mb_topic)
            got = read_all(cfg.endpoints.kafka, rt_topic)
            assert want, table
            assert comparable(got) == comparable(want), table
        orders = read_all(cfg.endpoints.kafka, table_topics["orders"][1])
        check_workload_orders([decode(fmt, r.key, r.value, tuple(r.headers)) for r in orders])
        assert read_all(cfg.endpoints.kafka, dlq) == []
        if fmt == "canal-json":  # every record the JVM wrote, as Canal's own class parses it
            for table, (_, rt_topic) in table_topics.items():
                parsed = canal_reader.messages(cfg.endpoints.kafka.bootstrap_servers, rt_topic)
                written = read_all(cfg.endpoints.kafka, rt_topic)
                assert len(parsed) == len(written), table
                rows = [m for m in parsed if not m.get("tombstone")]
                assert {(m["database"], m["table"], m["isDdl"]) for m in rows} == {(name, table, False)}
                assert all(len(m["data"]) == 1 for m in rows), table
    finally:
        kafka.delete_topics(
            env.cfg.endpoints.kafka, [t for pair in table_topics.values() for t in pair] + [dlq]
        )
        forget_table_versions(env)
