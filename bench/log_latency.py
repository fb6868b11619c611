"""Log latency, from the write of a line to a file to its UMS in Kafka: file -> rsyslog -> raw topic -> log
processor -> result topic (issue 16, acceptance 6; docs/logs.md, Log latency).

The path runs as it is deployed, on a log source of the bench's own (``benchlat_<hex>``, its topics,
checkpoints and rules): an rsyslogd of its own started by the stack's script (``cli.stages.private_rsyslog``)
watches a folder; the log processor is ``dbus submit logprocessor`` (``spark.master``, local[2] in the demo
configuration; the configuration's ``processor`` settings, or BENCH_LOG_LATENCY_PROCESSOR, a JSON object of
``processor`` settings, for tuning runs); the rules are the demo's (conf/demo/logrules: ``app_orders`` and
``http_access``). The demo's writer (cli/demolog.py) appends its lines (2 of 5 order lines, 2 of 5 access
lines, 1 of 5 taken by no table; each ends in ``req=<run>-<n>``) at BENCH_LOG_LATENCY_RATE (10,000) lines/s,
flushing every 10 ms, for BENCH_LOG_LATENCY_S (15) seconds, after a warm-up of BENCH_LOG_LATENCY_WARMUP_S (5)
seconds at the same rate, waited for through the processor (its JIT and first batches are not measured).

- A line's write time: the writer's wall clock after the flush that put it in the file.
- A record's time in Kafka: its timestamp, the broker's clock when it appended the record: the bench makes
  the source's topics itself, before rsyslog and the processor start, with
  ``message.timestamp.type=LogAppendTime`` (the producers' clocks play no part; one machine, one clock).
- ``log_latency_p50_ms`` / ``log_latency_p99_ms``: over the measured run's table rows (every line of
  app_orders and http_access, each a row of a UMS message): the message's time in Kafka minus the line's
  write time.
- baseline: the same lines' records in the raw topic, in the same run: the shipper alone (file -> rsyslog ->
  Kafka). The ratio is how many times the shipper's latency the whole path's is; the difference is what the
  processor adds (reading the raw topic, its batches, writing the UMS).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
import time
import uuid
from pathlib import Path

from bench.e2e import percentile
from bench.report import bench_line
from cli import demolog
from cli.stages import Stages, private_rsyslog
from dbuslib import kafka
from dbuslib.config import DbusConfig

RATE = int(os.environ.get("BENCH_LOG_LATENCY_RATE", "10000"))
SECONDS = float(os.environ.get("BENCH_LOG_LATENCY_S", "15"))
WARMUP_S = float(os.environ.get("BENCH_LOG_LATENCY_WARMUP_S", "5"))
PROCESSOR = json.loads(os.environ.get("BENCH_LOG_LATENCY_PROCESSOR", "{}"))
FLUSH_S = 0.01


def _outputs(cfg: DbusConfig, ds: str) -> list[str]:
    """The topics the processor writes a line to: the tables' result topic(s) and the unknown topic."""
    topics = demolog.topics_of(cfg, ds)
    return list(dict.fromkeys(topics[k] for k in (*demolog.TABLES, demolog.UNKNOWN)))


def _wait_placed(
    cfg: DbusConfig, ds: str, stages: Stages, since: dict, written: demolog.Written, what: str
) -> None:
    """Until the output topics past ``since`` hold every line of ``written`` (a line is one table row, in a
    message of many, or one unknown line; no heartbeat runs), read as they arrive."""
    from kafka import TopicPartition

    mark = re.compile(rb"%s-\d+" % re.escape(written.run).encode())
    at = dict(since)
    found = 0
    deadline = time.monotonic() + 300
    while True:
        for r in kafka.read_range(cfg.endpoints.kafka, _outputs(cfg, ds), at):
            found += len(mark.findall(r.value or b""))
            at[TopicPartition(r.topic, r.partition)] = r.offset + 1
        if found >= written.lines:
            return
        stages.check_alive()
        if time.monotonic() > deadline:
            log = stages.log("logprocessor")
            msg = f"log latency: {what} lines not all placed in 300s ({found} of {written.lines}); see {log}"
            raise RuntimeError(msg)
        time.sleep(0.5)


def _latencies(
    cfg: DbusConfig, topics: list[str], since: dict, written: demolog.Written, text: bytes
) -> list:
    """Sorted ms from write to Kafka of every table line of ``written`` found in ``topics`` past ``since``,
    each record's lines found by ``text % run`` (a regex whose group is the line number)."""
    pattern = re.compile(text % re.escape(written.run).encode())
    out = []
    for r in kafka.read_range(cfg.endpoints.kafka, topics, since):
        if r.timestamp_type != 1:  # LogAppendTime
            msg = f"log latency: {r.topic} has producer timestamps, not the broker's (LogAppendTime)"
            raise RuntimeError(msg)
        for m in pattern.finditer(r.value):
            n = int(m.group(1))
            if n % 5 != 4:  # the writer's fifth line of five is taken by no table
                out.append(r.timestamp - written.written_at(n) * 1000)
    want = sum(len(written.ids[t]) for t in demolog.TABLES)
    if len(out) != want:
        msg = f"log latency: {len(out)} table lines found in {topics}, {want} written"
        raise RuntimeError(msg)
    return sorted(out)


def run(cfg: DbusConfig) -> list[str]:
    home = Path(tempfile.mkdtemp(prefix="dbus-bench-loglat-"))
    ds = f"benchlat_{uuid.uuid4().hex[:8]}"
    mine = demolog.own_source_config(cfg, ds, home, PROCESSOR)
    topics = demolog.topics_of(mine, ds)
    src = mine.log_source(ds)
    kafka.ensure_topics(
        mine.endpoints.kafka,
        [*dict.fromkeys(topics.values()), src.topics.name("ctrl", ds)],
        partitions=src.topics.partitions,
        configs=kafka.LOG_APPEND_TIME,
    )
    stages = Stages(mine, ds, home / "stage-logs")
    try:
        private_rsyslog("up", home / "rsyslog", mine.path)
        demolog.ensure_rules(mine, ds)
        stages.start("logprocessor")
        stages.wait_ready("logprocessor", timeout=300)
        path = demolog.log_file(mine, ds)

        since = kafka.end_offsets(mine.endpoints.kafka, _outputs(mine, ds))
        warm = demolog.Written(path, f"w{uuid.uuid4().hex[:7]}")
        demolog.append(warm, WARMUP_S, RATE, every_s=FLUSH_S)
        _wait_placed(mine, ds, stages, since, warm, "warm-up")

        raw, results = [topics["raw"]], list(dict.fromkeys(topics[t] for t in demolog.TABLES))
        since = kafka.end_offsets(mine.endpoints.kafka, [*raw, *_outputs(mine, ds)])
        measured = demolog.Written(path, uuid.uuid4().hex[:8])
        demolog.append(measured, SECONDS, RATE, every_s=FLUSH_S)
        _wait_placed(mine, ds, stages, since, measured, "measured")
        shipped = _latencies(mine, raw, since, measured, rb"req=%s-(\d+)")
        ums = _latencies(mine, results, since, measured, rb'"%s-(\d+)"')
    finally:
        stages.stop_all()
        private_rsyslog("down", home / "rsyslog", mine.path)
        demolog.drop_own_source(mine, ds)
        if not os.environ.get("BENCH_KEEP"):
            shutil.rmtree(home, ignore_errors=True)
    return [
        bench_line(f"log_latency_p{q}_ms", percentile(ums, q / 100), "ms", percentile(shipped, q / 100))
        for q in (50, 99)
    ]
