"""The one output format of every benchmark."""

from __future__ import annotations


def bench_line(figure: str, value: float, unit: str, baseline: float | None = None) -> str:
    """``BENCH kafka_produce_rows_per_s value=52000.1 unit=rows/s baseline=2100.4 ratio=24.76``."""
    line = f"BENCH {figure} value={value:.1f} unit={unit}"
    if baseline is not None:
        ratio = value / baseline if baseline else float("inf")
        line += f" baseline={baseline:.1f} ratio={ratio:.2f}"
    return line
