"""A Spark stage whose meta store or Kafka cannot be reached at start ends with exit 3 and
ENDPOINT_RETRIES_EXHAUSTED on the first line the stage prints (``<stage>: ...``; log records and Spark's
own output aside), not a traceback with exit 1 (docs/errors.md, exit codes). The stage runs as
spark-submit runs it, ``python <stage>/main.py`` in cli/stages.py's environment: the failure comes before
its Spark session (the full puller's meta store: just after it). The endpoint is a closed loopback port
and ``endpoints.retry.budget_s`` is tiny, so a run takes seconds (an attempt to reach Kafka waits within
the budget, at least 1 s: ``dbuslib.kafka.bootstrap_wait_s``; kafka-python alone waited 30 s).
"""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from cli import stages
from dbuslib.config import raw_config

REPO = Path(__file__).resolve().parents[2]


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def config_with(cfg, tmp_path: Path, endpoint: str) -> Path:
    """``cfg``'s file with ``endpoint`` (meta_store or kafka) on a closed port and a 0.05 s retry budget."""
    doc = raw_config(cfg.path)
    port = closed_port()
    if endpoint == "meta_store":
        doc["endpoints"]["meta_store"]["url"] = f"mysql+pymysql://dbus:dbus@127.0.0.1:{port}/dbus"
    else:
        doc["endpoints"]["kafka"]["bootstrap_servers"] = f"127.0.0.1:{port}"
    doc["endpoints"]["retry"]["budget_s"] = 0.05
    doc["spark"]["jars_file"] = str(cfg.resolve(cfg.spark.jars_file))
    doc["spark"]["checkpoint_root"] = str(tmp_path / "checkpoints")
    path = tmp_path / "dbus.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


@pytest.mark.parametrize(
    ("stage", "endpoint"),
    [
        ("appender", "meta_store"),
        ("appender", "kafka"),
        ("dispatcher", "kafka"),
        ("fullpuller", "kafka"),
        ("fullpuller", "meta_store"),
    ],
)
def test_unreachable_endpoint_at_start_exits_3(cfg, tmp_path, stage, endpoint):
    path = config_with(cfg, tmp_path, endpoint)
    run = subprocess.run(
        [sys.executable, str(REPO / stage / "main.py"), "--config", str(path), "--source", "demo"],
        cwd=tmp_path,
        env=stages.environment(cfg),
        capture_output=True,
        text=True,
        timeout=120,
    )
    said = [ln for ln in run.stderr.splitlines() if ln.startswith(f"{stage}: ")]
    assert run.returncode == 3, run.stderr
    assert said and said[0].startswith(f"{stage}: ENDPOINT_RETRIES_EXHAUSTED: "), run.stderr
    assert "Traceback" not in run.stderr, run.stderr
