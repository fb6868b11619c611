"""The appender on the real stack: extractor output in, UMS out, garbage to the dead-letter topic."""

from __future__ import annotations

import json

import pytest

from appender import job
from dbuslib import kafka
from dbuslib.deadletter import DeadLetter

pytestmark = pytest.mark.integration


@pytest.fixture
def env(extractor_env):
    return extractor_env  # conftest.py: an extractor capturing only this test's database


def consume(endpoint, topic: str) -> list:
    """Every record of ``topic`` up to its end offsets now (the appender has stopped: nothing more comes)."""
    return kafka.read_range(endpoint, [topic])


def test_rows_become_ums_and_garbage_becomes_dead_letters(spark, env, writer_db, tmp_path):
    db, name = writer_db
    src = env.cfg.source(env.ds)
    result, dlq = src.topics.name("result", env.ds, name), src.topics.name("dead_letter", env.ds)
    kafka.ensure_topics(env.cfg.endpoints.kafka, [env.topic, result, dlq])
    with db.cursor() as cur:
        cur.execute("CREATE TABLE orders (id INT PRIMARY KEY, total DECIMAL(10,2), note VARCHAR(20))")
        cur.execute("INSERT INTO orders VALUES (1, 9.50, 'a'), (2, NULL, 'b')")
        cur.execute("UPDATE orders SET note = 'c' WHERE id = 1")
        cur.execute("DELETE FROM orders WHERE id = 2")
    env.spawn()
    env.records(lambda r: sum(x.event.kind == "rows" for x in r) >= 3, timeout=60)
    producer = kafka.producer(env.cfg.endpoints.kafka)
    producer.send(env.topic, key=b"x.y", value=b"garbage").get(30)
    producer.close()
    try:
        query = job.start(spark, env.cfg, env.ds, [env.topic], str(tmp_path / "ckpt"), available_now=True)
        query.awaitTermination(300)
        assert query.exception() is None
    finally:
        query.stop()

    messages = [json.loads(m.value) for m in consume(env.cfg.endpoints.kafka, result)]
    tuples = [t["tuple"] for m in messages for t in m["payload"]]
    assert [t[2] for t in tuples] == ["i", "i", "u", "d"]
    assert [t[4:] for t in tuples] == [[1, "9.50", "a"], [2, None, "b"], [1, "9.50", "c"], [2, None, "b"]]
    assert {m["schema"]["namespace"] for m in messages} == {f"mysql.{env.ds}.{name}.orders.0.0.0"}
    assert len({t[3] for t in tuples}) == 4, "ums_uid_ is unique"
    letters = [DeadLetter.from_json(m.value) for m in consume(env.cfg.endpoints.kafka, dlq)]
    assert [(d.code, d.value) for d in letters] == [("RAW_BAD_RECORD", b"garbage")]
