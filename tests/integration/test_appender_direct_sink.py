"""The producer a per-row source's appender sends with in real-time mode (appender/jvm ``DirectSink``, through
``dbus.jvm.DirectSinkMain``) on the real broker: records arrive with key, value and headers; a record the
broker or the producer refuses is an error raised by the flush that ends a task (so the task fails and its
batch is not committed), not a record silently lost; the task after it gets a new producer and sends.
The per-row formats' real-time pipelines themselves run in test_appender_rowformats_jvm_live.py."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit"))

import jvm_jar

from dbuslib import kafka
from dbuslib.spark import kafka_producer_config

pytestmark = pytest.mark.integration


def run(kafka_up, topic: str, sizes: list[int], **extra: str) -> list[str]:
    jar = jvm_jar.build()
    pyspark_jars = Path(__import__("pyspark").__file__).parent / "jars"
    options = kafka_producer_config(kafka_up, realtime=True, batching=True)
    options.update({"max.block.ms": "10000", **extra})
    cp = os.pathsep.join([str(jar), str(jar.parent / "spark" / "*"), str(pyspark_jars / "*")])
    out = subprocess.run(
        [
            "java",
            "-cp",
            cp,
            "dbus.jvm.DirectSinkMain",
            topic,
            ",".join(map(str, sizes)),
            *(f"{k}={v}" for k, v in options.items()),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return [ln for ln in out.stdout.splitlines() if ln.startswith(("ok ", "failed "))]


def test_records_arrive_with_key_value_and_headers(kafka_up, new_topic):
    topic = new_topic(partitions=3)
    assert run(kafka_up, topic, [10, 2000, 70_000]) == ["ok 0", "ok 1", "ok 2"]
    got = {r.key: r for r in kafka.read_range(kafka_up, [topic])}
    assert sorted(got) == [b"0", b"1", b"2"]
    assert [len(got[k].value) for k in (b"0", b"1", b"2")] == [10, 2000, 70_000]
    assert dict(got[b"2"].headers) == {"ums_uid_": b"2"}


def test_a_refused_record_fails_the_flush_and_the_next_producer_sends(kafka_up, new_topic):
    topic = new_topic()
    lines = run(kafka_up, topic, [100, 5000, 100], **{"max.request.size": "1000"})
    assert lines[0] == "ok 0"
    assert lines[1].startswith("failed 1 the appender's Kafka producer failed to send a record"), lines
    assert "5" in lines[1] and "1000" in lines[1], lines  # kafka-clients names the size and the limit
    assert lines[2] == "ok 2"
    assert sorted(r.key for r in kafka.read_range(kafka_up, [topic])) == [b"0", b"2"]
