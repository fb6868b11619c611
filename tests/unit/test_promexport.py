"""DBus's Prometheus exporter (dbuslib/promexport.py): points in, the newest value per series out, read by
prometheus_client's own parser; influx.write's copy to it (dbuslib.influx.to_exporter)."""

from __future__ import annotations

import io
import threading
from wsgiref.simple_server import WSGIRequestHandler, make_server
from wsgiref.util import setup_testing_defaults

import pytest
from influxdb_client import Point
from prometheus_client.parser import text_string_to_metric_families

from dbuslib import influx
from dbuslib.promexport import Latest, app, label_name, metric_name


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def call(wsgi, method: str, path: str, body: bytes = b"") -> tuple[str, bytes]:
    environ: dict = {"REQUEST_METHOD": method, "PATH_INFO": path, "CONTENT_LENGTH": str(len(body))}
    setup_testing_defaults(environ)
    environ["wsgi.input"] = io.BytesIO(body)
    got: dict = {}
    out = b"".join(wsgi(environ, lambda status, headers: got.setdefault("status", status)))
    return got["status"], out


def samples(text: str) -> dict[tuple[str, tuple], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def test_points_become_gauges_with_their_tags_as_labels_and_the_newest_value_wins():
    clock = Clock()
    wsgi = app(Latest(expire_s=60, clock=clock))
    lines = (
        "dbus_stage,ds=demo,stage=appender rows_per_s=40.5,input_rows=120i,waiting=0i 1\n"
        "dbus_heartbeat,ds=demo,schema=shop,table=orders latency_ms=812.5,rows=3i\n"
        'dbus_extractor,ds=demo committed_file="mariadb-bin.000003",lag_s=0.4,up=true\n'
        "dbus_stage,ds=demo,stage=appender rows_per_s=41.5 2\n"
    )
    assert call(wsgi, "POST", "/api/v2/write", lines.encode())[0] == "204 No Content"
    status, body = call(wsgi, "GET", "/metrics")
    got = samples(body.decode())
    assert got[("dbus_stage_rows_per_s", (("ds", "demo"), ("stage", "appender")))] == 41.5
    assert got[("dbus_stage_input_rows", (("ds", "demo"), ("stage", "appender")))] == 120
    assert (
        got[("dbus_heartbeat_latency_ms", (("ds", "demo"), ("schema", "shop"), ("table", "orders")))] == 812.5
    )
    assert got[("dbus_extractor_up", (("ds", "demo"),))] == 1  # a boolean: 1 or 0
    # a string: an info gauge with the newest text as its label
    assert got[("dbus_extractor_committed_file_info", (("ds", "demo"), ("value", "mariadb-bin.000003")))] == 1
    assert got[("dbus_exporter_points_total", ())] == 4


def test_a_series_nobody_writes_for_expire_s_is_dropped():
    clock = Clock()
    latest = Latest(expire_s=60, clock=clock)
    wsgi = app(latest)
    call(wsgi, "POST", "/write", b"dbus_stage,ds=demo,stage=dispatcher rows_per_s=1\n")
    clock.now += 30
    call(wsgi, "POST", "/write", b"dbus_stage,ds=demo,stage=appender rows_per_s=2\n")
    clock.now += 31
    names = {k for k in samples(call(wsgi, "GET", "/metrics")[1].decode()) if k[0] == "dbus_stage_rows_per_s"}
    assert names == {("dbus_stage_rows_per_s", (("ds", "demo"), ("stage", "appender")))}


def test_a_body_that_is_not_line_protocol_is_refused_and_counted_and_the_rest_goes_on():
    wsgi = app(Latest())
    status, body = call(wsgi, "POST", "/api/v2/write", b"m v=1\nm v=\n")
    assert status == "400 Bad Request" and b"line 2" in body
    assert call(wsgi, "POST", "/api/v2/write", b"\xff\xfe v=1\n")[0] == "400 Bad Request"
    assert call(wsgi, "POST", "/api/v2/write", b"m v=2\n")[0] == "204 No Content"
    got = samples(call(wsgi, "GET", "/metrics")[1].decode())
    assert got[("dbus_exporter_refused_lines_total", ())] == 2 and got[("m_v", ())] == 2
    assert call(wsgi, "GET", "/ping")[0] == "204 No Content"
    assert call(wsgi, "GET", "/nothing")[0] == "404 Not Found"


@pytest.mark.parametrize(
    ("measurement", "field", "name"),
    [
        ("dbus_stage", "rows_per_s", "dbus_stage_rows_per_s"),
        ("my-app", "p.99", "my_app_p_99"),
        ("9m", "v", "_9m_v"),
    ],
)
def test_names_are_made_prometheus_safe(measurement, field, name):
    assert metric_name(measurement, field) == name


def test_label_names_are_made_prometheus_safe():
    assert [label_name(t) for t in ("ds", "check-id", "0x", "__name")] == [
        "ds",
        "check_id",
        "_0x",
        "tag__name",
    ]


def test_influx_write_copies_the_points_to_the_exporter():
    latest = Latest()

    class Quiet(WSGIRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

    server = make_server("127.0.0.1", 0, app(latest), handler_class=Quiet)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_port}"
        point = Point("dbus_dead_letter").tag("ds", "demo").tag("stage", "appender").field("count", 3)
        beat = (
            Point("dbus_heartbeat").tag("ds", "demo").field("latency_ms", 2.5).time(1_700_000_000_250, "ms")
        )
        assert influx.to_exporter(url, [point, beat])  # two precisions: each in its own unit
        assert latest.points == 2
        got = samples(call(app(latest), "GET", "/metrics")[1].decode())
        key = ("dbus_point_timestamp_seconds", (("ds", "demo"), ("measurement", "dbus_heartbeat")))
        assert got[key] == 1_700_000_000.25
        assert not influx.to_exporter("http://127.0.0.1:9", [point])  # nobody there: logged, not raised
    finally:
        server.shutdown()


def test_each_point_s_own_time_is_served_and_tallies_add_up_into_counters_that_never_expire():
    clock = Clock()
    wsgi = app(Latest(expire_s=60, clock=clock, wall=lambda: 1700000099.5))
    lines = (
        "dbus_dead_letter,ds=demo,stage=appender,code=UMS_BAD count=2i,offset=7i 1700000000000000000\n"
        "dbus_dead_letter,ds=demo,stage=appender,code=UMS_BAD count=3i,offset=9i\n"  # no time: the wall clock
        "dbus_log,ds=applog,kind=rows,host=h1,table=t count=5i\n"
    )
    assert call(wsgi, "POST", "/write", lines.encode())[0] == "204 No Content"
    got = samples(call(wsgi, "GET", "/metrics")[1].decode())
    letters = (("code", "UMS_BAD"), ("ds", "demo"), ("stage", "appender"))
    assert got[("dbus_dead_letters_total", letters)] == 5  # 2 + 3: what the two points counted
    assert got[("dbus_dead_letter_count", letters)] == 3  # the gauge: the newest point's
    assert got[
        ("dbus_point_timestamp_seconds", tuple(sorted((*letters, ("measurement", "dbus_dead_letter")))))
    ] == (1700000099.5)
    assert (
        got[("dbus_log_lines_total", (("ds", "applog"), ("host", "h1"), ("kind", "rows"), ("table", "t")))]
        == 5
    )
    clock.now += 61  # the gauges expire, the counters stay (a window's count is their difference)
    got = samples(call(wsgi, "GET", "/metrics")[1].decode())
    assert ("dbus_dead_letter_count", letters) not in got
    assert got[("dbus_dead_letters_total", letters)] == 5


@pytest.mark.parametrize(
    ("query", "unit"), [("", 1), ("precision=ms", 10**6), ("precision=s", 10**9), ("precision=u", 10**3)]
)
def test_a_point_s_timestamp_is_read_in_the_write_s_precision(query, unit):
    latest = Latest()
    environ_path = "/api/v2/write"
    wsgi = app(latest)
    environ: dict = {"REQUEST_METHOD": "POST", "PATH_INFO": environ_path, "QUERY_STRING": query}
    body = f"dbus_heartbeat,ds=demo latency_ms=1 {1_700_000_000_000_000_000 // unit}\n".encode()
    environ["CONTENT_LENGTH"] = str(len(body))
    setup_testing_defaults(environ)
    environ["wsgi.input"] = io.BytesIO(body)
    b"".join(wsgi(environ, lambda status, headers: None))
    got = samples(call(wsgi, "GET", "/metrics")[1].decode())
    key = ("dbus_point_timestamp_seconds", (("ds", "demo"), ("measurement", "dbus_heartbeat")))
    assert got[key] == 1_700_000_000.0
