"""dbuslib.pygc: how often settle() collects and freezes."""

from __future__ import annotations

import gc

import pytest

from dbuslib import pygc


@pytest.fixture
def calls(monkeypatch):
    """settle()'s collections counted; the module's state and the interpreter's GC restored after."""
    made = []
    monkeypatch.setattr(pygc, "_settled", 0)
    monkeypatch.setattr(pygc, "_task", None)
    monkeypatch.setattr(pygc.gc, "collect", lambda: made.append("collect"))
    monkeypatch.setattr(pygc.gc, "freeze", lambda: None)
    before = gc.get_threshold()
    yield made
    gc.set_threshold(*before)


def test_settles_at_most_settles_times(calls):
    for _ in range(pygc.SETTLES + 5):
        pygc.settle()
    assert len(calls) == pygc.SETTLES
    assert gc.get_threshold() == pygc.THRESHOLDS


def test_a_per_record_caller_settles_once_per_task(calls):
    for _ in range(5):  # the first records of task 7
        pygc.settle(task=7)
    assert len(calls) == 1
    for task in (8, 8, 9, 9, 10):
        pygc.settle(task=task)
    assert len(calls) == 3  # tasks 7, 8 and 9; the limit stops task 10


def test_default_thresholds_kept_when_asked(calls):
    before = gc.get_threshold()
    pygc.settle(thresholds=None)
    assert calls == ["collect"]
    assert gc.get_threshold() == before
