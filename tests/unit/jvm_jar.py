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
    home = Path(os.environ.get("STACK_HOME", REPO / ".stack"))
    out = home / "jars" / "dbus-jvm.jar"
    subprocess.run(["bash", str(REPO / "binlog/jvm/build.sh"), str(out)], check=True, timeout=300)
    return out
