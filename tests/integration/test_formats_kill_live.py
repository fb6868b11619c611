"""kill -9 of the appender while it writes a per-row format over six partitions (issue #30, acceptance 4).

A source with ``topics.partitions: 6`` and ``output: {format: <fmt>, topic: table}``: the extractor runs, a
writer changes two tables the whole time (inserts, updates, primary-key changes, deletes, in small
transactions), the dispatcher and the appender run as ``spark-submit`` processes in micro-batches, each in
its own process group (tests/integration/pipeline_env.py). While the appender's output grows its whole
group (Python driver, JVM, Python workers) is killed with SIGKILL, then started again; the writer goes
on, stops, and the stages catch up. The table topics are then read from their start and checked against
the binlog itself (read as a replica: every row change with its file, event position and row index):

- every record's change is the binlog's change at the position the record names (table, op, images);
- per key (topic and record key), the changes read in offset order, a repeat of a change already read
  (the same ``ums_uid_``: a micro-batch written again after the kill) left out, are exactly the binlog's
  changes of that key in binlog order (a key change is the old key's delete and the new key's create);
  a repeat is the same change (op, images, position) as the first;
- the number of distinct ``ums_uid_`` is the number of the binlog's row changes;
- the records applied per key in offset order give each table as ``SELECT`` reads it (0 differences).

Counts and duplicates are printed (run with ``-s``).
"""

from __future__ import annotations

import contextlib
import random
import threading
import time
import urllib.request
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import pytest
import yaml
from helpers import wait_until
from pipeline_env import (
    appender_stage,
    cleanup_pipeline,
    dispatcher_stage,
    make_pipeline_env,
    set_trigger,
)

from dbuslib import kafka, mysql, topics
from dbuslib.config import load_config
from dbuslib.registry import Registry
from ums.formats import UMS_UID_HEADER, decode

pytestmark = pytest.mark.integration

TABLES = ("orders", "items")
PARTITIONS = 6


def norm(value: Any) -> str | None:
    """One spelling for a binlog value and a UMS wire value."""
    return None if value is None else str(value)


def image(values: tuple[Any, ...] | dict[str, Any] | None) -> tuple[str | None, ...] | None:
    if values is None:
        return None
    return tuple(norm(v) for v in (values.values() if isinstance(values, dict) else values))


@dataclass(frozen=True)
class Truth:
    """A row change of the binlog: its place (``index`` in binlog order), table, op and images."""

    index: int
    table: str
    op: str  # c u d
    before: tuple[str | None, ...] | None
    after: tuple[str | None, ...] | None

    def keys(self) -> list[tuple[str, str]]:
        """The keys (table, id) the change writes a record to, in the order it writes them."""
        ids = [img[0] for img in (self.before, self.after) if img is not None]
        return [(self.table, i) for i in dict.fromkeys(ids)]  # type: ignore[misc]


def binlog(env, database: str) -> dict[tuple[str, int, int], Truth]:
    """(file, position, tuple index) -> the change, for every row change of ``database``: the position
    both the rows event's and its table-map event's, the index the UMS tuple's (``ums.ids.ums_uid``)."""
    from pymysqlreplication import BinLogStreamReader
    from pymysqlreplication.row_event import DeleteRowsEvent, TableMapEvent, UpdateRowsEvent, WriteRowsEvent

    src = env.cfg.source(env.ds)
    file, pos = src.extractor.start.rsplit(":", 1)
    stream = BinLogStreamReader(
        connection_settings=mysql.connection_settings(src.mysql),
        server_id=random.randint(900_000, 990_000),
        log_file=file,
        log_pos=int(pos),
        resume_stream=True,
        blocking=False,
        only_schemas=[database],
        only_events=[TableMapEvent, WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent],
        enable_logging=False,
    )
    out: dict[tuple[str, int, int], Truth] = {}
    index, table_map = 0, -1
    try:
        for e in stream:
            at = e.packet.log_pos - e.packet.event_size
            if isinstance(e, TableMapEvent):
                table_map = at
                continue
            for row, r in enumerate(e.rows):
                if isinstance(e, WriteRowsEvent):
                    t = Truth(index, e.table, "c", None, image(r["values"]))
                elif isinstance(e, UpdateRowsEvent):
                    t = Truth(index, e.table, "u", image(r["before_values"]), image(r["after_values"]))
                else:
                    t = Truth(index, e.table, "d", image(r["values"]), None)
                index += 1
                tuple_ = 2 * row + 1 if t.op == "u" else row  # UMS's tuple index: an update's b counts
                out[(stream.log_file, at, tuple_)] = out[(stream.log_file, table_map, tuple_)] = t
    finally:
        stream.close()
    return out


