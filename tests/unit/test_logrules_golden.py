"""Every golden log-rule case (tests/golden/logrules, format: logrules_golden.py) through operators.py.

A case with ``out`` runs its rules in order (stopping at the first that leaves no rows) and must give
``out``; with ``error`` it must break with a ``LineError`` whose reason contains the text; with ``refused``
publishing its rules must fail with a ``RuleError`` containing it. Every other case's rules must publish.
"""

from __future__ import annotations

import pytest
from logrules_golden import Case, case_files, load_cases

from logprocessor.grammar import OPERATORS, Group, RuleError, check_rule, save_as_columns
from logprocessor.operators import LineError, run_group, run_rule, steps

CASES = load_cases()


def run(case: Case) -> list[list]:
    rows = case.rows
    for rule in case.rules:
        rows = run_rule(rule, rows)
        if not rows:
            break
    return rows


def publish(case: Case) -> None:
    for i, rule in enumerate(case.rules, 1):
        check_rule(rule, f"{case.id} rule {i}")


def test_one_golden_file_per_operator_and_the_group_example():
    assert {p.stem for p in case_files()} == {*OPERATORS, "group_example"}


def test_every_file_shows_the_empty_input_or_a_group():
    for path in case_files():
        cases = [c for c in CASES if c.file == path.stem]
        assert path.stem == "group_example" or any(c.rows == [] for c in cases), path.name


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_golden_case(case: Case):
    if case.refused is not None:
        with pytest.raises(RuleError) as refused:
            publish(case)
        assert case.refused in str(refused.value)
        return
    publish(case)
    if case.error is not None:
        with pytest.raises(LineError) as broke:
            run(case)
        assert case.error in broke.value.reason
    else:
        assert run(case) == case.out
    if case.columns is not None:
        assert save_as_columns(Group(case.name, case.rules)) == case.columns


GROUP_CASES = [c for c in CASES if c.file == "group_example"]


@pytest.mark.parametrize("case", GROUP_CASES, ids=lambda c: c.id)
def test_group_example_through_run_group_and_steps(case: Case):
    ((line,),) = case.rows
    group = Group("order_events", case.rules)
    result = run_group(group, line)
    if case.error is not None:
        assert result.rows == [] and result.failure is not None
        assert case.error in result.failure.message
        assert steps(group, line)[-1].error == result.failure.reason
        return
    assert result.failure is None
    assert result.rows == case.out
    assert result.columns == case.columns
    if case.steps is not None:
        assert [s.rows for s in steps(group, line)] == case.steps
