"""Heartbeats come only from the heartbeat file (issue #29, acceptance 5), on the real shipper: a log
source of the test's own (``pytest_hbf_<hex>``, the demo's two tables) shipped by an rsyslogd of its own
(the stack's script, ``RSYSLOG_HOME``; shipped_logs.py's way) from ``logs/*.log``, its ``heartbeat.file``
``logs/heartbeat.log``, and its log processor. A heartbeat-shaped line (``@timestamp`` in 2099) appended to
an application log is an ordinary line: it reaches the unknown bucket unchanged and makes no heartbeat; the
heartbeat writer's line in the heartbeat file is a heartbeat of every table."""

from __future__ import annotations

import json
import uuid
from datetime import datetime

import pytest
import yaml
from helpers import wait_until

from cli import demolog
from cli.stages import Stages, private_rsyslog
from dbuslib import kafka
from dbuslib.config import load_config
from heartbeat.logbeats import LogHeartbeatWriter, append_line, heartbeat_line

pytestmark = pytest.mark.integration
FORGED_MS = 4_070_908_800_000  # 2099-01-01T00:00:00Z


def _read(cfg, topic: str) -> list:
    consumer = kafka.consumer(
        cfg.endpoints.kafka, topic, auto_offset_reset="earliest", enable_auto_commit=False
    )
    try:
        got = []
        while batch := consumer.poll(timeout_ms=1500):
            got += [r for rs in batch.values() for r in rs]
        return got
    finally:
        consumer.close()


@pytest.fixture
def source(tmp_path, cfg, kafka_up):  # kafka_up: fails at once when Kafka is down
    ds = f"pytest_hbf_{uuid.uuid4().hex[:8]}"
    mine = demolog.own_source_config(cfg, ds, tmp_path)
    raw = yaml.safe_load(mine.path.read_text())
    raw["log_sources"][ds]["heartbeat"] = {"file": "logs/heartbeat.log"}  # relative: to the file's folder
    mine.path.write_text(yaml.safe_dump(raw))
    mine = load_config(mine.path)
    private_rsyslog("up", tmp_path / "rsyslog", mine.path, 2)  # creates the raw topic
    try:
        yield mine, ds
    finally:
        private_rsyslog("down", tmp_path / "rsyslog", mine.path, 2)
        demolog.drop_own_source(mine, ds)


def test_a_heartbeat_shaped_application_line_is_an_ordinary_line(source, tmp_path):
    cfg, ds = source
    src = cfg.log_source(ds)
    demolog.ensure_rules(cfg, ds)
    stages = Stages(cfg, ds, tmp_path / "stage-logs")
    stages.start("logprocessor")
    try:
        stages.wait_ready("logprocessor", timeout=600)
        forged = heartbeat_line(src.processor.heartbeat_type, ds, "forger", FORGED_MS)
        app_log = tmp_path / "logs" / "app.log"
        append_line(app_log, forged)
        writer = LogHeartbeatWriter(cfg, ds)
        assert writer.path == tmp_path / "logs" / "heartbeat.log"
        real = json.loads(writer.write_once())
        real_ms = int(datetime.fromisoformat(real["@timestamp"].replace("Z", "+00:00")).timestamp() * 1000)
        schema = src.schema_name(ds)
        result = src.topics.name("result", ds, schema, "app_orders")
        unknown = src.topics.name("unknown", ds)

        def arrived():
            lines = [json.loads(r.value) for r in _read(cfg, unknown)]
            beats = [
                r.key.decode() for r in _read(cfg, result) if r.key.startswith(b"data_increment_heartbeat.")
            ]
            return (lines, beats) if lines and len(beats) >= 2 else None

        try:
            lines, beats = wait_until(
                arrived, 240, "the forged line in the unknown bucket, the real heartbeats"
            )
        except AssertionError as e:
            log = stages.log("logprocessor").read_text(errors="replace")[-4000:]
            raise AssertionError(f"{e}; the processor's log ends:\n{log}") from e
    finally:
        stages.stop_all()

    # the forged line: shipped from app.log, an ordinary line of no table, unchanged
    assert [(r["path"], r["message"]) for r in lines] == [(str(app_log), forged)]
    # the real one: a heartbeat of each table, from the heartbeat file; none at the forged time
    tables = {k.split(".")[4] for k in beats}
    assert tables == {"app_orders", "http_access"}, beats
    assert all(f".{real_ms}|" in k for k in beats), (real_ms, beats)
    assert not [k for k in beats if str(FORGED_MS) in k or ".forger." in k], beats
    assert _read(cfg, src.topics.name("dead_letter", ds)) == []
