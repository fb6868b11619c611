"""Which tables a source captures: fnmatch globs over ``schema.table``, compiled once (pure)."""

from __future__ import annotations

import fnmatch
import re

from dbuslib.config import Capture


class TableFilter:
    """``allows("shop", "orders")``: included by some pattern and excluded by none (exclude wins).

    Answers are cached per table, so the per-event cost is one dict lookup.
    """

    def __init__(self, capture: Capture) -> None:
        self._include = _compile(capture.include)
        self._exclude = _compile(capture.exclude)
        self._cache: dict[tuple[str, str], bool] = {}

    def allows(self, schema: str, table: str) -> bool:
        key = (schema, table)
        hit = self._cache.get(key)
        if hit is None:
            name = f"{schema}.{table}"
            hit = bool(self._include.match(name)) and not self._exclude.match(name)
            self._cache[key] = hit
        return hit


def _compile(patterns: tuple[str, ...]) -> re.Pattern[str]:
    if not patterns:
        return re.compile(r"(?!)")  # matches nothing
    return re.compile("|".join(f"(?:{fnmatch.translate(p)})" for p in patterns))
