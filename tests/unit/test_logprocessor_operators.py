"""logprocessor/operators.py beyond its golden cases: groups, steps, and what any input may do.

The golden files (test_logrules_golden.py) hold the operators' semantics; here: ``run_group`` and ``steps``
(the empty saveAs appended, the failure named, the first empty rule ending the run), and hypothesis over
arbitrary rows, grammars and lines: an operator raises nothing but ``LineError``, never changes its input,
and ``run_group`` never raises at all.
"""

from __future__ import annotations

import copy
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from logprocessor.grammar import OPERATORS, Column, Entry, Group, Rule
from logprocessor.operators import GroupResult, LineError, run_group, run_rule, steps

TO_INDEX = Rule("toIndex", (Entry(scope="0", param="msg"), Entry(scope="1", param="lvl")))
KEEP_ERROR = Rule("filter", (Entry(scope="1", operate="==", rule_type="string", param="ERROR"),))
SAVE = Rule(
    "saveAs", (Entry(scope="0", name="msg", type="STRING"), Entry(scope="1", name="lvl", type="STRING"))
)
LINE = '{"msg":"boom","lvl":"ERROR"}'


def test_a_group_accepts_a_line_with_its_columns():
    result = run_group(Group("g", (TO_INDEX, KEEP_ERROR, SAVE)), LINE)
    assert result == GroupResult("g", [["boom", "ERROR"]], (Column("msg", "string"), Column("lvl", "string")))
    assert result.accepted


def test_a_group_without_save_as_gets_an_empty_one():
    result = run_group(Group("g", (TO_INDEX,)), LINE)
    assert (result.rows, result.columns, result.failure) == ([[]], (), None)


def test_the_first_rule_that_leaves_no_rows_ends_the_group():
    breaks_later = Rule("toIndex", (Entry(scope="0", param="x"),))  # column 0 is no JSON object any more
    result = run_group(Group("g", (TO_INDEX, Rule("filter", ()), breaks_later)), LINE)
    assert (result.rows, result.failure, result.accepted) == ([], None, False)


def test_a_line_error_names_group_rule_and_operator():
    keep_all = Rule("filter", (Entry(scope="0", operate="!=", rule_type="string", param="zzz"),))
    result = run_group(Group("orders", (keep_all, TO_INDEX, SAVE)), "not json")
    assert result.rows == []
    assert result.failure is not None
    assert (result.failure.position, result.failure.op) == (2, "toIndex")
    assert result.failure.message.startswith("group 'orders' rule 2 (toIndex): column 0: not a JSON object")


def test_a_rule_after_save_as_breaks_the_line():
    result = run_group(Group("g", (TO_INDEX, SAVE, KEEP_ERROR)), LINE)
    assert result.failure is not None
    assert (result.failure.position, result.failure.reason) == (
        3,
        "a rule after saveAs (saveAs must be the group's last rule)",
    )


def test_steps_show_the_rows_after_each_rule_up_to_a_step():
    group = Group("g", (TO_INDEX, KEEP_ERROR, SAVE))
    assert [(s.position, s.op, s.rows) for s in steps(group, LINE)] == [
        (1, "toIndex", [["boom", "ERROR"]]),
        (2, "filter", [["boom", "ERROR"]]),
        (3, "saveAs", [["boom", "ERROR"]]),
    ]
    assert [s.op for s in steps(group, LINE, upto=2)] == ["toIndex", "filter"]


def test_steps_end_at_the_rule_that_leaves_nothing_or_breaks():
    group = Group("g", (TO_INDEX, KEEP_ERROR, SAVE))
    assert [(s.op, s.rows, s.error) for s in steps(group, '{"msg":"ok","lvl":"INFO"}')] == [
        ("toIndex", [["ok", "INFO"]], None),
        ("filter", [], None),
    ]
    (broken,) = steps(group, "[1]")
    assert broken.rows == [] and broken.error is not None and "not a JSON object" in broken.error


