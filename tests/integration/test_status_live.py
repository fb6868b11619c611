"""``dbus status --json`` reports exactly the figures written for a fresh source: ZooKeeper nodes (leader,
epoch, committed position, full pulls, open alerts) and InfluxDB points (extractor, stages, heartbeats)."""

from __future__ import annotations

import argparse
import copy
import json
import time
import uuid
from pathlib import Path

import pytest
import yaml
from dashboards import as_server_type, influxql, server_types

from cli import status
from dbuslib import influx, mysql, zk
from dbuslib.config import load_config, raw_config
from extractor.leader import Leadership
from extractor.loop import position_store
from extractor.position import Position
from fullpuller.progress import Progress, ProgressStore, ShardState

PULL_ID = 1704164645123
IDENTITY = "pytest-status:4242"


def _config_with_source(cfg, ds: str, tmp_path) -> str:
    """A copy of the configuration with source ``ds`` (demo's settings, its own position mirror)."""
    raw = raw_config(cfg.path)
    raw.setdefault("spark", {})
    raw["spark"]["jars_file"] = str(cfg.resolve(cfg.spark.jars_file))
    raw["spark"]["checkpoint_root"] = str(cfg.resolve(Path(cfg.spark.checkpoint_root)))
    for name, src in raw["sources"].items():
        src.setdefault("extractor", {})["state_dir"] = str(cfg.resolve(cfg.source(name).extractor.state_dir))
    raw["sources"][ds] = copy.deepcopy(raw["sources"]["demo"])
    raw["sources"][ds]["extractor"]["state_dir"] = str(tmp_path / "extractor")
    path = tmp_path / "dbus.yaml"
    path.write_text(yaml.safe_dump(raw))
    return str(path)


def _point(cfg, measurement: str, ds: str, tags: dict, fields: dict, at_s: float):
    from influxdb_client import Point, WritePrecision

    server = server_types(cfg, measurement)
    p = Point(measurement).tag("ds", ds).time(int(at_s * 1000), WritePrecision.MS)
    for k, v in tags.items():
        p = p.tag(k, v)
    for k, v in fields.items():
        p = p.field(k, as_server_type(measurement, k, v, server))
    return p


