"""Columns added and widened mid-stream, then a change the registry refuses (issue #30, acceptance 2).

One source on the real stack writes a topic per table (``output.topic: table``): ``evo`` and ``other`` in
``avro`` through the stack's Apicurio (subjects BACKWARD, ``output.compatibility``'s default), ``evo_json``
in ``debezium-json`` (``output.tables``). ``evo`` and ``evo_json`` get the same statements: rows inserted,
updated, deleted and one key changed, then one ``ALTER TABLE`` that adds a column and widens two
(``INT`` -> ``BIGINT``, ``VARCHAR(10)`` -> ``VARCHAR(40)``), then more rows using both (values past 2^31).
The extractor captures them, the appender writes them (in this process, ``available_now``). Then:

- the subject ``<evo's topic>-value`` has exactly two versions (the key's one);
- confluent-kafka's ``AvroDeserializer`` with its ``SchemaRegistryClient``, unmodified, reads every record
  of ``evo`` (key and value, before and after the change), and the envelopes applied per key give SELECT;
- Debezium's JDBC sink on a Kafka Connect worker started here applies ``evo`` through Apicurio's
  AvroConverter and ``evo_json`` through JsonConverter into PostgreSQL, and each table ends equal to its
  source, typed. The sink's ``schema.evolution=basic`` adds columns but never changes a column's type
  (docs/formats.md, Kafka Connect), so its tables are created first with the widened types; it adds
  ``extra`` itself.

Then ``ALTER TABLE evo MODIFY n VARCHAR(30)``: BIGINT -> string, a schema BACKWARD refuses (Avro reads no
long as a string). The rows of ``evo`` written after it are dead letters ``REGISTRY_SCHEMA_REFUSED`` on
``<ds>.dlq`` with their coordinates (the raw topic, partition, offset), the subject keeps its two
versions, a row of ``other`` written after them arrives, and the heartbeat monitor's check (as
tests/integration/test_heartbeat_deadletters_live.py runs it) opens the dead-letter incident
``appender.REGISTRY_SCHEMA_REFUSED`` naming the newest letter's coordinates, posted to the source's
``heartbeat.webhook_url`` (docs/monitoring.md).
"""

from __future__ import annotations

import contextlib
import json
import re
import time
import urllib.request
from typing import Any

import pytest
import sqlalchemy as sa
import yaml
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer
from confluent_kafka.serialization import MessageField, SerializationContext
from connect import apicurio_avro_converters, jdbc_sink, json_converters, running_worker, wait_consumed
from dashboards import influxql
from helpers import wait_until
from replica_env import fresh_database
from rowformats_live import run_appender

from dbuslib import kafka, topics, zk
from dbuslib.config import load_config, raw_config
from dbuslib.deadletter import DeadLetter
from dbuslib.metastore import MetaStore
from dbuslib.registry import Registry
from heartbeat import deadletters
from heartbeat.monitor import Monitor, alerts_path
from ums.formats import decode

pytestmark = pytest.mark.integration

COLUMNS = ("id", "n", "s", "amt", "extra")
# the sink's tables, created first with the widened types (the sink adds columns, it changes no type)
PG_TABLE = "CREATE TABLE {t} (id integer PRIMARY KEY, n bigint, s varchar(40), amt numeric(10,2))"
REFUSED = "REGISTRY_SCHEMA_REFUSED"


