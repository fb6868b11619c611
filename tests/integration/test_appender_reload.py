"""Reload on the real stack: a running appender (spark-submit of appender/main.py) takes a new masking rule
from `dbus reload` at its next micro-batch, without a restart, and the clear value never leaves it."""

from __future__ import annotations

import hashlib
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from extractor_env import REPO, cleanup, make_env
from helpers import wait_until

from appender import rules
from cli.main import main as dbus
from dbuslib import kafka, spark, zk
from dbuslib.config import load_config

pytestmark = pytest.mark.integration

CLEAR = ("5550001111", "5550002222", "5550003333")


def _rewrite(path: Path, change) -> None:
    raw = yaml.safe_load(path.read_text())
    change(next(iter(raw["sources"].values())))
    path.write_text(yaml.safe_dump(raw))


@pytest.fixture
def env(tmp_path, writer_db, kafka_up):
    e = make_env(tmp_path, writer_db[1])
    db = writer_db[1]

    def setup(src):
        src["masking"] = {f"{db}.people": {"phone": {"type": "replace", "value": "REDACTED"}}}
        src["topics"]["schema"] = "{ds}"  # no dispatcher here: the appender reads the first-level topic
        src["topics"]["partitions"] = 1
        # Its own replica id: another reader with the demo's server_id (a concurrent test) would cut it off.
        src["mysql"]["server_id"] = random.randint(100_000, 2**31)

    _rewrite(e.cfg_path, setup)
    e.cfg = load_config(e.cfg_path)
    yield e
    cleanup(e)
    src = e.cfg.source(e.ds)
    kafka.delete_topics(
        e.cfg.endpoints.kafka,
        [src.topics.name(k, e.ds, db) for k in ("result", "ctrl", "dead_letter", "data_shards", "callback")],
    )
    client = zk.client(e.cfg.endpoints.zookeeper)
    try:
        client.delete(zk.path(e.cfg.endpoints.zookeeper, "Appender", e.ds), recursive=True)
    finally:
        client.stop()
        client.close()


def _submit(env) -> subprocess.Popen:
    log = (env.logs / "appender.log").open("wb")
    return subprocess.Popen(
        [
            str(Path(sys.executable).parent / "spark-submit"),
            *spark.submit_args(env.cfg),
            str(REPO / "appender" / "main.py"),
            "--config",
            str(env.cfg_path),
            "--source",
            env.ds,
        ],
        cwd=REPO,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        env={**os.environ, "PYSPARK_PYTHON": sys.executable, "PYTHONUNBUFFERED": "1"},
    )


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)  # the group this test started: spark-submit, its JVM, workers
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def _generation(env) -> int:
    client = zk.client(env.cfg.endpoints.zookeeper)
    try:
        snap, _ = rules.read_snapshot(client, rules.node_path(env.cfg, env.ds))
        return snap.generation if snap else 0
    finally:
        client.stop()
        client.close()


def _rows_by_id(env, topic: str, want: set[int], proc, timeout: float = 240) -> tuple[dict, list[bytes]]:
    """Consume ``topic`` from the start until every id in ``want`` was seen: ({id: (phone, field)}, raw)."""
    consumer = kafka.consumer(
        env.cfg.endpoints.kafka,
        topic,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        group_id=None,
        consumer_timeout_ms=1000,
    )
    seen, raw = {}, []
    deadline = time.monotonic() + timeout
    try:
        while not want <= set(seen):
            assert proc.poll() is None, f"the appender exited; see {env.logs / 'appender.log'}"
            assert time.monotonic() < deadline, f"ids {want - set(seen)} not in {topic}; see {env.logs}"
            for m in consumer:
                raw.append(m.value)
                msg = json.loads(m.value)
                names = [f["name"] for f in msg["schema"]["fields"]]
                field = msg["schema"]["fields"][names.index("phone")]
                for t in msg["payload"]:
                    row = dict(zip(names, t["tuple"], strict=True))
                    seen[row["id"]] = (row["phone"], field)
    finally:
        consumer.close()
    return seen, raw


