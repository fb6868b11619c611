"""Reading DBus's figures back from Prometheus (dbuslib/promread.py, dbuslib/seriesread.py): the PromQL built,
and Prometheus's answers folded into the shape InfluxDB answers, so both readers fold alike."""

from __future__ import annotations

import pytest

from dbuslib import promread, seriesread
from dbuslib.config import load_config
from heartbeat.monitor import observations, records_of
from status.readers import dead_letters, last_points

HB = {"__name__": "dbus_heartbeat_latency_ms", "ds": "demo", "schema": "shop", "job": "dbus"}


def vector(metric: dict, value: float | str) -> dict:
    return {"metric": metric, "value": [1700000100.0, str(value)]}


def test_last_queries_ask_one_field_each_and_the_points_own_times():
    values, times = promread.last_queries('it"s', 600, "dbus_heartbeat", ("latency_ms", "rows"))
    assert values["latency_ms"] == (
        'last_over_time({__name__=~"dbus_heartbeat_latency_ms|dbus_heartbeat_latency_ms_info",ds="it\\"s"}[600s])'
    )
    assert (
        times
        == 'last_over_time(dbus_point_timestamp_seconds{ds="it\\"s",measurement="dbus_heartbeat"}[600s])'
    )


def test_the_newest_heartbeat_is_timed_by_its_point_not_by_the_scrape_and_folds_as_influxql_s():
    orders = {k: v for k, v in HB.items() if k != "__name__"} | {"table": "orders"}
    items = orders | {"table": "items"}
    values = {
        "latency_ms": [vector(orders, 812.5), vector(items, 20)],
        "rows": [vector(orders, 3)],  # items' point had no rows field
    }
    times = [vector(orders | {"measurement": "dbus_heartbeat"}, 1700000000.25)]  # items: no time, no point
    series = promread.fold_last(values, times, "dbus_heartbeat", "latency_ms", ("rows",))
    assert series == [
        {
            "name": "dbus_heartbeat",
            "tags": {"ds": "demo", "job": "dbus", "schema": "shop", "table": "orders"},
            "columns": ["time", "last", "rows"],
            "values": [[1700000000250, 812.5, 3]],
        }
    ]
    assert last_points(series, "latency_ms", ("schema", "table")) == {
        ("shop", "orders"): {"rows": 3, "latency_ms": 812.5, "_time": 1700000000250}
    }
    (obs,) = observations(records_of(series), [("shop", "orders")])
    assert obs.latency_s == pytest.approx(0.8125)


def test_a_tally_counts_the_counter_s_difference_a_new_series_from_zero_and_after_a_reset_from_there():
    q = promread.tally("dbus_dead_letter", "count", "demo", 3600, ("stage", "code"))
    now = 'last_over_time(dbus_dead_letters_total{ds="demo"}[3600s])'
    before = 'last_over_time(dbus_dead_letters_total{ds="demo"}[3600s] offset 3600s)'
    assert q == f"sum by (stage, code) ((({now} - {before}) >= 0) or {now})"


def test_dead_letter_columns_join_per_tags_and_read_as_dbus_status_reads_influxdb():
    key = {"stage": "appender", "code": "UMS_BAD", "schema": "shop", "table": "orders"}
    parts = {
        "count": [vector(key, 4)],
        "topic": [vector(key | {"value": "demo.shop"}, 1)],  # the _info gauge: its text in the label
        "offset": [{"metric": key | {"ds": "demo"}, "values": [[1.0, "7"], [2.0, "9"]]}],  # a range: the last
        "newest_ms": [vector(key, 1700000000000)],
    }
    series = promread.fold_columns(parts, ("stage", "code", "schema", "table"), "dbus_dead_letter", 5)
    assert series[0]["columns"] == ["time", "count", "topic", "offset", "newest_ms"]
    assert series[0]["values"] == [[5, 4, "demo.shop", 9, 1700000000000]]
    (d,) = dead_letters(series, 1700000010.0, "demo.dbus.deadletter")
    assert (d.stage, d.code, d.count, d.origin, d.topic, d.offset, d.age_s) == (
        "appender",
        "UMS_BAD",
        4,
        "shop.orders",
        "demo.shop",
        9,
        10.0,
    )


def test_range_answers_become_influxql_s_time_buckets():
    parts = {
        "latency_ms": [{"metric": {"table": "orders"}, "values": [[60, "10"], [120, "NaN"]]}],
        "rows": [{"metric": {"table": "orders"}, "values": [[120, "5"]]}],
    }
    (s,) = promread.fold_range(parts, ("table",), "dbus_heartbeat")
    assert s["values"] == [[60000, 10, None], [120000, None, 5]]


def test_without_an_influxdb_url_the_figures_are_read_from_prometheus_which_must_be_named(tmp_path):
    base = load_config("conf/dbus.yaml")
    assert not seriesread.from_prometheus(base)
    conf = tmp_path / "no-influx.yaml"
    conf.write_text(f"extends: {base.path}\nendpoints:\n  influxdb: {{url: null}}\n", encoding="utf-8")
    cfg = load_config(conf)
    assert seriesread.from_prometheus(cfg) and cfg.endpoints.influxdb.where.endswith("19091")
    conf.write_text(
        f"extends: {base.path}\nendpoints:\n  influxdb: {{url: null}}\nprometheus: {{server: null}}\n",
        encoding="utf-8",
    )
    from dbuslib.errors import ConfigError

    with pytest.raises(ConfigError, match="prometheus.server"):
        load_config(conf)


def test_a_refused_or_failed_query_is_an_endpoint_error_naming_the_server():
    import json
    import threading
    from http.server import BaseHTTPRequestHandler, HTTPServer

    from dbuslib.errors import EndpointError

    class Answer(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            bad = "query=nonsense" in self.path
            body = json.dumps(
                {"status": "error", "errorType": "bad_data", "error": "parse error"}
                if bad
                else {"status": "success", "data": {"resultType": "vector", "result": []}}
            ).encode()
            self.send_response(400 if bad else 200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = HTTPServer(("127.0.0.1", 0), Answer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_port}"
    try:
        assert promread.query(url, "up") == []
        with pytest.raises(
            EndpointError, match=f"Prometheus at {url} refused a query \\(400\\).*parse error"
        ):
            promread.query(url, "nonsense")
    finally:
        server.shutdown()
        server.server_close()
    with pytest.raises(EndpointError, match="Prometheus at http://127.0.0.1:9 cannot be read"):
        promread.query("http://127.0.0.1:9", "up")
