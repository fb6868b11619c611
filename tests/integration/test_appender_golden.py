"""Golden test of the appender: every column type, through the real extractor and appender, exact UMS out.

The workload of test_rowdecode_types (41 columns: extremes, zero dates, NULLs; a multi-row INSERT, an
UPDATE, a DELETE, and a transaction mixing all three with a primary-key change) runs statement by
statement, the table read back with SELECT after each one. The expected messages are computed from those
SELECTs alone, with ``ums.values.encode_column`` for the values and the rows events read straight from
the binlog for ``ums_id_``/``ums_ts_``/``ums_uid_``; nothing of the appender's conversion is used. The
appender then runs three times over the same raw topic, each to its own result topic: ``ums.format:
json`` and ``ums.format: avro`` in micro-batch mode, and JSON through real-time mode's record path (the
JVM and its sidecar), which must write the same bytes as the first. The Avro records, decoded with the
schema their header names in the meta store, must equal the JSON messages one for one. The readable
cases of tests/golden/cdc/ run through the same path (both modes) and must give the tuples written there.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import golden_cdc
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
from extractor_env import ExtractorEnv

from appender import job
from appender.output import SCHEMA_HEADER, SchemaCache, decode, fingerprint
from dbuslib import kafka, mysql
from dbuslib.config import load_config, raw_config
from dbuslib.metastore import MetaStore
from ums import ColumnSpec, UmsField, UmsType, encode_column, from_json

pytestmark = pytest.mark.integration

NAMES = [n for n, _, _, _ in COLUMNS]
NOT_NULL = {"id", "nn"}
SPECS = [ColumnSpec(n, t, n not in NOT_NULL) for n, _, t, _ in COLUMNS]  # as the binlog's table map has them
# What each UPDATE of the workload changes: (id before, id after) in the order MariaDB logs them.
UPDATED = {1: [(1, 1), (2, 2), (4, 4)], 5: [(1, 10)], 7: [(5, 5)]}  # by statement index


@dataclass(frozen=True)
class Step:
    """One DML statement: its op and the rows it wrote, as SELECT showed them."""

    op: str
    rows: list[dict[str, Any]]


@dataclass(frozen=True)
class BinlogEvent:
    file: str
    pos: int
    ts: int
    rows: int


def run_statements(db, statements: list[str]) -> list[Step]:
    """Each statement, then SELECT (UTC; FLOAT read back as the exact stored float32 too)."""
    steps: list[Step] = []
    before: dict[int, dict[str, Any]] = {}
    with db.cursor() as cur:
        cur.execute("SET time_zone = '+00:00', sql_mode = ''")
        for n, sql in enumerate(statements):
            cur.execute(sql)
            verb = sql.split()[0].upper()
            if verb not in ("INSERT", "UPDATE", "DELETE"):
                continue
            cur.execute("SELECT *, CAST(fl AS DOUBLE) FROM every_type ORDER BY id")
            after = {row[0]: {**dict(zip(NAMES, row, strict=False)), "fl": row[-1]} for row in cur.fetchall()}
            if verb == "INSERT":
                steps.append(Step("i", [after[i] for i in sorted(set(after) - set(before))]))
            elif verb == "DELETE":
                steps.append(Step("d", [before[i] for i in sorted(set(before) - set(after))]))
            else:
                steps.append(Step("u", [after[new] for _, new in UPDATED[n]]))
            before = after
    return steps


def binlog_events(source, start: mysql.BinlogPosition, database: str) -> list[BinlogEvent]:
    """Every rows event of ``database`` since ``start``, read straight from the binlog."""
    server_id = source.mysql.server_id + 1000 + uuid.uuid4().int % 50000
    return [
        BinlogEvent(file, pos, e.timestamp, len(e.rows))
        for file, pos, e in rows_events(source.mysql, start.file, start.pos, database, server_id)
    ]


def wire(spec: ColumnSpec, value: Any) -> Any:
    return encode_column(spec, as_decoded(spec, value))


def expected_messages(steps: list[Step], events: list[BinlogEvent], namespace: str) -> list[dict[str, Any]]:
    """One message per rows event (the workload stays under the size limits), as plain JSON values."""
    tuples = [(s.op, row) for s in steps for row in s.rows]
    assert sum(e.rows for e in events) == len(tuples)
    fields = [
        ("ums_id_", UmsType.LONG, False),
        ("ums_ts_", UmsType.DATETIME, False),
        ("ums_op_", UmsType.STRING, False),
        ("ums_uid_", UmsType.STRING, False),
    ]
    fields += [(n, ums_type, n not in NOT_NULL) for n, _, _, ums_type in COLUMNS]
    out, at = [], 0
    for e in events:
        pos_id = int(e.file.rsplit(".", 1)[1]) * 10**13 + e.pos
        ts = datetime.fromtimestamp(e.ts, UTC).strftime("%Y-%m-%d %H:%M:%S") + ".000"
        payload = []
        for t, (op, row) in enumerate(tuples[at : at + e.rows]):
            values = [wire(spec, row[spec.name]) for spec in SPECS]
            payload.append((str(pos_id), ts, op, str(pos_id * 10**6 + t), *values))
        at += e.rows
        out.append(
            {
                "namespace": namespace,
                "fields": [UmsField(n, t, nl) for n, t, nl in fields],
                "payload": payload,
                "ts_ms": e.ts * 1000,
            }
        )
    return out


def consume_all(endpoint, topic: str) -> list:
    """Every record of ``topic`` up to its end offsets now (the appender has stopped: nothing more comes)."""
    return kafka.read_range(endpoint, [topic])


def avro_config(env: ExtractorEnv):
    """The environment's configuration with ``ums.format: avro`` and its own result topics."""
    raw = raw_config(env.cfg_path)
    raw["sources"][env.ds]["ums"]["format"] = "avro"
    raw["sources"][env.ds].setdefault("appender", {})["trigger"] = "microbatch"
    raw["sources"][env.ds]["topics"]["result"] = "{ds}.{schema}.avro"
    path = env.cfg_path.with_name("dbus-avro.yaml")
    path.write_text(yaml.safe_dump(raw))
    return load_config(path)


