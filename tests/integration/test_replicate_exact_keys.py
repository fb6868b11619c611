"""``dbus replicate`` keeps every source key exactly, sets undecodable records aside, and verifies equal
after a dropped column (issue #29, acceptance 0), into MariaDB and PostgreSQL.

A throwaway source's database holds tables whose keys differ only by trailing spaces or case under their
own collation: ``exact`` (``utf8mb4_nopad_bin``: ``'k1'``, ``'k1 '``, ``'k1  '``, ``'K1'`` are four keys;
300-character keys), ``folded`` (``utf8mb4_general_ci``, PAD SPACE: the source itself folds case and
trailing spaces, an update by ``'b'`` reaches the row ``'B'``) and ``pair`` (a composite key of a
300-character NO PAD column, a PAD SPACE binary one and an integer). The extractor, the dispatcher and
the appender (Spark in this process) carry their changes to the result topic; between two runs the test
writes two undecodable records into it itself: one that is not JSON, and a copy of the last valid change
of ``exact`` (``v = 111`` for ``'k1'``, newer by its ``ums_uid_``) whose ``v`` is not an integer, the
kind the consumer's fast path leaves to the sink. Then ``exact`` loses a column (``DROP COLUMN gone``)
and changes again.

Each replica is kept by ``dbus replicate --dead-letter-file``: it ends online, both bad records are in
its dead-letter file with their coordinates and reasons, the valid change before the bad copy is
applied (``'k1'`` has ``v = 111``), and ``dbus verify --replica`` finds each table equal (0
differences; the kept ``gone`` is not one). Run again, the replicate reads nothing new (its checkpoint
is past the bad records) and adds no dead letter. A key the target cannot hold is refused before
anything is read: ``wide`` (``VARCHAR(700)``, 2,800 bytes) into PostgreSQL, a ``TEXT`` key into MariaDB,
exit 2 with ``CLIENT_SINK_KEY`` naming the table and the column.

The limits the sink counts with agree with the real targets: through ``SqlSink`` (tables made, rows
applied), the longest declared key each target takes holds keys of that length in 4-byte characters
(random: PostgreSQL cannot compress them) that differ only by a trailing space or case, each its own row;
one character more is refused when the sink is made, and a key longer than declared (a record no source
writes) is refused as a bad row instead of failing the window.
"""

from __future__ import annotations

import json
import random
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from fullpull_env import run_dbus
from pipeline_env import Through, cleanup_pipeline, make_pipeline_env, read_records
from replica_env import fresh_database, scalar

from dbusclient.decode import RowChange, RowRefused, TableRef
from dbusclient.merge import Upsert
from dbusclient.replica_keys import KeyRefused, SourceColumn
from dbusclient.sink_sql import SqlSink
from dbuslib import kafka
from ums.message import Op, UmsField
from ums.types import UmsType

pytestmark = pytest.mark.integration

