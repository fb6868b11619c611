"""Issue #30, acceptance 1: unmodified off-the-shelf readers rebuild tables DBus writes while it runs.

One MariaDB database with three tables of every column type of tests/golden/cdc/every_type.sql (the
columns of tests/integration/every_type.py), one per format: ``t_debezium`` (``debezium-json``),
``t_avro`` (``avro``, through the stack's registry) and ``t_canal`` (``canal-json``), chosen by
``output.tables`` globs, a topic per table (``output.topic: table``), ``PARTITIONS`` partitions.
The extractor, the dispatcher and the appender (``spark-submit`` stages, each in its default mode: real
time, where the JVM writes the three per-row formats) run while the test writes
``FORMATS_ACCEPTANCE_ROWS`` rows per table (default ``ROWS``; 100,000 is the issue's size) in transactions
of several statements over the three tables: multi-row inserts of random values over every type (the
MAX, MIN, ODD and NULL rows of every_type.sql first), updates, primary-key changes and deletes. Once each
topic holds the records the statements' affected rows give, four unmodified readers rebuild the tables:

a. Debezium's JDBC sink (``io.debezium:debezium-connector-jdbc``) on a Kafka Connect worker started before
   the workload, JsonConverter, ``t_debezium``'s topic -> PostgreSQL;
b. the same sink on the same worker with Apicurio's AvroConverter in its Confluent mode, ``t_avro``'s topic
   -> PostgreSQL;
c. confluent-kafka's ``AvroDeserializer`` with its ``SchemaRegistryClient``: every record of ``t_avro``'s
   topic, key and value, applied per key in offset order;
d. Canal's own ``FlatMessage`` (tests/interop/canal, through canal_reader.py): every record of
   ``t_canal``'s topic parsed and applied per primary key.

Each rebuilt table is compared with SELECT on the source, every row and every column, typed (the first
differences named): a and b as the sink lands each type in PostgreSQL (jdbc_sink_compare.py's
``LANDS`` and ``differences``, and its column types), c the same way (the Avro values read as those
PostgreSQL values), d as UMS values (``decode_canal`` of what Canal parsed, as test_canal_flatmessage.py).

What Debezium's sink cannot take is arranged as docs/formats.md (Kafka Connect: Debezium's JDBC sink)
documents and test_connect_jdbc_sink.py does, not hidden: the PostgreSQL tables are created first with
``de numeric(65,30)`` (the sink would make ``numeric(38,30)``) and ``nn varchar(5) NOT NULL`` (no default
in a Connect schema); the TIME columns of the two sink tables hold values within a day (the sink fails on
a negative TIME or one of 24 h and more: the MAX, MIN and ODD rows' TIME values are moved into the day by
``IN_A_DAY``), while ``t_canal`` holds TIME over its whole range (-838:59:59 to 838:59:59). Debezium's own
mapping loses zero dates (null) and wraps BIGINT UNSIGNED above 2^63-1 (``long``): ``LANDS`` says so.

Run: ``.venv/bin/python -m pytest -q -m integration tests/integration/test_formats_acceptance.py``;
the issue's size: ``FORMATS_ACCEPTANCE_ROWS=100000`` before it.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import random
import re
import time as clock
import urllib.request
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import canal_reader
import jdbc_sink_compare as sink
import pytest
import sqlalchemy as sa
import yaml
from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer
from confluent_kafka.serialization import MessageField, SerializationContext
from connect import apicurio_avro_converters, jdbc_sink, json_converters, rows, running_worker, wait_consumed
from every_type import COLUMNS, CREATE, MAX_ROW, MIN_ROW, NULL_ROW, ODD_ROW, as_decoded, multi_row_insert
from helpers import wait_until
from pipeline_env import appender_stage, cleanup_pipeline, dispatcher_stage, make_pipeline_env
from replica_env import fresh_database

from dbuslib import kafka, topics
from dbuslib.config import load_config
from ums.types import ColumnSpec
from ums.values import encode_column

pytestmark = pytest.mark.integration

ROWS = int(os.environ.get("FORMATS_ACCEPTANCE_ROWS", "3000"))
PARTITIONS = int(os.environ.get("FORMATS_ACCEPTANCE_PARTITIONS", "6"))
BATCH = 500  # rows inserted per table and transaction
FORMATS = {"t_debezium": "debezium-json", "t_avro": "avro", "t_canal": "canal-json"}
IN_A_DAY_TABLES = ("t_debezium", "t_avro")  # read by Debezium's JDBC sink: TIME within a day
NAMES = [n for n, _, _, _ in COLUMNS]
NOT_NULL = {"id", "nn"}
SPECS = [ColumnSpec(n, t, n not in NOT_NULL) for n, _, t, _ in COLUMNS]
KEY_MOVE = 10_000_000  # a primary-key change adds this to the id (ids inserted stay below it)

# ---------------------------------------------------------------- the workload

TEXT = "abcxyzABC019 '\"\\%_,.;-\t\néüß✓漢字😀"
ENUM = ("small", "medium", "large")
SET = ("red", "green", "blue")
FIRST_DAY, LAST_DAY = date(1000, 1, 1), date(9999, 12, 31)
DAYS = (LAST_DAY - FIRST_DAY).days
TS_FIRST, TS_SECONDS = datetime(1970, 1, 1, 0, 0, 1), 2_147_483_647 - 1  # noqa: DTZ001 (UTC wall clock)


def _text(rng: random.Random, most: int) -> str:
    return "".join(rng.choice(TEXT) for _ in range(rng.randint(0, most)))


def _decimal(rng: random.Random, whole: int, frac: int) -> Decimal:
    sign = rng.choice(("", "-"))
    return Decimal(f"{sign}{rng.randint(0, 10**whole - 1)}.{rng.randint(0, 10**frac - 1):0{frac}d}")


def _time(rng: random.Random, in_a_day: bool, fsp: int) -> str:
    """A TIME literal: within a day, or over MariaDB's whole range (negative, up to 838 hours)."""
    if in_a_day:
        sign, hours = "", rng.randint(0, 23)
    else:
        sign, hours = rng.choice(("", "-")), rng.randint(0, 837)
    text = f"{sign}{hours:02d}:{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}"
    return text + (f".{rng.randint(0, 10**fsp - 1):0{fsp}d}" if fsp else "")


