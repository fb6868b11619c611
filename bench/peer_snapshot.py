"""DBus's full pull beside Debezium's snapshot of the same table, same MariaDB, same Kafka (opt-in:
``python -m bench peer_snapshot``).

One table of BENCH_PEER_ROWS rows (default 1,000,000; bench/fullpull.py's 7 columns and fill) and a
warm-up table of a tenth of it, in a throwaway database of the stack's MariaDB:

1. DBus: the full-puller service as it is deployed (bench/fullpull.py's ``Service``: ``spark-submit
   fullpuller/main.py``, the source's ``fullpull`` settings), a pull of the warm-up table, then of the big
   one. The clock starts when ``dbus fullpull request`` sends the request and stops at the Kafka timestamp
   of the pull's end marker; every row is counted in the result topic (UMS, ``data_initial_data``). The
   service is stopped before the peer starts.
2. Debezium: its MariaDB connector (``io.debezium.connector.mariadb.MariaDbConnector``, 3.5.0.Final, from
   ``make stack-up``: stack/services/connect.sh) on one distributed Kafka Connect worker
   (tests/integration/connect.py) with Kafka's own JVM settings for Connect (``-Xmx2g``, G1), not the
   tests' small one. ``snapshot.mode=initial_only`` (the table's rows, no streaming after), no table locks
   (``snapshot.locking.mode=none``, DBus's pull takes none either), tuned as a platform team would:
   JsonConverter without schemas (its smallest records), ``max.batch.size`` 8,192, ``max.queue.size``
   65,536, ``snapshot.fetch.size`` 10,000, ``poll.interval.ms`` 1, the producer as DBus's (lz4, 5 ms
   linger, 1 MiB batches). A warm-up connector snapshots the warm-up table first (its JIT warmed as
   DBus's pull is). The clock starts when the big table's connector is created and stops at the Kafka
   timestamp of the topic's last record once the topic holds every row (its end offsets, read every
   0.2 s: no reader competes with the connector for the CPU).

Prints ``BENCH peer_snapshot_rows_per_s value=<DBus rows/s> unit=rows/s baseline=<Debezium rows/s>
ratio=<DBus/Debezium>`` and, on stderr, each side's seconds. Run on the local stack (``make stack-up``);
BENCH_KEEP=1 keeps the worker's folder and log.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
import uuid
from pathlib import Path

from bench import fullpull
from bench.fullpull import bench_database
from bench.report import bench_line
from cli.stages import REPO
from dbuslib import kafka
from dbuslib.config import DbusConfig

sys.path.insert(0, str(REPO / "tests" / "integration"))  # the Kafka Connect worker the interop tests use
import connect

ROWS = int(os.environ.get("BENCH_PEER_ROWS", "1000000"))
WARMUP = max(ROWS // 10, 1000)
MARIADB = "io.debezium.connector.mariadb.MariaDbConnector"
# Kafka's own JVM settings for Connect (connect-distributed.sh, kafka-run-class.sh)
THROUGHPUT_JVM = (
    "java",
    "-Xms256m",
    "-Xmx2g",
    "-XX:+UseG1GC",
    "-XX:MaxGCPauseMillis=20",
    "-XX:InitiatingHeapOccupancyPercent=35",
    "-XX:+ExplicitGCInvokesConcurrent",
    "-Djava.awt.headless=true",
)


def debezium_config(
    cfg: DbusConfig, database: str, table: str, prefix: str, partitions: int
) -> dict[str, str]:
    """The MariaDB connector's configuration for a snapshot of ``database.table`` alone."""
    src = cfg.source("demo").mysql
    return {
        "connector.class": MARIADB,
        "tasks.max": "1",
        "database.hostname": src.host,
        "database.port": str(src.port),
        "database.user": src.user,
        "database.password": src.password.get_secret_value(),
        "database.server.id": str(6000 + uuid.uuid4().int % 1000),
        "topic.prefix": prefix,
        "database.include.list": database,
        "table.include.list": f"{database}.{table}",
        "snapshot.mode": "initial_only",
        "snapshot.locking.mode": "none",
        "snapshot.fetch.size": "10000",
        "include.schema.changes": "false",
        "schema.history.internal.kafka.bootstrap.servers": cfg.endpoints.kafka.bootstrap_servers,
        "schema.history.internal.kafka.topic": f"{prefix}.history",
        "schema.history.internal.store.only.captured.tables.ddl": "true",
        "topic.creation.default.replication.factor": "1",
        "topic.creation.default.partitions": str(partitions),
        "max.batch.size": "8192",
        "max.queue.size": "65536",
        "poll.interval.ms": "1",
        "producer.override.compression.type": "lz4",
        "producer.override.linger.ms": "5",
        "producer.override.batch.size": "1048576",
        **connect.json_converters(schemas=False),
    }