LONG_A, LONG_B = "x" * 300, "x" * 299 + "y"
TABLES = ("exact", "folded", "pair")
DDL = [
    "CREATE TABLE exact (k VARCHAR(300) CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin PRIMARY KEY, "
    "v INT, gone VARCHAR(20))",
    "CREATE TABLE folded (k VARCHAR(20) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci PRIMARY KEY, v INT)",
    "CREATE TABLE pair (a VARCHAR(300) CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin, "
    "b VARCHAR(10) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin, n INT, v INT, PRIMARY KEY (a, b, n))",
    "CREATE TABLE wide (k VARCHAR(700) CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin PRIMARY KEY, "
    "note TEXT)",
]
FIRST = [
    "INSERT INTO exact VALUES ('k1', 1, 'g1'), ('k1 ', 2, 'g2'), ('k1  ', 3, 'g3'), ('K1', 4, 'g4'), "
    f"('{LONG_A}', 5, 'g5'), ('{LONG_B}', 6, 'g6'), ('{LONG_B[:299]} ', 7, 'g7')",
    "INSERT INTO folded VALUES ('a', 1), ('B', 2), ('c ', 3)",
    "INSERT INTO pair VALUES ('k', 'x', 1, 1), ('k ', 'x', 1, 2), ('k  ', 'x', 1, 3), ('K', 'x', 1, 4), "
    f"('k', 'X', 1, 5), ('k', 'x', 2, 6), ('{LONG_A}', 'z', 1, 7), ('{LONG_A[:299]} ', 'z', 1, 8)",
    "UPDATE exact SET v = 20 WHERE k = 'k1 '",
    "DELETE FROM exact WHERE k = 'k1  '",
    "UPDATE folded SET v = 22 WHERE k = 'b  '",  # PAD SPACE, case-insensitive: the row 'B'
    "DELETE FROM pair WHERE a = 'k ' AND b = 'x' AND n = 1",
    "UPDATE exact SET v = 111 WHERE k = 'k1'",  # the valid change right before the bad copy of it
]
SECOND = [
    "ALTER TABLE exact DROP COLUMN gone",
    "INSERT INTO exact VALUES ('k2 ', 8), ('k2', 9)",
    "UPDATE exact SET v = 44 WHERE k = 'K1'",
    "UPDATE pair SET v = 77 WHERE a = 'k  ' AND b = 'x' AND n = 1",
]


def run(db, statements: list[str]) -> None:
    with db.cursor() as cur:
        for sql in statements:
            cur.execute(sql)
    db.commit()


def tuples(endpoint, topic: str) -> list[tuple[int, int, bytes | None, dict]]:
    """(partition, offset, key, message) of each JSON record of ``topic`` (what is not JSON left out)."""
    out = []
    for partition, offset, key, value in read_records(endpoint, topic):
        try:
            out.append((partition, offset, key, json.loads(value)))
        except ValueError:
            continue
    return out


def has_value(endpoint, topic: str, table: str, column: str, value: object) -> bool:
    for _, _, _, m in tuples(endpoint, topic):
        if m["schema"]["namespace"].split(".")[3] != table or m["protocol"]["type"] != "data_increment_data":
            continue
        names = [f["name"] for f in m["schema"]["fields"]]
        if any(p["tuple"][names.index(column)] == value for p in m["payload"]):
            return True
    return False


def bad_copy(endpoint, topic: str) -> tuple[bytes | None, bytes]:
    """The record of ``UPDATE exact SET v = 111``, its ``v`` not an integer and its ``ums_uid_`` one
    more (newer than the valid change, so the merge keeps it): key and value."""
    for _, _, key, m in reversed(tuples(endpoint, topic)):
        if m["schema"]["namespace"].split(".")[3] != "exact":
            continue
        names = [f["name"] for f in m["schema"]["fields"]]
        row = m["payload"][-1]["tuple"]
        if row[names.index("v")] == 111:
            row[names.index("v")] = "not an integer"
            row[3] = str(int(row[3]) + 1)
            m["payload"] = [{"tuple": row}]
            return key, json.dumps(m, separators=(",", ":")).encode()
    raise AssertionError(f"no record of v = 111 in {topic}")


def produce(cfg, topic: str, records: list[tuple[bytes | None, bytes]]) -> list[int]:
    """Write ``records`` to partition 0 of ``topic``; their offsets."""
    producer = kafka.producer(cfg.endpoints.kafka)
    try:
        futures = [producer.send(topic, key=k, value=v, partition=0) for k, v in records]
        producer.flush(30)
        return [f.get(30).offset for f in futures]
    finally:
        producer.close()


def replicate(cfg_path: Path, url: str, *args: str):
    # the target's password stays off the command line
    return run_dbus(cfg_path, "replicate", *args, timeout=300, environ={"DBUS_REPLICATE_TO": url})


