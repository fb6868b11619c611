"""influxdb-client writes then queries the real time-series server."""

from influxdb_client import Point

from dbuslib import influx


def test_write_then_query(cfg):
    assert "read back" in influx.write_and_read_check(cfg.endpoints.influxdb, "pytest")


def test_points_keep_tags_and_fields(cfg):
    ep = cfg.endpoints.influxdb
    influx.write(
        ep, [Point("pytest_latency").tag("schema", "shop").tag("table", "orders").field("latency_ms", 12.5)]
    )
    rows = influx.query(
        ep,
        f'from(bucket:"{ep.bucket}") |> range(start:-1h) '
        '|> filter(fn:(r) => r._measurement == "pytest_latency") |> last()',
    )
    assert [(r["schema"], r["table"], r["_field"], r["_value"]) for r in rows] == [
        ("shop", "orders", "latency_ms", 12.5)
    ]