@pytest.mark.parametrize("upto", [0, 4, -1])
def test_steps_refuse_a_step_the_group_does_not_have(upto):
    with pytest.raises(ValueError, match=r"has rules 1\.\.3"):
        steps(Group("g", (TO_INDEX, KEEP_ERROR, SAVE)), LINE, upto=upto)


def test_an_unknown_operator_is_a_line_error():
    with pytest.raises(LineError, match="unknown operator 'explode'"):
        run_rule(Rule("explode", ()), [["a"]])


# ---------------------------------------------------------------- any input

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=8,
)
json_texts = json_values.map(json.dumps)
texts = st.text(alphabet='ab 1-|:.,[]{}"$\\()*?+é\t\n', max_size=12)
cells = st.one_of(st.none(), texts, json_texts)
rows = st.lists(st.lists(cells, max_size=4), max_size=3)

SCOPES = [
    "0",
    "1",
    "2",
    "-1",
    "-3",
    "*",
    "0:",
    "1:",
    "-2:",
    "0:-1",
    "1:1",
    "2:1",
    "1:-2",
    "2,0",
    "-1,0",
    "7",
    " 1",
]
PARAMS = [
    "",
    " ",
    "|",
    "a",
    "(a)|(b)",
    r"(\d+)",
    "(?<n>a)",
    "[",
    "a**",
    "$.a",
    "$..a",
    "$.a[*]",
    "a.b",
    "$[?(@)]",
]
OPERATES = ["==", "!=", "left", "right", "both", "all", "before", "after", "$1", "${n}", "\\", "$"]
TYPES = ["STRING", "LONG", "DOUBLE", "DATETIME", "timestamp", "INT"]


def maybe(values: list[str]) -> st.SearchStrategy[str | None]:
    return st.one_of(st.none(), st.sampled_from(values), texts)


entries = st.builds(
    Entry,
    scope=maybe(SCOPES),
    param=maybe(PARAMS),
    operate=maybe(OPERATES),
    rule_type=maybe(["string", "regex", "index"]),
    sub_start=maybe(["0", "-3", "a", "9"]),
    sub_start_type=maybe(["index", "string"]),
    sub_end=maybe(["2", "-1", "b", "|"]),
    sub_end_type=maybe(["index", "string"]),
    filter_key=maybe(["a", "", "namespace"]),
    name=maybe(["a", "b"]),
    type=maybe(TYPES),
)
rules = st.builds(Rule, st.sampled_from(OPERATORS), st.lists(entries, max_size=3).map(tuple))
lines = st.one_of(
    texts,
    json_texts,
    st.binary(max_size=40).map(lambda b: b.decode("utf-8", errors="replace")),
    st.dictionaries(st.sampled_from(["a", "msg", "namespace", "type"]), json_values, max_size=4).map(
        json.dumps
    ),
)

PROPERTY = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@PROPERTY
@given(rules, rows)
def test_an_operator_raises_nothing_but_a_line_error_and_keeps_its_input(rule, given_rows):
    before = copy.deepcopy(given_rows)
    try:
        out = run_rule(rule, given_rows)
    except LineError as e:
        assert e.reason
    else:
        assert isinstance(out, list) and all(isinstance(r, list) for r in out)
    assert given_rows == before


@PROPERTY
@given(st.sampled_from(["filter", "keyFilter", "flattenUms"]), st.lists(entries, max_size=3), rows)
def test_a_filter_keeps_some_of_its_rows_as_they_are(op, grammar, given_rows):
    try:
        out = run_rule(Rule(op, tuple(grammar)), given_rows)
    except LineError:
        return
    assert all(any(r is g for g in given_rows) for r in out)


@PROPERTY
@given(st.lists(rules, min_size=1, max_size=4), lines)
def test_run_group_never_raises(group_rules, line):
    result = run_group(Group("g", tuple(group_rules)), line)
    assert isinstance(result, GroupResult)
    assert result.failure is None or (
        result.rows == [] and result.failure.message.startswith("group 'g' rule ")
    )
