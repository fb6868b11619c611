"""An exporter that is down is said at once, then every EXPORTER_WARN_S with the writes it missed: a stage
that writes points every few seconds does not fill its log with the same line (issue 32: an idle stage
writes few lines)."""

from __future__ import annotations

import logging
import socket

from influxdb_client import Point

from dbuslib import influx


def test_a_down_exporter_is_warned_once_then_every_ten_minutes(monkeypatch, caplog):
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{s.getsockname()[1]}"
    clock = [1000.0]
    monkeypatch.setattr(influx.time, "monotonic", lambda: clock[0])
    caplog.set_level(logging.WARNING, logger="dbuslib.influx")
    point = [Point("dbus_stage").field("rows_per_s", 1.0)]
    for _ in range(5):  # every 5 s for 20 s
        assert influx.to_exporter(url, point) is False
        clock[0] += 5
    clock[0] += influx.EXPORTER_WARN_S
    assert influx.to_exporter(url, point) is False
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 2, said
    assert said[0].startswith(f"the Prometheus exporter at {url} took no points (1 write(s) since")
    assert "(5 write(s) since the last warning)" in said[1]
