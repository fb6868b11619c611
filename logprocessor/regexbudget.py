"""Rule regexes with a time budget in the Python engine (operators.py; docs/logs.md, Regex budget).

A Java regex can backtrack for years on a crafted line (``(.*a){12}$`` on 48 characters). Every regex the
operators run on a cell (``search``, ``sub``, ``finditer``) runs here under the budget of the current
``budget(ms)`` block (``processor.regex_budget_ms``, default 100 ms); past it the call raises ``OverBudget``,
which the operators turn into the line's failure with the code ``LOG_RULE_BUDGET``: the processor's JVM
engine (``dbus.jvm.logrules.Budget``) makes such a line a dead letter with that code and these words.

How a call is stopped depends on the thread, since Python's ``re`` can only be interrupted by a signal:

- on the main thread (``dbus logrules test``, a worker process of a pool): the pattern runs in ``re``, the
  engine the operators are written and tested for, which backtracks as Java's does; a ``SIGALRM`` timer
  (``setitimer``) interrupts it at the budget, and the handler and timer there before are put back after;
- on any other thread (a web server's request thread): the same translated pattern runs in the ``regex``
  package (its ``VERSION0``, ``re``'s semantics) with its ``timeout=``. That engine avoids some catastrophic
  backtracking that ``re`` and Java do not (it answers ``(.*a){12}$`` on the crafted line in milliseconds), so
  there a line the processor gives up on may be answered (a miss) instead of ``OverBudget``.
"""

from __future__ import annotations

import re
import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from functools import lru_cache
from typing import Any, TypeVar

import regex

from dbuslib.config import LogProcessorSettings
from logprocessor.javatext import java_regex

CODE = "LOG_RULE_BUDGET"  # the dead letter's code (docs/errors.md), the JVM engine's too
DEFAULT_MS: int = LogProcessorSettings.model_fields["regex_budget_ms"].default

T = TypeVar("T")

_BUDGET_MS: ContextVar[int] = ContextVar("regex_budget_ms", default=DEFAULT_MS)


class OverBudget(Exception):
    """A regex ran past its budget on a text: the line is a dead letter ``LOG_RULE_BUDGET``."""

    def __init__(self, pattern: str, budget_ms: int, length: int) -> None:
        self.reason = reason(pattern, budget_ms, length)
        super().__init__(self.reason)


def reason(pattern: str, budget_ms: int, length: int) -> str:
    """The words of the dead letter, the same in the JVM engine (``Budget.Exceeded``)."""
    return f"regex {pattern!r} ran over its budget of {budget_ms} ms on a {length}-character text"


@contextmanager
def budget(ms: int | None) -> Iterator[None]:
    """Regexes in the block run with ``ms`` milliseconds each (None: the budget around the block, by default
    ``DEFAULT_MS``, 100)."""
    if ms is None:
        yield
        return
    if ms < 1:
        msg = f"regex budget {ms} ms: at least 1"
        raise ValueError(msg)
    token = _BUDGET_MS.set(ms)
    try:
        yield
    finally:
        _BUDGET_MS.reset(token)


def current_ms() -> int:
    return _BUDGET_MS.get()


def search(pattern: str, text: str) -> Any:
    """The Java regex ``pattern`` (``javatext.java_regex``, which must accept it) searched in ``text``
    (Java's ``find``) within the budget: a match (of ``re`` or ``regex``, the same methods) or None."""
    return _call(pattern, text, lambda p, kw: p.search(text, **kw))


def sub(pattern: str, replacement: Callable[[Any], str], text: str) -> str:
    """Every match of ``pattern`` in ``text`` replaced by ``replacement(match)``, within one budget."""
    return _call(pattern, text, lambda p, kw: p.sub(replacement, text, **kw))


def finditer(pattern: str, text: str) -> list[Any]:
    """Every match of ``pattern`` in ``text``, found within one budget."""
    return _call(pattern, text, lambda p, kw: list(p.finditer(text, **kw)))


# ---------------------------------------------------------------- how a call is stopped


class _Alarm(BaseException):
    """Raised by the SIGALRM handler inside ``re``; a BaseException so no ``except Exception`` swallows it."""


def _call(pattern: str, text: str, run: Callable[[Any, dict[str, Any]], T]) -> T:
    ms = _BUDGET_MS.get()
    rx = java_regex(pattern)
    if _can_alarm():
        try:
            return _with_alarm(ms / 1000, lambda: run(rx, {}))
        except _Alarm:
            raise OverBudget(pattern, ms, len(text)) from None
    try:
        thread_rx = _thread_pattern(rx.pattern)
    except regex.error as e:  # re reads it, the regex package does not: refused, never run without a budget
        msg = f"the regex package cannot read it ({e})"
        raise re.error(msg) from None
    try:
        return run(thread_rx, {"timeout": ms / 1000})
    except TimeoutError:
        raise OverBudget(pattern, ms, len(text)) from None


def _can_alarm() -> bool:
    """The main thread, with SIGALRM handled by Python (or not at all): the timer can interrupt ``re``."""
    return (
        hasattr(signal, "setitimer")
        and threading.current_thread() is threading.main_thread()
        and signal.getsignal(signal.SIGALRM) is not None
    )


def _with_alarm(seconds: float, run: Callable[[], T]) -> T:
    """``run()`` interrupted by ``_Alarm`` after ``seconds``; the SIGALRM handler and the timer that were set
    (pytest-timeout's, say) are put back, the timer with what was left of it."""
    fired: list[bool] = []

    def on_alarm(signum: int, frame: Any) -> None:
        if not fired:  # once: after it, a late signal is ignored
            fired.append(True)
            raise _Alarm

    previous = signal.signal(signal.SIGALRM, on_alarm)
    start = time.monotonic()
    old_delay, old_interval = signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        try:
            return run()
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
    finally:
        fired.append(True)
        signal.signal(signal.SIGALRM, previous)
        if old_delay > 0:
            left = old_delay - (time.monotonic() - start)
            signal.setitimer(signal.ITIMER_REAL, max(left, 1e-6), old_interval)


@lru_cache(maxsize=512)
def _thread_pattern(translated: str) -> Any:
    """The translated pattern in the ``regex`` package with ``re``'s semantics (VERSION0, ASCII classes; the
    pattern's own inline flags as it writes them)."""
    return regex.compile(translated, regex.ASCII | regex.VERSION0)
