"""The Python engine's regex budget (logprocessor/regexbudget.py, operators.run_group/steps) and JSON depth
limit (jsontext.MAX_DEPTH): a crafted backtracking line on a backtracking rule fails its group within the
budget with the code ``LOG_RULE_BUDGET``, on the main thread (``re`` under a SIGALRM timer) and on another
thread (the ``regex`` package's timeout); a normal line still matches; every operator that takes a regex is
budgeted; the budget leaves the handler and timer that were set before as they were; JSON nested up to
``MAX_DEPTH`` levels is read, deeper is a line error, whatever the caller's stack.

The JVM engine's side is tests/unit/test_logrules_budget_jvm.py."""

from __future__ import annotations

import signal
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from logrules_golden import load_cases

from logprocessor import operators, regexbudget
from logprocessor.grammar import Entry, Group, Rule
from logprocessor.jsontext import MAX_DEPTH, JsonTextError, depth, dumps, loads

EVIL = r"(.*a){12}$"
CRAFTED = "a" * 47 + "b"  # 48 characters: years of backtracking in Java's engine and Python's re
GOOD = "xa" * 12  # twelve a's, each after something: matches at once
BUDGET_MS = 100
SAVE = Rule("saveAs", (Entry(scope="0", name="c", type="STRING"),))


def _group(rule: Rule) -> Group:
    return Group("g", (rule, SAVE))


FILTER = _group(Rule("filter", (Entry(scope="0", rule_type="regex", operate="==", param=EVIL),)))


def _timed(fn, *args, **kwargs):
    start = time.monotonic()
    out = fn(*args, **kwargs)
    return out, time.monotonic() - start


def test_the_crafted_line_is_a_dead_letter_within_the_budget_and_a_normal_line_matches():
    res, took = _timed(operators.run_group, FILTER, CRAFTED, BUDGET_MS)
    assert res.rows == [] and res.failure is not None
    assert res.failure.code == "LOG_RULE_BUDGET" == operators.BUDGET_ERROR
    assert res.failure.message == (
        "group 'g' rule 1 (filter): regex '(.*a){12}$' ran over its budget of 100 ms on a 48-character text"
    )
    assert took < 2.0, took  # the budget is 0.1 s; generous for a loaded machine
    good = operators.run_group(FILTER, GOOD, BUDGET_MS)
    assert good.failure is None and good.rows == [[GOOD]]
    miss = operators.run_group(FILTER, "b" * 48, BUDGET_MS)
    assert miss.failure is None and miss.rows == []
    assert operators.run_group(_group(Rule("toIndex", ())), "not json").failure.code == "LOG_LINE_RULE_ERROR"


def test_steps_end_at_the_rule_over_budget_with_its_code():
    taken, took = _timed(operators.steps, FILTER, CRAFTED, None, 50)
    assert [(s.position, s.op, s.rows, s.code) for s in taken] == [(1, "filter", [], "LOG_RULE_BUDGET")]
    assert taken[0].error == "regex '(.*a){12}$' ran over its budget of 50 ms on a 48-character text"
    assert took < 2.0, took
    ok = operators.steps(FILTER, GOOD, budget_ms=50)
    assert [s.code for s in ok] == [None, None] and ok[-1].rows == [[GOOD]]


def test_the_budget_of_the_surrounding_block_and_the_default():
    assert regexbudget.current_ms() == regexbudget.DEFAULT_MS == 100
    with regexbudget.budget(7):
        assert regexbudget.current_ms() == 7
        res = operators.run_group(FILTER, CRAFTED)  # None: the block's
        assert "budget of 7 ms" in res.failure.reason
        with regexbudget.budget(None):
            assert regexbudget.current_ms() == 7
    assert regexbudget.current_ms() == 100
    with pytest.raises(ValueError, match="at least 1"), regexbudget.budget(0):
        pass


@pytest.mark.parametrize(
    "rule",
    [
        Rule("filter", (Entry(scope="0", rule_type="regex", operate="!=", param=EVIL),)),
        Rule("keyFilter", (Entry(filter_key="m", rule_type="regex", operate="==", param=EVIL),)),
        Rule("replace", (Entry(scope="0", rule_type="regex", param=EVIL, operate="x"),)),
        Rule("split", (Entry(scope="0", param=EVIL),)),
        Rule("regexExtract", (Entry(scope="0", param=EVIL),)),
    ],
    ids=lambda r: r.op,
)
def test_every_operator_that_takes_a_regex_is_budgeted(rule):
    line = f'{{"m": "{CRAFTED}"}}' if rule.op == "keyFilter" else CRAFTED
    res, took = _timed(operators.run_group, _group(rule), line, 30)
    assert res.failure is not None and res.failure.code == "LOG_RULE_BUDGET", res
    assert res.failure.position == 1 and res.failure.op == rule.op
    assert took < 2.0, took


def _in_thread(fn, *args):
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(fn, *args).result(timeout=60)


def test_off_the_main_thread_the_regex_package_keeps_the_budget():
    # the regex package answers the crafted line at once (a miss: it avoids this backtracking)...
    res, took = _in_thread(_timed, operators.run_group, FILTER, CRAFTED, BUDGET_MS)
    assert res.failure is None and res.rows == [] and took < 2.0
    # ...and times out on one it cannot avoid, within the budget
    evil = _group(Rule("filter", (Entry(scope="0", rule_type="regex", operate="==", param="(a|aa)+$"),)))
    res, took = _in_thread(_timed, operators.run_group, evil, "a" * 70 + "b", 50)
    assert res.failure is not None and res.failure.code == "LOG_RULE_BUDGET", res
    assert res.failure.reason == "regex '(a|aa)+$' ran over its budget of 50 ms on a 71-character text"
    assert took < 2.0, took
    assert _in_thread(operators.run_group, FILTER, GOOD, BUDGET_MS).rows == [[GOOD]]