def _datetime(rng: random.Random, fsp: int) -> datetime:
    at = datetime.combine(FIRST_DAY, time()) + timedelta(seconds=rng.randint(0, DAYS * 86400 + 86399))
    return at.replace(microsecond=rng.randint(0, 10**fsp - 1) * 10 ** (6 - fsp) if fsp else 0)


def _timestamp(rng: random.Random, fsp: int) -> datetime:
    at = TS_FIRST + timedelta(seconds=rng.randint(0, TS_SECONDS - 1))
    return at.replace(microsecond=rng.randint(0, 10**fsp - 1) * 10 ** (6 - fsp) if fsp else 0)


def _scaled(rng: random.Random, exponent: int) -> float:
    """A normal float of any sign and magnitude 10^-exponent to 10^exponent (no subnormal values)."""
    return rng.choice((-1, 1)) * rng.uniform(1, 10) * 10.0 ** rng.randint(-exponent, exponent - 1)


def _ipv6(rng: random.Random) -> str:
    """An IPv6 address, one in three with a run of zero groups (never IPv4-compatible or -mapped)."""
    bits = rng.getrandbits(128) | 1 << 127
    if rng.random() < 0.3:
        bits &= ~(((1 << 48) - 1) << 32)
    return str(ipaddress.IPv6Address(bits))


def _json(rng: random.Random) -> str:
    doc = {"n": rng.randint(-(2**40), 2**40), "s": _text(rng, 8), "a": [rng.random() > 0.5, None, 2.5]}
    return json.dumps(doc, ensure_ascii=False)


