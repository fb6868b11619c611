"""``logging.format: json`` on a real spark-submit: the driver's Python lines (DBus's loggers), Spark's JVM
lines and the failing stage's last line are JSON objects of one form, which Spark reads back with
``pyspark.logger.SPARK_LOG_SCHEMA``."""

from __future__ import annotations

import json
import re
import subprocess

from extractor_env import REPO
from helpers import spark_app_config, spark_submit_env

from cli.submit import spark_submit
from dbuslib import spark as dspark
from dbuslib.config import load_config

APP = """
import logging, sys
from dbuslib.config import load_config
from dbuslib.errors import EndpointError, report
from dbuslib.logs import setup_logging
setup_logging()
cfg = load_config(sys.argv[1])
from pyspark.sql import SparkSession
spark = SparkSession.builder.getOrCreate()
logging.getLogger("appender.main").info("demo: %d rows", spark.range(5).count())
spark.stop()
sys.exit(report("appender", EndpointError("Kafka at k:9092 is not reachable")))
"""
SPARK_TS = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z")


def test_one_json_form_for_dbus_and_spark_lines(spark, tmp_path):
    path = spark_app_config(tmp_path, lambda raw: raw.update(logging={"format": "json"}))
    cfg = load_config(path)
    app = tmp_path / "app.py"
    app.write_text(APP)
    env = {**spark_submit_env(), "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [spark_submit(), *dspark.submit_args(cfg), str(app), str(path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,  # spark-submit's driver: its Python's stderr comes out on stdout
        text=True,
        env=env,
        timeout=300,
        check=False,
        cwd=tmp_path,
    )
    assert done.returncode == 3, done.stdout[-3000:]
    lines = done.stdout.splitlines()
    # the lines spark-submit prints before Spark reads its settings, and Spark's notice when it switches to
    # the JSON layout: the documented exceptions (docs/monitoring.md#log-lines)
    known = re.compile(
        r"WARNING: Using incubator modules|Using Spark's default log4j profile|\d\d/\d\d/\d\d .* WARN Utils: "
    )
    other = [line for line in lines if not line.startswith("{")]
    assert all(known.match(line) for line in other), other
    json_lines = [line for line in lines if line.startswith("{")]
    parsed = [json.loads(line) for line in json_lines]
    assert all({"ts", "level", "msg", "logger"} <= set(p) and SPARK_TS.fullmatch(p["ts"]) for p in parsed)
    mine = [p for p in parsed if p["logger"] == "appender.main"]
    assert [p["msg"] for p in mine] == ["demo: 5 rows"]
    assert any(p["logger"] == "SparkContext" for p in parsed)  # the JVM's own lines
    assert parsed[-1]["msg"] == "appender: ENDPOINT_UNREACHABLE: Kafka at k:9092 is not reachable"
    assert parsed[-1]["context"] == {"stage": "appender", "code": "ENDPOINT_UNREACHABLE"}
    # Spark reads DBus's lines and its own with one schema
    from pyspark.logger import SPARK_LOG_SCHEMA

    log = tmp_path / "stage.log"
    log.write_text("\n".join(json_lines) + "\n")
    rows = spark.read.schema(SPARK_LOG_SCHEMA).json(str(log)).collect()
    assert len(rows) == len(parsed) and all(r.ts is not None and r.msg is not None for r in rows)
    assert {r.logger for r in rows} >= {"appender.main", "SparkContext", "dbus"}
