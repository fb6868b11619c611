"""The JVM classes' jar (``dbus-jvm.jar``: the shared ``binlog/jvm`` (``dbus.jvm.RowsUdf``, the decoder, the
sidecar protocol, planned stops) and each stage's ``<stage>/jvm``), built from the sources that come with
the package.

The local stack builds it itself (``make stack-up``: ``.stack/jars/dbus-jvm.jar``, listed in
``.stack/jars/spark.jars``). An installed wheel carries ``binlog/jvm/build.sh``, ``binlog/jvm/src`` and
each stage's ``jvm/src`` as package data, never a jar (nothing is compiled at ``pip install``);
``dbus jvm build --out JAR`` compiles one on first use, with ``javac --release 17`` against the jars of the
pyspark installed beside DBus (a JDK 17 is needed), and does nothing when the jar is newer than every
source.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
from pathlib import Path

from dbuslib.errors import StackError

JVM_DIR = Path(__file__).resolve().parent / "jvm"
BUILD_SH = JVM_DIR / "build.sh"


def pyspark_prefix() -> Path:
    """The environment whose ``lib/python3*/site-packages`` holds pyspark: build.sh's ``$VENV``."""
    spec = importlib.util.find_spec("pyspark")
    if spec is None or spec.origin is None:
        msg = "pyspark is not installed: the JVM decoder is compiled against its jars"
        raise StackError(msg)
    site = Path(spec.origin).parent.parent
    if site.name != "site-packages" or not site.parent.name.startswith("python3"):
        msg = f"pyspark is in {site}, not in a <prefix>/lib/python3*/site-packages that build.sh can find"
        raise StackError(msg)
    return site.parent.parent.parent


def build(out: Path, kafka_jars: Path | None = None) -> Path:
    """Compile the JVM decoder into ``out`` (a no-op when ``out`` is newer than every source) against
    pyspark's jars and the kafka-clients jar in ``kafka_jars`` (default: ``spark/`` beside ``out``, the
    local stack's layout); StackError naming what is missing (the JDK, pyspark, kafka-clients, the packaged
    sources) or how the build failed."""
    if not BUILD_SH.is_file():
        msg = f"{BUILD_SH} is missing: this installation of DBus has no JVM decoder sources"
        raise StackError(msg)
    missing = [tool for tool in ("javac", "jar") if shutil.which(tool) is None]
    if missing:
        msg = f"{' and '.join(missing)} not on PATH: building the JVM decoder needs a JDK 17"
        raise StackError(msg)
    env = {**os.environ, "VENV": str(pyspark_prefix())}
    if kafka_jars is not None:
        env["DBUS_JVM_KAFKA_JARS"] = str(kafka_jars)
    done = subprocess.run(
        ["bash", str(BUILD_SH), str(out)], env=env, capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        msg = f"building {out} failed (exit {done.returncode}): {done.stderr.strip()[-2000:]}"
        raise StackError(msg)
    return out