def mode_config(env: ExtractorEnv, trigger: str, suffix: str = "", ums_format: str = "json"):
    """The environment's configuration with the appender's ``trigger``: ``realtime`` is the JVM record path
    and its Python sidecar, drained here with ``available_now``; ``microbatch`` the Python path. With a
    ``suffix``, its own result topics ``{ds}.{schema}.<suffix>``."""
    raw = raw_config(env.cfg_path)
    raw["sources"][env.ds].setdefault("appender", {})["trigger"] = trigger
    raw["sources"][env.ds]["ums"]["format"] = ums_format
    if suffix:
        raw["sources"][env.ds]["topics"]["result"] = "{ds}.{schema}." + suffix
    path = env.cfg_path.with_name(f"dbus-{trigger}{suffix}.yaml")
    path.write_text(yaml.safe_dump(raw))
    return load_config(path)


def assert_same_records(endpoint, topic: str, jvm_topic: str, n: int) -> None:
    """The real-time record path wrote what the micro-batch path wrote, byte for byte: key, value, headers."""
    want = consume_all(endpoint, topic)
    got = consume_all(endpoint, jvm_topic)
    assert len(want) == n
    assert [(r.key, r.value, r.headers) for r in got] == [(r.key, r.value, r.headers) for r in want]


def run_appender(spark, cfg, ds: str, topic: str, checkpoint: str) -> None:
    query = job.start(spark, cfg, ds, [topic], checkpoint, available_now=True)
    try:
        query.awaitTermination(300)
        assert query.exception() is None
    finally:
        query.stop()


@pytest.fixture
def env(extractor_env):
    return extractor_env  # conftest.py: an extractor capturing only this test's database


