"""A secret in ``spark.conf`` reaches the Spark application through spark-submit's
``--extra-properties-file`` (dbuslib.spark.secret_properties), read back by Spark's own reader exactly, and
is on no command line while the application runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import yaml
from extractor_env import REPO

from cli.submit import spark_submit
from dbuslib import spark as dspark
from dbuslib.config import DEFAULT_CONFIG, load_config

APP = """
import json, subprocess, sys
from pyspark import SparkConf, SparkContext
sc = SparkContext(conf=SparkConf())
conf = dict(sc.getConf().getAll())
ps = subprocess.run(["ps", "-eww", "-o", "args"], capture_output=True, text=True).stdout
print("CONF " + json.dumps({k: conf.get(k) for k in sys.argv[1:]}))
print("PS " + json.dumps(ps))
sc.stop()
"""


def test_a_secret_in_spark_conf_reaches_spark_exactly_and_no_command_line(tmp_path):
    secrets = {
        "spark.hadoop.fs.s3a.secret.key": "s3:k=ey#!\\back",  # the separators and escapes of the format
        "spark.executorEnv.DB_PASSWORD": "pässwörd tab\there",
    }
    raw = yaml.safe_load(DEFAULT_CONFIG.read_text())
    raw["spark"]["conf"] = {**raw["spark"]["conf"], **secrets}
    raw["spark"]["jars_file"] = str(REPO / ".stack" / "jars" / "spark.jars")
    path = tmp_path / "dbus.yaml"
    path.write_text(yaml.safe_dump(raw))
    cfg = load_config(path)
    app = tmp_path / "app.py"
    app.write_text(APP)
    argv = [spark_submit(), *dspark.submit_args(cfg), str(app), *secrets]
    assert not any(v in " ".join(argv) for v in secrets.values())
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    env["PATH"] = f"{os.path.dirname(sys.executable)}:{env['PATH']}"
    out = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=300, check=True).stdout
    lines = {
        line.split(" ", 1)[0]: json.loads(line.split(" ", 1)[1]) for line in out.splitlines() if " " in line
    }
    assert lines["CONF"] == secrets
    ps = lines["PS"]
    assert "SparkSubmit" in ps and "--extra-properties-file" in ps
    assert not [v for v in secrets.values() if v in ps]