def _everything(env, topic: str) -> list[bytes]:
    consumer = kafka.consumer(
        env.cfg.endpoints.kafka,
        topic,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        group_id=None,
        consumer_timeout_ms=3000,
    )
    try:
        return [m.value for m in consumer]
    finally:
        consumer.close()


def _poison_the_control_topic(env) -> tuple[int, list[str]]:
    """Null, garbage, wrong types, a 2 MB value and huge numbers on <ds>_ctrl, most keyed as reloads; the last
    is a reload with id and a 5000-digit number. Returns its id (for the rejected reply) and the records'
    coordinates as the listener logs them."""
    from ums.control import ControlType, new_control_message, to_json

    key = b"APPENDER_RELOAD_CONFIG"
    ctrl = env.cfg.source(env.ds).topics.name("ctrl", env.ds)
    good = json.loads(
        to_json(new_control_message(ControlType.APPENDER_RELOAD_CONFIG, "pytest", {"ds": env.ds}))
    )
    last = good["id"] + 1
    huge = json.dumps({**good, "id": last, "payload": {"ds": env.ds, "n": 0}}).encode()
    records = [
        (key, None),
        (None, b"\x00 no key"),
        (key, b"\xff\xfe garbage"),
        (key, b"[1, 2]"),
        (key, json.dumps({**good, "payload": ["ds"]}).encode()),
        (key, json.dumps({**good, "id": "12"}).encode()),
        (key, b'{"id": ' + b"7" * 4400 + b"}"),
        (key, b'{"pad": "' + b"x" * 2_000_000 + b'"}'),
        (b"FULL_DATA_INDEPENDENT_PULL_REQ", None),
        (key, huge.replace(b'"n": 0', b'"n": ' + b"9" * 5000)),
    ]
    producer = kafka.producer(env.cfg.endpoints.kafka)
    try:
        metas = [producer.send(ctrl, key=k, value=v).get(30) for k, v in records]
    finally:
        producer.close()
    return last, [f"{ctrl}[{m.partition}]@{m.offset}" for m in metas]


def _wait_reply(env, request_id: int, timeout: float = 60) -> dict:
    client = zk.client(env.cfg.endpoints.zookeeper)
    try:
        return wait_until(
            lambda: (
                (reply := rules.read_reply(client, env.cfg, env.ds) or {}).get("request_id") == request_id
                and reply
            ),
            timeout,
            f"the reply to the reload {request_id}",
            interval=0.5,
        )
    finally:
        client.stop()
        client.close()