def evolving(cur, t: str) -> None:
    """The statements both evolving tables get: rows, one ALTER TABLE adding and widening, more rows."""
    cur.execute(f"CREATE TABLE {t} (id INT PRIMARY KEY, n INT, s VARCHAR(10), amt DECIMAL(10,2))")
    for lo in (1, 101):
        cur.execute(
            f"INSERT INTO {t} VALUES "
            + ",".join(f"({i}, {i * 1000}, 's{i}', {i}.25)" for i in range(lo, lo + 100))
        )
    cur.execute(f"UPDATE {t} SET n = n + 1, s = 'upd' WHERE id % 3 = 0")
    cur.execute(f"DELETE FROM {t} WHERE id % 10 = 0")
    cur.execute(f"UPDATE {t} SET id = 1005 WHERE id = 5")  # a key change
    cur.execute(f"ALTER TABLE {t} ADD COLUMN extra VARCHAR(20), MODIFY n BIGINT, MODIFY s VARCHAR(40)")
    cur.execute(
        f"INSERT INTO {t} VALUES "
        + ",".join(
            f"({i}, {3_000_000_000 + i}, 'a string of forty characters, row {i:05d}', {i}.50, 'x{i}')"
            for i in range(201, 301)
        )
    )
    cur.execute(f"UPDATE {t} SET n = 5000000000 + id, extra = 'widened' WHERE id % 7 = 0")
    cur.execute(f"DELETE FROM {t} WHERE id % 11 = 0")


def select(db, table: str) -> dict[int, tuple[Any, ...]]:
    db.commit()
    with db.cursor() as cur:
        cur.execute(f"SELECT {', '.join(COLUMNS)} FROM {table}")
        return {int(r[0]): tuple(r) for r in cur.fetchall()}


def text(row: tuple[Any, ...]) -> tuple[str | None, ...]:
    return tuple(None if v is None else str(v) for v in row)


def captured(env, marker: int) -> None:
    """Wait until the extractor has written the ``marker`` table's ``marker``-th rows event."""
    env.records(lambda got: sum(x.event.header.table == "marker" for x in got) >= marker, timeout=120)


def read_confluent(topic: str, endpoint, n_at_least: int) -> list[Any]:
    """Every record of ``topic`` now, in offset order per partition (kafka-python records)."""
    got = kafka.read_range(endpoint, [topic])
    assert len(got) >= n_at_least
    return sorted(got, key=lambda r: (r.partition, r.offset))


def delete_subjects(url: str, subjects: list[str]) -> None:
    for subject in subjects:
        with contextlib.suppress(OSError):
            urllib.request.urlopen(urllib.request.Request(f"{url}/subjects/{subject}", method="DELETE"))


