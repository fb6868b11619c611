"""Heartbeats through the whole pipeline on the real stack (issue #6): extractor, dispatcher, appender.

A throwaway source captures the test's database and a heartbeat table of its own, in a second database
(``<db>_hb``, the source's ``heartbeat.schema``), so no other test or demo shares its rows. The
extractor runs; the dispatcher and the appender run as ``spark-submit`` processes (their stage-metrics
listeners included). Rows are written to ``orders``, then heartbeat rows are inserted by hand: one for
``orders`` and one for ``quiet`` (a table never written), a garbage PACKET and a table that does not
exist. Checked:

- ``orders``' result topic holds a ``data_increment_heartbeat`` after the table's data, same key and
  partition, the ``ums_key`` header of spec 1.12; ``quiet`` gets one under version 0;
- InfluxDB holds ``dbus_heartbeat`` points for both (latency, ``rows`` = the 5 row changes of orders)
  and ``dbus_stage`` points of both stages;
- the garbage row and the unknown table are in ``<ds>.dlq`` with their reasons;
- the stages still run.
"""

from __future__ import annotations

import json
import time
import urllib.parse
import urllib.request

import pytest
import yaml
from helpers import wait_until
from pipeline_env import (
    appender_stage,
    cleanup_pipeline,
    dispatcher_stage,
    make_pipeline_env,
    read_records,
    set_trigger,
)

from dbuslib import influx, kafka, topics
from dbuslib.config import load_config
from dbuslib.deadletter import DeadLetter

pytestmark = pytest.mark.integration

HB_TABLE = "db_heartbeat_monitor"


def heartbeat_source(env, hb_schema: str) -> None:
    """Points the env's source at the heartbeat table in ``hb_schema`` and captures it."""
    raw = yaml.safe_load(env.cfg_path.read_text())
    src = raw["sources"][env.ds]
    src["capture"]["include"] = [f"{env.database}.*", f"{hb_schema}.{HB_TABLE}"]
    src["heartbeat"] = {**src.get("heartbeat", {}), "schema": hb_schema}
    env.cfg_path.write_text(yaml.safe_dump(raw))
    env.cfg = load_config(env.cfg_path)
    s = env.cfg.source(env.ds)
    kafka.ensure_topics(
        env.cfg.endpoints.kafka, topics.source_topics(env.ds, s), partitions=s.topics.partitions
    )


def packet(ds: str, schema: str, table: str, time_ms: int) -> str:
    return json.dumps(
        {
            "node": f"/DBus/HeartBeat/Monitor/{ds}/{schema}/{table}/0",
            "time": time_ms,
            "type": "checkpoint",
            "txTime": time_ms - 5,
        },
        separators=(",", ":"),
    )


def beat(cur, hb_schema: str, *rows: tuple) -> None:
    cur.execute(
        f"INSERT INTO `{hb_schema}`.{HB_TABLE} (DS_NAME, SCHEMA_NAME, TABLE_NAME, PACKET, CREATE_TIME, "
        "UPDATE_TIME) VALUES " + ",".join(["(%s, %s, %s, %s, NOW(), NOW())"] * len(rows)),
        [v for row in rows for v in row],
    )


def flux(cfg, measurement: str, ds: str) -> list[dict]:
    return influx.query(
        cfg.endpoints.influxdb,
        f'from(bucket:"{cfg.endpoints.influxdb.bucket}") |> range(start:-1h) '
        f'|> filter(fn:(r) => r._measurement == "{measurement}" and r.ds == "{ds}")',
    )


def drop_series(cfg, ds: str) -> None:
    """InfluxQL on /query: the throwaway source's points go with it."""
    db = cfg.endpoints.influxdb.bucket.split("/")[0]
    q = f"DROP SERIES FROM /^dbus_/ WHERE \"ds\" = '{ds}'"
    body = urllib.parse.urlencode({"db": db, "q": q}).encode()
    urllib.request.urlopen(
        urllib.request.Request(f"{cfg.endpoints.influxdb.url}/query", data=body), timeout=10
    )


