"""Heartbeats only from the heartbeat file (issue #29, acceptance 5's core; logprocessor/adapters.py): a
log_rsyslog record is a heartbeat when its message is a heartbeat JSON *and* its ``path`` is the source's
``heartbeat.file`` as the shipper names it; the same line from any other file is an ordinary line. The JVM's
adapter agrees (tests/unit/test_record_jvm.py runs the corpus with a heartbeat file);
tests/integration/test_rsyslog_ship.py shows it through rsyslog."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dbuslib.config import LogHeartbeat, LogSource
from logprocessor.adapters import AdapterSettings, KafkaRecord, adapt, heartbeat_files

HB = "/srv/dbus/hb.log"
BEAT = json.dumps({"type": "dbus-heartbeat", "@timestamp": "2099-01-01T00:00:00.000Z", "host": "vm"})


def record(path: str | None, message: str = BEAT, raw_path: str | None = None) -> KafkaRecord:
    doc = {"host": "vm", "timestamp": "2026-11-29T05:00:00.000Z", "message": message}
    if path is not None:
        doc["path"] = path
    text = json.dumps(doc)
    if raw_path is not None:  # rsyslog's own escaping of the path (``\/``)
        text = text.replace(json.dumps(path), raw_path)
    return KafkaRecord(text.encode(), None, 0, 7, 1_764_392_400_000)


def settings(files: tuple[str, ...] | None) -> AdapterSettings:
    return AdapterSettings("log_rsyslog", heartbeat_files=files)


@pytest.mark.parametrize(
    ("path", "files", "beat"),
    [
        (HB, (HB,), True),
        ("/srv/app/orders.log", (HB,), False),  # a heartbeat-shaped application line: an ordinary line
        (HB + "x", (HB,), False),
        ("/srv/dbus/../dbus/hb.log", (HB,), False),  # not the name the shipper gives the file
        (None, (HB,), False),
        (HB, (), False),  # the source names no heartbeat file: no record is a heartbeat
        ("/srv/app/orders.log", None, True),  # no check (a test's settings)
    ],
)
def test_a_heartbeat_comes_only_from_the_heartbeat_file(path, files, beat):
    rec = record(path)
    got = adapt(rec, settings(files))
    assert got.heartbeat is beat
    if beat:
        assert got.lines == () and got.heartbeat_ms == 4_070_908_800_000
    else:
        assert got.lines == (rec.value.decode(),)  # the line itself, for the tables' rules


def test_the_path_as_rsyslog_escapes_it_is_read():
    rec = record(HB, raw_path=json.dumps(HB).replace("/", "\\/"))
    assert b"\\/srv\\/dbus" in rec.value
    assert adapt(rec, settings((HB,))).heartbeat


@given(st.text(max_size=30))
def test_no_other_path_gives_a_heartbeat(path):
    assert adapt(record(path), settings((HB,))).heartbeat is (path == HB)


def test_the_heartbeat_files_of_a_source(tmp_path):
    def source(file: str | None) -> LogSource:
        return LogSource(heartbeat=LogHeartbeat(file=None if file is None else Path(file)))

    assert heartbeat_files(source(None), tmp_path) == ()
    assert heartbeat_files(source(HB), None) == (HB,)
    assert heartbeat_files(source("../logs/./hb.log"), None) is None  # relative, no folder: any path
    (tmp_path / "real").mkdir()
    (tmp_path / "conf").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    got = heartbeat_files(source("../link/hb.log"), tmp_path / "conf")
    assert got == (os.path.join(tmp_path, "link", "hb.log"), str(tmp_path.resolve() / "real" / "hb.log"))
    assert AdapterSettings.of(source("../link/hb.log"), tmp_path / "conf").heartbeat_files == got
