"""The consumer client (``dbusclient``) is a library an application imports: none of its modules loads
Spark, the console's web stack or the extractor's binlog reader, so a client-only installation (issue 32:
without pyspark and Flask) needs none of them."""

from __future__ import annotations

import subprocess
import sys

HEAVY = ("pyspark", "py4j", "flask", "waitress", "pandas", "pyarrow", "pymysqlreplication")

PROBE = f"""
import importlib, pkgutil, sys
import dbusclient
for m in pkgutil.iter_modules(dbusclient.__path__):
    importlib.import_module("dbusclient." + m.name)
print(",".join(m for m in {HEAVY!r} if m in sys.modules))
"""


def test_importing_every_client_module_loads_no_spark_web_or_binlog_reader():
    done = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=120, check=True
    )
    assert done.stdout.strip() == "", f"dbusclient imports {done.stdout.strip()}"