def test_every_type_through_extractor_and_appender_json_and_avro(spark, env, writer_db, source, tmp_path):
    db, name = writer_db
    cfg, cfg_avro, cfg_jvm = (
        mode_config(env, "microbatch"),
        avro_config(env),
        mode_config(env, "realtime", "jvm"),
    )
    src, src_avro = env.cfg.source(env.ds), cfg_avro.source(env.ds)
    result, result_avro = (
        src.topics.name("result", env.ds, name),
        src_avro.topics.name("result", env.ds, name),
    )
    result_jvm = cfg_jvm.source(env.ds).topics.name("result", env.ds, name)
    dlq = src.topics.name("dead_letter", env.ds)
    kafka.ensure_topics(env.cfg.endpoints.kafka, [env.topic, result, result_avro, result_jvm, dlq])
    store = MetaStore(env.cfg.endpoints.meta_store.url.get_secret_value())
    namespace = f"mysql.{env.ds}.{name}.every_type.0.0.0"
    try:
        with db.cursor() as cur:
            cur.execute(CREATE)
        start = mysql.binlog_end(db)
        statements = [multi_row_insert(db, [MAX_ROW, MIN_ROW, ODD_ROW, NULL_ROW])]
        statements += [sql for t in TRANSACTIONS[1:] for sql in t]
        steps = run_statements(db, statements)
        assert [s.op for s in steps] == ["i", "u", "d", "i", "u", "d", "u"]
        events = binlog_events(source, start, name)
        assert len(events) > len(steps), "the wide rows of the INSERT take events of their own"
        expected = expected_messages(steps, events, namespace)

        env.spawn()
        env.records(
            lambda r: sum(x.event.kind == "rows" for x in env.whole_events(r)) >= len(events), timeout=120
        )
        run_appender(spark, cfg, env.ds, env.topic, str(tmp_path / "ckpt-json"))
        run_appender(spark, cfg_avro, env.ds, env.topic, str(tmp_path / "ckpt-avro"))
        run_appender(spark, cfg_jvm, env.ds, env.topic, str(tmp_path / "ckpt-jvm"))

        records = consume_all(env.cfg.endpoints.kafka, result)
        messages = [from_json(r.value) for r in records]
        assert len(messages) == len(expected)
        for n, (m, r, want) in enumerate(zip(messages, records, expected, strict=True)):
            assert m.protocol.value == "data_increment_data" and m.version == "1.3", n
            assert (str(m.schema.namespace), m.schema.batch_id) == (namespace, 0), n
            assert list(m.schema.fields) == want["fields"], n
            for k, (got_t, want_t) in enumerate(zip(m.payload, want["payload"], strict=True)):
                bad = [
                    (f.name, g, w)
                    for f, g, w in zip(m.schema.fields, got_t, want_t, strict=True)
                    if g != w or type(g) is not type(w)
                ]
                assert bad == [], f"message {n} tuple {k}: {str(bad)[:400]}"
            assert len(m.payload) == len(want["payload"]), n
            assert r.key == f"{name}.every_type".encode()
            ums_key = f"data_increment_data.{namespace}.{want['ts_ms']}|{env.ds}.wh_placeholder"
            assert dict(r.headers) == {"ums_key": ums_key.encode()}

        avro_records = consume_all(env.cfg.endpoints.kafka, result_avro)
        cache = SchemaCache(store)
        assert [decode(r.value, r.headers, cache) for r in avro_records] == messages
        fps = {dict(r.headers)[SCHEMA_HEADER].decode() for r in avro_records}
        assert len(fps) == 1, "one schema per namespace version"
        [stored] = store.avro_schemas(namespace)
        assert (stored.fingerprint, fingerprint(stored.schema_json)) == (fps.pop(), stored.fingerprint)
        assert all(
            dict(r.headers)["ums_key"] == dict(j.headers)["ums_key"]
            for r, j in zip(avro_records, records, strict=True)
        )
        assert all(len(r.value) < len(j.value) for r, j in zip(avro_records, records, strict=True))
        assert_same_records(env.cfg.endpoints.kafka, result, result_jvm, len(expected))
        assert consume_all(env.cfg.endpoints.kafka, dlq) == []
    finally:
        kafka.delete_topics(env.cfg.endpoints.kafka, [result, result_avro, result_jvm, dlq])
        with store.engine.begin() as conn:
            conn.exec_driver_sql("DELETE FROM dbus_meta_version WHERE ds = %s", (env.ds,))
            conn.exec_driver_sql(
                "DELETE FROM dbus_meta_avro_schema WHERE namespace LIKE %s", (f"mysql.{env.ds}.%",)
            )
        store.dispose()


