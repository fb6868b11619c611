"""Runs every benchmark: python -m bench [--config conf/dbus.yaml] [name ...]."""

from __future__ import annotations

import argparse
import importlib
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
]
# run only when named: measurements behind a design, not figures of a stage
OPT_IN = ["realtime", "shipper"]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    p.add_argument("--config", default=None)
    p.add_argument("names", nargs="*", help=f"some of {BENCHMARKS + OPT_IN} (default: {BENCHMARKS})")
    args = p.parse_args(argv)
    unknown = set(args.names) - set(BENCHMARKS + OPT_IN)
    if unknown:
        p.error(f"unknown benchmark(s) {sorted(unknown)}; known: {BENCHMARKS + OPT_IN}")
    cfg = load_config(args.config)
    for name in args.names or BENCHMARKS:
        for line in importlib.import_module(f"bench.{name}").run(cfg):
            print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
