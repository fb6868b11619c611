"""The extractor's lag (extractor/metrics.py): now minus the last event's server time while it reads, 0
once it has read everything the server has, however old that last event is (issue #32: an idle
extractor's lag grew while it was 0 bytes behind)."""

from __future__ import annotations

import time

from extractor.metrics import ExtractorMetrics


def test_lag_is_the_age_of_the_last_event_while_reading():
    m = ExtractorMetrics("demo", last_event_ts=int(time.time()) - 30)
    assert 29 <= m.rates(0, 0).lag_s <= 31


def test_an_extractor_caught_up_has_no_lag():
    m = ExtractorMetrics("demo", last_event_ts=int(time.time()) - 3600, caught_up=True)
    assert m.rates(0, 0).lag_s == 0.0


def test_no_event_yet_is_no_lag():
    assert ExtractorMetrics("demo").rates(0, 0).lag_s == 0.0