class Writer(threading.Thread):
    """Small transactions over both tables until told to stop (and at least ``minimum`` changes made):
    inserts, updates, a primary-key change now and then, deletes."""

    def __init__(self, db, minimum: int) -> None:
        super().__init__(daemon=True)
        self.db, self.minimum, self.stop = db, minimum, threading.Event()
        self.changes = 0
        self.error: Exception | None = None

    def run(self) -> None:
        rng = random.Random(30)
        live: dict[str, list[int]] = defaultdict(list)
        next_id = Counter({t: 1 for t in TABLES})
        try:
            with self.db.cursor() as cur:
                n = 0
                while not self.stop.is_set() or self.changes < self.minimum:
                    n += 1
                    cur.execute("BEGIN")
                    for t in TABLES:
                        ids = list(range(next_id[t], next_id[t] + rng.randint(1, 3)))
                        next_id[t] += len(ids)
                        values = ",".join(f"({i}, 0, 'row {i} of txn {n}', {i}.5)" for i in ids)
                        cur.execute(f"INSERT INTO {t} VALUES {values}")
                        live[t] += ids
                        self.changes += len(ids)
                        keys = ",".join(map(str, rng.sample(live[t], min(3, len(live[t])))))
                        cur.execute(f"UPDATE {t} SET v = v + 1, s = 'upd {n}' WHERE id IN ({keys})")
                        self.changes += cur.rowcount
                        if rng.random() < 0.15:  # a key change: the old key's delete, the new key's create
                            old = live[t].pop(rng.randrange(len(live[t])))
                            new = next_id[t]
                            next_id[t] += 1
                            cur.execute(f"UPDATE {t} SET id = {new}, s = 'was {old}' WHERE id = {old}")
                            live[t].append(new)
                            self.changes += cur.rowcount
                        if rng.random() < 0.3:
                            gone = live[t].pop(rng.randrange(len(live[t])))
                            cur.execute(f"DELETE FROM {t} WHERE id = {gone}")
                            self.changes += cur.rowcount
                    cur.execute("COMMIT")
                    time.sleep(0.2)  # the workload's pace (~50 row changes/s), not a wait
        except Exception as e:
            self.error = e


def source_rows(db, table: str) -> dict[str, tuple[str | None, ...]]:
    db.commit()  # a fresh snapshot
    with db.cursor() as cur:
        cur.execute(f"SELECT id, v, s, amt FROM {table}")
        rows = cur.fetchall()
    return {str(r[0]): tuple(norm(str(v) if isinstance(v, Decimal) else v) for v in r) for r in rows}


def per_row_env(tmp_path, database: str, fmt: str):
    env = make_pipeline_env(tmp_path, database, partitions=PARTITIONS)
    set_trigger(env, "microbatch")
    raw = yaml.safe_load(env.cfg_path.read_text())
    raw["sources"][env.ds]["output"] = {"format": fmt, "topic": "table"}
    env.cfg_path.write_text(yaml.safe_dump(raw))
    env.cfg = load_config(env.cfg_path)
    return env


