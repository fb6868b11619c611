"""influxdb-client writes then queries the real time-series server."""

import uuid

from influxdb_client import Point

from dbuslib import influx


def test_a_written_point_reads_back_with_its_values(cfg):
    ep = cfg.endpoints.influxdb
    check_id = uuid.uuid4().hex[:12]  # this run's point only
    point = Point("pytest_check").tag("check_id", check_id).field("value", 812.25).field("rows", 17)
    influx.write(ep, [point])
    rows = influx.query(
        ep,
        f'from(bucket:"{ep.bucket}") |> range(start:-1h) '
        f'|> filter(fn:(r) => r._measurement == "pytest_check" and r.check_id == "{check_id}")',
    )
    assert sorted((r["_field"], r["_value"]) for r in rows) == [("rows", 17), ("value", 812.25)]


def test_points_keep_tags_and_fields(cfg):
    ep = cfg.endpoints.influxdb
    check_id = uuid.uuid4().hex[:12]  # this run's point only: another run may write the same series
    point = Point("pytest_latency").tag("check_id", check_id).tag("schema", "shop").tag("table", "orders")
    influx.write(ep, [point.field("latency_ms", 12.5)])
    rows = influx.query(
        ep,
        f'from(bucket:"{ep.bucket}") |> range(start:-1h) '
        f'|> filter(fn:(r) => r._measurement == "pytest_latency" and r.check_id == "{check_id}") |> last()',
    )
    assert [(r["schema"], r["table"], r["_field"], r["_value"]) for r in rows] == [
        ("shop", "orders", "latency_ms", 12.5)
    ]
