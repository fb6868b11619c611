"""Rows of any size on the real stack: 1 MB, 5 MB and 30 MB LONGBLOB values through the whole pipeline.

A UMS message up to ``endpoints.kafka.max_message_bytes`` is one record; a larger one (one huge row) leaves
the appender and the full puller as ordered chunks (ums.chunks, docs/ums.md#large-tuples), which consumers
join with ``ums.chunks.Reassembler``. The test reads the result topic as a consumer would, compares every
value with the source, checks that the appender keeps running and later rows arrive, then pulls the table
and reconciles and verifies it.

The pipeline test sets the record limit to 6 MiB and the extractor's raw record limit to 5.5 MB, so both
appender paths write chunks: the 5 MB row is one raw record, rendered by the JVM decoder, and its 6.7 MB
message is chunked by the text path; the 30 MB row is 6 raw chunks, joined and decoded in Python, and its
40 MB message is chunked by the Python path. The 1 MB row's message (1.33 MB) is one record.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import time
import uuid
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor

import pyarrow.parquet as pq
import pytest
import yaml
from fullpull_env import FullPullEnv, cleanup_fullpull, run_dbus
from helpers import wait_until
from kafka import TopicPartition
from pipeline_env import make_pipeline_env

from cli.stages import Stages
from dbuslib import kafka, mysql
from dbuslib.config import load_config
from fullpuller import reconcile, verify
from ums import ColumnSpec, DataRow, Namespace, Op, ProtocolType, build_data_messages, to_json, ums_uid
from ums.chunks import CHUNK, Reassembler, split

pytestmark = pytest.mark.integration
MB = 1_000_000
LIMIT = 6 * 1024 * 1024  # endpoints.kafka.max_message_bytes of the pipeline test
SIZES = {1: 1 * MB, 2: 5 * MB, 3: 30 * MB}  # id -> LONGBLOB bytes
DDL = "CREATE TABLE files (id INT PRIMARY KEY, name VARCHAR(40) NOT NULL, data LONGBLOB)"


def _blob(i: int, size: int) -> bytes:
    """``size`` bytes that differ per row and do not compress to nothing (a digest chain, repeated)."""
    seed = hashlib.sha256(f"row {i}".encode()).digest() * 64
    block = b"".join(hashlib.sha256(seed + bytes([k])).digest() for k in range(256))  # 8 KiB
    return (block * (size // len(block) + 1))[:size]


def _insert(db, i: int, size: int | None) -> None:
    with db.cursor() as cur:
        cur.execute(
            "INSERT INTO files VALUES (%s, %s, %s)",
            (i, f"file {i}", None if size is None else _blob(i, size)),
        )


class ResultReader:
    """A result topic read as a consumer reads it, from its start, keeping its place: each ``read()`` takes
    the records that arrived since the last one (up to the end offsets of the moment, or a little past
    them), checks each record's size and joins chunked ones (one Reassembler per partition, a record's
    chunks read so far kept between reads), so what it holds after any number of reads is what one pass
    over the same records gives. ``of(protocol)``: the tuples of that protocol's messages in partition
    order, and per id the chunks its last message came in (0: a whole record)."""

    def __init__(self, cfg, topic: str) -> None:
        self.topic = topic
        self.consumer = kafka.consumer(cfg.endpoints.kafka, enable_auto_commit=False, group_id=None)
        self.parts: list[TopicPartition] = []
        self.assemblers: dict[int, Reassembler] = {}
        self.chunks: dict[int, int] = {}  # per partition, the chunks of the record being joined
        self.messages: dict[str, list[tuple[dict, int]]] = defaultdict(list)  # protocol -> (message, chunks)

    def read(self, quiet_s: float = 60.0) -> ResultReader:
        if not self.parts:  # a topic not made yet reads as empty
            found = self.consumer.partitions_for_topic(self.topic) or ()
            self.parts = [TopicPartition(self.topic, p) for p in sorted(found)]
            if not self.parts:
                return self
            self.consumer.assign(self.parts)
            self.consumer.seek_to_beginning(*self.parts)
        ends = self.consumer.end_offsets(self.parts)
        last = time.monotonic()
        while any(self.consumer.position(tp) < end for tp, end in ends.items()):
            batch = self.consumer.poll(timeout_ms=1000, max_records=50_000)
            assert batch or time.monotonic() - last < quiet_s, f"{self.topic}: no records for {quiet_s:g} s"
            last = time.monotonic() if batch else last
            for records in batch.values():
                for rec in records:
                    self._take(rec)
        return self

    def _take(self, rec) -> None:
        where = f"{self.topic}/{rec.partition}@{rec.offset}"
        assert len(rec.value) <= LIMIT, f"{where}: {len(rec.value)} bytes"
        headers = list(rec.headers or [])
        is_chunk = any(k == CHUNK for k, _ in headers)
        chunks = self.chunks.get(rec.partition, 0) + is_chunk
        value = self.assemblers.setdefault(rec.partition, Reassembler()).push(rec.value, headers, where)
        self.chunks[rec.partition] = chunks if value is None else 0
        if value is not None:
            message = json.loads(value)
            self.messages[message["protocol"]["type"]].append((message, chunks if is_chunk else 0))

    def of(self, protocol: str = "data_increment_data") -> tuple[list[dict], dict[int, int]]:
        out, chunked = [], {}
        for message, chunks in self.messages[protocol]:
            names = [f["name"] for f in message["schema"]["fields"]]
            tuples = [dict(zip(names, t["tuple"], strict=True)) for t in message["payload"]]
            out.extend(tuples)
            chunked.update((int(t["id"]), chunks) for t in tuples)
        return out, chunked

    def close(self) -> None:
        self.consumer.close()


def _wait_for(reader: ResultReader, ids: set[int], stages: Stages, timeout: float) -> list[dict]:
    """The result tuples once every id of ``ids`` has one (the stages must stay alive meanwhile)."""

    def arrived() -> list[dict] | None:
        tuples, _ = reader.read().of()
        return tuples if ids <= {int(t["id"]) for t in tuples} else None

    return wait_until(arrived, timeout, f"ids {sorted(ids)} in {reader.topic}", alive=[stages], interval=0.5)


@pytest.mark.timeout(1800)
def test_1_5_and_30_mb_blobs_are_delivered_and_a_pull_reconciles_to_the_source(tmp_path, source):
    database = f"dbus_test_{uuid.uuid4().hex[:12]}"
    writer = mysql.connect(source.mysql, as_writer=True)
    with writer.cursor() as cur:
        cur.execute(f"CREATE DATABASE `{database}`")
        cur.execute(f"USE `{database}`")
        cur.execute(DDL)
    env = make_pipeline_env(tmp_path, database)
    raw = yaml.safe_load(env.cfg_path.read_text())
    raw["endpoints"]["kafka"]["max_message_bytes"] = LIMIT
    raw["sources"][env.ds]["extractor"]["max_record_bytes"] = 5_500_000
    env.cfg_path.write_text(yaml.safe_dump(raw))
    env.cfg = load_config(env.cfg_path)
    stages = Stages(env.cfg, env.ds, tmp_path / "stage-logs")
    topic = env.cfg.source(env.ds).topics.name("result", env.ds, database, "files")
    reader = ResultReader(env.cfg, topic)
    try:
        for stage in ("extractor", "dispatcher", "appender", "fullpuller"):  # the last idle until its pull
            stages.start(stage)
        stages.wait_ready("extractor", "dispatcher", "appender")
        for i, size in SIZES.items():
            _insert(writer, i, size)
        _insert(writer, 4, 10)  # a normal row after them
        tuples = _wait_for(reader, set(SIZES) | {4}, stages, 600)
        got = {int(t["id"]): t for t in tuples}
        for i, size in SIZES.items():
            data = base64.b64decode(got[i]["data"])
            assert len(data) == size and data == _blob(i, size), f"row {i}: {len(data)} bytes"
        assert base64.b64decode(got[4]["data"]) == _blob(4, 10)
        _, chunked = reader.read().of()
        print(f"\nresult topic: {len(tuples)} tuples; chunks per id: {chunked}")
        assert chunked[1] == 0 and chunked[4] == 0  # 1.33 MB and a few bytes: whole records
        assert chunked[2] == 2  # 6.7 MB: the JVM text path's message, in 2 chunks
        assert chunked[3] == -(-40 * MB // (LIMIT - 16_384))  # 40 MB: the Python path's, in 7 chunks

        _insert(writer, 5, 2 * MB)  # the appender goes on: later rows, large and small, arrive
        _insert(writer, 6, None)
        tuples = _wait_for(reader, {5, 6}, stages, 300)
        assert base64.b64decode({int(t["id"]): t for t in tuples}[5]["data"]) == _blob(5, 2 * MB)

        stages.wait_ready("fullpuller")
        out = run_dbus(
            env.cfg_path,
            "fullpull",
            "request",
            "--source",
            env.ds,
            "--table",
            f"{database}.files",
            "--follow",
            "--wait",
            "600",
        )
        assert out.returncode == 0, out.stdout + out.stderr
        pulled, chunked = reader.read().of("data_initial_data")
        assert sorted(int(t["id"]) for t in pulled) == [1, 2, 3, 4, 5, 6]
        assert chunked[2] == 2 and chunked[3] == 7 and chunked[1] == 0
        assert base64.b64decode({int(t["id"]): t for t in pulled}[3]["data"]) == _blob(3, SIZES[3])
        stages.check_alive()
        with ThreadPoolExecutor(4) as pool:  # free the cores for the checks, the four stopping at once
            list(pool.map(stages.stop, ("fullpuller", "appender", "dispatcher", "extractor")))

        snapshot = tmp_path / "snapshot"
        out = run_dbus(
            env.cfg_path,
            "reconcile",
            "--source",
            env.ds,
            "--table",
            f"{database}.files",
            "--out",
            str(snapshot),
        )
        assert out.returncode == 0, out.stdout + out.stderr
        print(f"reconcile: {out.stdout.strip().splitlines()[-1]}")
        out = run_dbus(
            env.cfg_path,
            "verify",
            "--source",
            env.ds,
            "--table",
            f"{database}.files",
            "--snapshot",
            str(snapshot),
        )
        print(out.stdout)
        assert out.returncode == 0 and "equal, 0 differences" in out.stdout, out.stdout + out.stderr
        with writer.cursor() as cur:  # verify can fail: one byte of the 30 MB value changed at the source
            cur.execute("UPDATE files SET data = CONCAT(LEFT(data, LENGTH(data) - 1), 'x') WHERE id = 3")
        out = run_dbus(
            env.cfg_path,
            "verify",
            "--source",
            env.ds,
            "--table",
            f"{database}.files",
            "--snapshot",
            str(snapshot),
        )
        assert out.returncode == 1, out.stdout + out.stderr
    finally:
        reader.close()
        cleanup_fullpull(FullPullEnv(env, writer, stages))


def test_reconcile_joins_chunked_records_and_verify_finds_no_difference(
    spark, cfg, writer_db, new_topic, tmp_path
):
    """In process: UMS records written the way the appender writes them (the large one as chunks, another
    record between its chunks) -> reconcile -> verify, 0 differences."""
    db, name = writer_db
    with db.cursor() as cur:
        cur.execute(DDL)
    columns = (
        ColumnSpec("id", "int(11)", False),
        ColumnSpec("name", "varchar(40)", False),
        ColumnSpec("data", "longblob"),
    )
    ns = Namespace("mysql", "demo", name, "files", 0)
    limit = 1 << 20  # a 1 MiB record limit: the 2 MB row's message is chunked
    records = []
    for i, size in enumerate((10, 2 * MB, 300_000), start=1):
        _insert(db, i, size)
        at = str(1_000_000_000 + i)
        values = (i, f"file {i}", _blob(i, size))
        row = DataRow(at, "2024-01-02 03:04:05.000", Op.INSERT, ums_uid(at, 0), values)
        for m in build_data_messages(ns, columns, [row], protocol=ProtocolType.DATA_INCREMENT_DATA):
            records.append(split(to_json(m).encode(), limit))
    other = [(b"{}", ())]  # a record of something else between the chunks
    stream = records[0] + [records[1][0]] + other + records[1][1:] + records[2]
    topic = new_topic(partitions=1)
    producer = kafka.producer(cfg.endpoints.kafka)
    for value, headers in stream:
        producer.send(topic, key=f"{name}.files".encode(), value=value, headers=list(headers))
    producer.flush()
    producer.close()
    assert len(records[1]) > 1

    out = str(tmp_path / "files.parquet")
    result = reconcile.run(spark, cfg, "demo", name, "files", out, topic=topic)
    assert result.rows == 3 and result.messages_read == 3
    snap = {r["id"]: r for r in pq.read_table(out).to_pylist()}
    assert base64.b64decode(snap[2]["data"]) == _blob(2, 2 * MB)
    parser = argparse.ArgumentParser()  # the options as `dbus verify` parses them
    parser.add_argument("--config")
    verify.add_arguments(parser)
    args = parser.parse_args(
        ["--config", str(cfg.path), "--source", "demo", "--table", f"{name}.files", "--snapshot", str(out)]
        + ["--shard-size", "100", "--workers", "1"]
    )
    assert verify.cli(args) == 0