@pytest.mark.parametrize("fmt", ["debezium-json", "avro"])
def test_kill_9_appender_keeps_every_keys_order(writer_db, tmp_path, kafka_up, fmt):
    db, name = writer_db
    env = per_row_env(tmp_path, name, fmt)
    src = env.cfg.source(env.ds)
    table_topics = [topics.result_topic(env.ds, src, name, t) for t in TABLES]
    dlq = src.topics.name("dead_letter", env.ds)
    registry = Registry.of(env.cfg) if fmt == "avro" else None
    schemas: Callable[[int], Any] | None = registry.schema if registry is not None else None
    dispatcher, appender = dispatcher_stage(env), appender_stage(env)
    writer = Writer(db, minimum=2000)
    t0 = time.monotonic()

    def written() -> int:  # records in the table topics (their end offsets)
        return sum(kafka.end_offsets(kafka_up, table_topics).values())

    try:
        with db.cursor() as cur:
            for t in TABLES:
                cur.execute(
                    f"CREATE TABLE {t} (id INT PRIMARY KEY, v INT NOT NULL, s VARCHAR(40), amt DECIMAL(12,2))"
                )
        env.spawn()
        dispatcher.start()
        appender.start()
        writer.start()
        first = wait_until(written, 240, "the appender's first records", alive=(dispatcher, appender))
        at = first + random.randint(100, 400)
        wait_until(lambda: written() >= at, 120, f"{at} records written", alive=(dispatcher, appender))
        before = written()
        wait_until(
            lambda: written() > before, 60, "the appender writes", interval=0.1, alive=(dispatcher, appender)
        )
        appender.kill()
        killed_at = written()
        print(
            f"\n{time.monotonic() - t0:.0f}s: appender killed "
            f"({killed_at} records out, {writer.changes} changes written)"
        )
        assert writer.is_alive() and writer.error is None, "the kill must happen while the workload runs"
        appender.start()
        meanwhile = writer.changes
        wait_until(lambda: writer.changes >= meanwhile + 250, 60, "250 changes written meanwhile")
        writer.stop.set()
        writer.join(120)
        assert writer.error is None, writer.error
        truth = binlog(env, name)
        changes = len({t.index for t in truth.values()})
        assert changes == writer.changes >= 2000

        def caught_up() -> list[Any] | None:
            records = kafka.read_range(kafka_up, table_topics)
            uids = {dict(r.headers)[UMS_UID_HEADER] for r in records if r.value is not None}
            return records if len(uids) >= changes else None

        records = wait_until(
            caught_up, 240, f"{changes} changes out", interval=3, alive=(dispatcher, appender)
        )
        print(f"{time.monotonic() - t0:.0f}s: caught up, {len(records)} records")
        # checked once every table has had its topic made (a table's topic may not exist yet at the kill)
        assert kafka.partition_count(kafka_up, table_topics) == PARTITIONS * len(TABLES)
        assert len({(r.topic, r.partition) for r in records}) > len(TABLES), "keys spread over partitions"

        # per key (topic, record key): its changes in offset order, a repeat of a ums_uid_ left out
        sequences: dict[tuple[str, bytes], list[int]] = defaultdict(list)
        first_of: dict[tuple[str, bytes, bytes], tuple] = {}
        states: dict[str, dict[bytes, tuple]] = {t: {} for t in table_topics}
        ids: dict[tuple[str, bytes], str | None] = {}  # (topic, record key) -> the id its changes carry
        repeats = 0
        for r in sorted(records, key=lambda r: (r.topic, r.partition, r.offset)):
            if r.value is None:  # a tombstone: after its key's delete
                states[r.topic].pop(r.key, None)
                continue
            change = decode(fmt, r.key, r.value, tuple(r.headers), schemas)
            assert change is not None
            at_ = (change.at.file, change.at.pos, change.at.row)
            assert at_ in truth, (
                f"{r.topic} partition {r.partition} offset {r.offset}: no binlog change at {at_}"
            )
            t = truth[at_]
            before, after = image(change.before), image(change.after)
            if t.op == "u" and t.before is not None and t.after is not None and t.before[0] != t.after[0]:
                want = ("d", t.before, None) if change.op == "d" else ("c", None, t.after)
            else:
                want = (t.op, t.before, t.after)
            assert (r.topic.rsplit(".", 1)[-1], change.op, before, after) == (t.table, *want), (
                f"{r.topic} partition {r.partition} offset {r.offset}"
            )
            uid = dict(r.headers)[UMS_UID_HEADER]
            content = (change.op, before, after, at_)
            seen = first_of.setdefault((r.topic, r.key, uid), content)
            if seen is not content:
                assert seen == content, f"{r.topic} offset {r.offset}: ums_uid_ {uid!r} with other content"
                repeats += 1
            else:
                sequences[(r.topic, r.key)].append(t.index)
                ids.setdefault((r.topic, r.key), (after or before or (None,))[0])
            if after is None:
                states[r.topic].pop(r.key, None)
            else:
                states[r.topic][r.key] = after

        # the binlog's changes of each key, in binlog order, against what each key's records say
        by_key: dict[tuple[str, str], list[int]] = defaultdict(list)
        for t in sorted(set(truth.values()), key=lambda t: t.index):
            for k in t.keys():
                by_key[k].append(t.index)
        got_by_key = {
            (topic.rsplit(".", 1)[-1], ids[(topic, key)]): seq for (topic, key), seq in sequences.items()
        }
        wrong = {k: (by_key[k], got_by_key.get(k)) for k in by_key if by_key[k] != got_by_key.get(k)}
        assert not wrong, (
            f"{len(wrong)} of {len(by_key)} keys out of order or incomplete: {list(wrong.items())[:3]}"
        )
        assert set(got_by_key) == set(by_key)
        assert len({u for (_, _, u) in first_of}) == changes

        for t, topic in zip(TABLES, table_topics, strict=True):
            want_rows = source_rows(db, t)
            got_rows = {after[0]: after for after in states[topic].values()}
            diff = [k for k in set(want_rows) | set(got_rows) if want_rows.get(k) != got_rows.get(k)]
            assert not diff, f"{t}: {len(diff)} rows differ, e.g. id {diff[0]}"
        assert kafka.read_range(kafka_up, [dlq]) == [], "no dead letters"
        print(
            f"{fmt}, 6 partitions, kill -9 appender x1: {changes} row changes over {len(by_key)} keys, "
            f"{len(records)} records ({repeats} repeats of a change); every key in order, final tables "
            f"equal; {time.monotonic() - t0:.0f}s"
        )
    finally:
        writer.stop.set()
        cleanup_pipeline(env, [dispatcher, appender])
        if registry is not None:
            registry.close()
            for topic in table_topics:
                for subject in (f"{topic}-key", f"{topic}-value"):
                    with contextlib.suppress(OSError):
                        urllib.request.urlopen(
                            urllib.request.Request(
                                f"{registry.url.rstrip('/')}/subjects/{subject}", method="DELETE"
                            )
                        )
