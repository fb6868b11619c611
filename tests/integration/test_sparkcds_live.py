"""``dbus spark cds`` on the stack's configuration (``make stack-up`` runs it): an archive for each set of
JVM options of the configured stages, and a stage's spark-submit arguments name the one of its options,
which the JVM maps (``-Xshare:on`` makes a JVM that cannot use its archive refuse to start)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from helpers import spark_submit_env

from dbuslib import spark, sparkcds

APP = """from pyspark.sql import SparkSession
print("rows", SparkSession.builder.getOrCreate().range(3).count())
"""


def test_the_archives_are_made_once_and_a_stage_driver_maps_its_own(cfg, tmp_path):
    dbus = str(Path(sys.executable).with_name("dbus"))
    config = ["--config", str(cfg.path)]
    first = subprocess.run([dbus, *config, "spark", "cds"], capture_output=True, text=True, timeout=900)
    assert first.returncode == 0, first.stderr
    archives = [Path(line) for line in first.stdout.split()]
    assert len(archives) == len(sparkcds.option_sets(cfg)) and all(a.is_file() for a in archives)
    again = subprocess.run([dbus, *config, "spark", "cds"], capture_output=True, text=True, timeout=120)
    assert again.returncode == 0 and again.stdout == first.stdout and "making" not in again.stderr

    args = spark.submit_args(cfg, "logprocessor", 1)
    options = next(a for a in args if a.startswith(f"{sparkcds.OPTIONS}="))
    own = sparkcds.archive_path(cfg, cfg.spark.stages["logprocessor"][sparkcds.OPTIONS])
    assert f"-XX:SharedArchiveFile={own}" in options
    app = tmp_path / "app.py"
    app.write_text(APP)
    strict = [a if a != options else f"{options} -Xshare:on" for a in args]
    done = subprocess.run(
        [spark.spark_submit(), *strict, str(app)],
        capture_output=True,
        text=True,
        timeout=300,
        env=spark_submit_env(),
        cwd=tmp_path,
        check=False,
    )
    assert done.returncode == 0 and "rows 3" in done.stdout, (done.stdout + done.stderr)[-3000:]