@pytest.mark.timeout(900)
def test_replicas_keep_exact_keys_set_bad_records_aside_and_verify_equal(
    spark, writer_db, tmp_path: Path, kafka_up
):
    db, database = writer_db
    env = make_pipeline_env(tmp_path, database, partitions=1)
    through = Through(env, spark, tmp_path, "microbatch")
    topic = env.cfg.source(env.ds).topics.name("result", env.ds, schema=database, table="exact")
    try:
        env.spawn()
        run(db, DDL + FIRST)
        env.records(lambda rs: sum(r.event.kind == "rows" for r in rs) >= len(FIRST), timeout=90)
        through.step(lambda: has_value(kafka_up, topic, "exact", "v", 111))
        bad = [(b"garbage", b"{not a UMS message"), bad_copy(kafka_up, topic)]
        bad_offsets = produce(env.cfg, topic, bad)
        run(db, SECOND)
        env.records(lambda rs: sum(r.event.kind == "rows" for r in rs) >= len(FIRST) + 3, timeout=90)
        through.step(lambda: has_value(kafka_up, topic, "pair", "v", 77))

        tables = ",".join(f"{database}.{t}" for t in TABLES)

        def kept(kind: str, url: str) -> None:
            dead = tmp_path / f"dead-{kind}.jsonl"
            args = ("--source", env.ds, "--tables", tables, "--name", f"exact-{kind}", "--no-bootstrap")
            args += ("--until-idle", "3", "--dead-letter-file", str(dead))
            out = replicate(env.cfg_path, url, *args)
            assert out.returncode == 0, out.stdout + out.stderr[-3000:]
            lines = [json.loads(line) for line in dead.read_text().splitlines()]
            assert [(d["topic"], d["partition"], d["offset"]) for d in lines] == [
                (topic, 0, o) for o in bad_offsets
            ], lines
            assert lines[0]["code"] == "CLIENT_BAD_ROW" and "not JSON" in lines[0]["error"]
            assert lines[1]["code"] == "CLIENT_BAD_ROW" and "v: cannot decode" in lines[1]["error"]
            # the valid change before the bad copy is applied
            assert scalar(url, "SELECT v FROM exact WHERE k = 'k1'") == 111
            assert scalar(url, "SELECT COUNT(*) FROM exact") == 8  # k1, 'k1 ', K1, three long ones, 'k2 ', k2
            for t in TABLES:
                check = run_dbus(
                    env.cfg_path, "verify", "--source", env.ds, "--table", f"{database}.{t}", "--replica", url
                )
                assert check.returncode == 0, f"{kind} {t}:\n{check.stdout}{check.stderr[-2000:]}"
                assert "equal, 0 differences" in check.stdout, check.stdout
                if t == "exact":
                    assert "['gone']" in check.stdout, check.stdout  # kept, said, not a difference

            again = replicate(env.cfg_path, url, *args)
            assert again.returncode == 0, again.stdout + again.stderr[-3000:]
            assert json.loads(again.stdout.strip().splitlines()[-1])["upserts"] == 0, again.stdout
            assert len(dead.read_text().splitlines()) == 2, "the restart read the bad records again"

        def refused(url: str, more: tuple[str, ...]) -> None:
            """A key the target cannot hold: refused before anything is read, naming table and column."""
            name = f"wide-{url.split(':')[0]}"
            args = ("--source", env.ds, "--tables", f"{database}.wide", "--name", name, *more)
            out = replicate(env.cfg_path, url, *args, "--no-bootstrap", "--until-idle", "3")
            assert out.returncode == 2, out.stdout + out.stderr[-3000:]
            column = "'note'" if more else "'k'"
            assert "CLIENT_SINK_KEY" in out.stderr and "replica wide" in out.stderr, out.stderr[-3000:]
            assert f"key column {column}" in out.stderr, out.stderr[-3000:]
            assert scalar(url, "SELECT COUNT(*) FROM wide") is None  # not made

        def kept_and_refused(kind: str, url: str, wide_args: tuple[str, ...]) -> None:
            kept(kind, url)
            refused(url, wide_args)

        with fresh_database("mariadb") as maria, fresh_database("postgresql") as pg:
            # each target's commands side by side with the other's: replicas of their own names, dead-letter
            # files and targets; the source no longer changes
            with ThreadPoolExecutor(2) as pool:
                runs = [
                    pool.submit(kept_and_refused, "mariadb", maria, ("--key", f"{database}.wide=note")),
                    pool.submit(kept_and_refused, "postgresql", pg, ()),
                ]
                for run_ in runs:
                    run_.result()
    finally:
        through.stop()
        cleanup_pipeline(env)


