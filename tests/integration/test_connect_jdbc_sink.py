"""Debezium's JDBC sink connector, unmodified, applies DBus's ``debezium-json`` and ``avro`` to PostgreSQL.

A Kafka Connect worker of the stack's jars (tests/integration/connect.py) runs
io.debezium.connector.jdbc.JdbcSinkConnector with JsonConverter (``schemas.enable=true``) for key and value,
``insert.mode=upsert``, ``delete.enabled=true``, ``primary.key.mode=record_key`` and
``schema.evolution=basic``. The records are ``ums.formats``' own (``formatter("debezium-json",
FormatOptions())``) for every change of tests/golden/cdc/every_type.sql's ``cdc_types`` (inserts, updates,
a primary-key change, deletes with their tombstones: tests/unit/every_type_changes.py) and three more rows
of its MAX, MIN and ODD values, written with kafka-python into 6 partitions keyed by the record key. Once
the sink has committed the topic's end offsets, PostgreSQL's table must be the final rows, every column
compared typed (``LANDS`` of jdbc_sink_compare.py: how each MySQL type lands in PostgreSQL through the
sink) and the column types too; a difference names the row and the column. The same again in ``avro``:
the ids from the stack's registry (dbuslib.registry), the records read by Apicurio's AvroConverter in its
Confluent mode.

What the sink cannot do, and the test therefore arranges (docs/formats.md, Kafka Connect):

- it creates ``decimal(65,30)`` as ``numeric(38,30)`` (Hibernate's PostgreSQL precision limit), which
  cannot hold the MAX row's 35 integer digits, and it cannot add a NOT NULL column without a default to
  a table (a Connect schema from MySQL's binlog carries no column defaults): the table is created first
  with ``id``, ``de numeric(65,30)`` and ``nn varchar(5) NOT NULL``; the sink adds every other column;
- it writes ``io.debezium.time.MicroTime`` into PostgreSQL ``time``, which holds 00:00:00 to 24:00:00:
  a MySQL TIME outside (negative, or 24 h and more) fails the task, as it does for Debezium's own MySQL
  connector's records. The TIME values here are moved into the day (``IN_A_DAY``);
- with several tasks, each evolves the table itself and they race (``column ... already exists``): one
  task.
"""

from __future__ import annotations

import contextlib
import re
import urllib.request
from pathlib import Path
from typing import Any, Literal

import pytest
import sqlalchemy as sa
from connect import apicurio_avro_converters, jdbc_sink, json_converters, rows, running_worker, wait_consumed
from jdbc_sink_compare import CREATED_FIRST, LANDS, NAMES, TABLE, differences, final_rows, in_a_day
from replica_env import fresh_database
from unit.every_type_changes import changes
from unit.every_type_changes import rows as more_rows

from dbuslib import kafka
from dbuslib.registry import Registry
from ums.formats import Format, FormatOptions, formatter
from ums.rowchange import RowChange

pytestmark = pytest.mark.integration


def through_the_sink(
    kafka_up: Any,
    topic: str,
    fmt: Format,
    converters: dict[str, str],
    folder: Path,
    mode: Literal["distributed", "standalone"] = "distributed",
) -> tuple[dict[str, str], list[dict[str, Any]], list[RowChange]]:
    """Every change in ``fmt`` into ``topic``, Debezium's JDBC sink from it (a worker in ``mode``) into a
    fresh PostgreSQL database until it has committed the topic's end: (column types, rows, the changes
    written)."""
    work = [in_a_day(c) for c in [*changes(), *more_rows(3)]]
    producer = kafka.producer(kafka_up)
    tombstones = 0
    for change in work:
        for record in fmt.records(topic, change):
            producer.send(topic, key=record.key, value=record.value, headers=list(record.headers))
            tombstones += record.value is None
    producer.flush()
    producer.close()
    assert tombstones == 3  # two deletes and the primary-key change's delete

    with fresh_database("postgresql") as url:
        engine = sa.create_engine(url)
        with engine.begin() as conn:
            conn.execute(sa.text(CREATED_FIRST))
        name = f"jdbc-{topic[-8:]}"
        with running_worker(kafka_up, folder, mode) as worker:
            worker.create(name, jdbc_sink(topic, url, table=TABLE, converters=converters))
            worker.wait_running(name)
            wait_consumed(worker, name, [topic])
            types = rows(
                url,
                "SELECT attname, format_type(atttypid, atttypmod) FROM pg_attribute "
                f"WHERE attrelid = '{TABLE}'::regclass AND attnum > 0 AND NOT attisdropped",
            )
            with engine.connect() as conn:
                got = [dict(r._mapping) for r in conn.execute(sa.text(f"SELECT * FROM {TABLE}"))]
        engine.dispose()
    return dict(types or []), got, work


def check_table(types: dict[str, str], got: list[dict[str, Any]], work: list[RowChange]) -> None:
    assert types == {n: LANDS[n][0] for n in NAMES}
    problems = differences(final_rows(work), got)
    assert not problems, "\n".join(problems)


def test_debezium_json_through_the_jdbc_sink(kafka_up, new_topic, tmp_path) -> None:
    fmt = formatter("debezium-json", FormatOptions())
    check_table(*through_the_sink(kafka_up, new_topic(partitions=6), fmt, json_converters(), tmp_path))


def test_avro_through_apicurio_and_the_jdbc_sink(cfg, kafka_up, new_topic, tmp_path) -> None:
    """The same in ``avro``: ids from the stack's registry (dbuslib.registry, the subjects BACKWARD, as
    ``output.compatibility`` defaults), read by Apicurio's AvroConverter in its Confluent mode (4-byte id,
    no headers, the id a content id: what the Confluent API hands out) through Apicurio's own API. The
    worker is a standalone one here (the debezium-json test's is distributed)."""
    topic = new_topic(partitions=6)
    registry = Registry.of(cfg)
    try:
        fmt = formatter("avro", FormatOptions(), registry.schema_ids("BACKWARD"))
        ccompat = registry.url.rstrip("/")
        core = re.sub(r"/apis/ccompat/v\d+$", "/apis/registry/v2", ccompat)
        converters = apicurio_avro_converters(core)
        check_table(*through_the_sink(kafka_up, topic, fmt, converters, tmp_path, "standalone"))
    finally:
        registry.close()
        for subject in (f"{topic}-key", f"{topic}-value"):  # the test's subjects, not left in the registry
            with contextlib.suppress(OSError):
                urllib.request.urlopen(
                    urllib.request.Request(f"{ccompat}/subjects/{subject}", method="DELETE")
                )
