"""canal-json records read by Canal's own class: ``FlatMessage`` parsed by fastjson2 as Canal's Kafka client
does (tests/interop/canal: Canal 1.1.8's canal.protocol, its fastjson2 2.0.31, kafka-clients), from the
stack's Kafka.

The records of every_type.sql's row changes (tests/unit/every_type_changes.py: inserts, updates with and
without before images, deletes and their tombstones, the primary-key change, a full pull) and 100 more
inserts, written by ``ums.formats.canal.CanalJson`` to a fresh topic; the Java reader prints each parsed
message's fields through FlatMessage's getters, and every field must be the one written, every value
reading back (``decode_canal``) as the source's UMS value; the table Canal's messages rebuild (applied in
order by primary key, in Java: tests/integration/canal_reader.py) must be the source's last state.

Then the same through the pipeline: every_type's rows and 100 more written to MariaDB, captured by the
extractor and appended in canal-json to the table's topic; the table Canal's messages rebuild equals what
SELECT shows, every value of every column (acceptance 1d of issue #30, on a small table).
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import replace
from pathlib import Path

import pytest
import yaml
from binlog_truth import rows_events
from every_type import (
    COLUMNS,
    CREATE,
    MAX_ROW,
    MIN_ROW,
    NULL_ROW,
    ODD_ROW,
    TRANSACTIONS,
    as_decoded,
    multi_row_insert,
)
from rowformats_live import forget_table_versions

from appender import job
from dbuslib import kafka, mysql, topics
from dbuslib.config import load_config, raw_config
from ums.formats import FormatOptions
from ums.formats.canal import CanalJson, decode_canal
from ums.rowchange import RowChange
from ums.types import ColumnSpec
from ums.values import encode_column

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "unit"))
import canal_reader  # noqa: E402
from every_type_changes import changes, pulled, rows  # noqa: E402

pytestmark = pytest.mark.integration


def _source() -> list[RowChange]:
    every = changes()
    without_before = [replace(c, before=None) for c in every if c.op == "u" and not c.key_changed][:1]
    return every + without_before + pulled() + rows(100)


def _named(change: RowChange, values: tuple | None) -> dict | None:
    if values is None:
        return None
    return {f.name: (type(v).__name__, v) for f, v in zip(change.table.fields, values, strict=True)}


def test_canal_reads_every_record(kafka_up, new_topic):
    topic = new_topic()
    fmt = CanalJson(FormatOptions())
    written = [(change, r) for change in _source() for r in fmt.records(topic, change)]
    producer = kafka.producer(kafka_up)
    try:
        for _, r in written:
            producer.send(topic, key=r.key, value=r.value, headers=list(r.headers))
        producer.flush()
    finally:
        producer.close()

    parsed = canal_reader.messages(kafka_up.bootstrap_servers, topic)
    assert (
        len(parsed) == len(written) == 121
    )  # 117 changes: 114 one record each, 2 deletes + tombstones, 1 key change (3)

    tombstones = 0
    for (change, record), got in zip(written, parsed, strict=True):
        assert got["key"] == (None if record.key is None else record.key.decode())
        if record.value is None:
            assert got == {"key": got["key"], "tombstone": True}
            tombstones += 1
            continue
        sent = json.loads(record.value)
        # every field of Canal's FlatMessage, through its getters, is the one written
        assert got == {"key": got["key"]} | {name: sent[name] for name in got if name != "key"}
        assert set(got) - {"key"} == set(sent)
        assert got["id"] == change.at.ums_id and got["es"] == change.at.ts_ms
        assert (got["database"], got["table"]) == (change.table.schema, change.table.table)
        assert got["mysqlType"] == {c.name: c.column_type for c in change.table.columns}
        # and what Canal holds reads back as the source's UMS values
        again = decode_canal(
            record.key, json.dumps({k: v for k, v in got.items() if k != "key"}).encode(), record.headers
        )
        assert again is not None  # fastjson2's maps keep no order: compare by column name
        image = again.before if got["type"] == "DELETE" else again.after
        source = change.before if got["type"] == "DELETE" else change.after
        assert _named(again, image) == _named(change, source), f"{got['type']} id {got['data'][0]['id']}"
        if got["type"] == "UPDATE":
            assert _named(again, again.before) == _named(change, change.before)
    assert tombstones == sum(1 for c in _source() if c.op == "d" or c.key_changed)

    # the table Canal's messages rebuild is the source's last state
    expected: dict[tuple, dict] = {}
    for change in _source():
        names = [f.name for f in change.table.fields]
        if change.before is not None:
            expected.pop((change.before[0],), None)
        if change.after is not None:
            expected[(change.after[0],)] = dict(zip(names, change.after, strict=True))
    rebuilt = canal_reader.tables(kafka_up.bootstrap_servers, [topic])
    assert list(rebuilt) == [("golden", "cdc_types")]
    assert rebuilt[("golden", "cdc_types")] == expected
    assert len(expected) == 106  # 4, 5, 10 left by the changes; 1, 2, 3 pulled again; 1000..1099


NOT_NULL = {"id", "nn"}
SPECS = [ColumnSpec(n, t, n not in NOT_NULL) for n, _, t, _ in COLUMNS]
# rows beyond every_type's four (ids 1000...): 100, or DBUS_CANAL_ROWS (100000: the acceptance's size)
ROWS = int(os.environ.get("DBUS_CANAL_ROWS", "100"))
MORE = [(1000 + k, *row[1:]) for k, row in enumerate([MAX_ROW, MIN_ROW, ODD_ROW, NULL_ROW] * (ROWS // 4 + 1))]
MORE = MORE[:ROWS]
STATEMENTS = [
    *(sql for t in TRANSACTIONS[1:] for sql in t),
    "UPDATE every_type SET id = id + 1000000, vc = 'moved' WHERE id BETWEEN 1000 AND 1009",  # key changes
    "DELETE FROM every_type WHERE id BETWEEN 1010 AND 999999 AND id % 10 = 0",
    "UPDATE every_type SET vc = 'changed', fl = 2.5, bl = x'00ff', st = 'red,blue' "
    "WHERE id >= 1000 AND id % 10 = 5",
]


def records_of(sql: str, rowcount: int) -> int:
    """How many row records a statement gives: a key change two (a DELETE and an INSERT), others one."""
    verb = sql.split()[0].upper()
    if verb not in ("INSERT", "UPDATE", "DELETE"):
        return 0
    return rowcount * (2 if verb == "UPDATE" and " SET id = " in sql else 1)


@pytest.fixture
def env(extractor_env):
    return extractor_env  # conftest.py: an extractor capturing only this test's database


def canal_config(env):
    """The env's configuration writing canal-json to a topic per table, the appender in micro-batches."""
    raw = raw_config(env.cfg_path)
    src = raw["sources"][env.ds]
    src["output"] = {"format": "canal-json", "topic": "table"}
    src.setdefault("appender", {})["trigger"] = "microbatch"
    src["topics"]["table"] = "{ds}.{schema}.{table}.canal"
    src["topics"]["events"] = "{ds}.{schema}.events.canal"
    path = env.cfg_path.with_name("dbus-canal-json.yaml")
    path.write_text(yaml.safe_dump(raw))
    return load_config(path)