@pytest.fixture
def status_env(cfg, tmp_path):
    """Known nodes and points for a fresh source; yields (config path, ds, what was written)."""
    ds = f"pytest_st_{uuid.uuid4().hex[:8]}"
    config = _config_with_source(cfg, ds, tmp_path)
    scfg = load_config(config)
    client = zk.client(cfg.endpoints.zookeeper)
    leadership = Leadership(client, cfg.endpoints.zookeeper.root, ds, IDENTITY)
    now = time.time()
    try:
        epoch = leadership.acquire(timeout=10)
        db = mysql.connect(scfg.source(ds).mysql)
        try:
            end = mysql.binlog_end(db)
        finally:
            db.close()
        # a little behind the server's end, whatever other tests write meanwhile: the screen then shows the
        # measured lag, not "caught up" (0 bytes behind)
        committed = Position(end.file, max(4, end.pos - 100), end.gtid, int(now) - 3, epoch)
        position_store(scfg, ds, client).commit(committed)

        pulls = ProgressStore(client, zk.path(cfg.endpoints.zookeeper, "FullPuller", ds))
        running = Progress(
            PULL_ID, "shop", "orders", "pulling", TotalCount=10, TotalRows=1_000_000, StartSecs=now - 10
        )
        pulls.create(running)
        for i in range(4):
            pulls.report_shard(running, i, ShardState(100_000, "done"))
        pulls.report_shard(running, 4, ShardState(12_000, "pulling"))
        pulls.create(
            Progress(
                PULL_ID - 1,
                "shop",
                "items",
                "ending",
                TotalCount=1,
                TotalRows=5,
                StartSecs=now - 60,
                EndSecs=now - 50,
            )
        )
        alert = {
            "ds": ds,
            "schema": "shop",
            "table": "quiet",
            "kind": "stale",
            "since_ms": int(now - 300) * 1000,
            "notified_ms": int(now - 299) * 1000,
            "age_s": 900.0,
            "latency_s": None,
            "message": "no heartbeat from shop.quiet for 900 s",
        }
        client.create(
            zk.path(cfg.endpoints.zookeeper, "HeartBeat", ds, "alerts", "shop.quiet.stale"),
            json.dumps(alert).encode(),
            makepath=True,
        )

        times = {"extractor": now - 5, "dispatcher": now - 2, "orders": now - 30, "quiet": now - 900}
        influx.write(
            cfg.endpoints.influxdb,
            [
                _point(
                    cfg,
                    "dbus_extractor",
                    ds,
                    {},
                    {
                        "events_per_s": 50.0,
                        "records_per_s": 812.0,
                        "bytes_per_s": 1e5,
                        "lag_s": 2.5,
                        "committed_pos": end.pos,
                        "committed_file": end.file,
                    },
                    times["extractor"],
                ),
                _point(
                    cfg,
                    "dbus_stage",
                    ds,
                    {"stage": "dispatcher"},
                    {
                        "input_rows": 600,
                        "rows_per_s": 640.5,
                        "batch_ms": 210.0,
                        "lag_records": 12,
                        "waiting": 1,
                    },
                    times["dispatcher"],
                ),
                _point(
                    cfg,
                    "dbus_heartbeat",
                    ds,
                    {"schema": "shop", "table": "orders"},
                    {"latency_ms": 1234.5, "rows": 120, "packet_ms": 1, "tx_ms": 1},
                    times["orders"],
                ),
                _point(
                    cfg,
                    "dbus_heartbeat",
                    ds,
                    {"schema": "shop", "table": "quiet"},
                    {"latency_ms": 800.0, "rows": 0, "packet_ms": 1, "tx_ms": 1},
                    times["quiet"],
                ),
                # dead letters as the heartbeat monitor counts them: two checks of one table, one without a
                # table, and one older than the hour dbus status looks at
                *[
                    _point(
                        cfg,
                        "dbus_dead_letter",
                        ds,
                        tags,
                        {
                            "count": n,
                            "topic": topic,
                            "partition": 0,
                            "offset": off,
                            "dlq_partition": 0,
                            "dlq_offset": dlq,
                            "newest_ms": int((now - age) * 1000),
                        },
                        now - age,
                    )
                    for tags, n, topic, off, dlq, age in [
                        (
                            {
                                "stage": "appender",
                                "code": "RAW_UNDECODABLE",
                                "schema": "shop",
                                "table": "orders",
                            },
                            2,
                            f"{ds}.shop",
                            41,
                            5,
                            120,
                        ),
                        (
                            {
                                "stage": "appender",
                                "code": "RAW_UNDECODABLE",
                                "schema": "shop",
                                "table": "orders",
                            },
                            1,
                            f"{ds}.shop",
                            42,
                            6,
                            60,
                        ),
                        ({"stage": "dispatcher", "code": "RAW_BAD_RECORD"}, 4, ds, 7, 3, 300),
                        ({"stage": "dispatcher", "code": "RAW_BAD_RECORD"}, 9, ds, 1, 1, 7200),
                    ]
                ],
            ],
        )
        yield config, ds, {"epoch": epoch, "committed": committed, "alert": alert, "times": times}
    finally:
        leadership.release()
        for part in ("Extractor", "FullPuller", "HeartBeat"):
            client.delete(zk.path(cfg.endpoints.zookeeper, part, ds), recursive=True)
        client.stop()
        client.close()
        for measurement in ("dbus_extractor", "dbus_stage", "dbus_heartbeat", "dbus_dead_letter"):
            influxql(cfg, f'DROP SERIES FROM "{measurement}" WHERE "ds" = \'{ds}\'')


def _ms(value: float) -> float:
    """Ages are compared at the millisecond: InfluxDB keeps the points' times in ms here."""
    return round(value, 3)


