"""Encoding speed of the per-row formats: a pure measurement, no stack, a few seconds.

The rows are bytes_per_row's (the e2e workload of one table: 4/5 inserts, 1/5 updates, 7 columns),
BENCH_ENCODE_ROWS row changes (default 50,000), as the appender and the full puller encode them:

- ``ums``: the UMS ``data_increment_data`` messages of the rows (500 tuples each) written as JSON text
  (``ums.to_json``): the baseline;
- ``debezium_json``, ``canal_json``, ``avro``: the row changes (``RowChange``, made beforehand from the
  messages with before images) through the format's encoder (``ums.formats.formatter(...).records``),
  the source's ``output`` options; avro's registry ids are made up (no I/O).

Each figure is row changes per second of CPU time (``time.process_time``), the best of
BENCH_ENCODE_ROUNDS rounds (default 3), printed beside ``ums``'s as baseline:
``BENCH formats_encode_debezium_json_rows_per_s value=... baseline=<ums> ratio=...``.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

from bench.bytes_per_row import COLUMNS, messages, workload
from bench.report import bench_line
from dbuslib.config import DbusConfig

ROWS = int(os.environ.get("BENCH_ENCODE_ROWS", "50000"))
ROUNDS = int(os.environ.get("BENCH_ENCODE_ROUNDS", "3"))
FORMATS = ("debezium_json", "canal_json", "avro")
TOPIC = "e2e_0123abcd.dbus_e2e_0123abcd.result"


def best_rate(rows: int, work: Callable[[], object], rounds: int = ROUNDS) -> float:
    """Rows per CPU-second of ``work`` (which handles ``rows`` rows), the best of ``rounds``."""
    best = float("inf")
    for _ in range(rounds):
        start = time.process_time()
        work()
        best = min(best, time.process_time() - start)
    return rows / max(best, 1e-9)


def row_changes(msgs: list[Any]) -> list[Any]:
    from ums.rowchange import from_message
    from ums.types import ColumnSpec

    columns = tuple(ColumnSpec(n, t, nullable) for n, t, nullable in COLUMNS)
    out: list[Any] = []
    for m in msgs:
        out += from_message(m, columns, ("id",), file="mysql-bin.000003", ts_ms=1795000000000)
    return out


def encode_all(fmt: Any, changes: list[Any]) -> int:
    records = fmt.records
    return sum(len(records(TOPIC, c)) for c in changes)


def measure(cfg: DbusConfig, rows: int = ROWS) -> dict[str, float]:
    """Rows per CPU-second of UMS JSON and of each per-row format's encoder."""
    from ums import to_json
    from ums.formats import formatter

    src = cfg.source(next(iter(cfg.sources)))
    statements = workload(rows)
    plain = messages(statements, False, src.ums.tuples_per_message)
    changes = row_changes(messages(statements, True, src.ums.tuples_per_message))
    if len(changes) != rows:
        msg = f"{len(changes)} row changes for {rows} rows"
        raise RuntimeError(msg)
    out = {"ums": best_rate(rows, lambda: [to_json(m) for m in plain])}
    options = src.output.options()
    ids: dict[tuple[str, str], int] = {}

    def schema_ids(subject: str, text: str) -> int:
        return ids.setdefault((subject, text), len(ids) + 1)

    for name in FORMATS:
        fmt = formatter(name.replace("_", "-"), options, schema_ids)
        out[name] = best_rate(rows, lambda fmt=fmt: encode_all(fmt, changes))  # type: ignore[misc]
    return out


def run(cfg: DbusConfig) -> list[str]:
    rates = measure(cfg)
    return [bench_line(f"formats_encode_{name}_rows_per_s", rates[name], "rows/s", rates["ums"])
            for name in ("ums", *FORMATS)]  # fmt: skip