def test_heartbeats_reach_the_result_topic_influxdb_and_the_dead_letter_topic(writer_db, tmp_path, kafka_up):
    db, name = writer_db
    hb_schema = f"{name}_hb"
    env = make_pipeline_env(tmp_path, name, partitions=1)
    # dbus_stage and dbus_heartbeat_bad points come at batch ends (300 s by default): 5 s batches, so the
    # waits for them below end within 5 s of the data; what the points hold does not depend on the length
    set_trigger(env, "realtime", checkpoint_s=5)
    heartbeat_source(env, hb_schema)
    dispatcher, appender = dispatcher_stage(env), appender_stage(env)
    src = env.cfg.source(env.ds)
    result, dlq = src.topics.name("result", env.ds, name), src.topics.name("dead_letter", env.ds)
    try:
        with db.cursor() as cur:
            cur.execute("CREATE TABLE orders (id INT PRIMARY KEY, v INT NOT NULL)")
            cur.execute("CREATE TABLE quiet (id INT PRIMARY KEY)")
            cur.execute(f"CREATE DATABASE `{hb_schema}`")
            cur.execute(
                f"CREATE TABLE `{hb_schema}`.{HB_TABLE} (ID bigint auto_increment PRIMARY KEY, "
                "DS_NAME varchar(64), SCHEMA_NAME varchar(64), TABLE_NAME varchar(64), PACKET varchar(256), "
                "CREATE_TIME datetime, UPDATE_TIME datetime)"
            )
        env.spawn()
        dispatcher.start()
        appender.start()
        with db.cursor() as cur:
            cur.execute("INSERT INTO orders VALUES (1, 0), (2, 0), (3, 0)")
            cur.execute("UPDATE orders SET v = 1 WHERE id IN (1, 2)")
            sent_ms = int(time.time() * 1000)
            beat(
                cur,
                hb_schema,
                (env.ds, name, "orders", packet(env.ds, name, "orders", sent_ms)),
                (env.ds, name, "quiet", packet(env.ds, name, "quiet", sent_ms)),
            )
            beat(cur, hb_schema, (env.ds, name, "orders", "{not json"))
            beat(cur, hb_schema, (env.ds, name, "nosuch", packet(env.ds, name, "nosuch", sent_ms)))
            cur.execute(f"DELETE FROM `{hb_schema}`.{HB_TABLE} WHERE ID < 2")  # the writer's purge: nothing

        def heartbeats():
            out = [(r, json.loads(r[3])) for r in read_records(kafka_up, result)]
            return (
                out if sum(m["protocol"]["type"] == "data_increment_heartbeat" for _, m in out) >= 2 else None
            )

        out = wait_until(heartbeats, 240, f"two heartbeats in {result}", alive=(dispatcher, appender))
        kinds = [(m["protocol"]["type"], m["schema"]["namespace"].split(".")[3]) for _, m in out]
        assert kinds == [("data_increment_data", "orders")] * 2 + [
            ("data_increment_heartbeat", "orders"),
            ("data_increment_heartbeat", "quiet"),
        ]
        (partition, _, key, _), hb = out[2]
        assert key == f"{name}.orders".encode() and partition == out[0][0][0]
        assert hb["schema"]["namespace"] == f"mysql.{env.ds}.{name}.orders.0.0.0"
        assert [f["name"] for f in hb["schema"]["fields"]] == ["ums_id_", "ums_ts_"]
        assert int(hb["payload"][0]["tuple"][0]) > int(
            out[1][1]["payload"][0]["tuple"][0]
        )  # after the update
        headers = dict(read_records_headers(kafka_up, result)[2])
        assert (
            headers["ums_key"]
            == (
                f"data_increment_heartbeat.mysql.{env.ds}.{name}.orders.0.0.0."
                f"{sent_ms}|{sent_ms - 5}|ok|{env.ds}.wh_placeholder"
            ).encode()
        )
        assert out[3][1]["schema"]["namespace"] == f"mysql.{env.ds}.{name}.quiet.0.0.0"

        def letters():
            got = [DeadLetter.from_json(r[3]) for r in read_records(kafka_up, dlq)]
            return got if len(got) >= 2 else None

        got = wait_until(letters, 60, f"two dead letters in {dlq}", alive=(dispatcher, appender))
        assert sorted(d.code for d in got) == ["APPENDER_BAD_HEARTBEAT", "APPENDER_HEARTBEAT_UNKNOWN_TABLE"]
        assert all(d.stage == "appender" and d.topic == src.topics.name("schema", env.ds, name) for d in got)
        assert any("PACKET is not JSON" in d.error for d in got) and any("nosuch" in d.error for d in got)

        def points():
            rows = flux(env.cfg, "dbus_heartbeat", env.ds)
            return rows if {r["table"] for r in rows} >= {"orders", "quiet"} else None

        figures = {
            (r["table"], r["_field"]): r["_value"] for r in wait_until(points, 60, "dbus_heartbeat points")
        }
        print(f"\nheartbeat figures: {figures}")
        assert figures[("orders", "rows")] == 5 and figures[("quiet", "rows")] == 0  # 3 inserts, 2 updates
        assert 0 < figures[("orders", "latency_ms")] < 240_000 and isinstance(
            figures[("orders", "latency_ms")], float
        )
        assert figures[("orders", "packet_ms")] == sent_ms and figures[("orders", "tx_ms")] == sent_ms - 5

        def bad_points():  # each batch's counts are written at its end: the two may come in two batches
            rows = flux(env.cfg, "dbus_heartbeat_bad", env.ds)
            return rows if len({r["reason"] for r in rows}) >= 2 else None

        bad = wait_until(bad_points, 60, "both dbus_heartbeat_bad points", alive=(dispatcher, appender))
        assert {r["reason"]: r["_value"] for r in bad} == {
            "APPENDER_BAD_HEARTBEAT": 1,
            "APPENDER_HEARTBEAT_UNKNOWN_TABLE": 1,
        }

        def stages():
            rows = flux(env.cfg, "dbus_stage", env.ds)
            done = {r["stage"] for r in rows if r["_field"] == "input_rows" and r["_value"] > 0}
            return rows if done >= {"dispatcher", "appender"} else None

        rows = wait_until(stages, 60, "dbus_stage points of both stages", alive=(dispatcher, appender))
        assert {r["_field"] for r in rows} == {
            "input_rows",
            "rows_per_s",
            "batch_ms",
            "checkpoint_ms",
            "lag_records",
            "waiting",
        }
        assert {r["_value"] for r in rows if r["_field"] == "waiting"} == {0}  # local[n]: every task runs
        dispatcher.assert_alive()
        appender.assert_alive()
        assert len(read_records(kafka_up, result)) == 4  # the purge added nothing
    finally:
        cleanup_pipeline(env, [dispatcher, appender])
        with db.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS `{hb_schema}`")
        try:
            drop_series(env.cfg, env.ds)
        except OSError as e:
            print(f"could not drop the test's series: {e}")


def read_records_headers(endpoint, topic: str) -> list[list[tuple[str, bytes]]]:
    """The headers of every record now in ``topic``, in offset order."""
    return [list(r.headers or ()) for r in kafka.read_range(endpoint, [topic])]
