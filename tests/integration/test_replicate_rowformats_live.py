"""``dbus replicate`` and ``dbus reconcile`` read every per-row format on the real stack, and ``dbus
verify`` finds no difference.

A table of every column type of tests/golden/cdc/every_type.sql (tests/integration/every_type.py) per
per-row format, in a source whose ``output.tables`` globs give each its format and ``output.topic: table``
a topic of its own. The test writes the rows on MariaDB (MAX, MIN, NULL; not ODD, whose zero dates no
replica holds: docs/client.md, The SQL sink), then an insert, an update, a delete and a primary-key
change. The records of those changes (the rows as a full pull, op r, then c/u/d at later positions,
tombstones after deletes) are made from ``RowChange``s by each format's encoder (``ums.formats``; Avro
ids from the stack's registry through ``dbuslib.registry``) and produced to the tables' topics (two
partitions each): no appender runs, so this tests the readers alone. One ``dbus replicate
--no-bootstrap`` reads the three topics into PostgreSQL, and ``dbus verify --replica`` finds 0
differences for each table; ``dbus reconcile`` of each topic gives a snapshot that ``dbus verify
--snapshot`` finds equal too.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from every_type import CREATE, MAX_ROW, MIN_ROW, NULL_ROW, as_decoded, multi_row_insert
from extractor_env import make_env
from fullpull_env import run_dbus
from replica_env import fresh_database, scalar

from dbuslib import kafka, topics
from dbuslib.config import load_config
from fullpuller import catalog
from fullpuller.render import python_columns
from ums import formats
from ums.build import field_for, user_columns
from ums.ids import ums_id, ums_uid
from ums.rowchange import Position, RowChange, TableShape
from ums.values import encode_column

pytestmark = pytest.mark.integration

TABLES = {"rows_dbz": "debezium-json", "rows_canal": "canal-json", "rows_avro": "avro"}
FILE = "mysql-bin.000001"


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
def test_replicate_reads_every_per_row_format_and_verify_finds_no_difference(tmp_path: Path, writer_db):
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
            rows = [MAX_ROW, MIN_ROW, NULL_ROW]
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
                assert scalar(pg, f"SELECT COUNT(*) FROM {table}") == 3
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
            out = run_dbus(env.cfg_path, "reconcile", "--source", env.ds, "--table", name, "--out", snapshot)
            assert out.returncode == 0, out.stdout + out.stderr
            result = json.loads(out.stdout.strip().splitlines()[-1])
            print(result)
            assert (result["rows"], result["topic"], result["versions"]) == (3, names[table], [1])
            args = ("--source", env.ds, "--table", name, "--snapshot", snapshot)
            check = run_dbus(env.cfg_path, "verify", *args)
            print(check.stdout)
            assert check.returncode == 0, check.stdout + check.stderr
            assert "equal, 0 differences" in check.stdout, check.stdout
    finally:
        producer.close()
        kafka.delete_topics(cfg.endpoints.kafka, list(names.values()))
