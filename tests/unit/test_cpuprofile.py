"""tests/cpuprofile.py names a process by its program, not by the paths in its arguments."""

from __future__ import annotations

import os

import pytest
from cpuprofile import Sampler, _test_file, kind, running

JAVA = "/usr/lib/jvm/java-17-openjdk-amd64/bin/java"
VENV_PY = "/work/main/.venv/bin/python"


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (
            [
                JAVA,
                "-cp",
                "/a/conf:/a/jars/*",
                "-Xmx1g",
                "org.apache.spark.deploy.SparkSubmit",
                "--conf",
                "x=y",
                "/work/main/appender/main.py",
                "--config",
                "/tmp/pytest-of-root/pytest-5/t0/dbus.yaml",
            ],
            "spark-driver-jvm:appender",
        ),
        (
            [JAVA, "-cp", "/a/*", "org.apache.spark.deploy.SparkSubmit", "pyspark-shell"],
            "spark-driver-jvm:pyspark-shell",
        ),
        (
            [
                JAVA,
                "-Xms512m",
                "-XX:+UseG1GC",
                "-cp",
                "/s/jars/kafka/*",
                "kafka.Kafka",
                "/s/server.properties",
            ],
            "kafka",
        ),
        (
            [JAVA, "-cp", "/s/*", "org.apache.spark.launcher.Main", "org.apache.spark.deploy.SparkSubmit"],
            "spark-launcher",
        ),
        ([JAVA, "-Xss8m", "-cp", "/s/dbus-jvm.jar", "dbus.jvm.LogRulesCheck"], "java:LogRulesCheck"),
        ([VENV_PY, "-u", "-c", "import sys;exec(eval(sys.stdin.readline()))"], "pytest-worker"),
        ([VENV_PY, "-m", "pyspark.daemon"], "pyspark-worker"),
        (
            [VENV_PY, "-m", "extractor", "--config", "/tmp/pytest-of-root/pytest-1/x.yaml", "run"],
            "python -m extractor",
        ),
        (
            [VENV_PY, "/work/main/dispatcher/main.py", "--config", "/tmp/pytest-of-root/c.yaml"],
            "python-driver:dispatcher",
        ),
        ([VENV_PY, "/work/main/.venv/bin/dbus", "status"], "python dbus"),
        (["/usr/sbin/mariadbd", "--defaults-file=/s/my.cnf"], "mariadbd"),
        (["postgres: checkpointer "], "postgres"),
        (
            [JAVA, "-Xmx384m", "-jar", "/w/.stack/jars/registry-build/target/registry-runtime-1-runner.jar"],
            "registry",
        ),
        ([], "?"),
    ],
)
def test_a_process_is_named_by_its_program(argv, expected):
    assert kind(argv) == expected


def burn_in_a_child(seconds: float) -> None:
    """A child of this (pytest) process that burns CPU for ``seconds``, then ends; returns when it has."""
    pid = os.fork()
    if pid == 0:
        end = os.times().elapsed + seconds
        while os.times().elapsed < end:
            pass
        os._exit(0)
    os.waitpid(pid, 0)


def test_a_sampler_counts_the_processes_started_while_it_runs():
    sampler = Sampler(interval_s=0.05).start()
    burn_in_a_child(0.3)
    found = sampler.stop()
    assert found["elapsed_s"] >= 0 and found["cores"] == os.cpu_count()
    assert sum(found["starts"].values()) >= 1, found


def test_a_child_s_time_goes_to_the_file_its_pytest_process_runs(tmp_path):
    path = str(tmp_path / "cpu.json")
    running(path, os.getpid(), "tests/unit/test_x.py")
    sampler = Sampler(interval_s=0.05, path=path).start()
    burn_in_a_child(0.6)  # across several samples
    found = sampler.stop()
    assert sum(found["by_file"].get("tests/unit/test_x.py", {}).values()) > 0.1, found["by_file"]
    assert not (tmp_path / "cpu.json.running").exists()


def test_a_process_of_no_pytest_process_counts_as_the_rest():
    assert _test_file("30", {"30": "20", "20": "1"}, {"10": "tests/a.py"}) == "-"
    assert _test_file("30", {"30": "20", "20": "10", "10": "1"}, {"10": "tests/a.py"}) == "tests/a.py"