def test_added_and_widened_columns_then_a_refused_change(
    spark, extractor_env, writer_db, tmp_path, receivers
):
    env = extractor_env
    db, name = writer_db
    hook, _ = receivers
    raw = raw_config(env.cfg_path)
    raw["sources"][env.ds].setdefault("heartbeat", {}).update(
        {"webhook_url": f"http://127.0.0.1:{hook.port}/alerts", "webhook_timeout_s": 5}
    )
    raw["sources"][env.ds]["output"] = {
        "format": "avro",
        "topic": "table",
        "tables": {f"{name}.evo_json": "debezium-json", f"{name}.marker": "debezium-json"},
    }
    path = env.cfg_path.with_name("dbus-evolution.yaml")
    path.write_text(yaml.safe_dump(raw))
    cfg = load_config(path)
    src = cfg.source(env.ds)
    evo, evo_json, other, marker = (
        topics.result_topic(env.ds, src, name, t) for t in ("evo", "evo_json", "other", "marker")
    )
    dlq = src.topics.name("dead_letter", env.ds)
    events = topics.events_topic(env.ds, src, name)
    kafka.ensure_topics(cfg.endpoints.kafka, [env.topic, dlq])
    registry = Registry.of(cfg)
    ccompat = registry.url.rstrip("/")
    confluent = SchemaRegistryClient({"url": ccompat})
    subjects = [f"{t}-{side}" for t in (evo, other) for side in ("key", "value")]
    checkpoint = str(tmp_path / "ckpt")
    client = zk.client(cfg.endpoints.zookeeper)
    t0 = time.monotonic()
    try:
        with db.cursor() as cur:
            cur.execute("CREATE TABLE marker (id INT PRIMARY KEY)")
            cur.execute("CREATE TABLE other (id INT PRIMARY KEY, v VARCHAR(10))")
            cur.execute("INSERT INTO other VALUES (1, 'one'), (2, 'two')")
            evolving(cur, "evo")
            evolving(cur, "evo_json")
            cur.execute("INSERT INTO marker VALUES (1)")
        env.spawn()
        captured(env, 1)
        run_appender(spark, cfg, env.ds, env.topic, checkpoint)
        assert kafka.read_range(cfg.endpoints.kafka, [dlq]) == [], "no dead letter before the refused change"

        # the registry: the value subject has two versions, the key's one
        assert confluent.get_versions(f"{evo}-value") == [1, 2]
        assert confluent.get_versions(f"{evo}-key") == [1]

        # confluent-kafka's AvroDeserializer reads every record of evo; the envelopes give the table
        deserialize = AvroDeserializer(confluent)
        records = read_confluent(evo, cfg.endpoints.kafka, 300)
        table: dict[Any, dict[str, Any]] = {}
        for r in records:
            key = deserialize(r.key, SerializationContext(evo, MessageField.KEY))
            value = (
                None
                if r.value is None
                else deserialize(r.value, SerializationContext(evo, MessageField.VALUE))
            )
            if value is None or value["after"] is None:
                table.pop(key["id"], None)
            else:
                table[key["id"]] = value["after"]
        want = select(db, "evo")
        got = {k: text(tuple(v.get(c) for c in COLUMNS)) for k, v in table.items()}
        assert got == {k: text(v) for k, v in want.items()}, "AvroDeserializer's envelopes give evo"
        versions = {
            json.loads(h[1])
            for r in records
            if r.value is not None
            for h in r.headers
            if h[0] == "ums_version"
        }
        assert len(versions) == 2, f"records of both versions of evo: {versions}"
        print(f"\n{time.monotonic() - t0:.0f}s: {len(records)} records of evo read by AvroDeserializer")

        # Debezium's JDBC sink: evo through Apicurio's AvroConverter, evo_json through JsonConverter
        with fresh_database("postgresql") as url:
            engine = sa.create_engine(url)
            with engine.begin() as conn:
                for t in ("evo", "evo_json"):
                    conn.execute(sa.text(PG_TABLE.format(t=t)))
            core = re.sub(r"/apis/ccompat/v\d+$", "/apis/registry/v2", ccompat)
            with running_worker(cfg.endpoints.kafka, tmp_path / "connect") as worker:
                worker.create(
                    "evo-avro", jdbc_sink(evo, url, table="evo", converters=apicurio_avro_converters(core))
                )
                worker.create(
                    "evo-json", jdbc_sink(evo_json, url, table="evo_json", converters=json_converters())
                )
                worker.wait_running("evo-avro")
                worker.wait_running("evo-json")
                wait_consumed(worker, "evo-avro", [evo])
                wait_consumed(worker, "evo-json", [evo_json])
            for t in ("evo", "evo_json"):
                with engine.connect() as conn:
                    pg = {
                        r[0]: tuple(r) for r in conn.execute(sa.text(f"SELECT {', '.join(COLUMNS)} FROM {t}"))
                    }
                source = select(db, t)
                problems = [
                    f"{t} id {k}: source {source.get(k)!r}, PostgreSQL {pg.get(k)!r}"
                    for k in sorted(set(source) | set(pg))
                    if source.get(k) != pg.get(k)
                    or [type(v) for v in source.get(k, ())] != [type(v) for v in pg.get(k, ())]
                ]
                assert not problems, f"{len(problems)} differences:\n" + "\n".join(problems[:10])
            engine.dispose()
        print(
            f"{time.monotonic() - t0:.0f}s: the JDBC sink's evo and evo_json equal the source "
            f"({len(want)} rows each)"
        )

        # a change BACKWARD refuses: dead letters with coordinates, other tables go on, the monitor alerts
        with db.cursor() as cur:
            cur.execute("ALTER TABLE evo MODIFY n VARCHAR(30)")
            cur.execute("INSERT INTO evo VALUES (400, 'four hundred', 'refused', 1.00, 'r')")
            cur.execute("UPDATE evo SET s = 'refused too' WHERE id = 1")
            cur.execute("INSERT INTO other VALUES (3, 'after')")
            cur.execute("INSERT INTO marker VALUES (2)")
        captured(env, 2)
        run_appender(spark, cfg, env.ds, env.topic, checkpoint)
        letters = [(m, DeadLetter.from_json(m.value)) for m in kafka.read_range(cfg.endpoints.kafka, [dlq])]
        assert [(d.code, d.stage, d.topic) for _, d in letters] == [(REFUSED, "appender", env.topic)] * 2
        for _, d in letters:
            assert f"{name}.evo" in d.error and evo in d.error and d.offset >= 0, d
        assert confluent.get_versions(f"{evo}-value") == [1, 2], "the refused schema is no version"
        assert len(kafka.read_range(cfg.endpoints.kafka, [evo])) == len(records), "nothing more in evo"
        later = [
            decode("avro", r.key, r.value, tuple(r.headers), registry.schema)
            for r in kafka.read_range(cfg.endpoints.kafka, [other])
        ]
        assert sorted(list(c.after) for c in later if c is not None) == [[1, "one"], [2, "two"], [3, "after"]]

        monitor = Monitor(cfg, env.ds, client=client, list_tables=lambda: [])
        try:
            notes: list = []
            wait_until(
                lambda: [n for n in notes.__iadd__(monitor.check()) if n.event == "alert"], 60, "an incident"
            )
        finally:
            monitor.close()
        key = f"appender.{REFUSED}.{deadletters.KIND}"
        assert [(n.event, n.alert.key) for n in notes] == [("alert", key)]
        incident = json.loads(client.get(f"{alerts_path(cfg.endpoints.zookeeper.root, env.ds)}/{key}")[0])
        newest = letters[-1][1]
        assert (incident["count"], incident["topic"], incident["offset"]) == (2, env.topic, newest.offset)
        wait_until(lambda: hook.hooks, 10, "the dead-letter alert at the webhook")
        [alert] = hook.hooks
        assert (alert["event"], alert["kind"], alert["stage"], alert["code"], alert["count"]) == (
            "alert",
            "dead_letter",
            "appender",
            REFUSED,
            2,
        )
        assert (alert["topic"], alert["offset"], alert["origin"]) == (env.topic, newest.offset, f"{name}.evo")
        print(
            f"{time.monotonic() - t0:.0f}s: 2 dead letters {REFUSED} ({env.topic} offsets "
            f"{[d.offset for _, d in letters]}), incident {key} open, other's row after them arrived"
        )
    finally:
        registry.close()
        client.delete(zk.path(cfg.endpoints.zookeeper, "HeartBeat", env.ds), recursive=True)
        client.stop()
        client.close()
        kafka.delete_topics(cfg.endpoints.kafka, [evo, evo_json, other, marker, events, dlq])
        admin = kafka.admin(cfg.endpoints.kafka)
        with contextlib.suppress(Exception):
            admin.delete_groups([deadletters.group_id(env.ds)])
        admin.close()
        for measurement in (deadletters.MEASUREMENT, "dbus_alert"):
            influxql(cfg, f'DROP SERIES FROM "{measurement}" WHERE "ds" = \'{env.ds}\'')
        delete_subjects(ccompat, subjects)
        store = MetaStore(cfg.endpoints.meta_store.url.get_secret_value())
        try:
            with store.engine.begin() as conn:
                conn.exec_driver_sql("DELETE FROM dbus_meta_version WHERE ds = %s", (env.ds,))
        finally:
            store.dispose()
