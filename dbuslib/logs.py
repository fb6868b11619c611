"""One logging setup for every stage and the ``dbus`` command.

Loggers are named after their module (``logging.getLogger(__name__)``: ``extractor.loop``,
``appender.rules``, ``dbuslib.retry``), so a line says where it came from. ``setup_logging()`` writes
``2026-01-01 12:00:00,000 INFO extractor.loop: demo: leading (epoch 3)`` lines on stderr at INFO
(DEBUG with ``verbose``); the chatty client libraries stay at WARNING unless ``verbose``.
"""

from __future__ import annotations

import logging

FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
NOISY = ("kafka", "kazoo", "py4j", "pymysqlreplication")


def setup_logging(verbose: bool = False) -> None:
    """Configure the root logger once; a process that configured it already (a test calling ``main()``
    in-process, pytest's capture) keeps its handlers."""
    root = logging.getLogger()
    if not root.handlers:
        logging.basicConfig(level=logging.DEBUG if verbose else logging.INFO, format=FORMAT)
    for name in NOISY:
        logging.getLogger(name).setLevel(logging.NOTSET if verbose else logging.WARNING)
