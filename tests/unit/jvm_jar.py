"""The JVM jar (binlog/jvm) for the tests that run its classes: built into the stack's jar directory by
binlog/jvm/build.sh (a no-op when current). java and javac must be on PATH (JDK 17): a missing JDK fails,
it does not skip."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def build() -> Path:
    for tool in ("java", "javac", "jar"):
        assert shutil.which(tool), f"{tool} (JDK 17) is not on PATH: the JVM decoder cannot be built"
    home = Path(os.environ.get("STACK_CACHE", REPO / ".stack"))  # jars: stack/env.sh
    out = home / "jars" / "dbus-jvm.jar"
    subprocess.run(["bash", str(REPO / "binlog/jvm/build.sh"), str(out)], check=True, timeout=300)
    return out


def stack_jars() -> list[str]:
    """The Spark connectors `make stack-up` resolved (Kafka's, MariaDB's JDBC driver: the list file
    ``spark.jars_file`` names), when every listed jar is there; none without the stack."""
    from dbuslib import connectors

    return connectors.listed(Path(os.environ.get("STACK_CACHE", REPO / ".stack")) / "jars") or []


def spark_session(app: str, probe_class: str):
    """A local[2] SparkSession with the jar: the one of this process when one exists (getOrCreate), with the
    jar added when that session was made without it (``probe_class`` not loadable). A session made here
    launches this process's JVM, whose class path is fixed from then on: it carries the stack's connectors
    too, or an integration test's session later in the same pytest worker (tests/integration/conftest.py's
    ``spark``) could not find the Kafka source."""
    from pyspark.sql import SparkSession

    jar = build()
    session = (
        SparkSession.builder.master("local[2]")
        .appName(app)
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.jars", ",".join(dict.fromkeys([str(jar), *stack_jars()])))
        .getOrCreate()
    )
    jvm = session._jvm
    for part in probe_class.split("."):
        jvm = getattr(jvm, part)
    if type(jvm).__name__ == "JavaPackage":  # py4j's name for what it cannot load as a class
        session.sql(f"ADD JAR '{jar}'")
    return session
