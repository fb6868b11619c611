"""``dbus replicate`` and ``dbus reconcile`` read every per-row format on the real stack, and ``dbus
verify`` finds no difference.

A table of every column type of tests/golden/cdc/every_type.sql (tests/integration/every_type.py) per
per-row format, in a source whose ``output.tables`` globs give each its format and ``output.topic: table``
a topic of its own, with the rows MAX, MIN, ODD and NULL (the ODD row's zero dates are NULL in a replica
and in Debezium's formats, and verify compares them so).

The first test then makes an insert, an update, a delete and a primary-key change on MariaDB; the records
of those changes (the rows as a full pull, op r, then c/u/d at later positions, tombstones after deletes)
are made from ``RowChange``s by each format's encoder (``ums.formats``; Avro ids from the stack's
registry through ``dbuslib.registry``) and produced to the tables' topics (two partitions each): no
appender runs, so this tests the readers alone. One ``dbus replicate --no-bootstrap`` reads the three
topics into PostgreSQL, and ``dbus verify --replica`` finds 0 differences for each table; reconcile of
each topic (``reconcile.run``, the code of ``dbus reconcile``, on the tests' Spark session) gives a
snapshot that ``dbus verify --snapshot`` finds equal too. The second test bootstraps a new replica of
such tables through the full puller (rows on the tables' topics, markers on the events topic).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
import yaml
from every_type import CREATE, MAX_ROW, MIN_ROW, NULL_ROW, ODD_ROW, as_decoded, multi_row_insert
from extractor_env import make_env
from fullpull_env import cleanup_fullpull, make_fullpull_env, run_dbus
from replica_env import fresh_database, scalar
from rowformats_live import per_table_formats

from dbuslib import kafka, topics
from dbuslib.config import load_config
from fullpuller import catalog, reconcile
from fullpuller.render import python_columns
from ums import formats
from ums.build import field_for, user_columns
from ums.ids import ums_id, ums_uid
from ums.rowchange import Position, RowChange, TableShape
from ums.values import encode_column

pytestmark = pytest.mark.integration

TABLES = {"rows_dbz": "debezium-json", "rows_canal": "canal-json", "rows_avro": "avro"}
FILE = "mysql-bin.000001"
ROWS = [MAX_ROW, MIN_ROW, ODD_ROW, NULL_ROW]


def selected(db: Any, database: str, table: str) -> tuple[list[Any], dict[int, tuple[Any, ...]]]:
    """The table's columns and its rows as UMS wire values by id (``ums.values`` of a SELECT; FLOAT read
    exactly, as a DOUBLE), what the appender would write for them."""
    info = catalog.table_info(db, database, table)
    assert info is not None
    columns = [info.columns[i] for i in user_columns(info.columns)]
    floats = python_columns(info.columns)
    exprs = ", ".join(f"CAST(`{c.name}` AS DOUBLE)" if c.name in floats else f"`{c.name}`" for c in columns)
    with db.cursor() as cur:
        cur.execute(f"SELECT {exprs} FROM `{table}`")
        rows = cur.fetchall()
    out = {}
    for row in rows:
        values = tuple(
            json.loads(json.dumps(encode_column(c, as_decoded(c, v))))
            for c, v in zip(columns, row, strict=True)
        )
        out[row[0]] = values
    return columns, out


class Changes:
    """The row changes of one table as the test makes them on the source, each at the next position."""

    def __init__(self, shape: TableShape) -> None:
        self.shape, self.out, self.offset = shape, [], 4
        self.ts_ms = int(time.time() * 1000)

    def at(self, row: int = 0, snapshot: str = "false") -> tuple[Position, str]:
        base = ums_id(FILE, self.offset)
        position = Position(int(base), self.ts_ms, FILE, self.offset, row, 1, None, snapshot)  # type: ignore[arg-type]
        return position, ums_uid(base, row)

    def pulled(self, rows: dict[int, tuple[Any, ...]]) -> None:
        for n, key in enumerate(sorted(rows)):
            at, uid = self.at(n, "last" if n == len(rows) - 1 else "true")
            self.out.append(RowChange(self.shape, "r", None, rows[key], at, uid))
        self.offset += 100

    def change(self, op: str, before: tuple[Any, ...] | None, after: tuple[Any, ...] | None) -> None:
        at, uid = self.at()
        self.out.append(RowChange(self.shape, op, before, after, at, uid))  # type: ignore[arg-type]
        self.offset += 100


@pytest.mark.timeout(300)
def test_replicate_and_reconcile_read_every_per_row_format_and_verify_agrees(
    tmp_path: Path, writer_db, spark
):
    from dbuslib.registry import Registry

    db, database = writer_db
    env = make_env(tmp_path, database)
    raw = yaml.safe_load(env.cfg_path.read_text())
    raw["sources"][env.ds]["output"] = {
        "topic": "table",
        "tables": {f"{database}.{t}": fmt for t, fmt in TABLES.items()},
    }
    env.cfg_path.write_text(yaml.safe_dump(raw))
    cfg = load_config(env.cfg_path)
    src = cfg.source(env.ds)
    names = {t: topics.result_topic(env.ds, src, database, t) for t in TABLES}
    assert names["rows_dbz"] == f"{env.ds}.{database}.rows_dbz"
    registry = Registry.of(cfg)
    ids = registry.schema_ids(src.output.compatibility)
    with db.cursor() as cur:
        cur.execute("SET SESSION sql_mode = ''")  # as every_type.py's rows were written
    producer = kafka.producer(cfg.endpoints.kafka)
    try:
        kafka.ensure_topics(cfg.endpoints.kafka, list(names.values()), partitions=2)
        for table, fmt in TABLES.items():
            rows = ROWS
            with db.cursor() as cur:
                cur.execute(CREATE.replace("TABLE every_type", f"TABLE {table}"))
                cur.execute(multi_row_insert(db, rows).replace("INTO every_type", f"INTO {table}"))
            columns, state = selected(db, database, table)
            shape = TableShape(
                env.ds, database, table, 1, tuple(columns), tuple(field_for(c) for c in columns), ("id",)
            )
            made = Changes(shape)
            made.pulled(state)
            statements = [  # an insert, an update, a delete, a primary-key change: (sql, old id, new id)
                (f"INSERT INTO `{table}` (id, vc, nn) VALUES (50, 'new ✓', 'x')", None, 50),
                (f"UPDATE `{table}` SET vc = 'changed ✓', bi = -7 WHERE id = 1", 1, 1),
                (f"DELETE FROM `{table}` WHERE id = 2", 2, None),
                (f"UPDATE `{table}` SET id = 40 WHERE id = 4", 4, 40),
            ]
            for sql, old, new in statements:
                with db.cursor() as cur:
                    cur.execute(sql)
                _, after = selected(db, database, table)
                op = "c" if old is None else "d" if new is None else "u"
                made.change(op, None if old is None else state[old], None if new is None else after[new])
                state = after
            encoder = formats.formatter(fmt, src.output.options(), ids)
            for change in made.out:
                for r in encoder.records(names[table], change):
                    producer.send(names[table], key=r.key, value=r.value, headers=list(r.headers))
        producer.flush(60)
        with fresh_database("postgresql") as pg:
            out = run_dbus(
                env.cfg_path,
                "replicate",
                "--source",
                env.ds,
                "--tables",
                ",".join(f"{database}.{t}" for t in TABLES),
                "--to",
                pg,
                "--no-bootstrap",
                "--until-idle",
                "3",
                "--dead-letter-file",
                str(tmp_path / "dead.jsonl"),
                timeout=180,
            )
            assert out.returncode == 0, out.stdout + out.stderr
            assert not (tmp_path / "dead.jsonl").exists(), (tmp_path / "dead.jsonl").read_text()
            for table in TABLES:
                assert scalar(pg, f"SELECT COUNT(*) FROM {table}") == 4
                check = run_dbus(
                    env.cfg_path,
                    "verify",
                    "--source",
                    env.ds,
                    "--table",
                    f"{database}.{table}",
                    "--replica",
                    pg,
                )
                print(check.stdout)
                assert check.returncode == 0, check.stdout + check.stderr
                assert "equal, 0 differences" in check.stdout, check.stdout
        for table in TABLES:
            name, snapshot = f"{database}.{table}", str(tmp_path / f"snapshot-{table}")
            result = reconcile.run(spark, cfg, env.ds, database, table, snapshot)  # one JVM for the three
            print(result)
            assert (result.rows, result.topic, result.versions) == (4, names[table], (1,))
            longs = pq.read_schema(next(Path(snapshot).glob("*.parquet")))  # UMS longs, by source type
            assert [str(longs.field(c).type) for c in ("iu", "bi", "biu", "b64")] == [
                *("int64", "int64"),
                *("decimal128(20, 0)", "decimal128(20, 0)"),
            ], table
            args = ("--source", env.ds, "--table", name, "--snapshot", snapshot)
            check = run_dbus(env.cfg_path, "verify", *args)
            print(check.stdout)
            assert check.returncode == 0, check.stdout + check.stderr
            assert "equal, 0 differences" in check.stdout, check.stdout
    finally:
        producer.close()
        kafka.delete_topics(cfg.endpoints.kafka, list(names.values()))


@pytest.mark.timeout(420)
def test_replicate_bootstraps_per_row_tables_from_full_pulls_and_verify_finds_no_difference(tmp_path, source):
    """A new replica of per-row tables (no checkpoint): ``dbus replicate`` requests a full pull of each,
    the full puller writes its rows (op r) to the table's topic and its markers to the events topic, the
    replicate reads both and goes online; ``dbus verify --replica`` finds 0 differences."""
    fp = make_fullpull_env(tmp_path, source)
    try:
        per_table_formats(fp, TABLES)
        src = fp.cfg.source(fp.ds)
        fp.sql("SET SESSION sql_mode = ''")
        for table in TABLES:
            fp.sql(
                CREATE.replace("TABLE every_type", f"TABLE {table}"),
                multi_row_insert(fp.db, ROWS).replace("INTO every_type", f"INTO {table}"),
            )
        names = [topics.result_topic(fp.ds, src, fp.database, t) for t in TABLES]
        kafka.ensure_topics(fp.cfg.endpoints.kafka, [*names, topics.events_topic(fp.ds, src, fp.database)])
        fp.start()
        with fresh_database("postgresql") as pg:
            tables = ",".join(f"{fp.database}.{t}" for t in TABLES)
            out = run_dbus(
                fp.env.cfg_path,
                "replicate",
                "--source",
                fp.ds,
                "--tables",
                tables,
                "--to",
                pg,
                "--until-idle",
                "5",
                timeout=300,
            )
            assert out.returncode == 0, out.stdout + out.stderr
            summary = json.loads(out.stdout.strip().splitlines()[-1])
            print(summary)
            for table in TABLES:
                name = f"{fp.database}.{table}"
                check = run_dbus(
                    fp.env.cfg_path, "verify", "--source", fp.ds, "--table", name, "--replica", pg
                )
                print(check.stdout)
                assert check.returncode == 0, check.stdout + check.stderr
                assert "4 source rows, 4 snapshot rows: equal, 0 differences" in check.stdout, check.stdout
    finally:
        cleanup_fullpull(fp)
