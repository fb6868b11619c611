"""The local Spark standalone cluster of ``stack/cluster.sh``, for tests that need one (not a test module).

- ``up()``: the master and both workers running (a no-op when healthy); returns the master URL.
- ``kill_worker(n)`` / ``start_worker(n)``: ``kill -9`` of worker ``n``'s JVM (1 or 2) and its start again;
  each returns once the master and the process table agree.
- ``executor_env()``: the executors' packed Python environment (built when the dependencies changed).
- ``spark_conf()``: the settings that give a session's executors that environment.
- ``workers()`` / ``apps()``: what the master's ``/json`` says now.

Worker 2 runs in its own mount namespace without the checkout and the venv, as on another machine: the
job brings its Python (``spark_conf()``) and its code (``--py-files``).
"""

from __future__ import annotations

import json
import os
import subprocess
import urllib.request
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "stack" / "cluster.sh"
UI_URL = f"http://127.0.0.1:{os.environ.get('CLUSTER_UI_PORT', '18080')}"
PYTHON = "./env/bin/python"  # the archive's interpreter, relative to an executor's working directory


def _run(*args: str) -> str:
    """Run ``bash stack/cluster.sh ARGS``; its log goes to our stderr, its stdout is returned stripped."""
    done = subprocess.run(["bash", str(SCRIPT), *args], check=True, stdout=subprocess.PIPE, text=True)
    return done.stdout.strip()


def up() -> str:
    """Start the cluster (a no-op when healthy) and return the master URL (``spark://127.0.0.1:17077``)."""
    return _run("up").splitlines()[-1]


def down() -> None:
    """Stop the workers (and any executor of theirs) and the master."""
    _run("down")


def kill_worker(n: int) -> None:
    """``kill -9`` worker ``n``'s JVM; returns when it, its executors and its ALIVE state are gone."""
    _run("kill-worker", str(n))


def start_worker(n: int) -> None:
    """Start worker ``n`` again; returns when the master shows it ALIVE."""
    _run("start-worker", str(n))


def executor_env() -> Path:
    """The executors' packed Python environment (``.stack/cluster/executor-env.tar.gz``)."""
    return Path(_run("executor-env").splitlines()[-1])


def spark_conf() -> dict[str, str]:
    """Settings that unpack ``executor_env()`` as ``./env`` beside each executor and run its Python.

    ``spark.pyspark.python`` is honoured by ``spark-submit``; a driver started from Python (a test) must also
    set ``os.environ["PYSPARK_PYTHON"] = PYTHON`` before its SparkContext starts: PySpark takes the
    executors' interpreter from that variable, and the workers have no Python of the project.
    """
    return {"spark.archives": f"{executor_env()}#env", "spark.pyspark.python": PYTHON}


def _state() -> dict[str, Any]:
    with urllib.request.urlopen(f"{UI_URL}/json/", timeout=5) as resp:
        return json.load(resp)


def workers() -> list[dict]:
    """Every worker the master knows (a killed one stays, DEAD): id, host, port, state, cores, coresused."""
    keys = ("id", "host", "port", "state", "cores", "coresused")
    return [{k: w[k] for k in keys} for w in _state()["workers"]]


def apps() -> list[dict]:
    """The master's running applications: id, name, state, cores."""
    keys = ("id", "name", "state", "cores")
    return [{k: a[k] for k in keys} for a in _state()["activeapps"]]
