"""The Spark edge: the connector jars resolved by `make stack-up`, spark-submit arguments, sessions.

Every Spark stage is started as ``spark-submit $(dbus spark args) <stage>/main.py --config ...``; the
same jars and settings are used when a test or the demo builds a session in-process.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from dbuslib.config import DbusConfig
from dbuslib.errors import StackError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def jars(cfg: DbusConfig) -> list[str]:
    """Absolute paths of the connector jars (spark-sql-kafka and its deps, the MariaDB JDBC driver)."""
    path = cfg.resolve(cfg.spark.jars_file)
    try:
        listed = [j for j in path.read_text().strip().split(",") if j]
    except FileNotFoundError:
        msg = f"{path} is missing: run `make stack-up` to resolve Spark's Kafka connector"
        raise StackError(msg) from None
    if not listed:
        msg = f"{path} lists no jars: run `make stack-up` again"
        raise StackError(msg)
    return listed


def submit_args(cfg: DbusConfig) -> list[str]:
    """Arguments for spark-submit before the application file."""
    args = ["--master", cfg.spark.master, "--jars", ",".join(jars(cfg))]
    for key, value in sorted(cfg.spark.conf.items()):
        args += ["--conf", f"{key}={value}"]
    return args


def session(cfg: DbusConfig, app_name: str) -> SparkSession:
    """A SparkSession configured like spark-submit would configure it (for tests and the demo)."""
    from pyspark.sql import SparkSession

    import sys

    builder = SparkSession.builder.appName(app_name).master(cfg.spark.master)
    builder = builder.config("spark.jars", ",".join(jars(cfg)))
    builder = builder.config("spark.pyspark.python", sys.executable)  # workers import DBus from this venv
    for key, value in cfg.spark.conf.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


def checkpoint(cfg: DbusConfig, *parts: str) -> str:
    """Checkpoint folder of one query: <checkpoint_root>/<part>/<part>."""
    return str(cfg.resolve(cfg.spark.checkpoint_root).joinpath(*parts))


def with_trigger(writer: Any, available_now: bool = False, interval_ms: int = 0) -> Any:
    """A DataStreamWriter's trigger: ``availableNow`` (process what is there, then stop), a fixed
    interval, or (0) the next micro-batch as soon as the previous one ends."""
    if available_now:
        return writer.trigger(availableNow=True)
    if interval_ms > 0:
        return writer.trigger(processingTime=f"{interval_ms} milliseconds")
    return writer
