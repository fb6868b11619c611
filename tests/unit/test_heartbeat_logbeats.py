"""heartbeat/logbeats.py: the heartbeat line of a log source is one the processor's adapter reads as a
heartbeat at the line's own time (logprocessor/adapters.py), whole lines appended, the file from the
config."""

from __future__ import annotations

import json
import threading

import pytest
import yaml

from dbuslib.config import DEFAULT_CONFIG, load_config
from dbuslib.errors import ConfigError
from heartbeat.logbeats import LogHeartbeatWriter, heartbeat_file, heartbeat_line
from logprocessor.adapters import Adapted, AdapterSettings, KafkaRecord, adapt


def config(tmp_path, heartbeat: dict | None = None):
    src = {"type": "log_rsyslog", **({"heartbeat": heartbeat} if heartbeat else {})}
    path = tmp_path / "dbus.yaml"
    raw = yaml.safe_load(DEFAULT_CONFIG.read_text())
    raw["log_sources"] = {"applog": src}
    path.write_text(yaml.safe_dump(raw))
    return load_config(path)


def test_the_line_is_a_heartbeat_to_the_rsyslog_adapter_at_its_own_time():
    line = heartbeat_line("dbus-heartbeat", "applog", "vm.local", 1709604930123)
    assert json.loads(line) == {
        "type": "dbus-heartbeat",
        "@timestamp": "2024-03-05T02:15:30.123Z",
        "host": "vm.local",
        "ds": "applog",
    }
    record = json.dumps(
        {"host": "vm.local", "path": "/x/hb.log", "timestamp": "2024-03-05T02:15:31Z", "message": line}
    )
    got = adapt(
        KafkaRecord(record.encode(), b"/x/hb.log", 0, 1, 1709604999000), AdapterSettings("log_rsyslog")
    )
    assert isinstance(got, Adapted)
    assert (got.heartbeat, got.heartbeat_ms, got.lines) == (True, 1709604930123, ())


def test_the_writer_appends_whole_lines_to_the_configured_file(tmp_path):
    cfg = config(tmp_path, {"file": "logs/hb.log", "interval_s": 1})
    writer = LogHeartbeatWriter(cfg, "applog", clock=lambda: 1709604930.123)
    assert writer.path == tmp_path / "logs" / "hb.log"
    writer.write_once()
    writer.write_once()
    lines = writer.path.read_text().splitlines()
    assert len(lines) == 2 and all(json.loads(x)["@timestamp"] == "2024-03-05T02:15:30.123Z" for x in lines)


def test_run_writes_until_stopped(tmp_path):
    cfg = config(tmp_path, {"file": str(tmp_path / "hb.log"), "interval_s": 1})
    writer = LogHeartbeatWriter(cfg, "applog")
    thread = threading.Thread(target=writer.run)
    thread.start()
    writer.stop()
    thread.join(5)
    assert not thread.is_alive() and writer.written >= 1


def test_no_heartbeat_file_is_a_config_error_naming_the_key(tmp_path):
    cfg = config(tmp_path)
    with pytest.raises(ConfigError, match=r"log_sources.applog.heartbeat.file: not set"):
        heartbeat_file(cfg, "applog")
