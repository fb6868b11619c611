"""Extractor rows/s binlog -> Kafka (acks=all) and its peak RSS, beside a plain baseline, same workload.

Workload: BENCH_EXTRACTOR_ROWS (default 500000) inserted into a 7-column table in transactions of 10
statements x 1000 rows. value: the real extractor (``python -m extractor run``, a subprocess) from the
moment it starts reading until it has committed the position after the last transaction.
baseline: the plain way, python-mysql-replication decoding every row + one UMS-shaped JSON per row +
kafka-python produce (acks=all, batched), over the first BENCH_EXTRACTOR_BASELINE_ROWS rows of the
same binlog. Then one transaction of BENCH_BIG_TXN_MB (default 1024) MB goes through the extractor
alone, to show its memory stays bounded (figure ``extractor_big_txn_peak_rss_mb``).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import yaml

from bench.report import bench_line
from dbuslib import kafka, mysql, zk, zkpaths
from dbuslib.config import DbusConfig, load_config, raw_config

ROWS = int(os.environ.get("BENCH_EXTRACTOR_ROWS", "500000"))
BASELINE_ROWS = int(os.environ.get("BENCH_EXTRACTOR_BASELINE_ROWS", "100000"))
BIG_TXN_MB = int(os.environ.get("BENCH_BIG_TXN_MB", "1024"))
REPO = Path(__file__).resolve().parent.parent
TABLE = (
    "CREATE TABLE t (id BIGINT PRIMARY KEY, customer_id INT NOT NULL, status VARCHAR(16) NOT NULL, "
    "total DECIMAL(12,2) NOT NULL, placed_at DATETIME(3) NOT NULL, note VARCHAR(64), qty SMALLINT)"
)


def _write_rows(db, rows: int) -> None:
    with db.cursor() as cur:
        cur.execute(TABLE)
        next_id = 0
        while next_id < rows:
            cur.execute("BEGIN")
            for _ in range(10):
                n = min(1000, rows - next_id)
                if n <= 0:
                    break
                values = ",".join(
                    f"({i},{i % 9973},'paid',{i % 1000}.25,'2026-11-22 10:00:00.{i % 1000:03d}',"
                    f"'note {i}',{i % 7})"
                    for i in range(next_id, next_id + n)
                )
                cur.execute(f"INSERT INTO t VALUES {values}")
                next_id += n
            cur.execute("COMMIT")


def _end_after_marker(db) -> mysql.BinlogPosition:
    """One small transaction after the workload, then the binlog end: a position the extractor commits
    even when the workload's last transaction rotated the binlog (a file holding no transaction yet gives
    it no boundary to commit)."""
    with db.cursor() as cur:
        cur.execute("CREATE TABLE IF NOT EXISTS marker (id INT AUTO_INCREMENT PRIMARY KEY)")
        cur.execute("INSERT INTO marker VALUES ()")
    return mysql.binlog_end(db)


def _write_big_transaction(db, megabytes: int) -> None:
    rows = megabytes * 1024  # ~1 KiB per row
    with db.cursor() as cur:
        cur.execute("CREATE TABLE big (id BIGINT PRIMARY KEY, payload VARCHAR(1000) NOT NULL)")
        cur.execute("BEGIN")
        cur.execute(f"INSERT INTO big SELECT seq, REPEAT('x', 1000) FROM seq_1_to_{rows}")
        cur.execute("COMMIT")


class _Run:
    """One extractor subprocess on its own source, config and topic."""

    def __init__(self, base: DbusConfig, database: str, start: mysql.BinlogPosition, tmp: Path) -> None:
        self.ds = f"bench_{uuid.uuid4().hex[:8]}"
        raw = raw_config(base.path)  # the configuration the bench runs with
        src = raw["sources"]["demo"]
        src["capture"] = {"include": [f"{database}.*"], "exclude": []}
        src["extractor"].update(
            {
                "start": f"{start.file}:{start.pos}",
                "commit_interval_s": 0.2,
                "state_dir": str(tmp / "state"),
                "metrics_interval_s": 5,
            }
        )
        if os.environ.get("BENCH_EXTRACTOR_PRODUCER"):  # tuning: kafka-python options as JSON
            src["extractor"]["producer"] = json.loads(os.environ["BENCH_EXTRACTOR_PRODUCER"])
        raw["sources"] = {self.ds: src}
        self.cfg_path = tmp / f"{self.ds}.yaml"
        self.cfg_path.write_text(yaml.safe_dump(raw))
        self.cfg = load_config(self.cfg_path)
        self.state = tmp / "state" / f"{self.ds}.position.json"
        self.log = tmp / f"{self.ds}.log"

    def until_committed(self, end: mysql.BinlogPosition) -> tuple[float, float]:
        """Seconds from 'reading from' to a committed position at or past ``end``; peak RSS in MB."""
        with self.log.open("wb") as out:
            proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "extractor",
                    "--config",
                    str(self.cfg_path),
                    "run",
                    "--source",
                    self.ds,
                ],
                cwd=REPO,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        try:
            t0 = _wait(lambda: "reading from" in self.log.read_text(), proc, self.log, 120)
            t1 = _wait(lambda: self._committed_past(end), proc, self.log, 1800)
            peak = _peak_rss_mb(proc.pid)
        finally:  # the extractor stops within seconds of SIGTERM (dbuslib/lifecycle.py); never left running
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        return t1 - t0, peak

    def _committed_past(self, end: mysql.BinlogPosition) -> bool:
        try:
            p = json.loads(self.state.read_text())
        except (FileNotFoundError, json.JSONDecodeError):
            return False
        return (p["file"], p["pos"]) >= (end.file, end.pos)

    def cleanup(self) -> None:
        kafka.delete_topics(self.cfg.endpoints.kafka, [self.ds])
        client = zk.client(self.cfg.endpoints.zookeeper)
        client.delete(zkpaths.extractor(self.cfg.endpoints.zookeeper.root, self.ds), recursive=True)
        client.stop()
        client.close()


def _wait(check, proc: subprocess.Popen, log: Path, timeout: float) -> float:
    deadline = time.monotonic() + timeout
    while not check():
        if proc.poll() is not None:
            msg = f"extractor exited with {proc.returncode}; see {log}"
            raise RuntimeError(msg)
        if time.monotonic() > deadline:
            msg = f"extractor did not finish in {timeout}s; see {log}"
            raise RuntimeError(msg)
        time.sleep(0.05)
    return time.monotonic()


def _peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def baseline(cfg: DbusConfig, database: str, start: mysql.BinlogPosition, rows: int) -> float:
    """python-mysql-replication full decode + UMS-shaped JSON per row + kafka-python produce."""
    from pymysqlreplication import BinLogStreamReader
    from pymysqlreplication.row_event import WriteRowsEvent

    src = cfg.source("demo")
    topic = f"bench_baseline_{uuid.uuid4().hex[:8]}"
    kafka.ensure_topics(cfg.endpoints.kafka, [topic])
    producer = kafka.producer(cfg.endpoints.kafka, linger_ms=5, batch_size=1_048_576, compression_type="lz4")
    stream = BinLogStreamReader(
        connection_settings=mysql.connection_settings(src.mysql),
        server_id=97100,
        log_file=start.file,
        log_pos=start.pos,
        resume_stream=True,
        blocking=False,
        only_schemas=[database],
        only_events=[WriteRowsEvent],
        enable_logging=False,
    )
    done, t0 = 0, time.perf_counter()
    for event in stream:
        for row in event.rows:
            value = json.dumps(
                {
                    "schema": event.schema,
                    "table": event.table,
                    "op": "i",
                    "file": stream.log_file,
                    "pos": event.packet.log_pos,
                    "values": row["values"],
                },
                default=str,
            )
            producer.send(topic, key=f"{event.schema}.{event.table}".encode(), value=value.encode())
            done += 1
        if done >= rows:
            break
    producer.flush()
    rate = done / (time.perf_counter() - t0)
    stream.close()
    producer.close()
    kafka.delete_topics(cfg.endpoints.kafka, [topic])
    return rate


def run(cfg: DbusConfig) -> list[str]:
    src = cfg.source("demo")
    database = f"dbus_bench_{uuid.uuid4().hex[:8]}"
    db = mysql.connect(src.mysql, as_writer=True)
    tmp = Path(tempfile.mkdtemp(prefix="dbus-bench-extractor-"))
    with db.cursor() as cur:
        cur.execute(f"CREATE DATABASE {database}")
    db.select_db(database)
    lines = []
    try:
        start = mysql.binlog_end(db)
        _write_rows(db, ROWS)
        end = _end_after_marker(db)
        base = baseline(cfg, database, start, min(BASELINE_ROWS, ROWS))
        run_ = _Run(cfg, database, start, tmp)
        seconds, peak = run_.until_committed(end)
        run_.cleanup()
        lines.append(bench_line("extractor_rows_per_s", ROWS / seconds, "rows/s", base))
        lines.append(bench_line("extractor_peak_rss_mb", peak, "MB"))
        if BIG_TXN_MB > 0:
            big_start = mysql.binlog_end(db)
            _write_big_transaction(db, BIG_TXN_MB)
            big = _Run(cfg, database, big_start, tmp)
            seconds, peak = big.until_committed(_end_after_marker(db))
            big.cleanup()
            lines.append(bench_line("extractor_big_txn_mb_per_s", BIG_TXN_MB / seconds, "MB/s"))
            lines.append(bench_line("extractor_big_txn_peak_rss_mb", peak, "MB"))
    finally:
        with db.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS {database}")
        db.close()
        shutil.rmtree(tmp, ignore_errors=True)
    return lines