CASES = [c for c in load_cases() if c.refused is None]


def _outcome(case):
    """A golden case's rules on its rows, as the golden test runs them: the rows, or the line error."""
    rows = case.rows
    try:
        with regexbudget.budget(5000):
            for rule in case.rules:
                rows = operators.run_rule(rule, rows)
                if not rows:
                    break
    except operators.LineError as e:
        return ("error", e.reason)
    return ("rows", rows)


def test_the_golden_cases_give_the_same_off_the_main_thread():
    """The regex package (VERSION0) reads every golden case's regexes as re does."""
    main = [_outcome(c) for c in CASES]
    threaded = _in_thread(lambda: [_outcome(c) for c in CASES])
    differ = [(c.id, a, b) for c, a, b in zip(CASES, main, threaded, strict=True) if a != b]
    assert not differ, differ[:5]
    assert len(CASES) > 200


def test_the_timer_and_handler_set_before_are_put_back():
    fired = []

    def outer(signum, frame):
        fired.append(time.monotonic())

    previous = signal.signal(signal.SIGALRM, outer)
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.5)
        start = time.monotonic()
        res = operators.run_group(FILTER, CRAFTED, 100)
        assert res.failure.code == "LOG_RULE_BUDGET"
        assert operators.run_group(FILTER, GOOD, 100).rows == [[GOOD]]
        assert signal.getsignal(signal.SIGALRM) is outer
        left, _ = signal.getitimer(signal.ITIMER_REAL)
        assert 0 < left <= 0.5
        deadline = time.monotonic() + 5
        while not fired and time.monotonic() < deadline:
            time.sleep(0.01)
        assert fired and 0.4 <= fired[0] - start < 2.0, (fired, start)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@settings(max_examples=30, deadline=None)
@given(st.text(alphabet="ab\n", max_size=30))
def test_budgeted_search_is_re_search(text):
    import re

    for pattern in (r"a+b", r"(a|b)*\n", r"^b", r"(?<x>a)\k<x>"):
        rx = re.compile(pattern.replace("(?<x>", "(?P<x>").replace(r"\k<x>", "(?P=x)"), re.ASCII)
        want = rx.search(text)
        got = regexbudget.search(pattern, text)
        assert (want is None) == (got is None)
        if want is not None:
            assert want.span() == got.span() and want.groups() == got.groups()


# ---------------------------------------------------------------- JSON depth


def _nested(levels: int) -> str:
    """A JSON object ``levels`` deep (objects and arrays alternating), with a string holding brackets."""
    text = '"[[{{"'
    for k in range(levels):
        text = f'{{"k":{text}}}' if k % 2 == 0 else f"[{text}]"
    return text


@pytest.mark.parametrize(
    "levels", [1, 2, 100, MAX_DEPTH - 1, MAX_DEPTH, MAX_DEPTH + 1, 985, 986, 987, 988, 3000]
)
def test_json_is_read_up_to_max_depth_whatever_the_stack(levels):
    text = _nested(levels)
    assert depth(text) == levels

    def deep_stack(n: int):
        if n:
            return deep_stack(n - 1)
        try:
            return dumps(loads(text)) == text
        except JsonTextError as e:
            return str(e)

    for frames in (0, 300, sys.getrecursionlimit() - 400):
        got = deep_stack(frames)
        if levels <= MAX_DEPTH:
            assert got is True, (levels, frames, got)
        else:
            assert got == f"not JSON: nested too deeply (more than {MAX_DEPTH} levels)", (levels, frames)


def test_a_line_nested_past_the_limit_breaks_to_index_in_the_python_engine():
    group = _group(Rule("toIndex", (Entry(scope="0", param="k"),)))
    at = operators.run_group(group, '{"k":"v","d":' + _nested(MAX_DEPTH - 1) + "}")
    assert at.failure is None and at.rows == [["v"]]
    over = operators.run_group(group, '{"k":"v","d":' + _nested(MAX_DEPTH) + "}")
    assert over.failure is not None and "nested too deeply" in over.failure.reason
    assert over.failure.code == "LOG_LINE_RULE_ERROR"


def test_a_thread_keeps_the_main_threads_budget_default():
    seen = []
    t = threading.Thread(target=lambda: seen.append(regexbudget.current_ms()))
    with regexbudget.budget(9):
        t.start()
        t.join()
    assert seen == [regexbudget.DEFAULT_MS]  # a new thread starts from the default, not the caller's block


def test_dbus_logrules_test_says_the_code_of_a_line_over_budget():
    from cli.logtest import show_steps

    with regexbudget.budget(30):
        printed, outcome = show_steps(FILTER, CRAFTED, None)
    assert outcome == "broken"
    assert printed == [
        "step 1 filter: error: LOG_RULE_BUDGET: group 'g' rule 1 (filter): regex '(.*a){12}$' ran over its "
        "budget of 30 ms on a 48-character text"
    ]
    printed, outcome = show_steps(FILTER, GOOD, None)
    assert outcome == "accepted", printed