def test_status_json_reports_exactly_the_written_figures(status_env, capsys):
    config, ds, w = status_env
    assert status.cli(argparse.Namespace(config=config, source=ds, json=True, window=10.0)) == 0
    snap = json.loads(capsys.readouterr().out)
    taken = snap["taken_at"]
    ages = {k: round(taken - int(t * 1000) / 1000, 3) for k, t in w["times"].items()}
    c = w["committed"]

    assert snap["errors"] == []
    ext = snap["extractor"]
    assert (ext["leader"], ext["epoch"]) == (IDENTITY, w["epoch"])
    assert (ext["committed_file"], ext["committed_pos"], ext["committed_gtid"]) == (c.file, c.pos, c.gtid)
    assert ext["behind_bytes"] is not None and ext["behind_bytes"] > 0  # other tests may write meanwhile
    assert ext["lag_s"] == 2.5
    assert abs(ext["metrics_age_s"] - ages["extractor"]) < 0.002
    assert abs(ext["position_lag_s"] - (taken - c.ts)) < 1.0  # admin.status rounds and reads its own clock

    stages = {s["stage"]: s for s in snap["stages"]}
    assert list(stages) == ["extractor", "dispatcher", "appender"]
    assert (stages["extractor"]["rows_per_s"], stages["dispatcher"]["rows_per_s"]) == (812.0, 640.5)
    assert (stages["dispatcher"]["lag_records"], stages["dispatcher"]["batch_ms"]) == (12, 210.0)
    assert stages["dispatcher"]["waiting"] is True
    assert stages["appender"] == {
        "stage": "appender",
        "rows_per_s": None,
        "lag_records": None,
        "batch_ms": None,
        "age_s": None,
        "waiting": False,
        "checkpoint_ms": 0.0,
    }

    beats = [(b["schema"], b["table"], b["latency_ms"], b["rows"]) for b in snap["heartbeats"]]
    assert beats == [("shop", "orders", 1234.5, 120), ("shop", "quiet", 800.0, 0)]
    for b in snap["heartbeats"]:
        assert abs(b["age_s"] - ages[b["table"]]) < 0.002, b

    assert [
        (
            p["id"],
            p["schema"],
            p["table"],
            p["status"],
            p["rows"],
            p["total_rows"],
            p["shards_done"],
            p["shards_total"],
        )
        for p in snap["fullpulls"]
    ] == [(PULL_ID, "shop", "orders", "pulling", 412_000, 1_000_000, 4, 10)]
    dlq = f"{ds}.dlq"
    assert [{k: v for k, v in d.items() if k != "age_s"} for d in snap["dead_letters"]] == [
        {
            "stage": "appender",
            "code": "RAW_UNDECODABLE",
            "count": 3,
            "origin": "shop.orders",
            "topic": f"{ds}.shop",
            "partition": 0,
            "offset": 42,
            "dlq_topic": dlq,
            "dlq_partition": 0,
            "dlq_offset": 6,
        },
        {
            "stage": "dispatcher",
            "code": "RAW_BAD_RECORD",
            "count": 4,
            "origin": "",
            "topic": ds,
            "partition": 0,
            "offset": 7,
            "dlq_topic": dlq,
            "dlq_partition": 0,
            "dlq_offset": 3,
        },
    ]
    assert [round(d["age_s"]) for d in snap["dead_letters"]] == [60, 300]
    a = w["alert"]
    assert snap["alerts"] == [
        {k: a[k] for k in ("schema", "table", "kind", "since_ms", "age_s", "latency_s", "message")}
    ]


def test_status_screen_says_which_stage_has_no_data(status_env, capsys):
    config, ds, w = status_env
    assert status.cli(argparse.Namespace(config=config, source=ds, json=False, window=10.0)) == 0
    screen = capsys.readouterr().out
    c = w["committed"]
    for expected in [
        f"leader     {IDENTITY}",
        f"epoch      {w['epoch']}",
        f"committed  {c.file}:{c.pos}",
        "lag        2.5 s",
        "appender   no data in the last 10 minutes",
        "shop.orders    1.234 s        120   30 s ago",
        f"{PULL_ID}  shop.orders",
        "41% 412000/1000000 rows",
        "shop.quiet stale since",
        f"RAW_UNDECODABLE        3   {ds}.shop partition 0 offset 42 (shop.orders), in {ds}.dlq "
        "partition 0 offset 6, 60 s ago",
    ]:
        assert expected in screen, f"{expected!r} not in\n{screen}"


def test_a_wrong_kafka_address_is_an_error_and_exit_1(status_env, tmp_path, capsys):
    """Every other server answers; Kafka's address is a closed port: the screen says so and exits 1."""
    config, ds, _ = status_env
    raw = yaml.safe_load(Path(config).read_text())
    raw["endpoints"]["kafka"]["bootstrap_servers"] = "127.0.0.1:9"  # discard: nothing listens
    wrong = tmp_path / "wrong-kafka.yaml"
    wrong.write_text(yaml.safe_dump(raw))
    assert status.cli(argparse.Namespace(config=str(wrong), source=ds, json=False, window=10.0)) == 1
    screen = capsys.readouterr().out
    assert "kafka          not read" in screen
    assert "could not read:\n  Kafka: ENDPOINT_UNREACHABLE: Kafka at 127.0.0.1:9 is not reachable" in screen
    assert f"leader     {IDENTITY}" in screen  # the rest is still shown
