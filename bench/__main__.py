"""Runs every benchmark: python -m bench [--config conf/dbus.yaml] [name ...].

Several benchmarks run one after the other, each in a Python process of its own: a benchmark that
starts a Spark session (logrules, logprocessor, ...) must not hand its JVM, and that JVM's jars, to the
next one. One that fails is reported and the others still run; the exit code is 1 if any failed."""

from __future__ import annotations

import argparse
import importlib
import subprocess
import sys

from dbuslib.config import load_config

BENCHMARKS = [
    "bytes_per_row",
    "formats_encode",
    "kafka_produce",
    "extractor",
    "e2e",
    "fullpull",
    "logrules",
    "logprocessor",
    "log_latency",
    "client",
    "spark_start",
]
# run only when named: measurements behind a design, not figures of a stage
OPT_IN = ["realtime", "shipper", "peer_snapshot"]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    p.add_argument("--config", default=None)
    p.add_argument("names", nargs="*", help=f"some of {BENCHMARKS + OPT_IN} (default: {BENCHMARKS})")
    args = p.parse_args(argv)
    unknown = set(args.names) - set(BENCHMARKS + OPT_IN)
    if unknown:
        p.error(f"unknown benchmark(s) {sorted(unknown)}; known: {BENCHMARKS + OPT_IN}")
    names = args.names or BENCHMARKS
    cfg = load_config(args.config)  # a bad config fails here, once, not in every benchmark
    if len(names) == 1:
        for line in importlib.import_module(f"bench.{names[0]}").run(cfg):
            print(line, flush=True)
        return 0
    config = ["--config", args.config] if args.config else []
    failed = [n for n in names if subprocess.call([sys.executable, "-m", "bench", *config, n]) != 0]
    if failed:
        print(f"bench: {len(failed)} of {len(names)} failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
