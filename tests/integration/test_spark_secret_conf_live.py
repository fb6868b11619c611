"""A secret in ``spark.conf`` reaches the Spark application through spark-submit's
``--extra-properties-file`` (dbuslib.spark.secret_properties), read back by Spark's own reader exactly, and
is on no command line while the application runs."""

from __future__ import annotations

import json
import subprocess

from helpers import spark_app_config, spark_submit_env

from cli.submit import spark_submit
from dbuslib import spark as dspark
from dbuslib.config import load_config

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
    cfg = load_config(spark_app_config(tmp_path, lambda raw: raw["spark"]["conf"].update(secrets)))
    app = tmp_path / "app.py"
    app.write_text(APP)
    argv = [spark_submit(), *dspark.submit_args(cfg), str(app), *secrets]
    assert not any(v in " ".join(argv) for v in secrets.values())
    out = subprocess.run(
        argv, capture_output=True, text=True, env=spark_submit_env(), timeout=300, check=True
    ).stdout
    lines = {
        line.split(" ", 1)[0]: json.loads(line.split(" ", 1)[1]) for line in out.splitlines() if " " in line
    }
    assert lines["CONF"] == secrets
    ps = lines["PS"]
    assert "SparkSubmit" in ps and "--extra-properties-file" in ps
    assert not [v for v in secrets.values() if v in ps]
