"""Debezium's JDBC sink connector, unmodified, applies DBus's ``debezium-json`` and ``avro`` to PostgreSQL.

A Kafka Connect worker of the stack's jars (tests/integration/connect.py) runs
io.debezium.connector.jdbc.JdbcSinkConnector with JsonConverter (``schemas.enable=true``) for key and value,
``insert.mode=upsert``, ``delete.enabled=true``, ``primary.key.mode=record_key`` and
``schema.evolution=basic``. The records are ``ums.formats``' own (``formatter("debezium-json",
FormatOptions())``) for every change of tests/golden/cdc/every_type.sql's ``cdc_types`` (inserts, updates,
a primary-key change, deletes with their tombstones: tests/unit/every_type_changes.py) and three more rows
of its MAX, MIN and ODD values, written with kafka-python into 6 partitions keyed by the record key. Once
the sink has committed the topic's end offsets, PostgreSQL's table must be the final rows, every column
compared typed (``LANDS``: how each MySQL type lands in PostgreSQL through the sink) and the column types
too; a difference names the row and the column. The same again in ``avro``: the ids from the stack's
registry (dbuslib.registry), the records read by Apicurio's AvroConverter in its Confluent mode.

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

import base64
import contextlib
import dataclasses
import re
import struct
import urllib.request
from collections.abc import Callable
from datetime import UTC, date, datetime, time
from decimal import Decimal
from pathlib import Path
from typing import Any, Literal

import pytest
import sqlalchemy as sa
from connect import apicurio_avro_converters, jdbc_sink, json_converters, rows, running_worker, wait_consumed
from replica_env import fresh_database
from unit.every_type_changes import SHAPE, changes
from unit.every_type_changes import rows as more_rows

from dbuslib import kafka
from dbuslib.registry import Registry
from ums.formats import Format, FormatOptions, formatter
from ums.rowchange import RowChange
from ums.scalars import JsonValue

pytestmark = pytest.mark.integration

TABLE = "cdc_types"
CREATED_FIRST = f"CREATE TABLE {TABLE} (id integer PRIMARY KEY, de numeric(65,30), nn varchar(5) NOT NULL)"
NAMES = [f.name for f in SHAPE.fields]
# MySQL TIME values of every_type.sql outside PostgreSQL's time range -> values within it
IN_A_DAY = {
    "838:59:59": "23:59:59",
    "-838:59:59": "00:00:00",
    "-00:00:01": "00:00:01",
    "838:59:58.999": "23:59:58.999",
    "-838:59:58.999": "00:00:00.001",
    "-00:00:00.001": "00:00:00.001",
    "-12:00:00.500": "12:00:00.500",
}


def _float32(v: Any) -> float:
    return float(struct.unpack("<f", struct.pack("<f", float(v)))[0])


def _wrapped(v: Any) -> int:  # bigint_unsigned_handling_mode=long: above 2^63-1 wraps, as Debezium does
    n = int(v)
    return n - (1 << 64) if n >= 1 << 63 else n


def _date(v: Any) -> date | None:  # a zero or partly zero date: Debezium writes null
    try:
        return date.fromisoformat(v)
    except ValueError:
        return None


def _datetime(v: Any) -> datetime | None:
    try:
        return datetime.fromisoformat(v)
    except ValueError:
        return None


def _zoned(v: Any) -> datetime | None:
    got = _datetime(v)
    return None if got is None else got.replace(tzinfo=UTC)


def _bytes(v: Any) -> bytes:
    return base64.b64decode(v)


_int: Callable[[Any], Any] = int
_str: Callable[[Any], Any] = str

# column -> (its PostgreSQL type as format_type() prints it, UMS wire value -> what psycopg reads back)
LANDS: dict[str, tuple[str, Callable[[Any], Any]]] = {
    "id": ("integer", _int),  # created first
    "de": ("numeric(65,30)", Decimal),  # created first (the sink would make numeric(38,30))
    "nn": ("character varying(5)", _str),  # created first (NOT NULL without a default)
    "ti": ("smallint", _int),  # int8 -> smallint (PostgreSQL has no 1-byte integer)
    "tiu": ("smallint", _int),  # int16
    "si": ("smallint", _int),  # int16
    "siu": ("integer", _int),  # int32
    "mi": ("integer", _int),  # int32
    "miu": ("integer", _int),  # int32
    "i": ("integer", _int),  # int32
    "iu": ("bigint", _int),  # int64
    "bi": ("bigint", _int),  # int64
    "biu": ("bigint", _wrapped),  # int64, wrapped above 2^63-1 (bigint.unsigned.handling.mode=long)
    "d2": ("numeric(10,2)", Decimal),  # org.apache.kafka.connect.data.Decimal
    "fl": ("real", _float32),  # float32
    "db": ("double precision", float),  # float64
    "b1": ("bit(1)", lambda v: str(int(v))),  # boolean with source type BIT -> bit(1), read as '0'/'1'
    "b64": ("bit(64)", lambda v: format(int(v), "064b")),  # io.debezium.data.Bits
    "dt": ("date", _date),  # io.debezium.time.Date
    "dtm": ("timestamp(6) without time zone", _datetime),  # io.debezium.time.Timestamp (ms)
    "dtm6": ("timestamp(6) without time zone", _datetime),  # io.debezium.time.MicroTimestamp
    "ts": ("timestamp(6) with time zone", _zoned),  # io.debezium.time.ZonedTimestamp (UTC)
    "ts3": ("timestamp(3) with time zone", _zoned),
    "tm": ("time(6) without time zone", time.fromisoformat),  # io.debezium.time.MicroTime, within a day
    "tm3": ("time(3) without time zone", time.fromisoformat),
    "yr": ("integer", _int),  # io.debezium.time.Year
    "ch": ("character(10)", lambda v: v.ljust(10)),  # PostgreSQL pads char(n)
    "vc": ("character varying(20)", _str),  # the propagated length
    "tt": ("text", _str),
    "tx": ("text", _str),
    "mt": ("text", _str),
    "lt": ("text", _str),
    "bn": ("bytea", _bytes),
    "vb": ("bytea", _bytes),
    "tb": ("bytea", _bytes),
    "bl": ("bytea", _bytes),
    "mb": ("bytea", _bytes),
    "lb": ("bytea", _bytes),
    "en": ("text", _str),  # io.debezium.data.Enum
    "st": ("text", _str),  # io.debezium.data.EnumSet
    "js": ("text", _str),  # MariaDB's JSON is LONGTEXT
    "i4": ("text", _str),  # INET4, INET6, UUID: strings
    "i6": ("text", _str),
    "uu": ("text", _str),
}


def in_a_day(change: RowChange) -> RowChange:
    def moved(image: tuple[JsonValue, ...] | None) -> tuple[JsonValue, ...] | None:
        if image is None:
            return None
        return tuple(
            IN_A_DAY.get(v, v) if n in ("tm", "tm3") and isinstance(v, str) else v
            for n, v in zip(NAMES, image, strict=True)
        )

    return dataclasses.replace(change, before=moved(change.before), after=moved(change.after))


def final_rows(changes: list[RowChange]) -> dict[int, dict[str, Any]]:
    """The table after the changes, by id: each column as psycopg reads it back (``LANDS``)."""
    table: dict[int, tuple[JsonValue, ...]] = {}
    for c in changes:
        if c.before is not None:
            table.pop(int(c.before[0]), None)  # type: ignore[arg-type]
        if c.after is not None:
            table[int(c.after[0])] = c.after  # type: ignore[arg-type]
    return {
        key: {n: None if v is None else LANDS[n][1](v) for n, v in zip(NAMES, image, strict=True)}
        for key, image in table.items()
    }


def differences(want: dict[int, dict[str, Any]], got: list[dict[str, Any]]) -> list[str]:
    out = []
    have = {row["id"]: row for row in got}
    for key in sorted(set(want) | set(have)):
        if key not in have or key not in want:
            out.append(f"id {key}: {'missing' if key not in have else 'not expected'} in PostgreSQL")
            continue
        for name in NAMES:
            w, g = want[key][name], have[key][name]
            if name == "fl" and g is not None:
                g = _float32(g)
            if w != g or type(w) is not type(g):
                out.append(f"id {key} column {name}: expected {w!r}, PostgreSQL has {g!r}")
    return out


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