def test_golden_cdc_files_through_extractor_and_appender(spark, env, writer_db, source, tmp_path):
    """tests/golden/cdc/*.sql: each statement becomes the UMS tuples on its ``->`` lines (run fields left
    out). ``DBUS_GOLDEN_WRITE=1`` writes those lines from this run instead, to be read against docs/ums.md."""
    db, name = writer_db
    cfg, cfg_jvm = mode_config(env, "microbatch"), mode_config(env, "realtime", "jvm")
    cfg_avro, cfg_avro_jvm = (mode_config(env, t, f"avro{t}", "avro") for t in ("microbatch", "realtime"))
    src = cfg.source(env.ds)
    result, dlq = src.topics.name("result", env.ds, name), src.topics.name("dead_letter", env.ds)
    result_jvm = cfg_jvm.source(env.ds).topics.name("result", env.ds, name)
    avro_topics = [c.source(env.ds).topics.name("result", env.ds, name) for c in (cfg_avro, cfg_avro_jvm)]
    kafka.ensure_topics(env.cfg.endpoints.kafka, [env.topic, result, result_jvm, *avro_topics, dlq])
    cases = {path: golden_cdc.read_case(path) for path in golden_cdc.cases()}
    try:
        start = mysql.binlog_end(db)
        with db.cursor() as cur:
            for statements in cases.values():
                for s in statements:
                    cur.execute(s.sql)
        events = binlog_events(source, start, name)
        env.spawn()
        env.records(
            lambda r: sum(x.event.kind == "rows" for x in env.whole_events(r)) >= len(events), timeout=120
        )
        run_appender(spark, cfg, env.ds, env.topic, str(tmp_path / "ckpt-golden"))
        before = list(spark._jvm.dbus.jvm.AppendUdf.counts())  # local mode: the executors are this JVM
        run_appender(spark, cfg_jvm, env.ds, env.topic, str(tmp_path / "ckpt-golden-jvm"))
        in_jvm, in_python = (
            a - b for a, b in zip(spark._jvm.dbus.jvm.AppendUdf.counts(), before, strict=True)
        )
        # each table shape's first record (and the DDL) goes to the sidecar, the rest is written in the JVM
        assert in_jvm > 0 and in_python > 0, (in_jvm, in_python)
        # Avro: real-time mode's sidecar gets the JVM's Avro of the rows and writes what micro-batch mode does
        run_appender(spark, cfg_avro, env.ds, env.topic, str(tmp_path / "ckpt-golden-avro"))
        run_appender(spark, cfg_avro_jvm, env.ds, env.topic, str(tmp_path / "ckpt-golden-avro-jvm"))
        messages = [
            m
            for r in consume_all(env.cfg.endpoints.kafka, result)
            if (m := json.loads(r.value))["protocol"]["type"] == "data_increment_data"
        ]
        assert len(messages) == len(events), "one message per rows event"
        problems: list[str] = []
        for path, statements in cases.items():
            tables = golden_cdc.tables(statements)
            got = [
                golden_cdc.tuple_dict(m["schema"]["fields"], p["tuple"])
                for m in messages
                if m["schema"]["namespace"].split(".")[3] in tables
                for p in m["payload"]
            ]
            if golden_cdc.WRITE:
                golden_cdc.write_expected(path, statements, got)
            problems += golden_cdc.differences(path, statements, got)
        assert problems == []
        n = len(consume_all(env.cfg.endpoints.kafka, result))
        assert_same_records(env.cfg.endpoints.kafka, result, result_jvm, n)
        assert_same_records(env.cfg.endpoints.kafka, *avro_topics, n)
        assert consume_all(env.cfg.endpoints.kafka, dlq) == []
    finally:
        kafka.delete_topics(env.cfg.endpoints.kafka, [result, result_jvm, *avro_topics, dlq])
        store = MetaStore(env.cfg.endpoints.meta_store.url.get_secret_value())
        with store.engine.begin() as conn:
            conn.exec_driver_sql("DELETE FROM dbus_meta_version WHERE ds = %s", (env.ds,))
        store.dispose()


def test_avro_schemas_are_stored_once_race_safe(cfg):
    store = MetaStore(cfg.endpoints.meta_store.url.get_secret_value())
    store.create_schema()
    ns = f"mysql.pytest_{uuid.uuid4().hex[:8]}.shop.orders.0.0.0"
    text = '{"name":"x"}'
    fp = fingerprint(text)
    try:
        first = store.add_avro_schema(ns, fp, text)
        again = store.add_avro_schema(ns, fp, text)  # another executor, or a restart
        assert (again.namespace, again.fingerprint, again.schema_json) == (ns, fp, text)
        assert store.avro_schema(fp) == again and again.created_ms == first.created_ms
        assert store.avro_schemas(ns) == [again]
        with pytest.raises(ValueError, match="another schema text"):
            store.add_avro_schema(ns, fp, '{"name":"y"}')
        assert store.avro_schema("0" * 64) is None
    finally:
        with store.engine.begin() as conn:
            conn.exec_driver_sql("DELETE FROM dbus_meta_avro_schema WHERE namespace = %s", (ns,))
        store.dispose()