# the longest key per target: (declared key columns (name, column_type), one character more refused)
LIMITS = {
    "mariadb": ([("k", "varchar(768)")], [("k", "varchar(769)")]),
    "postgresql": ([("k", "varchar(673)")], [("k", "varchar(674)")]),
}
LIMITS_COMPOSITE = {
    "mariadb": (
        [("k", "varchar(383)"), ("n", "int"), ("j", "varchar(384)")],
        [("k", "varchar(384)"), ("n", "int"), ("j", "varchar(384)")],
    ),
    "postgresql": (
        [("k", "varchar(334)"), ("n", "int"), ("j", "varchar(335)")],
        [("k", "varchar(334)"), ("n", "int"), ("j", "varchar(336)")],
    ),
}


def sink_of(url: str, columns: list[tuple[str, str]]) -> SqlSink:
    declared = [SourceColumn(n, t, "utf8mb4", "utf8mb4_nopad_bin") for n, t in columns]
    return SqlSink(url, {"shop.longkeys": tuple(n for n, _ in columns)}, declared={"shop.longkeys": declared})


@pytest.mark.parametrize("kind", ["mariadb", "postgresql"])
@pytest.mark.parametrize("limits", [LIMITS, LIMITS_COMPOSITE], ids=["one-column", "composite"])
def test_the_longest_key_a_target_takes_holds_every_key_apart_and_one_more_is_refused(kind, limits):
    fits, too_long = limits[kind]
    rnd = random.Random(29)
    with fresh_database(kind) as url:
        with pytest.raises(KeyRefused, match=r"replica longkeys: key column '(k|j)'"):
            sink_of(url, too_long).engine.dispose()
        sink = sink_of(url, fits)
        try:
            table = TableRef("demo", "shop", "longkeys")
            types = {n: UmsType.INT if t == "int" else UmsType.STRING for n, t in fits}
            fields = [UmsField(n, t, False) for n, t in types.items()] + [UmsField("v", UmsType.INT, True)]
            sink.ensure_table(table, 0, fields)
            lengths = {n: int(t.split("(")[1].rstrip(")")) for n, t in fits if t != "int"}
            # incompressible: random characters of 4 bytes in UTF-8
            long = {
                n: "".join(chr(rnd.randrange(0x10000, 0x20000)) for _ in range(m)) for n, m in lengths.items()
            }
            variants = [
                lambda s: s,
                lambda s: s[:-1] + " ",
                lambda s: s[:-2] + "  ",
                lambda s: s[:-1] + "K",
                lambda s: s[:-1] + "k",
            ]
            effects = []
            for i, shape in enumerate(variants):
                values = {n: (shape(long[n]) if n in long else 7) for n in types}
                key = tuple(values[n] for n in types)
                change = RowChange(
                    table,
                    0,
                    key,
                    Op.INSERT,
                    100 + i,
                    (100 + i) * 10**6,
                    "2024-01-02 03:04:05.000",
                    {**values, "v": i},
                )
                effects.append(Upsert(change))
            sink.apply(effects)
            assert scalar(url, "SELECT COUNT(*) FROM longkeys") == len(variants)
            assert scalar(url, "SELECT SUM(v) FROM longkeys") == sum(range(len(variants)))
            # a key longer than the source declares (no source writes one): refused by name, not cut
            values = {n: (long[n] + "x" if n in long else 7) for n in types}
            key = tuple(values[n] for n in types)
            longer = RowChange(table, 0, key, Op.INSERT, 200, 200 * 10**6, "2024-01-02 03:04:05.000", values)
            with pytest.raises(RowRefused, match=r"replica longkeys: .* key column '(k|j)' is \d+ long") as e:
                sink.apply([Upsert(longer)])
            assert e.value.change is longer
            assert scalar(url, "SELECT COUNT(*) FROM longkeys") == len(variants)
        finally:
            sink.engine.dispose()
