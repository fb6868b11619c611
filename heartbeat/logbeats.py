"""Heartbeat lines for a log source (docs/logs.md, Heartbeats): every ``heartbeat.interval_s`` the writer
appends one line to the source's ``heartbeat.file``, a file its shipper watches, so the heartbeat travels
the way the source's lines do: shipper, raw topic, log processor, and a heartbeat UMS in the result topic of
every table (logprocessor/job.py), whose ``ums_ts_`` minus the line's time is the path's latency.

The line is JSON, as the processor's adapters recognise a heartbeat (logprocessor/adapters.py)::

    {"type":"dbus-heartbeat","@timestamp":"2026-11-24T22:15:30.123Z","host":"vm","ds":"applog"}

For ``log_rsyslog`` (the local stack's shipper) the line is the record's ``message``: a JSON object whose
``type`` is the heartbeat type, its ``@timestamp`` the heartbeat's time. Other shippers mark heartbeats by
the record's own ``type`` field (logstash ``type => "dbus-heartbeat"`` on the heartbeat file's input;
filebeat ``fields.type``), which only their configuration can set: the writer's line is the same.
"""

from __future__ import annotations

import json
import logging
import socket
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

from dbuslib.config import DbusConfig
from dbuslib.errors import ConfigError

log = logging.getLogger("heartbeat.logs")


def heartbeat_line(heartbeat_type: str, ds: str, host: str, time_ms: int) -> str:
    """The line appended (no newline): JSON, the heartbeat ``type`` and ``@timestamp`` (RFC 3339, ms, UTC)
    first."""
    stamp = datetime.fromtimestamp(time_ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
    doc = {"type": heartbeat_type, "@timestamp": stamp, "host": host, "ds": ds}
    return json.dumps(doc, separators=(",", ":"), ensure_ascii=False)


def heartbeat_file(cfg: DbusConfig, ds: str) -> Path:
    """The source's ``heartbeat.file``, absolute; ConfigError naming the key when it is not set."""
    src = cfg.log_source(ds)
    if src.heartbeat.file is None:
        msg = f"{cfg.path}: log_sources.{ds}.heartbeat.file: not set (the file heartbeat lines go to)"
        raise ConfigError(msg)
    return cfg.resolve(src.heartbeat.file)


def append_line(path: Path, line: str) -> None:
    """One whole line appended (one write of line + newline, O_APPEND): a tailing shipper never reads half."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as f:
        f.write(line + "\n")


class LogHeartbeatWriter:
    """Appends a heartbeat line every ``interval_s`` until ``stop()``; a failed write is logged and tried
    again at the next beat (the file's folder gone, a full disk), never fatal."""

    def __init__(self, cfg: DbusConfig, ds: str, clock=time.time) -> None:
        src = cfg.log_source(ds)
        self.ds, self.path = ds, heartbeat_file(cfg, ds)
        self.interval_s = src.heartbeat.interval_s
        self.heartbeat_type = src.processor.heartbeat_type
        self.host = socket.gethostname()
        self.clock = clock
        self.written = 0
        self._stop = threading.Event()

    def stop(self) -> None:
        self._stop.set()

    def write_once(self) -> str:
        line = heartbeat_line(self.heartbeat_type, self.ds, self.host, int(self.clock() * 1000))
        append_line(self.path, line)
        self.written += 1
        return line

    def run(self) -> None:
        log.info("%s: heartbeat lines to %s every %gs", self.ds, self.path, self.interval_s)
        while not self._stop.is_set():
            try:
                self.write_once()
            except OSError as e:
                log.warning("%s: could not append a heartbeat line to %s: %s", self.ds, self.path, e)
            self._stop.wait(self.interval_s)