# column -> (rng, TIME within a day) -> a value MariaDB takes for it
VALUES: dict[str, Callable[[random.Random, bool], Any]] = {
    "ti": lambda r, _: r.randint(-128, 127),
    "tiu": lambda r, _: r.randint(0, 255),
    "si": lambda r, _: r.randint(-32768, 32767),
    "siu": lambda r, _: r.randint(0, 65535),
    "mi": lambda r, _: r.randint(-8388608, 8388607),
    "miu": lambda r, _: r.randint(0, 16777215),
    "i": lambda r, _: r.randint(-(2**31), 2**31 - 1),
    "iu": lambda r, _: r.randint(0, 2**32 - 1),
    "bi": lambda r, _: r.randint(-(2**63), 2**63 - 1),
    "biu": lambda r, _: r.randint(0, 2**64 - 1),
    "de": lambda r, _: _decimal(r, 35, 30),
    "d2": lambda r, _: _decimal(r, 8, 2),
    "fl": lambda r, _: r.choice((0.0, r.uniform(-1e6, 1e6), _scaled(r, 30))),
    "db": lambda r, _: r.choice((0.0, -0.0, _scaled(r, 300))),
    "b1": lambda r, _: r.randint(0, 1),
    "b64": lambda r, _: r.getrandbits(64),
    "dt": lambda r, _: FIRST_DAY + timedelta(days=r.randint(0, DAYS)),
    "dtm": lambda r, _: _datetime(r, 0),
    "dtm6": lambda r, _: _datetime(r, 6),
    "ts": lambda r, _: _timestamp(r, 0),
    "ts3": lambda r, _: _timestamp(r, 3),
    "tm": lambda r, day: _time(r, day, 0),
    "tm3": lambda r, day: _time(r, day, 3),
    "yr": lambda r, _: r.choice((0, r.randint(1901, 2155))),
    "ch": lambda r, _: _text(r, 10),
    "vc": lambda r, _: _text(r, 20),
    "tt": lambda r, _: _text(r, 40),
    "tx": lambda r, _: _text(r, 200),
    "mt": lambda r, _: _text(r, 200),
    "lt": lambda r, _: _text(r, 300),
    "bn": lambda r, _: r.randbytes(r.randint(0, 4)),
    "vb": lambda r, _: r.randbytes(r.randint(0, 16)),
    "tb": lambda r, _: r.randbytes(r.randint(0, 64)),
    "bl": lambda r, _: r.randbytes(r.randint(0, 300)),
    "mb": lambda r, _: r.randbytes(r.randint(0, 300)),
    "lb": lambda r, _: r.randbytes(r.randint(0, 300)),
    "en": lambda r, _: r.choice(ENUM),
    "st": lambda r, _: ",".join(s for s in SET if r.random() < 0.5),
    "js": lambda r, _: _json(r),
    "i4": lambda r, _: str(ipaddress.IPv4Address(r.getrandbits(32))),
    "i6": lambda r, _: _ipv6(r),
    "uu": lambda r, _: str(uuid.UUID(int=r.getrandbits(128))),
    "nn": lambda r, _: _text(r, 5),
}
UPDATED = ("vc", "d2", "fl", "bl", "st", "tm3", "ts3", "dtm6", "js", "b64", "nn", "i6")


def random_row(rng: random.Random, key: int, in_a_day: bool) -> tuple[Any, ...]:
    """A row of random values, each nullable column NULL one time in ten."""
    return (key,) + tuple(
        VALUES[n](rng, in_a_day) if n in NOT_NULL or rng.random() >= 0.1 else None for n in NAMES[1:]
    )


def golden_rows(in_a_day: bool) -> list[tuple[Any, ...]]:
    """every_type.sql's MAX, MIN, ODD and NULL rows (ids 1-4), for a sink table their TIME within a day."""
    tm = NAMES.index("tm"), NAMES.index("tm3")
    out = []
    for row in (MAX_ROW, MIN_ROW, ODD_ROW, NULL_ROW):
        values: list[Any] = list(row)
        if in_a_day:
            for at in tm:
                values[at] = sink.IN_A_DAY.get(values[at], values[at])
        out.append(tuple(values))
    return out


