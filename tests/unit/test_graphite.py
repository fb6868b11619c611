"""Spark's GraphiteSink lines as the exporter's samples (dbuslib/graphite.py), the exporter's Graphite
listener (cli/metrics.py GraphiteServer) and the Spark settings that send them (dbuslib.spark)."""

from __future__ import annotations

import socket

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cli.metrics import GraphiteServer
from dbuslib import graphite
from dbuslib.lineprotocol import Sample
from dbuslib.promexport import Latest


def test_a_spark_line_is_the_gauge_of_its_metric_with_app_and_instance() -> None:
    got = graphite.parse_line("dbus_spark.dbus-appender-demo.driver.jvm.heap.used 1234.5 1764470000\n")
    assert got == Sample(
        "spark",
        (("app", "dbus-appender-demo"), ("instance", "driver")),
        (("jvm_heap_used", 1234.5),),
        1764470000 * 10**9,
    )


@pytest.mark.parametrize(
    "line",
    [
        "other.app.driver.jvm.heap.used 1 1",  # another prefix
        "dbus_spark.app.driver 1 1",  # no metric
        "dbus_spark..driver.x 1 1",  # no app
        "dbus_spark.app.driver.x NaN 1",
        "dbus_spark.app.driver.x inf 1",
        "dbus_spark.app.driver.x one 1",
        "dbus_spark.app.driver.x 1 noon",
        "dbus_spark.app.driver.x",
        "",
        "dbus_spark.app.driver.x 1 2 3",
    ],
)
def test_lines_not_from_dbus_spark_are_none(line: str) -> None:
    assert graphite.parse_line(line) is None


@given(st.text())
def test_any_text_is_a_sample_or_none(text: str) -> None:
    got = graphite.parse_line(text)
    assert got is None or (got.measurement == "spark" and len(got.fields) == 1)


def test_the_exporter_takes_spark_lines_over_tcp() -> None:
    latest = Latest()
    server = GraphiteServer(("127.0.0.1", 0), latest)
    server.daemon_threads = False  # server_close() then waits for the connection's handler
    try:
        with socket.create_connection(server.server_address[:2], timeout=5) as s:
            s.sendall(
                b"dbus_spark.dbus-dispatcher-demo.driver.jvm.heap.used 42 1764470000\n"
                b"not a graphite line\n"
                b"dbus_spark.dbus-dispatcher-demo.3.executor.filesystem.file.read_bytes 7 1764470000\n"
            )
        server.handle_request()  # the connection, queued since connect: its handler reads it to the end
    finally:
        server.server_close()
    names = {(m.name, tuple(sorted(s.labels.items())), s.value) for m in latest.collect() for s in m.samples}
    assert ("spark_jvm_heap_used", (("app", "dbus-dispatcher-demo"), ("instance", "driver")), 42.0) in names
    assert (
        "spark_executor_filesystem_file_read_bytes",
        (("app", "dbus-dispatcher-demo"), ("instance", "3")),
        7.0,
    ) in names
    assert server.dropped == 1 and latest.points == 2


def test_spark_stages_send_their_metrics_when_spark_metrics_is_set() -> None:
    from dbuslib.spark import spark_metrics_settings

    conf = spark_metrics_settings("127.0.0.1:19095")
    assert conf["spark.metrics.conf.*.sink.graphite.class"] == "org.apache.spark.metrics.sink.GraphiteSink"
    assert conf["spark.metrics.conf.*.sink.graphite.host"] == "127.0.0.1"
    assert conf["spark.metrics.conf.*.sink.graphite.port"] == "19095"
    assert conf["spark.metrics.conf.*.sink.graphite.prefix"] == graphite.PREFIX
    assert conf["spark.metrics.namespace"] == "${spark.app.name}"


def test_an_oversized_line_is_dropped_and_the_next_one_taken() -> None:
    from cli.metrics import MAX_LINE_BYTES

    latest = Latest()
    server = GraphiteServer(("127.0.0.1", 0), latest)
    server.daemon_threads = False
    try:
        with socket.create_connection(server.server_address[:2], timeout=5) as s:
            s.sendall(b"dbus_spark.app.driver.x " + b"9" * (100 * MAX_LINE_BYTES) + b" 1\n")
            s.sendall(b"\x00\xff garbage\n" + b"dbus_spark.app.driver.y 5 1764470000")  # the last, no newline
        server.handle_request()
    finally:
        server.server_close()
    names = {(m.name, s.value) for m in latest.collect() for s in m.samples}
    assert ("spark_y", 5.0) in names and not any(n == "spark_x" for n, _ in names)
    assert server.dropped == 2 and latest.points == 1
