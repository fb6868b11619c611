"""No single record stops the appender: poison records on a per-schema topic, and a table named with a dot.

A null value, garbage and a cut copy of a real raw record are written between good records of the topic
the appender reads. The good rows before and after them arrive as UMS, each poison record is in the
dead-letter topic with its own topic/partition/offset, and the query ends cleanly. A table called
`t.dot` is delivered with its name escaped in the namespace (``t%2Edot``, docs/ums.md).
"""

from __future__ import annotations

import json

import pytest
from helpers import wait_until

from appender import job
from dbuslib import kafka
from dbuslib.deadletter import DeadLetter

pytestmark = pytest.mark.integration


@pytest.fixture
def env(extractor_env):
    return extractor_env  # conftest.py: an extractor capturing only this test's database


def wait_end(endpoint, topic: str, at_least: int, timeout: float = 120) -> int:
    def end() -> int:
        n = sum(kafka.end_offsets(endpoint, [topic]).values())
        return n if n >= at_least else 0

    return wait_until(end, timeout, f"{at_least} records in {topic}", interval=0.5)


def read_all(endpoint, topic: str) -> list:
    """Every record of ``topic`` up to its end offsets now."""
    return kafka.read_range(endpoint, [topic])


def test_poison_records_become_dead_letters_and_rows_around_them_arrive(spark, env, writer_db, tmp_path):
    db, name = writer_db
    endpoint = env.cfg.endpoints.kafka
    src = env.cfg.source(env.ds)
    result, dlq = src.topics.name("result", env.ds, name), src.topics.name("dead_letter", env.ds)
    kafka.ensure_topics(endpoint, [env.topic, result, dlq])
    with db.cursor() as cur:
        cur.execute("CREATE TABLE orders (id INT PRIMARY KEY, note VARCHAR(20))")
        cur.execute("CREATE TABLE `t.dot` (id INT PRIMARY KEY, note VARCHAR(20))")
        cur.execute("INSERT INTO orders VALUES (1, 'a')")
        cur.execute("INSERT INTO `t.dot` VALUES (1, 'x')")
    env.spawn()
    env.records(lambda r: sum(x.event.kind == "rows" for x in r) >= 2, timeout=90)
    first = next(m for m in read_all(endpoint, env.topic) if m.key == f"{name}.orders".encode())

    producer = kafka.producer(endpoint)
    poison = [(first.key, None), (first.key, first.value[: len(first.value) - 25]), (b"x.y", b"garbage")]
    offsets = [producer.send(env.topic, key=k, value=v, partition=0).get(30).offset for k, v in poison]
    producer.close()
    with db.cursor() as cur:
        cur.execute("INSERT INTO orders VALUES (2, 'b')")
        cur.execute("INSERT INTO `t.dot` VALUES (2, 'y')")
    wait_end(endpoint, env.topic, offsets[-1] + 3)  # both inserts are in after the poison

    query = job.start(spark, env.cfg, env.ds, [env.topic], str(tmp_path / "ckpt"), available_now=True)
    try:
        query.awaitTermination(300)
        assert query.exception() is None
    finally:
        query.stop()

    messages = [json.loads(m.value) for m in read_all(endpoint, result)]
    rows = sorted((m["schema"]["namespace"], t["tuple"][-1]) for m in messages for t in m["payload"])
    orders, dotted = f"mysql.{env.ds}.{name}.orders.0.0.0", f"mysql.{env.ds}.{name}.t%2Edot.0.0.0"
    assert rows == [(orders, "a"), (orders, "b"), (dotted, "x"), (dotted, "y")]
    assert {m.key for m in read_all(endpoint, result)} == {
        f"{name}.orders".encode(),
        f"{name}.t.dot".encode(),
    }

    letters = [DeadLetter.from_json(m.value) for m in read_all(endpoint, dlq)]
    assert sorted((d.topic, d.partition, d.offset) for d in letters) == [(env.topic, 0, o) for o in offsets]
    by_offset = {d.offset: d for d in letters}
    assert by_offset[offsets[0]].code == "RAW_BAD_RECORD" and "null value" in by_offset[offsets[0]].error
    assert by_offset[offsets[0]].value is None
    assert by_offset[offsets[1]].code in ("RAW_BAD_RECORD", "RAW_UNDECODABLE")
    assert by_offset[offsets[2]].value == b"garbage"
