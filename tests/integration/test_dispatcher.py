"""The dispatcher on the real stack: a raw topic in, per-schema topics and the dead-letter topic out.

Records (ordinary rows and DDL of several tables, a chunked event, captured heartbeat inserts, a
heartbeat purge and garbage) are produced to a fresh first-level topic; ``dispatcher.main`` runs with
``--available-now`` in the session's Spark, twice (the second run after more records, from the
checkpoint). Each target topic must hold exactly the expected records: bytes and keys equal, in order
per key, nothing sent twice.
"""

from __future__ import annotations

import importlib.util
import json
import uuid
from collections import defaultdict
from pathlib import Path

import pytest
import yaml

from binlog import rawevent
from binlog.rawevent import RawEvent
from dbuslib import kafka
from dbuslib.config import load_config, raw_config
from dbuslib.deadletter import DeadLetter
from dispatcher import main as dispatcher_main
from dispatcher.routing import BAD_RECORD, CHUNKED_HEARTBEAT, Router, route

pytestmark = pytest.mark.integration

_RECORDS = Path(__file__).resolve().parents[1] / "unit" / "records.py"  # fixtures, not a test module
_spec = importlib.util.spec_from_file_location("unit_records", _RECORDS)
captured = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(captured)  # the heartbeat records captured from MariaDB (see that file)


CONTRACT = set(json.loads(DeadLetter("c", "e", "t", 0, 0, None, None, "s").to_json()))


def rows_record(schema: str, table: str, seq: int, body: bytes = b"tm-and-rows") -> bytes:
    h = {
        "kind": "rows",
        "source": "t",
        "server_id": 1,
        "file": "mariadb-bin.000001",
        "pos": seq,
        "next_pos": seq + 1,
        "ts": 1795356395,
        "schema": schema,
        "table": table,
        "event_type": 30,
        "crc": True,
        "tm_len": 3,
    }
    return rawevent.encode(RawEvent(header=h, body=body + seq.to_bytes(4, "big")))


