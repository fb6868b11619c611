"""Shared fixtures. Unit tests need nothing; integration fixtures live in tests/integration/conftest.py.

A Spark session a test makes runs its Python workers (Python UDFs, ``mapInArrow``) with this interpreter,
the project's venv, not the ``python3`` on PATH: PySpark reads ``PYSPARK_PYTHON`` when its context starts.
Tests that start stages or a cluster set their own.

**The order of the test files** (``pytest_collection_modifyitems``, tests/fileorder.py). ``make test``
runs two xdist workers that take whole files in collection order (``--dist loadfile
--no-loadscope-reorder``). An ``exclusive`` integration test holds the stack lock alone
(tests/integration/conftest.py), so a second worker that takes another integration file meanwhile waits,
idle. The files are therefore ordered so that each exclusive file is followed by unit files (which take
no lock) of about its duration: while one worker runs the exclusive test, the other runs those. A test
marked ``exclusive(alone=True)`` (it times seconds) comes first, followed by an integration file, so that
nothing at all runs beside it. Then come the other integration files, longest first, then the unit files
left.
**Long tests** (marked ``long``: a soak, or the second trigger mode of a failure test whose first mode runs
every time) are skipped unless ``DBUS_LONG_TESTS=1``; ``make test-long`` runs them (CONTRIBUTING.md, Tests).

Durations per file are read from tests/durations.json (seconds, from a run with
``DBUS_TEST_DURATIONS=tests/durations.json``, which writes each file it ran into it, keeping the others:
``make test``'s secure pass adds its files to the plain pass's); a file not in it counts as 1 s (unit) or
30 s (integration). ``DBUS_TEST_CPU=<file.json>`` writes where the run's CPU went, by kind of process
(tests/cpuprofile.py).
"""

from __future__ import annotations

import json
import os
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from cpuprofile import ENV as CPU_ENV
from cpuprofile import Sampler, running
from fileorder import order_files

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

DURATIONS = Path(__file__).with_name("durations.json")
RECORD_ENV = "DBUS_TEST_DURATIONS"  # a path: write each file's duration there at the end of the run
_spent: dict[str, float] = defaultdict(float)
_cpu: list[Sampler] = []  # the controller's, under DBUS_TEST_CPU


def _file_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


LONG_ENV = "DBUS_LONG_TESTS"  # 1: run the tests marked long too (make test-long runs only them)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if os.environ.get(LONG_ENV) != "1":
        skip = pytest.mark.skip(reason=f"long: {LONG_ENV}=1 runs it (make test-long)")
        for item in items:
            if item.get_closest_marker("long") is not None:
                item.add_marker(skip)
    by_file: dict[str, list[pytest.Item]] = {}
    for item in items:
        by_file.setdefault(_file_of(item.nodeid), []).append(item)
    marks = {f: [m for i in its for m in i.iter_markers("exclusive")] for f, its in by_file.items()}
    exclusive = {f for f, m in marks.items() if m}
    alone = frozenset(f for f, m in marks.items() if any(x.kwargs.get("alone") for x in m))
    try:
        durations = json.loads(DURATIONS.read_text())
    except (OSError, ValueError):
        durations = {}
    items[:] = [i for f in order_files(list(by_file), exclusive, durations, alone) for i in by_file[f]]


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if os.environ.get(RECORD_ENV):
        _spent[_file_of(report.nodeid)] += report.duration


def pytest_sessionstart(session: pytest.Session) -> None:
    if os.environ.get(CPU_ENV) and not hasattr(session.config, "workerinput"):
        _cpu.append(Sampler(path=os.environ[CPU_ENV]).start())


def pytest_runtest_protocol(item: pytest.Item) -> None:
    if os.environ.get(CPU_ENV):  # the file this pytest process runs now, for the sampler's by_file
        running(os.environ[CPU_ENV], os.getpid(), _file_of(item.nodeid))


def pytest_sessionfinish(session: pytest.Session, exitstatus: Any) -> None:
    out = os.environ.get(RECORD_ENV)
    if out and not hasattr(session.config, "workerinput") and _spent:  # the controller writes it
        # into what the file holds: make test's secure pass adds its files' seconds to the plain pass's
        known = json.loads(Path(out).read_text()) if Path(out).is_file() else {}
        known.update({f: round(s, 1) for f, s in _spent.items()})
        Path(out).write_text(json.dumps(dict(sorted(known.items())), indent=1) + "\n")
    if _cpu:
        Path(os.environ[CPU_ENV]).write_text(json.dumps(_cpu[0].stop(), indent=1) + "\n")


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if _cpu:
        found = _cpu[0].result()
        total = sum(found["cpu_s"].values())
        terminalreporter.write_sep("=", f"CPU by kind of process ({CPU_ENV}={os.environ[CPU_ENV]})")
        terminalreporter.write_line(
            f"{total:.0f} CPU-s sampled in {found['elapsed_s']:.0f} s on {found['cores']} cores"
        )
        for k, v in [kv for kv in found["cpu_s"].items() if kv[1] >= 0.1][:20]:
            terminalreporter.write_line(f"{v:9.1f} CPU-s  {found['starts'].get(k, 0):5d} started  {k}")
        terminalreporter.write_line("by test file (its pytest process and what that started; - the rest):")
        for f, kinds in list(found["by_file"].items())[:20]:
            top = ", ".join(f"{k} {v:.0f}" for k, v in list(kinds.items())[:3])
            terminalreporter.write_line(f"{sum(kinds.values()):9.1f} CPU-s  {f}  ({top})")
