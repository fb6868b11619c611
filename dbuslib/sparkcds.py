"""Class data sharing for the Spark drivers DBus starts: a JVM starts from an archive of the classes a
Spark stage loads (the JDK's AppCDS, a dynamic archive) instead of reading and verifying them from the jars
each time. A trivial PySpark application's spark-submit took 10.2-10.6 s and 11.3 CPU-seconds here; with
the archive 5.6-5.8 s and 6.8 (docs/performance.md, Spark's start).

An archive is only good for the JVM, the pyspark (its jars, the class path) and the JVM options it was made
with, so each combination has its own file, named by a hash of the three (``key``), in the folder of the
stages' jar list (``dbuslib.spark.jars_list``: ``.stack/jars`` of the local stack, or DBus's user cache).
``dbus spark cds`` makes the archives of the configured stages (``make stack-up`` runs it; an installed DBus
runs it once, after ``dbus spark jars``); a stage uses its archive when it exists
(``spark.class_data_sharing``, on by default). The JVM checks an archive itself and, when it does not
match after all, starts without it: its notice about that is turned off (``QUIET``), so a mismatch costs
the time saved, never a start.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from dbuslib.config import DbusConfig

OPTIONS = "spark.driver.extraJavaOptions"
QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off"
TRAIN = Path(__file__).with_name("sparkcds_train.py")  # what a stage's driver loads, without a server
BUILD_TIMEOUT_S = 600


def key(java_options: str) -> str:
    """What an archive is good for: this JVM (its file and build time), this Spark (``spark_submit``'s, and
    each jar of its class path by name, size and time, which the JVM checks against the archive: a
    reinstalled pyspark has new files, and its stages would start without the old archive) and
    ``java_options``."""
    from dbuslib import connectors, spark

    found = connectors.java_path()
    jvm = os.path.realpath(found) if found else "java"
    try:
        built = os.stat(jvm).st_mtime_ns
    except OSError:
        built = 0
    submit = spark.spark_submit()
    ident = [jvm, built, submit, connectors.spark_version(), java_options.strip(), class_path(submit)]
    return hashlib.sha256(json.dumps(ident).encode()).hexdigest()[:16]


def class_path(spark_submit: str) -> list[tuple[str, int, int]]:
    """The jars of spark-submit's class path (``<spark>/jars``), each as (name, size, mtime_ns)."""
    found = []
    try:
        with os.scandir(Path(spark_submit).parent.parent / "jars") as entries:
            for entry in entries:
                st = entry.stat()
                found.append((entry.name, st.st_size, st.st_mtime_ns))
    except OSError:
        return []
    return sorted(found)


def archive_path(cfg: DbusConfig, java_options: str) -> Path:
    """Where the archive for ``java_options`` lives (beside the stages' jar list)."""
    from dbuslib import spark

    return spark.jars_list(cfg).parent / f"spark-classes-{key(java_options)}.jsa"


def with_archive(cfg: DbusConfig, conf: dict[str, str]) -> dict[str, str]:
    """``conf`` (a driver's final settings) with its archive added to ``spark.driver.extraJavaOptions`` when
    ``spark.class_data_sharing`` is on and the archive for those options exists; else ``conf`` unchanged."""
    base = conf.get(OPTIONS, "")
    if not cfg.spark.class_data_sharing or "SharedArchiveFile" in base or "ArchiveClassesAtExit" in base:
        return conf
    path = archive_path(cfg, base)
    if not path.is_file():
        return conf
    return {**conf, OPTIONS: f"{base} -XX:SharedArchiveFile={path} {QUIET}".strip()}


def option_sets(cfg: DbusConfig) -> list[str]:
    """The distinct JVM options of the configured Spark stages' drivers: ``spark.conf``'s, and each
    ``spark.stages.<stage>`` that sets its own."""
    base = cfg.spark.conf.get(OPTIONS, "")
    found = [base] + [s[OPTIONS] for s in cfg.spark.stages.values() if OPTIONS in s]
    return list(dict.fromkeys(found))


def build(cfg: DbusConfig, say: Callable[[str], None]) -> list[Path]:
    """The archive of every ``option_sets`` made when missing (about 30 s each: a spark-submit of
    ``TRAIN`` that writes the classes it loaded at its exit; the missing ones are made at once, side by
    side); returns the archives. A failed build is said, and the stages start without it."""
    from concurrent.futures import ThreadPoolExecutor

    from dbuslib import spark

    jvm_jars = [j for j in spark.jars(cfg) if Path(j).name == spark.JVM_JAR]
    wanted = {archive_path(cfg, options): options for options in option_sets(cfg)}
    missing = [(options, path) for path, options in wanted.items() if not path.is_file()]
    if missing:
        with ThreadPoolExecutor(len(missing)) as pool:
            list(pool.map(lambda m: _make(cfg, m[0], m[1], jvm_jars, say), missing))
    return [path for path in wanted if path.is_file()]


def _make(cfg: DbusConfig, options: str, path: Path, jvm_jars: list[str], say: Callable[[str], None]) -> None:
    from dbuslib import spark

    say(f"making the Spark drivers' class archive {path} (once, about 30 s)")
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".spark-classes-", suffix=".jsa")
    os.close(fd)
    os.unlink(tmp)  # the JVM writes it at its exit
    dump = {OPTIONS: f"{options} -XX:ArchiveClassesAtExit={tmp} {QUIET}".strip()}
    argv = [spark.spark_submit(), *spark.submit_args(cfg, master="local[2]", conf=dump)]
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    with tempfile.TemporaryDirectory() as work:
        done = subprocess.run(
            [*argv, str(TRAIN), work, *jvm_jars],
            capture_output=True,
            text=True,
            timeout=BUILD_TIMEOUT_S,
            env=env,
            cwd=work,
            check=False,
        )
    if done.returncode != 0 or not Path(tmp).is_file():
        Path(tmp).unlink(missing_ok=True)
        tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        say(f"the class archive was not made (spark-submit exited {done.returncode}): {' | '.join(tail)}")
        return
    os.replace(tmp, path)