def snapshot(worker: connect.ConnectWorker, cfg: DbusConfig, database: str, table: str, rows: int) -> float:
    """Create a connector snapshotting ``table``; seconds from its creation to its last record's Kafka
    timestamp, once the topic holds ``rows`` records. The connector and its topics are deleted after."""
    prefix = f"peer_{uuid.uuid4().hex[:8]}"
    topic = f"{prefix}.{database}.{table}"
    name = f"snapshot-{prefix}"
    partitions = cfg.source("demo").topics.partitions
    t0 = time.time()
    worker.create(name, debezium_config(cfg, database, table, prefix, partitions))
    try:
        deadline = time.monotonic() + 1800
        while sum(kafka.end_offsets(cfg.endpoints.kafka, [topic]).values()) < rows:
            worker.check_alive()
            try:
                got = worker.status(name)
            except connect.ConnectError:
                got = None  # not known to the worker yet
            if got is not None:
                worker.fail_on_failed(name, got)
            if time.monotonic() > deadline:
                msg = f"Debezium's snapshot of {table} did not end within 1800 s: {got}"
                raise TimeoutError(msg)
            time.sleep(0.2)
        ends = kafka.end_offsets(cfg.endpoints.kafka, [topic])
        if sum(ends.values()) != rows:
            msg = f"Debezium's snapshot of {table}: {sum(ends.values())} records, expected {rows}"
            raise RuntimeError(msg)
        return last_timestamp(cfg, ends) / 1000 - t0
    finally:
        worker.delete(name)
        kafka.delete_topics(cfg.endpoints.kafka, [topic, f"{prefix}.history"])


def last_timestamp(cfg: DbusConfig, ends: dict) -> int:
    """The greatest Kafka timestamp (ms) among the last records of the partitions ending at ``ends``."""
    consumer = kafka.consumer(cfg.endpoints.kafka, enable_auto_commit=False)
    try:
        parts = [tp for tp, end in ends.items() if end > 0]
        consumer.assign(parts)
        for tp in parts:
            consumer.seek(tp, ends[tp] - 1)
        last: dict = {}
        while len(last) < len(parts):
            for tp, records in consumer.poll(timeout_ms=1000).items():
                last[tp] = max(r.timestamp for r in records)
        return max(last.values())
    finally:
        consumer.close()


def run(cfg: DbusConfig) -> list[str]:
    tmp = Path(tempfile.mkdtemp(prefix="dbus-bench-peer-"))
    try:
        with bench_database(cfg, "bench_peer", {"warm": WARMUP, "big": ROWS}) as (database, _):
            with fullpull.warm_service(cfg, database, tmp) as service:  # stopped before the peer starts
                seqno, dbus_s, tuples = service.pull("big")
            if tuples != ROWS:
                msg = f"full pull {seqno}: {tuples} rows in the result topic, expected {ROWS}"
                raise RuntimeError(msg)
            print(f"peer_snapshot: DBus's full pull of {ROWS} rows in {dbus_s:.2f} s", file=sys.stderr)
            with connect.running_worker(cfg.endpoints.kafka, tmp / "connect", java=THROUGHPUT_JVM) as worker:
                snapshot(worker, cfg, database, "warm", WARMUP)
                dbz_s = snapshot(worker, cfg, database, "big", ROWS)
            print(f"peer_snapshot: Debezium's snapshot of {ROWS} rows in {dbz_s:.2f} s", file=sys.stderr)
            return [bench_line("peer_snapshot_rows_per_s", ROWS / dbus_s, "rows/s", ROWS / dbz_s)]
    finally:
        if not os.environ.get("BENCH_KEEP"):
            shutil.rmtree(tmp, ignore_errors=True)
