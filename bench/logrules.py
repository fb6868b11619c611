"""The log processor's rules step: lines/s through a rule group in the JVM (``dbus.jvm.LogRulesUdf``, what the
stage runs: logprocessor/rules_jvm.py ``lines_results``) beside the Python reference
(``logprocessor.operators``).

The group: the spec's §5.7 example (conf/demo/logrules/order_events.json: keyFilter, toIndex, filter, split,
regexExtract, trim, select, saveAs); the lines: its logstash sample (conf/demo/logrules/
order_events.logstash.jsonl) cycled, each with its own order number, BENCH_LOGRULES_LINES of them (default
200000), one line per record as a logstash record carries.

value: Spark (``spark.master``, local[2] in the demo) running ``dbus_log_rules`` over the lines, cached in
memory first; the clock covers one action that sums the rows every line gave (after two runs on the same
lines, while the JIT compiles the engine: a running stage's steady state).
baseline: plain Python, ``operators.run_group`` on each line, in the same run on the same machine.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from bench.report import bench_line
from dbuslib.config import DbusConfig
from logprocessor import operators
from logprocessor.grammar import TableRules, groups_from_json, save_as_columns

LINES = int(os.environ.get("BENCH_LOGRULES_LINES", "200000"))
DEMO = Path(__file__).resolve().parents[1] / "conf" / "demo" / "logrules"
ORDER = "order=98123"


def samples() -> list[str]:
    lines = (DEMO / "order_events.logstash.jsonl").read_text().splitlines()
    return [line for line in lines if line.strip()]


def python_rate(group: operators.Group, lines: list[str]) -> tuple[float, int]:
    start = time.perf_counter()
    rows = sum(len(operators.run_group(group, line).rows) for line in lines)
    return len(lines) / (time.perf_counter() - start), rows


def jvm_rate(cfg: DbusConfig, tables: list[TableRules], sample: list[str], n: int) -> tuple[float, int]:
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    from binlog import jvmjar
    from dbuslib.spark import _is_jvm, jars, scheme
    from logprocessor.rules_jvm import lines_results

    # the stack's jar, current with the sources (a no-op when it is), as the log processor's bench
    jar = next(Path(j.removeprefix("file:")) for j in jars(cfg) if _is_jvm(j) and scheme(j) == "file")
    jvmjar.build(jar)
    spark = (
        SparkSession.builder.master(cfg.spark.master)
        .appName("bench_logrules")
        .config("spark.ui.enabled", "false")
        .config("spark.jars", str(jar))
        .getOrCreate()
    )
    try:
        texts = F.array(*[F.lit(s) for s in sample])
        line = F.replace(
            F.element_at(texts, (F.col("id") % len(sample) + 1).cast("int")),
            F.lit(ORDER),
            F.concat(F.lit("order="), F.col("id").cast("string")),
        )

        def run(count: int) -> tuple[float, int]:
            df = spark.range(count).select(F.array(line).alias("lines")).cache()
            df.count()
            results = lines_results(spark, F.col("lines"), tables)
            rows = F.expr("aggregate(r, 0L, (a, x) -> a + size(x.rows))")
            start = time.perf_counter()
            total = df.select(results.alias("r")).select(F.sum(rows)).first()
            elapsed = time.perf_counter() - start
            if total is None:  # a sum without grouping gives one row, even over no rows
                msg = "bench_logrules: the sum of result rows gave no row"
                raise RuntimeError(msg)
            (got,) = total
            df.unpersist()
            return count / elapsed, int(got or 0)

        for _ in range(2):  # the JIT compiles the engine: a running stage's steady state
            run(n)
        return run(n)
    finally:
        spark.stop()


def run(cfg: DbusConfig) -> list[str]:
    groups = groups_from_json((DEMO / "order_events.json").read_text())
    tables = [TableRules("order_events", 1, groups, save_as_columns(groups[0]))]
    sample = samples()
    lines = [sample[i % len(sample)].replace(ORDER, f"order={i}") for i in range(LINES)]
    jvm, jvm_rows = jvm_rate(cfg, tables, sample, LINES)
    python, python_rows = python_rate(groups[0], lines)
    if jvm_rows != python_rows:
        msg = f"log rules: the JVM gave {jvm_rows} rows, operators.py {python_rows}, for the same lines"
        raise RuntimeError(msg)
    return [bench_line("log_rules_lines_per_s", jvm, "lines/s", python)]