def workload(start: int, n: int) -> list[tuple[bytes, bytes]]:
    """(key, value) records: tables of two schemas, a DDL, a chunked event, heartbeats and garbage."""
    tables = [("shop", "orders"), ("shop", "customers"), ("crm", "leads")]
    out = []
    for i in range(start, start + n):
        schema, table = tables[i % len(tables)]
        out.append((f"{schema}.{table}".encode(), rows_record(schema, table, i)))
    ddl = RawEvent(
        header={
            "kind": "ddl",
            "file": "f.000001",
            "pos": start,
            "next_pos": 1,
            "ts": 1,
            "schema": "crm",
            "table": "leads",
            "sql": "ALTER TABLE leads ADD c INT",
            "ddl": "ALTER",
        }
    )
    out.insert(n // 2, (b"crm.leads", rawevent.encode(ddl)))
    big = rawevent.decode(rows_record("shop", "orders", start + n, body=bytes(range(256)) * 40))
    out += [(b"shop.orders", rawevent.encode(c)) for c in rawevent.split(big, 2000)]
    hb_key = f"{captured.HB_DB}.db_heartbeat_monitor".encode()
    heartbeats = (captured.HEARTBEAT_ONE, captured.HEARTBEAT_THREE, captured.HEARTBEAT_DELETE)
    out += [(hb_key, v) for v in heartbeats]
    chunked_hb = rawevent.split(rawevent.decode(captured.HEARTBEAT_THREE), 400)
    out += [(hb_key, rawevent.encode(c)) for c in chunked_hb]
    out += [
        (b"shop.orders", b"not a raw event " + str(start).encode()),
        (None, b"DBR\x01\x00\x00\x00\x05{bad"),
    ]
    return out


def produce(endpoint, topic: str, records: list[tuple[bytes | None, bytes]]) -> None:
    producer = kafka.producer(endpoint)
    for key, value in records:
        producer.send(topic, key=key, value=value)
    producer.flush()
    producer.close()


def read_all(endpoint, topic: str) -> list[tuple[int, bytes | None, bytes]]:
    """Every record now in ``topic``: (partition, key, value) in offset order per partition."""
    return [(r.partition, r.key, r.value) for r in kafka.read_range(endpoint, [topic])]


def expected_by_topic(router: Router, records) -> dict[str, list[tuple[bytes | None, bytes | str]]]:
    """What routing.route says each topic gets, in produce order; dead letters as their reason."""
    out: dict[str, list] = defaultdict(list)
    for key, value in records:
        for r in route(router, value, key):
            out[r.topic].append((key, r.code if r.dead else value))
    return out


def per_key(records) -> dict[bytes | None, list]:
    out: dict[bytes | None, list] = defaultdict(list)
    for key, value in records:
        out[key].append(value)
    return out


def as_expected(got: list[tuple[int, bytes | None, bytes]], dead: bool) -> list[tuple]:
    if not dead:
        return [(k, v) for _, k, v in got]
    return [(k, json.loads(v)["code"]) for _, k, v in got]


@pytest.fixture
def dispatcher_env(tmp_path, kafka_up, spark):
    """A config with a fresh source ``pytest_dispatcher_<hex>`` whose heartbeat table is the captured one."""
    ds = f"pytest_dispatcher_{uuid.uuid4().hex[:8]}"
    active = load_config()  # $DBUS_CONFIG, else conf/dbus.yaml
    raw = raw_config(active.path)
    demo = raw["sources"]["demo"]
    demo["heartbeat"]["schema"] = captured.HB_DB
    raw["sources"] = {ds: demo}
    raw["spark"]["jars_file"] = str(active.resolve(active.spark.jars_file))  # the default's too
    raw["spark"]["checkpoint_root"] = str(tmp_path / "checkpoints")
    path = tmp_path / "dbus.yaml"
    path.write_text(yaml.safe_dump(raw))
    kafka.ensure_topics(kafka_up, [ds], partitions=2)
    yield ds, path
    admin = kafka.admin(kafka_up)
    try:
        mine = [t for t in admin.list_topics() if t == ds or t.startswith(f"{ds}.")]
    finally:
        admin.close()
    kafka.delete_topics(kafka_up, mine)


def run_dispatcher(path: Path, ds: str) -> None:
    code = dispatcher_main.main(
        ["--config", str(path), "--source", ds, "--available-now", "--max-offsets-per-trigger", "40"]
    )
    assert code == 0


def assert_topics_hold(endpoint, router: Router, records) -> None:
    expected = expected_by_topic(router, records)
    for topic, want in expected.items():
        got = read_all(endpoint, topic)
        have = as_expected(got, dead=topic == router.dead_letter)
        assert sorted(have, key=repr) == sorted(want, key=repr), f"{topic}: exactly the records routed to it"
        assert per_key(have) == per_key(want), f"{topic}: each key's records in order"
        partitions_of_key = defaultdict(set)
        for partition, key, _ in got:
            partitions_of_key[key].add(partition)
        assert all(len(p) == 1 for p in partitions_of_key.values()), f"{topic}: one partition per key"


def test_records_reach_their_schema_topics_and_a_restart_resumes(spark, kafka_up, dispatcher_env):
    ds, path = dispatcher_env
    router = Router(ds, "{ds}.{schema}", f"{ds}.dlq", captured.HB_DB, "db_heartbeat_monitor")
    first = workload(0, 120)
    produce(kafka_up, ds, first)
    run_dispatcher(path, ds)

    assert_topics_hold(kafka_up, router, first)
    shop = read_all(kafka_up, f"{ds}.shop")
    hb_key = f"{captured.HB_DB}.db_heartbeat_monitor".encode()
    assert [v for _, k, v in shop if k == hb_key] == [captured.HEARTBEAT_ONE, captured.HEARTBEAT_THREE]
    crm = read_all(kafka_up, f"{ds}.crm")
    assert [v for _, k, v in crm if k == hb_key] == [captured.HEARTBEAT_THREE]
    dead = [json.loads(v) for _, _, v in read_all(kafka_up, f"{ds}.dlq")]
    garbage = next(d for d in dead if d["code"] == BAD_RECORD and d["key"] == "shop.orders")
    # the demo source masks columns, and garbage may be any table's record: its bytes are withheld
    assert garbage["value_base64"] is None and garbage["withheld"]
    assert (garbage["topic"], garbage["partition"] in (0, 1)) == (ds, True)
    assert "bad magic" in garbage["error"]
    assert isinstance(garbage["offset"], int)
    assert sum(d["code"] == CHUNKED_HEARTBEAT for d in dead) > 1
    assert all(set(d) == CONTRACT and d["stage"] == "dispatcher" for d in dead)

    second = workload(1000, 60)
    produce(kafka_up, ds, second)
    run_dispatcher(path, ds)
    assert_topics_hold(kafka_up, router, first + second)


# ---------------------------------------------------------------- poison records, a running dispatcher


@pytest.mark.parametrize("trigger", ["microbatch", "realtime"])
def test_poison_records_become_dead_letters_with_coordinates_and_the_dispatcher_runs_on(
    tmp_path, kafka_up, trigger
):
    """A null value, garbage and a truncated raw record between good records, each batch written while a
    ``spark-submit`` dispatcher runs: the good ones reach the schema topic in order, each bad one is a
    dead letter naming its topic/partition/offset, and the dispatcher is still running afterwards. In
    real-time mode the bad ones take the Python sidecar, the good ones the JVM, in one partition's order."""
    from helpers import wait_until
    from pipeline_env import cleanup_pipeline, dispatcher_stage, make_pipeline_env, set_trigger

    env = make_pipeline_env(tmp_path, "poison_db", partitions=1)
    set_trigger(env, trigger, "dispatcher")
    stage = dispatcher_stage(env)
    endpoint = env.cfg.endpoints.kafka
    t = env.cfg.source(env.ds).topics
    schema_topic, dlq = t.name("schema", env.ds, "poison_db"), t.name("dead_letter", env.ds)
    key = b"poison_db.t"
    try:
        stage.start()
        good, bad = [], {}
        producer = kafka.producer(endpoint)
        for round_ in range(3):
            ok = [rows_record("poison_db", "t", 10 * round_ + i) for i in range(4)]
            poison = [None, b"garbage \x00\xff" + bytes([round_]), ok[0][: 20 + 7 * round_]][round_]
            for value in (ok[0], ok[1], poison, ok[2], ok[3]):
                meta = producer.send(env.ds, key=key, value=value).get(timeout=60)
                if value is poison:
                    bad[meta.offset] = value
            producer.flush()
            good += ok
            n = len(good)
            wait_until(
                lambda n=n: len(read_all(endpoint, schema_topic)) >= n,
                300,
                f"round {round_}: good records in {schema_topic}",
                alive=[stage],
            )
        producer.close()
        wait_until(lambda: len(read_all(endpoint, dlq)) >= len(bad), 120, "dead letters", alive=[stage])
        assert [v for _, _, v in read_all(endpoint, schema_topic)] == good, "the good ones, in order, once"
        letters = [json.loads(v) for _, _, v in read_all(endpoint, dlq)]
        assert all(set(d) == CONTRACT for d in letters)
        got = {d["offset"]: DeadLetter.from_json(json.dumps(d)) for d in letters}
        assert sorted(got) == sorted(bad), "one dead letter per poison record, at its offset"
        for offset, value in bad.items():
            d = got[offset]
            want = (BAD_RECORD, "dispatcher", env.ds, 0, key)
            assert (d.code, d.stage, d.topic, d.partition, d.key) == want
            assert (d.value, d.withheld) == (value, "")  # the source masks nothing: the record is kept
        assert "null value" in got[min(bad)].error and "truncated" in got[max(bad)].error
        stage.assert_alive()
    finally:
        stage.kill()
        cleanup_pipeline(env)
