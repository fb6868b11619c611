"""``spark_start_s``: how long a Spark stage's driver takes to start, as ``dbus submit`` starts it (the
dispatcher's spark-submit arguments): spark-submit of an application that makes its session, plans the
Kafka source and runs a small job, until it has exited; the median of ``RUNS``. Baseline: the same with
``spark.class_data_sharing: false`` (no class archive, dbuslib/sparkcds.py), alternated with it in one
run. Lower is better: the ratio is the share of the baseline's time."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.report import bench_line
from dbuslib import spark, sparkcds
from dbuslib.config import DbusConfig

RUNS = int(os.environ.get("BENCH_SPARK_START_RUNS", "5"))
APP = """import sys
from pyspark.sql import SparkSession
spark = SparkSession.builder.getOrCreate()
reader = spark.readStream.format("kafka").option("kafka.bootstrap.servers", sys.argv[1])
reader.option("subscribe", "t").load()
spark.range(10000).selectExpr("id % 7 AS k").groupBy("k").count().collect()
spark.stop()
"""


def once(cfg: DbusConfig, app: Path, work: str) -> float:
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    argv = [spark.spark_submit(), *spark.submit_args(cfg, "dispatcher", 1), str(app)]
    start = time.monotonic()
    subprocess.run(
        [*argv, cfg.endpoints.kafka.bootstrap_servers], check=True, capture_output=True, env=env, cwd=work
    )
    return time.monotonic() - start


def run(cfg: DbusConfig) -> list[str]:
    sparkcds.build(cfg, say=lambda m: print(f"bench: {m}", file=sys.stderr))
    plain = cfg.model_copy(update={"spark": cfg.spark.model_copy(update={"class_data_sharing": False})})
    shared: list[float] = []
    without: list[float] = []
    with tempfile.TemporaryDirectory() as work:
        app = Path(work) / "app.py"
        app.write_text(APP)
        for _ in range(RUNS):
            without.append(once(plain, app, work))
            shared.append(once(cfg, app, work))
    return [bench_line("spark_start_s", statistics.median(shared), "s", statistics.median(without))]
