"""A masked table in a schema named with non-ASCII letters, through the whole pipeline (issue #12, item 6).

The database ``shöp_<hex>`` holds ``customers`` (``phone`` and ``email`` masked) and ``orders`` (not masked).
Kafka refuses ``ö`` in a topic name: the schema is escaped (``sh_x00f6p_<hex>``, dbuslib.topics.escape)
wherever it goes into a topic name. Rows are written while the extractor runs; then damaged copies of a
real ``customers`` record are written to ``<ds>`` (header cut: the dispatcher dead-letters it; body cut:
forwarded, the appender dead-letters it) with a keyless garbage record holding a clear value. The
dispatcher and the appender run in this process's Spark (``--available-now``), as in the order test.

Then: every topic of the source has a legal name, the rows arrive as UMS masked, and no clear value of a
masked column is in any topic but ``<ds>`` and ``<ds>.<schema>``: the test reads every record of every
other topic (keys, values, headers, and the Base64 ``value_base64`` of dead letters decoded) and greps.
"""

from __future__ import annotations

import base64
import json
import uuid

import pytest
import yaml
from pipeline_env import (
    cleanup_pipeline,
    ds_topics,
    make_pipeline_env,
    read_ums,
    run_appender_now,
    run_dispatcher_now,
)

from binlog import rawevent
from dbuslib import kafka, mysql
from dbuslib.config import load_config
from dbuslib.deadletter import UNATTRIBUTED, UNVERIFIED, DeadLetter
from dbuslib.topics import escape, topic_problem

pytestmark = pytest.mark.integration

ROWS = 12


def clear_values(tag: str) -> list[tuple[int, str, str]]:
    return [(i, f"+49-CLEAR{tag}-{i:03d}", f"clear{tag}.{i}@mail.example") for i in range(ROWS)]


def everything_in(record) -> bytes:
    """All bytes of a record a consumer sees, a dead letter's withheld-or-not value decoded."""
    parts = [record.key or b"", record.value or b""] + [v or b"" for _, v in record.headers or ()]
    try:
        letter = json.loads(record.value)
    except (ValueError, TypeError):
        letter = None
    if isinstance(letter, dict) and letter.get("value_base64"):
        parts.append(base64.b64decode(letter["value_base64"]))
    return b"\n".join(parts)


@pytest.fixture
def shoep_db(source):
    name = f"shöp_{uuid.uuid4().hex[:8]}"
    db = mysql.connect(source.mysql, as_writer=True)
    with db.cursor() as cur:
        cur.execute(f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4")
    db.select_db(name)
    yield db, name
    with db.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS `{name}`")
    db.close()


def test_masked_columns_of_a_non_ascii_schema_reach_no_topic_but_raw_and_schema(
    spark, shoep_db, tmp_path, kafka_up
):
    db, name = shoep_db
    env = make_pipeline_env(tmp_path, name)
    raw = yaml.safe_load(env.cfg_path.read_text())
    raw["sources"][env.ds]["masking"] = {
        f"{name}.customers": {
            "phone": {"type": "replace", "value": "N/A"},
            "email": {"type": "sha256", "salt": "pepper"},
        }
    }
    env.cfg_path.write_text(yaml.safe_dump(raw))
    env.cfg = load_config(env.cfg_path)
    src = env.cfg.source(env.ds)
    schema_topic, result = src.topics.name("schema", env.ds, name), src.topics.name("result", env.ds, name)
    assert schema_topic == f"{env.ds}.{escape(name)}" == f"{env.ds}.sh_x00f6p_{name[5:]}"
    tag = uuid.uuid4().hex[:6]
    clear = clear_values(tag)
    try:
        with db.cursor() as cur:
            cur.execute(
                "CREATE TABLE customers (id INT PRIMARY KEY, name VARCHAR(32), phone VARCHAR(32), "
                "email VARCHAR(64))"
            )
            cur.execute("CREATE TABLE orders (id INT PRIMARY KEY, customer INT, note VARCHAR(32))")
        env.spawn()
        with db.cursor() as cur:
            for i, phone, email in clear:
                cur.execute("INSERT INTO customers VALUES (%s, %s, %s, %s)", (i, f"name {i}", phone, email))
                cur.execute("INSERT INTO orders VALUES (%s, %s, %s)", (i, i, f"order {i}"))
            db.commit()
        key = f"{name}.customers".encode()
        env.records(
            lambda rs: sum(r.event.kind == "rows" and r.event.header.table == "orders" for r in rs) >= ROWS,
            timeout=180,
        )
        originals = [
            r
            for r in kafka.read_range(kafka_up, [env.ds])
            if r.key == key and rawevent.decode(r.value).kind == "rows"
        ]  # not the CREATE TABLE
        assert len(originals) == ROWS
        value = originals[-1].value
        assert clear[-1][1].encode() in value  # the raw record holds the clear value: the grep can fail
        producer = kafka.producer(kafka_up)
        damaged = {
            "header cut": producer.send(env.ds, key=key, value=value[:30]).get(60),
            "body cut": producer.send(env.ds, key=key, value=value[:-12]).get(60),
            "keyless garbage": producer.send(env.ds, key=None, value=b"junk " + clear[0][1].encode()).get(60),
        }
        producer.close()

        run_dispatcher_now(env)
        run_appender_now(spark, env.cfg_path, env.ds, tmp_path / "appender-ckpt")

        topics = ds_topics(env)
        assert result in topics and all(topic_problem(t) is None for t in topics), topics
        out = [o for o in read_ums(kafka_up, result) if o.kind == "data_increment_data"]
        customers = [dict(o.values()) for o in out if o.table == "customers"]
        assert sorted(int(c["id"]) for c in customers) == list(range(ROWS))
        assert {c["phone"] for c in customers} == {"N/A"}
        assert not {c["email"] for c in customers} & {e for _, _, e in clear}
        assert len([o for o in out if o.table == "orders"]) == ROWS

        leaks = []
        for topic in topics:
            if topic in (env.ds, schema_topic):
                continue
            for record in kafka.read_range(kafka_up, [topic]):
                seen = everything_in(record)
                leaks += [
                    (topic, record.offset, v) for _, p, e in clear for v in (p, e) if v.encode() in seen
                ]
        assert not leaks, f"clear values of masked columns outside {env.ds} and {schema_topic}: {leaks[:5]}"

        dlq = src.topics.name("dead_letter", env.ds)
        letters = {
            (d.stage, d.topic, d.offset): d
            for d in (DeadLetter.from_json(r.value) for r in kafka.read_range(kafka_up, [dlq]))
        }
        cut = letters[("dispatcher", env.ds, damaged["header cut"].offset)]
        assert (cut.value, cut.withheld, cut.key) == (None, UNVERIFIED, key)
        junk = letters[("dispatcher", env.ds, damaged["keyless garbage"].offset)]
        assert (junk.value, junk.withheld) == (None, UNATTRIBUTED)
        body = [d for d in letters.values() if d.stage == "appender" and d.topic == schema_topic]
        assert len(body) == 1 and body[0].value is None and body[0].withheld, body
    finally:
        cleanup_pipeline(env)