def test_reload_changes_a_rule_live(env, writer_db):
    db, name = writer_db
    src = env.cfg.source(env.ds)
    result, dlq = src.topics.name("result", env.ds, name), src.topics.name("dead_letter", env.ds)
    with db.cursor() as cur:
        cur.execute("CREATE TABLE people (id INT PRIMARY KEY, phone VARCHAR(20))")
        cur.execute(f"INSERT INTO people VALUES (1, '{CLEAR[0]}')")
    env.spawn()
    env.records(lambda r: any(x.event.kind == "rows" for x in r), timeout=60)

    proc = _submit(env)
    try:
        deadline = time.monotonic() + 180
        while _generation(env) < 1:  # the listener publishes once it sits at the end of <ds>_ctrl
            assert proc.poll() is None, f"the appender exited; see {env.logs / 'appender.log'}"
            assert time.monotonic() < deadline, f"no rules published; see {env.logs / 'appender.log'}"
            time.sleep(1)
        first = _generation(env)
        seen, _ = _rows_by_id(env, result, {1}, proc)
        assert seen[1][0] == "REDACTED" and seen[1][1]["encoded"] is True

        # A bad file: refused by the CLI, nothing is sent, the rules stay.
        good = env.cfg_path.read_text()
        _rewrite(env.cfg_path, lambda s: s["masking"][f"{name}.people"]["phone"].update(type="rot13"))
        assert dbus(["--config", str(env.cfg_path), "reload", "--source", env.ds]) == 2
        env.cfg_path.write_text(good)

        _rewrite(
            env.cfg_path, lambda s: s["masking"][f"{name}.people"].update(phone={"type": "md5", "salt": "s1"})
        )
        started = time.monotonic()
        assert dbus(["--config", str(env.cfg_path), "reload", "--source", env.ds, "--wait", "60"]) == 0
        assert _generation(env) == first + 1
        with db.cursor() as cur:
            cur.execute(f"INSERT INTO people VALUES (2, '{CLEAR[1]}')")
        seen, _ = _rows_by_id(env, result, {1, 2}, proc)
        print(f"reload -> new rule seen in {time.monotonic() - started:.1f}s")
        assert seen[1][0] == "REDACTED", "messages already written are not rewritten"
        assert seen[2][0] == hashlib.md5(f"{CLEAR[1]}s1".encode()).hexdigest()
        assert (seen[2][1]["type"], seen[2][1]["encoded"]) == ("string", True)

        # The appender itself refuses a file that went bad after the CLI checked it: the rules stay.
        from ums.control import ControlType, control_key, new_control_message, to_json

        good_md5 = env.cfg_path.read_text()
        _rewrite(
            env.cfg_path,
            lambda s: s["masking"][f"{name}.people"].update(
                phone={"type": "default"}, ums_id_={"type": "default"}
            ),
        )
        message = new_control_message(ControlType.APPENDER_RELOAD_CONFIG, "pytest", {"ds": env.ds})
        producer = kafka.producer(env.cfg.endpoints.kafka)
        producer.send(
            src.topics.name("ctrl", env.ds),
            key=control_key(message).encode(),
            value=to_json(message).encode(),
        ).get(30)
        producer.close()
        client = zk.client(env.cfg.endpoints.zookeeper)
        try:
            reply = wait_until(
                lambda: (
                    (r := rules.read_reply(client, env.cfg, env.ds) or {}).get("request_id") == message.id
                    and r
                ),
                60,
                "the reply to the reload",
                interval=0.5,
            )
        finally:
            client.stop()
            client.close()
        assert reply["status"] == "rejected" and "ums_id_" in reply["reason"]
        assert _generation(env) == first + 1
        with db.cursor() as cur:
            cur.execute(f"INSERT INTO people VALUES (3, '{CLEAR[2]}')")
        seen, _ = _rows_by_id(env, result, {1, 2, 3}, proc)
        assert seen[3][0] == hashlib.md5(f"{CLEAR[2]}s1".encode()).hexdigest()

        # Poison control records (issue 12): none stops the listener; a later `dbus reload` is applied.
        env.cfg_path.write_text(good_md5)
        last, where = _poison_the_control_topic(env)
        reply = _wait_reply(env, last)
        assert (reply["status"], reply["code"]) == ("rejected", "UMS_BAD_CONTROL"), reply
        assert "payload.n: a number of 5000 characters" in reply["reason"], reply
        assert dbus(["--config", str(env.cfg_path), "reload", "--source", env.ds, "--wait", "60"]) == 0
        assert _generation(env) == first + 2
        log = (env.logs / "appender.log").read_text(errors="replace")
        assert "could not be handled" not in log, log[-3000:]
        assert [w for w in where if f": {w}: " not in log] == [], (
            "each poison record is logged, by coordinates"
        )

        assert proc.poll() is None, "the appender never restarted"
        log = (env.logs / "appender.log").read_text(errors="replace")
        assert log.count("published at start-up") == 1, log[-3000:]
        for topic in (result, dlq):
            for value in _everything(env, topic):
                assert not any(c.encode() in value for c in CLEAR), (
                    f"a clear value in {topic}: {value[:300]!r}"
                )
    finally:
        _stop(proc)
