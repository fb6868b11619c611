"""The console's budget for work off the request threads (console/budget.py): an answer comes back, a
raise is named, a regex that backtracks in C (which no thread could interrupt) is killed with its process at
the budget and says where it was, and the slots refuse a second run of a user and a run past the total.
A viewer's preview over budget is answered 422 with the reason (Flask's test client)."""

from __future__ import annotations

import os
import re
import threading
import time
from typing import Any

import pytest

from console.budget import Budget, Busy, Failed, OverBudget, run_killable

CRAFTED = "a" * 47 + "b"  # (.*a){12}$ backtracks on it for longer than anyone waits


def double(x: int, *, mark: Any) -> int:
    return 2 * x


def refuse(*, mark: Any) -> None:
    raise ValueError("no such thing")


def backtrack(pattern: str, text: str, *, mark: Any) -> Any:
    """A catastrophic match in C, after its mark (the child imports this module first: 5 s leaves room)."""
    mark(os.getpid(), 1)  # where it is: the test reads the process's pid from it
    return re.search(pattern, text)


def nap(seconds: float, *, mark: Any) -> str:
    time.sleep(seconds)
    return "rested"


def test_an_answer_comes_back_and_a_raise_is_named() -> None:
    assert run_killable(double, (21,), 30) == 42
    with pytest.raises(Failed, match="ValueError: no such thing"):
        run_killable(refuse, (), 30)


def test_a_backtracking_regex_is_killed_at_the_budget_with_where_it_was() -> None:
    with pytest.raises(OverBudget) as e:
        Budget(5.0).run("vi", backtrack, r"(.*a){12}$", CRAFTED)
    pid, group = e.value.where
    assert group == 1 and pid > 0 and e.value.seconds == 5.0
    with pytest.raises(ProcessLookupError):  # killed and reaped: no process holds a core on
        os.kill(pid, 0)


def test_one_run_per_user_and_the_slots_in_all() -> None:
    budget = Budget(30.0, slots=2, per_user=1)
    done: dict[str, Any] = {}

    def slow(user: str) -> None:
        done[user] = budget.run(user, nap, 3.0)

    first = threading.Thread(target=slow, args=("vi",))
    first.start()
    deadline = time.monotonic() + 30
    while budget.slots.running("vi") == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    with pytest.raises(Busy, match="you have previews running already"):
        budget.run("vi", double, 1)
    assert budget.run("op", double, 2) == 4  # another user's run goes ahead
    second = threading.Thread(target=slow, args=("op",))
    second.start()
    while budget.slots.running("op") == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    with pytest.raises(Busy, match="2 previews are running"):
        budget.run("third", double, 3)
    first.join()
    second.join()
    assert done == {"vi": "rested", "op": "rested"}
    assert budget.run("vi", double, 5) == 10  # the slots are free again


def test_a_viewers_preview_over_budget_is_answered_with_where_it_was(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from console_fakes import CONF, console_app, csrf_token, log_in, with_users

    from console import rules
    from dbuslib.config import load_config

    monkeypatch.setattr(rules, "PREVIEW_BUDGET_S", 1.0)
    app = console_app(with_users(load_config(CONF)), tmp_path)
    client = app.test_client()
    log_in(client, "vi")
    headers = {"X-CSRFToken": csrf_token(client, "/rules/"), "Accept": "application/json"}
    group = {
        "groupName": "crafted",
        "rules": [
            {
                "ruleTypeName": "regexExtract",
                "ruleGrammar": [{"ruleScope": "0", "ruleParamter": "(.*a){12}$"}],
            },
            {"ruleTypeName": "saveAs", "ruleGrammar": [{"ruleScope": "0", "name": "x", "type": "STRING"}]},
        ],
    }
    # each crafted line stops at the rule engine's own regex budget (logprocessor.regexbudget) or runs on:
    # fifty of them are over the preview's budget either way
    body = {"groups": [group], "records": ["fine"] + [CRAFTED] * 50, "raw": True}
    got = client.post("/rules/api/applog/app_orders/preview", json=body, headers=headers)
    answer = got.get_json()
    assert got.status_code == 422, answer
    assert re.match(r"over budget: record \d+, group 'crafted' did not finish within 1 s", answer["error"]), (
        answer
    )
    assert client.get("/login").status_code in (200, 302)  # the console goes on