def test_the_appender_writes_canal_json_that_canal_reads(spark, env, writer_db, source, tmp_path):
    db, name = writer_db
    cfg = canal_config(env)
    src = cfg.source(env.ds)
    table_topic = topics.result_topic(env.ds, src, name, "every_type")
    events_topic = topics.events_topic(env.ds, src, name)
    dlq = src.topics.name("dead_letter", env.ds)
    endpoint = cfg.endpoints.kafka
    kafka.ensure_topics(endpoint, [env.topic, dlq])
    try:
        with db.cursor() as cur:
            cur.execute(CREATE)
            start = mysql.binlog_end(db)
            cur.execute("SET time_zone = '+00:00', sql_mode = ''")
            inserted = [MAX_ROW, MIN_ROW, ODD_ROW, NULL_ROW, *MORE]
            for at in range(0, len(inserted), 500):
                cur.execute(multi_row_insert(db, inserted[at : at + 500]))
            expected_records = len(inserted)
            for sql in STATEMENTS:
                expected_records += records_of(sql, cur.execute(sql))
            cur.execute("SELECT *, CAST(fl AS DOUBLE) FROM every_type ORDER BY id")
            names = [spec.name for spec in SPECS]
            selected = [{**dict(zip(names, row, strict=False)), "fl": row[-1]} for row in cur.fetchall()]
        server_id = source.mysql.server_id + 2000
        events = sum(1 for _ in rows_events(source.mysql, start.file, start.pos, name, server_id))
        env.spawn()
        wait_s = 120 + ROWS / 100  # a deadline for a broken stage, not a timing
        env.records(
            lambda r: sum(x.event.kind == "rows" for x in env.whole_events(r)) >= events, timeout=wait_s
        )
        query = job.start(spark, cfg, env.ds, [env.topic], str(tmp_path / "ckpt"), available_now=True)
        try:
            query.awaitTermination(300 + ROWS / 50)
            assert query.exception() is None, query.exception()
        finally:
            query.stop()

        # every record parses with Canal's class and is a row change of the table
        parsed = canal_reader.messages(endpoint.bootstrap_servers, table_topic)
        rows = [m for m in parsed if not m.get("tombstone")]
        assert len(rows) == expected_records  # 135 for 100 rows
        assert {(m["database"], m["table"], m["isDdl"]) for m in rows} == {(name, "every_type", False)}
        assert {m["type"] for m in rows} == {"INSERT", "UPDATE", "DELETE"}
        assert all(m["pkNames"] == ["id"] and len(m["data"]) == 1 for m in rows)
        assert sum(1 for m in parsed if m.get("tombstone")) == sum(1 for m in rows if m["type"] == "DELETE")

        # the table Canal's messages rebuild is the source table, every value of every column
        rebuilt = canal_reader.tables(endpoint.bootstrap_servers, [table_topic])
        expected = {
            (row["id"],): {spec.name: encode_column(spec, as_decoded(spec, row[spec.name])) for spec in SPECS}
            for row in selected
        }
        assert list(rebuilt) == [(name, "every_type")]
        got = rebuilt[(name, "every_type")]
        assert sorted(got) == sorted(expected)
        bad = [
            (key, column, got[key][column], value)
            for key, row in expected.items()
            for column, value in row.items()
            if got[key][column] != value or type(got[key][column]) is not type(value)
        ]
        assert bad == [], str(bad)[:2000]
        assert len(got) == 4 - 2 + 1 + ROWS - len(range(1010, 1000 + ROWS, 10))  # 2 and 3 gone, 5 added
        assert kafka.read_range(endpoint, [dlq]) == []
    finally:
        kafka.delete_topics(endpoint, [table_topic, events_topic, dlq])
        forget_table_versions(env)
