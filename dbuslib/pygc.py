"""Python's cyclic garbage collector in DBus's long-running Python processes.

The extractor and the Python workers of the Spark stages import a great deal once (pyspark, pyarrow,
SQLAlchemy, pydantic, kafka-python: several hundred thousand objects) and then allocate short-lived
containers per record (lists, tuples, dicts, dataclasses). With CPython's default thresholds
(700, 10, 10) the collector keeps walking the imported objects again (measured: docs/performance.md).

``settle()`` is called once a process has made its long-lived state: it collects once, moves every
object alive then to the permanent generation (``gc.freeze``: never walked again) and raises the
thresholds so that young objects are collected every ``THRESHOLDS[0]`` allocations instead of 700.
Reference cycles are still collected; they are only looked for less often. A Spark Python worker keeps
making long-lived objects in its first tasks (lazy imports, SQLAlchemy's statement cache, the meta
store's connection pool), and PySpark's daemon runs a full ``gc.collect()`` after every task of a reused
worker, which walked them each time: the workers therefore settle again after each of their first
``SETTLES`` tasks. Code
that runs per record (a UDF) passes its task's id, so that it settles once per task, not on its first
records.
"""

from __future__ import annotations

import gc
from typing import Any

THRESHOLDS = (50_000, 20, 100)
SETTLES = 3
_settled = 0
_task: Any = None  # the task of the last settle, when the caller named one


def settle(thresholds: tuple[int, int, int] | None = THRESHOLDS, task: Any = None) -> None:
    """Collect, freeze what the process holds now and set ``thresholds`` (None: keep CPython's); done
    at most ``SETTLES`` times per process (later calls return at once, so a per-task caller may call it
    freely), and once per ``task`` when one is given (a per-record caller). A process whose garbage
    cycles can hold large buffers (the extractor) keeps the default thresholds: raised ones let such
    buffers pile up between collections (measured: docs/performance.md)."""
    global _settled, _task
    if _settled >= SETTLES or (task is not None and task == _task):
        return
    _settled += 1
    _task = task
    gc.collect()
    gc.freeze()
    if thresholds is not None:
        gc.set_threshold(*thresholds)
