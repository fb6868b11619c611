"""console/throttle.py: failed logins counted per name and per address over a window (a fake clock)."""

from __future__ import annotations

import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from console.throttle import MAX_WAITING, LoginThrottle


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, s: float) -> None:
        self.slept.append(s)


def throttle(clock: Clock, **kw: float) -> LoginThrottle:
    limits = {"window_s": 60, "slow_after": 5, "delay_s": 1, "user_failures": 10, "address_failures": 30}
    return LoginThrottle(**{**limits, **kw}, clock=clock, sleep=clock.sleep)  # type: ignore[arg-type]


def test_the_first_failures_pass_then_attempts_wait_then_are_refused() -> None:
    clock = Clock()
    t = throttle(clock)
    seen = []
    for _ in range(12):
        v = t.verdict("operator", "10.0.0.1")
        seen.append("refused" if v.refused else f"wait {v.wait_s:g}")
        if not v.refused:
            t.failed("operator", "10.0.0.1")
        clock.now += 1
    assert seen == ["wait 0"] * 5 + ["wait 1"] * 5 + ["refused"] * 2


def test_a_refusal_says_when_the_oldest_failure_leaves_the_window() -> None:
    clock = Clock()
    t = throttle(clock)
    for _ in range(10):
        t.failed("operator", "10.0.0.1")
        clock.now += 2  # failures at 1000, 1002, ... 1018; now 1020
    v = t.verdict("operator", "10.0.0.1")
    assert v.refused and v.by == "user" and v.failures == 10 and v.retry_after == 40
    clock.now = 1059.5
    assert t.verdict("operator", "10.0.0.1").refused
    clock.now = 1060.0  # the failure of 1000 is out: 9 remain
    v = t.verdict("operator", "10.0.0.1")
    assert not v.refused and v.wait_s == 1


def test_a_right_password_is_refused_too_while_locked() -> None:
    """The throttle answers before any password is read: the 20th attempt is refused whatever it holds."""
    clock = Clock()
    t = throttle(clock)
    for _ in range(19):
        if not t.verdict("operator", "10.0.0.1").refused:
            t.failed("operator", "10.0.0.1")
    assert t.verdict("operator", "10.0.0.1").refused


def test_names_and_addresses_count_apart() -> None:
    clock = Clock()
    t = throttle(clock, user_failures=3, address_failures=5)
    for i in range(5):  # five names from one address: no name is locked, the address is
        t.failed(f"user{i}", "10.0.0.1")
    v = t.verdict("user9", "10.0.0.1")
    assert v.refused and v.by == "address" and v.failures == 5
    assert not t.verdict("user9", "10.0.0.2").refused  # the same name from elsewhere
    for _ in range(3):
        t.failed("operator", "10.0.0.3")
    v = t.verdict("operator", "10.0.0.4")  # a locked name is locked from every address
    assert v.refused and v.by == "user"


def test_a_success_clears_its_name_but_not_its_address() -> None:
    clock = Clock()
    t = throttle(clock, user_failures=3, address_failures=4)
    for _ in range(2):
        t.failed("operator", "10.0.0.1")
    t.succeeded("operator")
    assert t.verdict("operator", "10.0.0.2").failures == 0
    for _ in range(2):
        t.failed("viewer", "10.0.0.1")
    assert t.verdict("viewer", "10.0.0.1").refused  # the address's 4 failures stayed


def test_refusals_are_audited_1st_2nd_4th_8th_of_a_lock() -> None:
    clock = Clock()
    t = throttle(clock, user_failures=2)
    t.failed("operator", "a")
    t.failed("operator", "a")
    audited = [n for n in range(1, 20) if t.verdict("operator", "a").audit]
    assert audited == [1, 2, 4, 8, 16]
    clock.now += 61  # the lock is over; a new one is audited from its first refusal
    t.failed("operator", "a")
    t.failed("operator", "a")
    assert t.verdict("operator", "a").audit


def test_waits_are_bounded() -> None:
    """At most MAX_WAITING attempts wait at once; the next one is told at once that it may not."""
    t = LoginThrottle(window_s=60, slow_after=1, delay_s=1, user_failures=10, address_failures=10)
    release = threading.Event()
    t._sleep = lambda s: release.wait(10)  # type: ignore[method-assign]  # hold the waiters
    waiters = [threading.Thread(target=t.wait, args=(1,)) for _ in range(MAX_WAITING)]
    for w in waiters:
        w.start()
    try:
        assert not t.wait(1)
    finally:
        release.set()
        for w in waiters:
            w.join()
    assert t.wait(1)  # and a wait is possible again


def test_no_wait_sleeps_not() -> None:
    clock = Clock()
    assert throttle(clock).wait(0) and clock.slept == []


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from("abcdefgh"), st.sampled_from("xyz")), max_size=200))
def test_memory_is_bounded(attempts: list[tuple[str, str]]) -> None:
    clock = Clock()
    t = LoginThrottle(
        window_s=60, slow_after=2, delay_s=0, user_failures=3, address_failures=5, max_keys=4, clock=clock
    )
    for name, address in attempts:
        if not t.verdict(name, address).refused:
            t.failed(name, address)
        assert len(t) <= 4
        assert all(len(q) <= 5 for q in t._failures.values())


@pytest.mark.parametrize(("gap", "refused"), [(5.9, True), (6.0, False)])
def test_the_window_slides(gap: float, refused: bool) -> None:
    clock = Clock()
    t = throttle(clock, window_s=6, user_failures=2)
    t.failed("operator", "a")
    clock.now += 1
    t.failed("operator", "a")
    clock.now += gap - 1
    assert t.verdict("operator", "a").refused is refused


def test_attempts_refused_for_too_many_waiting_are_audited_sparsely() -> None:
    clock = Clock()
    t = throttle(clock)
    verdicts = [t.busy(1.0) for _ in range(9)]
    assert all(v.refused and v.retry_after == 1 for v in verdicts)
    assert [i + 1 for i, v in enumerate(verdicts) if v.audit] == [1, 2, 4, 8]
    clock.now += 60  # a new window: its first is audited again
    assert t.busy(1.0).audit


def test_a_huge_name_is_kept_short() -> None:
    clock = Clock()
    t = throttle(clock, user_failures=2)
    huge = "x" * 2_000_000
    t.failed(huge, "a")
    t.failed(huge, "b")
    assert t.verdict(huge, "c").refused
    assert all(len(key[1]) <= 256 for key in t._failures)
    t.succeeded(huge)
    assert not t.verdict(huge, "c").refused
