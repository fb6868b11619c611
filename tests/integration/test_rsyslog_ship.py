"""The log shipper on the real stack (docs/logs.md, The shipper): lines appended to a watched file reach the
log source's raw topic as one JSON record each, exactly, in order, keyed by the file's path; a restart of
rsyslog loses no line.

Each test runs its own rsyslogd through the stack's own script (``RSYSLOG_HOME``, ``RSYSLOG_DBUS_CONFIG``:
bash stack/stack.sh up|restart|down rsyslog) on a throwaway configuration whose one log source watches the
test's folder and writes to a fresh topic, so the stack's rsyslog and its topics are never touched, and the
generator is exercised on a configuration other than the shipped one.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml
from helpers import wait_until

from cli.stages import private_rsyslog
from dbuslib import kafka
from dbuslib.config import KafkaEndpoint, find_config, raw_config

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]
STAMP = re.compile(rb"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")


@dataclass
class Shipper:
    """A private rsyslogd (the stack's script) shipping ``logs/*.log`` to ``topic``."""

    home: Path
    logs: Path
    topic: str
    kafka: KafkaEndpoint

    def stack(self, command: str, down_s: int = 2) -> None:
        private_rsyslog(command, self.home / "rsyslog", self.home / "dbus.yaml", down_s)

    def running(self) -> bool:
        pidfile = self.home / "rsyslog" / "rsyslogd.pid"
        try:
            return Path(f"/proc/{pidfile.read_text().strip()}/comm").read_text().strip() == "rsyslogd"
        except (FileNotFoundError, ValueError):
            return False

    def count(self) -> int:
        return sum(kafka.end_offsets(self.kafka, [self.topic]).values())

    def records(self, n: int, timeout: float = 60) -> list:
        """The topic's records once it holds at least ``n``, in offset order per partition."""
        wait_until(lambda: self.count() >= n, timeout, f"{n} records in {self.topic}")
        return kafka.read_range(self.kafka, [self.topic])

    def log(self) -> str:
        return (self.home / "rsyslog" / "log" / "rsyslogd.log").read_text(errors="replace")


@pytest.fixture
def shipper(tmp_path, new_topic, kafka_up) -> Iterator[Shipper]:
    topic = new_topic(partitions=3)
    logs = tmp_path / "logs"
    logs.mkdir()
    raw = raw_config(find_config())  # the active configuration ($DBUS_CONFIG, else conf/dbus.yaml)
    raw["log_sources"] = {
        f"ship_{uuid.uuid4().hex[:8]}": {
            "shipper": {"files": [str(logs / "*.log")]},
            "topics": {"raw": topic},
        }
    }
    (tmp_path / "dbus.yaml").write_text(yaml.safe_dump(raw))
    s = Shipper(tmp_path, logs, topic, kafka_up)
    s.stack("up")
    try:
        yield s
    finally:
        s.stack("down")


def _jsonf(value: bytes) -> bytes:
    """rsyslog's jsonf escaping (runtime/msg.c jsonAddVal): ", \\ and / escaped, control characters as
    \\b \\f \\n \\r \\t or \\u00XX, every other byte (invalid UTF-8 too) as it is."""
    named = {0x22: b'\\"', 0x5C: b"\\\\", 0x2F: b"\\/"}
    named |= {0x08: b"\\b", 0x0C: b"\\f", 0x0A: b"\\n", 0x0D: b"\\r", 0x09: b"\\t"}
    out = bytearray()
    for c in value:
        out += named.get(c) or (b"\\u%04X" % c if c < 0x20 else bytes([c]))
    return bytes(out)


def _expected(host: str, path: Path, stamp: bytes, message: bytes) -> bytes:
    return b'{"host":"%s","path":"%s","timestamp":"%s","message":"%s"}\n' % (
        _jsonf(host.encode()),
        _jsonf(str(path).encode()),
        stamp,
        _jsonf(message),
    )


def _append(path: Path, lines: list[bytes]) -> None:
    with path.open("ab") as f:
        f.write(b"".join(line + b"\n" for line in lines))


def _stamp(value: bytes) -> bytes:
    """The record's timestamp, checked: RFC 3339, UTC, milliseconds."""
    stamp = re.search(rb'"timestamp":"([^"]*)"', value)
    assert stamp and STAMP.match(stamp.group(1)), value[:200]
    return stamp.group(1)


def test_each_line_is_one_exact_json_record_in_file_order(shipper):
    lines = [
        b"2026-11-24 10:15:30.100 | INFO | plain ASCII",
        "utf-8: é ü 日本 🚀".encode(),
        b'a "quote", a \\ backslash, a \t tab and a / slash',
        b"",  # an empty line: imfile does not ship it (docs/logs.md, The shipper)
        b"12345",  # digits stay a JSON string
        b"ctl \x01\x1f del \x7f",
        b"invalid UTF-8 \xff\xfe\xc3(",  # passed as they are: the record is not UTF-8
        b"x" * 2_000_000,  # 2 MB: under the line limit, shipped whole
        b"the last line",
    ]
    a, b = shipper.logs / "a.log", shipper.logs / "b.log"
    before = datetime.now(UTC)
    _append(a, lines)
    _append(b, [b"b first", b"b second"])
    shipped = [line for line in lines if line]
    records = shipper.records(len(shipped) + 2)
    after = datetime.now(UTC)

    host = socket.gethostname().split(".")[0]
    by_file: dict[bytes, list] = {}
    for r in records:
        by_file.setdefault(r.key, []).append(r)
    assert sorted(by_file) == [str(a).encode(), str(b).encode()]
    assert len({r.partition for r in by_file[str(a).encode()]}) == 1  # one file, one partition

    got = by_file[str(a).encode()]
    assert len(got) == len(shipped), "a line went missing or twice"
    for record, line in zip(got, shipped, strict=True):
        stamp = _stamp(record.value)
        assert record.value == _expected(host, a, stamp, line)
        when = datetime.strptime(stamp.decode(), "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)
        assert before.replace(microsecond=before.microsecond // 1000 * 1000) <= when <= after
    # what a JSON reader sees (the record of invalid UTF-8 aside)
    first = json.loads(got[0].value)
    assert list(first) == ["host", "path", "timestamp", "message"]
    assert (first["host"], first["path"], first["message"]) == (host, str(a), shipped[0].decode())
    assert json.loads(got[2].value)["message"] == shipped[2].decode()
    assert json.loads(got[3].value)["message"] == "12345"
    assert [json.loads(r.value)["message"] for r in by_file[str(b).encode()]] == ["b first", "b second"]


def test_a_restart_of_rsyslog_loses_no_line(shipper):
    """Lines in flight when rsyslogd is told to stop, lines written while it is down (one file new) and
    lines after: every one arrives, each file's in order; a line may come twice (at least once)."""
    a, b = shipper.logs / "a.log", shipper.logs / "b.log"
    expected: dict[Path, list[bytes]] = {a: [], b: []}

    def write(path: Path, tag: str, n: int) -> None:
        lines = [f"{tag} {i:06d} {'.' * (i % 50)}".encode() for i in range(n)]
        _append(path, lines)
        expected[path] += lines

    write(a, "before", 100_000)
    restart = subprocess.Popen(
        ["bash", str(REPO / "stack" / "stack.sh"), "restart", "rsyslog"],
        env={
            **os.environ,
            "RSYSLOG_HOME": str(shipper.home / "rsyslog"),
            "RSYSLOG_DBUS_CONFIG": str(shipper.home / "dbus.yaml"),
            "DOWN_S": "3",
        },
    )
    try:
        wait_until(lambda: not shipper.running(), 40, "rsyslogd stopped by the restart")
        down_at, at_stop = time.monotonic(), shipper.count()
        write(a, "while-down", 5_000)
        write(b, "new-file-while-down", 1_000)
        assert not shipper.running() and time.monotonic() - down_at < 3, "written while rsyslogd was down"
        assert restart.wait(timeout=120) == 0
    finally:
        if restart.poll() is None:
            restart.kill()
    write(a, "after", 1_000)
    write(b, "after", 1_000)

    total = sum(len(v) for v in expected.values())
    records = shipper.records(total, timeout=120)
    seen: dict[Path, list[bytes]] = {a: [], b: []}
    for r in records:
        seen[Path(r.key.decode())].append(json.loads(r.value)["message"].encode())
    for path, lines in expected.items():
        first: list[bytes] = list(dict.fromkeys(seen[path]))  # first occurrences, in partition order
        assert first == lines, f"{path}: lost or out of order ({len(set(lines) - set(first))} missing)"
    dups = len(records) - total
    print(f"restart: {total} lines, {at_stop} in Kafka when rsyslogd had stopped, {dups} duplicate record(s)")
    assert "exiting on signal 15" in shipper.log()


def _stack(command: str, service: str, down_s: int = 5) -> None:
    env = {**os.environ, "DOWN_S": str(down_s)}
    subprocess.run(
        ["bash", str(REPO / "stack" / "stack.sh"), command, service], env=env, check=True, timeout=300
    )


@pytest.mark.exclusive  # restarts the stack's Kafka
def test_a_kafka_restart_loses_no_line(shipper):
    """Lines written all along while the broker restarts (bash stack/stack.sh restart kafka, down 5 s):
    every line arrives, each first copy in order; rsyslogd waits for Kafka, it drops nothing. It restarts
    the stack's Kafka, so it is ``exclusive``: no other integration test runs beside it
    (tests/integration/conftest.py)."""
    path = shipper.logs / "a.log"
    written: list[bytes] = []
    stop = threading.Event()

    def writer() -> None:
        i = 0
        while not stop.is_set():
            lines = [f"line {i + j:07d}".encode() for j in range(100)]
            _append(path, lines)
            written.extend(lines)
            i += len(lines)
            stop.wait(0.1)

    thread = threading.Thread(target=writer, daemon=True)
    thread.start()
    try:
        wait_until(lambda: shipper.count() >= 1_000, 60, "lines shipping before the restart")
        _stack("restart", "kafka")
        at = len(written)
        wait_until(lambda: len(written) >= at + 2_000, 60, "lines written after the restart")
    finally:
        stop.set()
        thread.join()
    try:
        records = shipper.records(len(written), timeout=180)
    except AssertionError as e:
        raise AssertionError(
            f"{e}: {shipper.count()} arrived; rsyslogd.log ends:\n{shipper.log()[-3000:]}"
        ) from e
    first = list(dict.fromkeys(json.loads(r.value)["message"].encode() for r in records))
    assert first == written, f"lost or out of order: {len(set(written) - set(first))} missing"
    print(f"kafka restart: {len(written)} lines, {len(records) - len(written)} duplicate record(s)")
