"""One logging setup for every stage and the ``dbus`` command.

Loggers are named after their module (``logging.getLogger(__name__)``: ``extractor.loop``,
``appender.rules``, ``dbuslib.retry``), so a line says where it came from. ``setup_logging()`` writes
``2026-01-01 12:00:00,000 INFO extractor.loop: demo: leading (epoch 3)`` lines on stderr at INFO
(DEBUG with ``verbose``); the chatty client libraries stay at WARNING unless ``verbose``.

``configure(cfg)``, called by ``load_config``, follows the file's ``logging.format``: with ``json`` every
line is a JSON object in Spark's structured form (``pyspark.logger.SPARK_LOG_SCHEMA``), its ``ts`` in
Spark's format (UTC, ``2026-01-01T12:00:00.000Z``), so a stage's Python lines and its JVM's lines
(``spark.log.structuredLogging.enabled``, dbuslib.spark.settings) read with one schema; the last line of a
stage that fails (``dbuslib.errors.report``) is one of them too.
"""

from __future__ import annotations

import functools
import logging
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dbuslib.config import DbusConfig

FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
NOISY = ("kafka", "kazoo", "py4j", "pymysqlreplication")
_format = "text"  # what configure() chose: report() follows it


@functools.cache
def json_formatter() -> logging.Formatter:
    """PySpark's JSON formatter (the fields of Spark's JSON layout), its ``ts`` as Spark writes it."""
    from pyspark.logger.logger import JSONFormatter

    class SparkLines(JSONFormatter):
        converter = staticmethod(time.gmtime)
        default_time_format = "%Y-%m-%dT%H:%M:%S"
        default_msec_format = "%s.%03dZ"

    return SparkLines()


def configure(cfg: DbusConfig) -> None:
    """Follow ``cfg.logging.format`` (``load_config`` calls this): the root logger's handlers get the JSON
    formatter for ``json``, DBus's text format back for ``text``; nothing changes while the format stays."""
    global _format
    if cfg.logging.format == _format:
        return
    _format = cfg.logging.format
    formatter = json_formatter() if _format == "json" else logging.Formatter(FORMAT)
    for handler in logging.getLogger().handlers:
        handler.setFormatter(formatter)


def final_line(text: str, **context: Any) -> str:
    """A stage's last line (its error), as the configured format writes lines: ``text`` itself, or a
    JSON line (level ERROR, logger ``dbus``) with ``context``."""
    if _format != "json":
        return text
    record = logging.LogRecord("dbus", logging.ERROR, __file__, 0, text, None, None)
    record.context = {k: str(v) for k, v in context.items()}
    return json_formatter().format(record)


def setup_logging(verbose: bool = False) -> None:
    """Configure the root logger once; a process that configured it already (a test calling ``main()``
    in-process, pytest's capture) keeps its handlers."""
    root = logging.getLogger()
    if not root.handlers:
        logging.basicConfig(level=logging.DEBUG if verbose else logging.INFO, format=FORMAT)
    for name in NOISY:
        logging.getLogger(name).setLevel(logging.NOTSET if verbose else logging.WARNING)
