"""Full pull, MariaDB -> UMS ``data_initial_data`` in Kafka: rows/s of the full-puller service.

The service runs as it is deployed (``spark-submit fullpuller/main.py``, ``local[2]``) on a throwaway
source. A table of BENCH_FULLPULL_ROWS rows (7 columns, the e2e bench's shape) is filled with MariaDB's
sequence engine; a warm-up pull of BENCH_FULLPULL_WARMUP_ROWS rows goes first, so the figure is a running
service's, not a JVM's first minute. The clock runs from the Kafka timestamp of the request on the control
topic (``dbus fullpull request`` sends it; the command's own start is not counted) to the Kafka timestamp
of the pull's end marker; then every pulled tuple is counted (it must be all
of them).

- ``fullpull_rows_per_s``: the pull above, beside the baseline: pymysql SELECT of the same table (a
  streaming cursor) + one UMS-shaped JSON per row + kafka-python produce (batched, lz4, acks=all), over
  BENCH_FULLPULL_BASELINE_ROWS rows, in the same run.
- ``fullpull_<format>_rows_per_s`` for each per-row format of BENCH_FULLPULL_FORMATS (default
  ``debezium-json``; ``debezium-json,canal-json,avro`` for all, avro through ``endpoints.registry``; empty:
  none): the same rows (a copy of the table, ``output.tables`` names its format) pulled by the same
  service into one record per row (docs/fullpull.md#per-row-formats), after a warm-up pull of
  BENCH_FULLPULL_WARMUP_ROWS / 5 rows in that format, beside ``fullpull_rows_per_s`` of the same run
  as baseline. Its end marker is on the schema's events topic; its rows are the records carrying
  ``ums_uid_``.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from bench.report import bench_line
from cli.stages import REPO, Stages
from dbuslib import kafka, mysql, topics, zk, zkpaths
from dbuslib.config import DbusConfig, load_config, raw_config
from ums.formats import UMS_UID_HEADER

ROWS = int(os.environ.get("BENCH_FULLPULL_ROWS", "1000000"))
WARMUP = int(os.environ.get("BENCH_FULLPULL_WARMUP_ROWS", "100000"))
BASELINE_ROWS = int(os.environ.get("BENCH_FULLPULL_BASELINE_ROWS", "100000"))
FORMATS = [f for f in os.environ.get("BENCH_FULLPULL_FORMATS", "debezium-json").split(",") if f]
COLUMNS = (
    "id BIGINT PRIMARY KEY, customer_id INT NOT NULL, status VARCHAR(16) NOT NULL, total DECIMAL(12,2) "
    "NOT NULL, placed_at DATETIME(3) NOT NULL, note VARCHAR(64), qty SMALLINT"
)
FILL = (
    "SELECT seq, seq % 9973, ELT(1 + seq % 4, 'new', 'paid', 'shipped', 'closed'), (seq % 100000) / 100, "
    "TIMESTAMP('2024-01-02 03:04:05.123') + INTERVAL seq SECOND, CONCAT('note ', seq), seq % 1000 "
    "FROM seq_1_to_{n}"
)


def _suffix(fmt: str) -> str:
    """``debezium-json`` -> ``debezium_json``: a table name's and a figure's spelling of a format."""
    return fmt.replace("-", "_")


class Service(Stages):
    """The full puller of one throwaway source, as a subprocess."""

    def __init__(self, base: DbusConfig, database: str, tmp: Path) -> None:
        ds = f"fp_{uuid.uuid4().hex[:8]}"
        raw = raw_config(base.path)  # the configuration the bench runs with
        src = raw["sources"]["demo"]
        src["capture"] = {"include": [f"{database}.*"], "exclude": []}
        src["masking"] = {}
        src.setdefault("fullpull", {}).update(json.loads(os.environ.get("BENCH_FULLPULL_SETTINGS", "{}")))
        src["output"] = {
            "tables": {f"{database}.{t}_{_suffix(f)}": f for f in FORMATS for t in ("warm", "big")}
        }
        raw["sources"] = {ds: src}
        raw["spark"]["jars_file"] = str((Path(base.path).parent / base.spark.jars_file).resolve())
        raw["spark"]["checkpoint_root"] = str(tmp / "checkpoints")
        raw["endpoints"]["meta_store"]["url"] = base.endpoints.meta_store.url.get_secret_value()
        self.cfg_path = tmp / f"{ds}.yaml"
        self.cfg_path.write_text(yaml.safe_dump(raw))
        super().__init__(load_config(self.cfg_path), ds, tmp)
        self.database = database

    def pull(self, table: str) -> tuple[int, float, int]:
        """Request a pull of ``table`` and wait for its end marker: (request id, seconds, tuples: rows
        of UMS messages, or per-row records)."""
        src = self.cfg.source(self.ds)
        topic = topics.result_topic(self.ds, src, self.database, table)
        per_row = src.output.format_for(self.database, table) != "ums"
        watched = [topic, topics.events_topic(self.ds, src, self.database)] if per_row else [topic]
        kafka.ensure_topics(self.cfg.endpoints.kafka, watched)
        since = kafka.end_offsets(self.cfg.endpoints.kafka, watched)
        ctrl = src.topics.name("ctrl", self.ds)
        asked = kafka.end_offsets(self.cfg.endpoints.kafka, [ctrl])
        out = subprocess.run(
            [
                sys.executable,
                "-m",
                "cli.main",
                "--config",
                str(self.cfg_path),
                "fullpull",
                "request",
                "--source",
                self.ds,
                "--table",
                f"{self.database}.{table}",
                "--wait",
                "0",
            ],
            cwd=REPO,
            capture_output=True,
            text=True,
            check=True,
        )
        seqno = int(out.stdout.split("\t", 1)[0])
        t0 = request_time(self.cfg, asked) / 1000  # when the request was sent, not when its CLI started
        deadline = time.monotonic() + 900
        tuples, end_ms = 0, None
        consumer = kafka.consumer(self.cfg.endpoints.kafka, enable_auto_commit=False)
        try:
            consumer.assign(list(since))
            for tp, offset in since.items():
                consumer.seek(tp, offset)
            rest: dict | None = None  # per-row: the result topic's end offsets once the end marker is in
            while end_ms is None or rest and any(consumer.position(tp) < end for tp, end in rest.items()):
                self.check_alive()
                if time.monotonic() > deadline:
                    msg = f"full pull {seqno} of {table} did not end within 900 s"
                    raise TimeoutError(msg)
                for records in consumer.poll(timeout_ms=500, max_records=2000).values():
                    for rec in records:
                        headers = dict(rec.headers or [])
                        if (
                            headers.get("dbus_fullpull") == b"end"
                            and headers.get("dbus_fullpull_id") == str(seqno).encode()
                        ):
                            end_ms = rec.timestamp
                            # the marker is on the events topic: the rows before it may not be read yet
                            rest = kafka.end_offsets(self.cfg.endpoints.kafka, [topic]) if per_row else None
                        elif per_row:
                            tuples += any(k == UMS_UID_HEADER for k, _ in rec.headers or ())
                        elif b'"tuple":' in rec.value:
                            tuples += rec.value.count(b'{"tuple":')
        finally:
            consumer.close()
        return seqno, end_ms / 1000 - t0, tuples

    def cleanup(self) -> None:
        self.stop_all()
        src = self.cfg.source(self.ds)
        names = [src.topics.name(k, self.ds) for k in ("ctrl", "callback", "data_shards")]
        names += [topics.result_topic(self.ds, src, self.database, t) for t in ("warm", "big")]
        names.append(topics.events_topic(self.ds, src, self.database))
        kafka.delete_topics(self.cfg.endpoints.kafka, list(dict.fromkeys(names)))
        client = zk.client(self.cfg.endpoints.zookeeper)
        client.delete(zkpaths.fullpuller(self.cfg.endpoints.zookeeper.root, self.ds), recursive=True)
        client.stop()
        client.close()


def request_time(cfg: DbusConfig, since: dict) -> int:
    """The Kafka timestamp (ms) of the first record written to the control topic past ``since`` (its end
    offsets before ``dbus fullpull request`` ran): the request."""
    consumer = kafka.consumer(cfg.endpoints.kafka, enable_auto_commit=False)
    try:
        consumer.assign(list(since))
        for tp, offset in since.items():
            consumer.seek(tp, offset)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            got = [r.timestamp for records in consumer.poll(timeout_ms=500).values() for r in records]
            if got:
                return min(got)
        msg = "the full-pull request is not on the control topic"
        raise RuntimeError(msg)
    finally:
        consumer.close()


def baseline(cfg: DbusConfig, database: str, rows: int) -> float:
    """pymysql streaming SELECT + UMS-shaped JSON per row + kafka-python produce."""
    from pymysql.cursors import SSCursor

    topic = f"bench_baseline_{uuid.uuid4().hex[:8]}"
    kafka.ensure_topics(cfg.endpoints.kafka, [topic])
    producer = kafka.producer(cfg.endpoints.kafka, linger_ms=5, batch_size=1_048_576, compression_type="lz4")
    db = mysql.connect(cfg.source("demo").mysql, database, cursorclass=SSCursor)
    done, t0 = 0, time.perf_counter()
    with db.cursor() as cur:
        cur.execute(f"SELECT * FROM big LIMIT {rows}")
        names = [d[0] for d in cur.description]
        for row in cur:
            value = json.dumps(
                {
                    "schema": database,
                    "table": "big",
                    "op": "i",
                    "values": dict(zip(names, row, strict=False)),
                },
                default=str,
            )
            producer.send(topic, key=f"{database}.big".encode(), value=value.encode())
            done += 1
    producer.flush()
    rate = done / (time.perf_counter() - t0)
    db.close()
    producer.close()
    kafka.delete_topics(cfg.endpoints.kafka, [topic])
    return rate


@contextlib.contextmanager
def bench_database(cfg: DbusConfig, prefix: str, tables: dict[str, int]) -> Iterator[tuple[str, Any]]:
    """A throwaway database ``<prefix>_<hex>`` on the stack's MariaDB with ``tables`` (name -> rows) of
    COLUMNS filled by FILL: (its name, the writer's connection, in it); dropped when the block ends."""
    database = f"{prefix}_{uuid.uuid4().hex[:8]}"
    writer = mysql.connect(cfg.source("demo").mysql, as_writer=True)
    try:
        with writer.cursor() as cur:
            cur.execute(f"CREATE DATABASE `{database}`")
            cur.execute(f"USE `{database}`")
            for table, n in tables.items():
                cur.execute(f"CREATE TABLE {table} ({COLUMNS})")
                cur.execute(f"INSERT INTO {table} {FILL.format(n=n)}")
        yield database, writer
    finally:
        with writer.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS `{database}`")
        writer.close()


@contextlib.contextmanager
def warm_service(cfg: DbusConfig, database: str, tmp: Path) -> Iterator[Service]:
    """The full-puller service of a throwaway source, started, listening and warm (it pulled ``warm``);
    stopped and its topics deleted when the block ends."""
    service = Service(cfg, database, tmp)
    try:
        service.start("fullpuller")
        service.wait_log("fullpuller", "listening on", 180)
        service.pull("warm")
        yield service
    finally:
        service.cleanup()


def run(cfg: DbusConfig) -> list[str]:
    tmp = Path(tempfile.mkdtemp(prefix="dbus-bench-fullpull-"))
    try:
        with bench_database(cfg, "bench_fp", {"warm": WARMUP, "big": ROWS}) as (database, writer):
            with writer.cursor() as cur:
                for fmt in FORMATS:  # copies pulled in a per-row format (output.tables)
                    for table, n in (("warm", WARMUP // 5), ("big", ROWS)):
                        cur.execute(f"CREATE TABLE {table}_{_suffix(fmt)} ({COLUMNS})")
                        cur.execute(f"INSERT INTO {table}_{_suffix(fmt)} SELECT * FROM {table} LIMIT {n}")
            base = baseline(cfg, database, BASELINE_ROWS)
            with warm_service(cfg, database, tmp) as service:
                return measure(service, base)
    finally:
        if not os.environ.get("BENCH_KEEP"):
            shutil.rmtree(tmp, ignore_errors=True)


def measure(service: Service, base: float) -> list[str]:
    """``fullpull_rows_per_s`` of the warm ``service`` pulling ``big``, then each format's copy."""
    seqno, seconds, tuples = service.pull("big")
    print(f"fullpull: {tuples} tuples in {seconds:.2f} s (request {seqno})", file=sys.stderr)
    if tuples != ROWS:
        msg = f"full pull {seqno}: {tuples} tuples in the result topic, expected {ROWS}"
        raise RuntimeError(msg)
    ums = ROWS / seconds
    lines = [bench_line("fullpull_rows_per_s", ums, "rows/s", base)]
    for fmt in FORMATS:
        service.pull(f"warm_{_suffix(fmt)}")
        seqno, seconds, rows = service.pull(f"big_{_suffix(fmt)}")
        print(f"fullpull {fmt}: {rows} records in {seconds:.2f} s (request {seqno})", file=sys.stderr)
        if rows != ROWS:
            msg = f"full pull {seqno} ({fmt}): {rows} records with {UMS_UID_HEADER}, expected {ROWS}"
            raise RuntimeError(msg)
        lines.append(bench_line(f"fullpull_{_suffix(fmt)}_rows_per_s", ROWS / seconds, "rows/s", ums))
    return lines