class Workload:
    """The statements over the three tables and the records each table's topic must get from them."""

    def __init__(self, db: Any, seed: int = 30) -> None:
        self.db, self.rng = db, random.Random(seed)
        self.live: dict[str, list[int]] = {t: [] for t in FORMATS}
        self.records: dict[str, int] = dict.fromkeys(FORMATS, 0)
        self.counts: dict[str, dict[str, int]] = {
            t: dict.fromkeys(("c", "u", "key", "d"), 0) for t in FORMATS
        }

    def insert(self, cur: Any, table: str, rows: list[tuple[Any, ...]]) -> None:
        sql = multi_row_insert(self.db, rows).replace("INSERT INTO every_type", f"INSERT INTO {table}", 1)
        self.counts[table]["c"] += cur.execute(sql)
        self.live[table].extend(r[0] for r in rows)

    def change(self, cur: Any, table: str, inserted: int) -> None:
        """After ``inserted`` rows, updates of as many live rows as a tenth of them, primary-key changes of
        a hundredth, deletes of a twentieth (each at least one), the rows picked at random among
        every live row."""
        rng, live = self.rng, self.live[table]
        n_updated, n_moved = max(1, inserted // 10), max(1, inserted // 100)
        some = rng.sample(live, min(len(live), n_updated + n_moved))
        updated, moved = some[:n_updated], some[n_updated:]
        new = random_row(rng, 0, table in IN_A_DAY_TABLES)
        sets = ", ".join(f"`{n}` = %s" for n in UPDATED)
        args = [new[NAMES.index(n)] for n in UPDATED]
        self.counts[table]["u"] += cur.execute(
            f"UPDATE {table} SET {sets} WHERE id IN ({','.join(map(str, updated))})", args
        )
        self.counts[table]["key"] += cur.execute(
            f"UPDATE {table} SET id = id + {KEY_MOVE}, vc = 'moved' WHERE id IN ({','.join(map(str, moved))})"
        )
        gone = set(moved)
        live[:] = [k for k in live if k not in gone] + [k + KEY_MOVE for k in moved]
        deleted = rng.sample(live, min(len(live), max(1, inserted // 20)))
        self.counts[table]["d"] += cur.execute(
            f"DELETE FROM {table} WHERE id IN ({','.join(map(str, deleted))})"
        )
        gone = set(deleted)
        live[:] = [k for k in live if k not in gone]

    def run(self, rows: int) -> None:
        with self.db.cursor() as cur:
            cur.execute("SET time_zone = '+00:00', sql_mode = ''")
            for table in FORMATS:
                cur.execute(CREATE.replace("CREATE TABLE every_type", f"CREATE TABLE {table}", 1))
            cur.execute("BEGIN")
            for table in FORMATS:
                self.insert(cur, table, golden_rows(table in IN_A_DAY_TABLES))
            cur.execute("COMMIT")
            for start in range(0, rows, BATCH):
                cur.execute("BEGIN")
                for table in FORMATS:
                    keys = range(100 + start, 100 + min(rows, start + BATCH))
                    self.insert(cur, table, [random_row(self.rng, k, table in IN_A_DAY_TABLES) for k in keys])
                    self.change(cur, table, len(keys))
                cur.execute("COMMIT")
        for table, n in self.counts.items():
            # a key change is a delete, its tombstone and a create; a delete is followed by its tombstone
            self.records[table] = n["c"] + n["u"] + 3 * n["key"] + 2 * n["d"]

    def selected(self, table: str) -> dict[int, dict[str, Any]]:
        """The source table now, by id, each value as the UMS value the pipeline carries (in UTC)."""
        with self.db.cursor() as cur:
            cur.execute("SET time_zone = '+00:00'")
            cur.execute(f"SELECT *, CAST(fl AS DOUBLE) FROM {table} ORDER BY id")
            out = {}
            for row in cur.fetchall():
                values = {**dict(zip(NAMES, row, strict=False)), "fl": row[-1]}
                out[row[0]] = {s.name: encode_column(s, as_decoded(s, values[s.name])) for s in SPECS}
        return out


# ---------------------------------------------------------------- the readers' comparisons


def landed(table: dict[int, dict[str, Any]]) -> dict[int, dict[str, Any]]:
    """UMS values -> the values Debezium's JDBC sink lands in PostgreSQL (jdbc_sink_compare.LANDS)."""
    return {
        key: {n: None if v is None else sink.LANDS[n][1](v) for n, v in row.items()}
        for key, row in table.items()
    }


EPOCH = datetime(1970, 1, 1)  # noqa: DTZ001 (a wall clock, as PostgreSQL's timestamp reads back)
# an Avro value of Debezium's type (as confluent-kafka's AvroDeserializer reads it) -> the PostgreSQL value
# the sink lands it as (LANDS); the columns not named read as they are (int, Decimal, float, str, bytes)
FROM_AVRO: dict[str, Callable[[Any], Any]] = {
    "b1": lambda v: str(int(v)),  # boolean
    "b64": lambda v: format(int.from_bytes(v, "little"), "064b"),  # io.debezium.data.Bits
    "dt": lambda v: EPOCH.date() + timedelta(days=v),  # io.debezium.time.Date
    "dtm": lambda v: EPOCH + timedelta(milliseconds=v),  # io.debezium.time.Timestamp
    "dtm6": lambda v: EPOCH + timedelta(microseconds=v),  # io.debezium.time.MicroTimestamp
    "ts": datetime.fromisoformat,  # io.debezium.time.ZonedTimestamp, ...Z
    "ts3": datetime.fromisoformat,
    "tm": lambda v: (EPOCH + timedelta(microseconds=v)).time(),  # io.debezium.time.MicroTime
    "tm3": lambda v: (EPOCH + timedelta(microseconds=v)).time(),
    "ch": lambda v: v.ljust(10),  # CHAR(10) as PostgreSQL pads it
}


def typed_differences(want: dict[Any, dict[str, Any]], got: dict[Any, dict[str, Any]], who: str) -> list[str]:
    """Rows missing or extra, and each value that differs in value or type, by key and column."""
    out = []
    for key in sorted(set(want) | set(got), key=str):
        if key not in got or key not in want:
            out.append(f"{key}: {'missing' if key not in got else 'not expected'} in {who}")
            continue
        for name, w in want[key].items():
            g = got[key].get(name)
            if w != g or type(w) is not type(g):
                out.append(f"{key} column {name}: the source has {w!r}, {who} has {g!r}")
    return out


def avro_rebuilt(cfg: Any, topic: str, expected: int) -> tuple[dict[int, dict[str, Any]], int]:
    """Every record of ``topic`` read by confluent-kafka (its Consumer, AvroDeserializer and
    SchemaRegistryClient, unmodified), key and value, applied per key in offset order: (the table by id, as
    PostgreSQL values, the records read)."""
    registry = SchemaRegistryClient({"url": cfg.endpoints.registry.url})
    deserialize = AvroDeserializer(registry)
    keys, values = (SerializationContext(topic, f) for f in (MessageField.KEY, MessageField.VALUE))
    ends = {tp.partition: end for tp, end in kafka.end_offsets(cfg.endpoints.kafka, [topic]).items()}
    consumer = Consumer(
        {
            "bootstrap.servers": cfg.endpoints.kafka.bootstrap_servers,
            "group.id": f"pytest-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
        }
    )
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in ends])
    table: dict[int, dict[str, Any]] = {}
    read = 0
    last = dict.fromkeys(ends, -1)
    try:

        def drained() -> bool:
            nonlocal read
            for msg in consumer.consume(500, 1.0):
                assert msg.error() is None, msg.error()
                partition, offset = msg.partition(), msg.offset()
                assert partition is not None and offset is not None
                assert offset > last[partition], "offset order within a partition"
                last[partition] = offset
                read += 1
                key = deserialize(msg.key(), keys)
                envelope = deserialize(msg.value(), values)
                if envelope is None:  # a tombstone: its key's row is gone already
                    assert key["id"] not in table, f"a tombstone of live key {key}"
                    continue
                image = envelope["before"] if envelope["op"] == "d" else envelope["after"]
                assert key == {"id": image["id"]}, f"key {key} of a change of id {image['id']}"
                if envelope["op"] == "d":
                    table.pop(image["id"])
                else:
                    table[image["id"]] = {
                        n: None if v is None else FROM_AVRO.get(n, _same)(v) for n, v in image.items()
                    }
            return all(last[p] + 1 >= end for p, end in ends.items())

        wait_until(drained, 300 + expected / 100, f"confluent-kafka read {topic} to its end", interval=0)
    finally:
        consumer.close()
    return table, read


def _same(v: Any) -> Any:
    return v


# ---------------------------------------------------------------- the test


def per_row_config(env: Any, database: str) -> None:
    """The env's source writes debezium-json, avro and canal-json by table glob, a topic per table."""
    raw = yaml.safe_load(env.cfg_path.read_text())
    raw["sources"][env.ds]["output"] = {
        "format": "debezium-json",
        "tables": {f"{database}.t_avro": "avro", f"{database}.t_canal": "canal-json"},
        "topic": "table",
    }
    env.cfg_path.write_text(yaml.safe_dump(raw))
    env.cfg = load_config(env.cfg_path)


class Alive:
    """The extractor process as wait_until's ``alive``."""

    def __init__(self, env: Any) -> None:
        self.env = env

    def check_alive(self) -> None:
        for proc, log in zip(self.env.procs, self.env.log_paths, strict=True):
            assert proc.poll() is None, f"the extractor exited with {proc.returncode}; see {log}"


@pytest.mark.timeout(600 + ROWS // 50)  # 100,000 rows: 2,600 s, a deadline for a stuck stage, not a timing
def test_unmodified_readers_rebuild_every_format(writer_db, kafka_up, tmp_path: Path) -> None:
    db, database = writer_db
    env = make_pipeline_env(tmp_path, database, partitions=PARTITIONS)
    per_row_config(env, database)
    src = env.cfg.source(env.ds)
    endpoint = env.cfg.endpoints.kafka
    topic = {t: topics.result_topic(env.ds, src, database, t) for t in FORMATS}
    kafka.ensure_topics(endpoint, list(topic.values()), partitions=PARTITIONS)
    stages = [dispatcher_stage(env), appender_stage(env)]
    assert env.cfg.endpoints.registry is not None, "conf/dbus.yaml names the stack's registry"
    ccompat = env.cfg.endpoints.registry.url.rstrip("/")
    began = clock.monotonic()
    try:
        # DBus starts while the Kafka Connect worker does; the rows are written once both sinks run
        env.spawn()
        for stage in stages:
            stage.start()
        with (
            fresh_database("postgresql") as url,
            running_worker(kafka_up, tmp_path) as worker,
            ThreadPoolExecutor(2) as readers,  # its end waits for readers c and d, also on a failure
        ):
            engine = sa.create_engine(url)
            with engine.begin() as conn:  # what the sink cannot create itself (docs/formats.md)
                for table in IN_A_DAY_TABLES:
                    conn.execute(sa.text(sink.CREATED_FIRST.replace(sink.TABLE, table, 1)))
            core = re.sub(r"/apis/ccompat/v\d+$", "/apis/registry/v2", ccompat)
            converters = {"t_debezium": json_converters(), "t_avro": apicurio_avro_converters(core)}
            for table, conv in converters.items():
                worker.create(f"jdbc-{table}", jdbc_sink(topic[table], url, table=table, converters=conv))
                worker.wait_running(f"jdbc-{table}")

            # DBus runs while the rows are written
            ready = clock.monotonic()
            work = Workload(db)
            work.run(ROWS)
            written = clock.monotonic()

            def all_written() -> bool:
                ends = kafka.end_offsets(endpoint, topic.values())
                have = {t: sum(n for tp, n in ends.items() if tp.topic == name) for t, name in topic.items()}
                assert all(have[t] <= work.records[t] for t in FORMATS), f"more records than changes: {have}"
                return have == work.records

            alive: list[Any] = [Alive(env), *stages]
            wait_until(
                all_written, 300 + ROWS / 20, "every change on its table's topic", interval=1, alive=alive
            )
            through = clock.monotonic()
            assert kafka.read_range(endpoint, [src.topics.name("dead_letter", env.ds)]) == []

            # c and d read the topics beside the sink (they do not depend on it), collected after it
            avro_read = readers.submit(avro_rebuilt, env.cfg, topic["t_avro"], work.records["t_avro"])
            canal_read = readers.submit(canal_reader.tables, endpoint.bootstrap_servers, [topic["t_canal"]])

            source = {t: work.selected(t) for t in FORMATS}
            problems: dict[str, list[str]] = {}

            # a, b: Debezium's JDBC sink into PostgreSQL
            for table in converters:
                wait_consumed(worker, f"jdbc-{table}", [topic[table]], timeout=300 + ROWS / 20)
                types = rows(
                    url,
                    "SELECT attname, format_type(atttypid, atttypmod) FROM pg_attribute "
                    f"WHERE attrelid = '{table}'::regclass AND attnum > 0 AND NOT attisdropped",
                )
                assert dict(types or []) == {n: sink.LANDS[n][0] for n in NAMES}, table
                with engine.connect() as conn:
                    got = [dict(r._mapping) for r in conn.execute(sa.text(f"SELECT * FROM {table}"))]
                problems[f"{table} (JDBC sink)"] = sink.differences(landed(source[table]), got)
            engine.dispose()
            sunk = clock.monotonic()
            rebuilt, read = avro_read.result()
            canal = canal_read.result()

        # c: confluent-kafka's AvroDeserializer, every avro record
        assert read == work.records["t_avro"]
        want = landed(source["t_avro"])
        problems["t_avro (AvroDeserializer)"] = sink.differences(want, list(rebuilt.values()))

        # d: Canal's FlatMessage, every canal-json record
        assert list(canal) == [(database, "t_canal")]
        by_id = {key[0]: row for key, row in canal[(database, "t_canal")].items()}
        problems["t_canal (FlatMessage)"] = typed_differences(source["t_canal"], by_id, "Canal's table")
        done = clock.monotonic()

        counts = ", ".join(f"{t} {work.records[t]} records, {len(source[t])} rows left" for t in FORMATS)
        print(
            f"\n{ROWS} rows per table, {PARTITIONS} partitions: {counts}; the sinks ready in"
            f" {ready - began:.1f} s, the rows written in {written - ready:.1f} s, every record on the topics"
            f" {through - written:.1f} s later, sinks a and b {sunk - through:.1f} s later, readers c and d"
            f" (beside the sinks) read and all compared {done - through:.1f} s after the topics;"
            f" {done - began:.1f} s in all"
        )
        assert {t: len(source[t]) for t in FORMATS} == dict.fromkeys(FORMATS, len(source["t_canal"]))
        first = {who: p[:20] for who, p in problems.items() if p}
        report = [
            f"{who}: {len(problems[who])} differences, first:\n  " + "\n  ".join(p)
            for who, p in first.items()
        ]
        assert not first, "\n".join(report)
    finally:
        cleanup_pipeline(env, stages)
        for subject in (f"{topic['t_avro']}-key", f"{topic['t_avro']}-value"):  # not left in the registry
            with contextlib.suppress(OSError):
                urllib.request.urlopen(
                    urllib.request.Request(f"{ccompat}/subjects/{subject}", method="DELETE")
                )
