"""Spark's own metrics reach ``dbus metrics exporter`` (``prometheus.spark_metrics``, docs/monitoring.md):
a real dispatcher, started as ``dbus submit`` starts it, reports its metrics system through Spark's
GraphiteSink to the exporter's Graphite listener, and ``/metrics`` serves them as ``spark_<metric>`` with
the application's name and ``driver`` as labels (the JVM's heap among them)."""

from __future__ import annotations

import re
import subprocess
import sys
import urllib.request

import pytest
import yaml
from console_env import free_port
from extractor_env import cleanup, make_env
from helpers import wait_until

from cli.stages import Stages, stop_group
from dbuslib.config import load_config, raw_config

pytestmark = pytest.mark.integration


def test_a_spark_stage_s_own_metrics_are_on_the_exporter(tmp_path, writer_db, kafka_up):
    env = make_env(tmp_path, writer_db[1])
    listen, graphite = free_port(), free_port()
    raw = raw_config(env.cfg_path)
    raw["prometheus"] = {"listen": f"127.0.0.1:{listen}", "spark_metrics": f"127.0.0.1:{graphite}"}
    path = tmp_path / "spark-metrics.yaml"
    path.write_text(yaml.safe_dump(raw))
    cfg = load_config(path)
    log = (tmp_path / "exporter.log").open("wb")
    exporter = subprocess.Popen(
        [sys.executable, "-m", "cli.main", "--config", str(path), "metrics", "exporter"],
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    stages = Stages(cfg, env.ds, tmp_path / "logs")
    try:
        stages.start("dispatcher")
        stages.wait_ready("dispatcher")

        def heap() -> str:
            with urllib.request.urlopen(f"http://127.0.0.1:{listen}/metrics", timeout=10) as r:
                body = r.read().decode()
            return "\n".join(
                ln for ln in body.splitlines() if ln.startswith("spark_jvm_heap_used{") and env.ds in ln
            )

        found = wait_until(heap, 120, "the dispatcher's JVM heap as spark_jvm_heap_used", alive=[stages])
        print(f"\n{found}")
        assert re.search(r'instance="driver"', found) and float(found.split()[-1]) > 0, found
    finally:
        stages.stop_all()
        stop_group(exporter)
        log.close()
        cleanup(env)
