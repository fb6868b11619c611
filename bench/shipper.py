"""The log shipper's lines/s: rsyslog (imfile -> omkafka, the configuration `dbus logs shipper-conf` makes)
shipping a file of log4j-style lines into a fresh raw topic on the local broker.

value: a private rsyslogd, already running and watching an empty folder; the clock starts when the file is
written (one write of every line) and stops when the topic's end offset holds every line, acks=all.
baseline: plain Python doing the same work: read the file line by line, build the same JSON record
(json.dumps), send it with kafka-python (acks=all, the producer DBus stages use), flush.
BENCH_SHIPPER_LINES (default 100000) lines of about 120 bytes.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

from bench.report import bench_line
from dbuslib import kafka
from dbuslib.config import DbusConfig, LogSource
from logprocessor import shipper

LINES = int(os.environ.get("BENCH_SHIPPER_LINES", "100000"))


def log_lines(n: int) -> bytes:
    levels = ("INFO", "WARN", "ERROR", "DEBUG")
    return b"".join(
        f"2026-11-24 10:15:{i % 60:02d}.{i % 1000:03d} [{levels[i % 4]}] [worker-{i % 8}] "
        f"com.example.OrderService - order={100000 + i} amount={i % 997}.{i % 100:02d} status=PAID\n".encode()
        for i in range(n)
    )


def _wait(check, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            msg = f"{what}: not within {timeout:g}s"
            raise RuntimeError(msg)
        time.sleep(0.02)


def rsyslog_rate(cfg: DbusConfig, topic: str, data: bytes, n: int) -> float:
    home = Path(tempfile.mkdtemp(prefix="dbus-bench-shipper-"))
    try:
        (home / "logs").mkdir()
        (home / "work").mkdir()
        src = LogSource.model_validate(
            {"shipper": {"files": [str(home / "logs" / "*.log")]}, "topics": {"raw": topic}}
        )
        conf = home / "rsyslog.conf"
        conf.write_text(
            shipper.rsyslog_conf(cfg.model_copy(update={"log_sources": {"bench": src}}), home / "work")
        )
        pidfile = home / "rsyslogd.pid"
        proc = subprocess.Popen(
            ["rsyslogd", "-n", "-i", str(pidfile), "-f", str(conf)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        try:
            _wait(pidfile.exists, 30, "rsyslogd started")
            (home / "logs" / "warmup.log").write_bytes(b"warm-up line\n")
            _wait(
                lambda: sum(kafka.end_offsets(cfg.endpoints.kafka, [topic]).values()) >= 1, 30, "warm-up line"
            )
            t0 = time.perf_counter()
            (home / "logs" / "app.log").write_bytes(data)
            _wait(
                lambda: sum(kafka.end_offsets(cfg.endpoints.kafka, [topic]).values()) >= n + 1,
                600,
                f"{n} lines in {topic}",
            )
            return n / (time.perf_counter() - t0)
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=60)
    finally:
        shutil.rmtree(home, ignore_errors=True)


def python_rate(cfg: DbusConfig, topic: str, data: bytes, n: int) -> float:
    home = Path(tempfile.mkdtemp(prefix="dbus-bench-shipper-"))
    path = home / "app.log"
    path.write_bytes(data)
    producer = kafka.producer(cfg.endpoints.kafka)
    host, key = socket.gethostname(), str(path).encode()
    try:
        t0 = time.perf_counter()
        with path.open(encoding="utf-8") as f:
            for line in f:
                stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
                record = {"host": host, "path": str(path), "timestamp": stamp, "message": line.rstrip("\n")}
                producer.send(topic, key=key, value=json.dumps(record, ensure_ascii=False).encode())
        producer.flush()
        return n / (time.perf_counter() - t0)
    finally:
        producer.close()
        shutil.rmtree(home, ignore_errors=True)


def run(cfg: DbusConfig) -> list[str]:
    data = log_lines(LINES)
    topics = [f"bench_shipper_{uuid.uuid4().hex[:8]}", f"bench_shipper_py_{uuid.uuid4().hex[:8]}"]
    kafka.ensure_topics(cfg.endpoints.kafka, topics, partitions=1)
    try:
        value = rsyslog_rate(cfg, topics[0], data, LINES)
        baseline = python_rate(cfg, topics[1], data, LINES)
    finally:
        kafka.delete_topics(cfg.endpoints.kafka, topics)
    return [bench_line("shipper_lines_per_s", value, "lines/s", baseline)]
