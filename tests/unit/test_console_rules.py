"""The console's Log rules page (console/rules.py): its pure parts (the checks naming the operator and the
parameter, the step-by-step preview, the diff of versions) and its endpoints through Flask's test client over
a SQLite meta store (no server, no stack; the reload a publish sends is recorded instead of sent)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import rule_engines
from console_fakes import CONF, console_app, csrf_token, log_in, with_users
from flask import Flask
from pydantic import SecretStr
from rule_engines import accepts_all

from console import rules
from dbuslib.config import DbusConfig, load_config
from logprocessor.adapters import AdapterSettings

ROOT = Path(__file__).resolve().parents[2]
APP_ORDERS = ROOT / "conf" / "demo" / "logrules" / "app_orders.json"
ORDER = "2026-11-24 10:15:30.100 | [WARN] | OrderService order=98123 amount=45.50 req=r-1"
PAYMENT = "2026-11-24 10:15:31.002 | [INFO] | PaymentService paid=98123 req=r-3"
BAD_AMOUNT = "2026-11-24 10:15:32.000 | [WARN] | OrderService order=7 amount=1.2.3 req=r-4"
RSYSLOG = AdapterSettings("log_rsyslog")


def record(message: str) -> str:
    return json.dumps(
        {
            "host": "app-01.prod",
            "path": "/srv/a.log",
            "timestamp": "2026-11-24T10:15:30.100Z",
            "message": message,
        }
    )


def demo_groups() -> list[dict[str, Any]]:
    """The demo's app_orders group as the editor holds it."""
    return rules.editor_groups(json.loads(APP_ORDERS.read_text()))


def checked(doc: list[dict[str, Any]]) -> tuple[Any, ...]:
    groups, problems = rules.check_groups(doc)
    assert problems == []
    return groups


# ---------------------------------------------------------------- checks


def test_the_editor_groups_round_trip_to_the_stored_rules() -> None:
    doc = demo_groups()
    assert doc[0]["groupName"] == "app_orders" and doc[0]["active"] is True
    assert doc[0]["rules"][1] == {
        "ruleTypeName": "filter",
        "ruleGrammar": [
            {"ruleScope": "1", "ruleParamter": "OrderService", "ruleOperate": "==", "ruleType": "string"}
        ],
    }
    ((name, active, text),) = rules.stored_rules(checked(doc))
    assert (name, active) == ("app_orders", True)
    assert json.loads(text) == json.loads(APP_ORDERS.read_text())[0]["rules"]


def test_every_problem_names_the_group_the_rule_its_operator_and_the_parameter() -> None:
    doc = demo_groups()
    doc[0]["rules"][2]["ruleGrammar"][0]["ruleScope"] = "1-3"  # split
    doc[0]["rules"][3]["ruleGrammar"][0]["ruleParamter"] = "order=(\\d+"  # regexExtract
    doc[0]["rules"][6]["ruleGrammar"][3]["type"] = "MONEY"  # saveAs
    doc.append({"groupName": "other", "rules": [{"ruleTypeName": "explode", "ruleGrammar": []}]})
    groups, problems = rules.check_groups(doc)
    assert groups == ()  # a group with a problem is not run
    assert [(p["group"], p["rule"], p["op"]) for p in problems] == [
        ("app_orders", 3, "split"),
        ("app_orders", 4, "regexExtract"),
        ("app_orders", 7, "saveAs"),
        ("other", 1, "explode"),
    ]
    messages = [p["message"] for p in problems]
    assert messages[0].startswith("group 'app_orders' rule 3 (split) entry 1: ruleScope: ruleScope '1-3'")
    assert messages[1].startswith(
        "group 'app_orders' rule 4 (regexExtract) entry 1: ruleParamter 'order=(\\\\d+'"
    )
    assert "is not a valid regex" in messages[1]
    assert messages[2] == "group 'app_orders' rule 7 (saveAs) entry 4: type 'MONEY' is none of " + ", ".join(
        ("STRING", "LONG", "DOUBLE", "DATETIME", "TIMESTAMP")
    )
    assert messages[3].startswith("group 'other' rule 1 (explode): unknown operator 'explode'")


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ({"groupName": "x"}, "the rules must be a list of groups ({groupName, rules})"),
        ([{"rules": []}], "group 1: groupName None is missing"),
        ([{"groupName": " ", "rules": []}], "group 1: groupName ' ' is empty"),
        (
            [{"groupName": "a", "rules": []}, {"groupName": "a", "rules": []}],
            "group 'a': the name is given twice",
        ),
    ],
)
def test_group_problems(doc: Any, message: str) -> None:
    assert [p["message"] for p in rules.check_groups(doc)[1]] == [message]


# ---------------------------------------------------------------- the step-by-step preview


def test_the_preview_shows_the_row_after_every_operator() -> None:
    (group,) = checked(demo_groups())
    got = rules.group_preview(group, record(ORDER))
    assert got["outcome"] == "accepted" and got["reason"] == "1 row(s)"
    steps = {s["position"]: s for s in got["steps"]}
    assert [s["op"] for s in got["steps"]] == [
        "toIndex",
        "filter",
        "split",
        "regexExtract",
        "trim",
        "select",
        "saveAs",
    ]
    assert steps[1]["rows"] == [["app-01.prod", ORDER]] and steps[1]["columns"] is None
    assert steps[3]["rows"] == [
        ["app-01.prod", "2026-11-24 10:15:30.100", "[WARN]", "OrderService order=98123 amount=45.50 req=r-1"]
    ]
    assert steps[5]["rows"][0][2] == "WARN"
    assert steps[7]["columns"] == ["log_time", "level", "order_id", "amount", "req_id", "src_host"]
    assert steps[7]["rows"] == [["2026-11-24 10:15:30.100", "WARN", "98123", 45.5, "r-1", "app-01.prod"]]


def test_the_preview_names_the_rule_that_rejects_or_breaks_a_line() -> None:
    (group,) = checked(demo_groups())
    rejected = rules.group_preview(group, record(PAYMENT))
    assert rejected["outcome"] == "rejected"
    assert rejected["reason"] == "rule 2 (filter) leaves no rows: the group does not accept it"
    assert [s["position"] for s in rejected["steps"]] == [1, 2] and rejected["steps"][1]["rows"] == []
    broken = rules.group_preview(group, record(BAD_AMOUNT))
    assert broken["outcome"] == "broken"
    assert broken["reason"].startswith("rule 7 (saveAs) breaks on the line: saveAs column 'amount' (DOUBLE)")
    assert broken["steps"][-1]["error"] is not None


def test_the_preview_of_records_says_what_the_processor_does_with_each() -> None:
    groups = checked(demo_groups())
    heartbeat = json.dumps(
        {
            "host": "app-01.prod",
            "path": "/x/heartbeat.log",
            "timestamp": "2026-11-24T10:15:30.100Z",
            "message": "not a heartbeat",
        }
    )
    got = rules.preview(
        groups, [record(ORDER), "", record(PAYMENT), "not json", record(BAD_AMOUNT), heartbeat], RSYSLOG
    )
    assert got["summary"] == {"records": 5, "accepted": 1, "rejected": 2, "broken": 1, "refused": 1}
    by_number = {r["number"]: r for r in got["records"]}
    assert sorted(by_number) == [1, 3, 4, 5, 6]
    assert by_number[1]["lines"][0]["table"] == "accepted by 'app_orders'"
    assert by_number[3]["lines"][0]["table"] == "accepted by no group: the unknown bucket"
    assert by_number[4]["refused"].startswith("LOG_RECORD_NOT_JSON")
    assert by_number[5]["lines"][0]["table"].startswith("a dead letter: group 'app_orders' rule 7 (saveAs)")
    json.dumps(got)  # all of it goes to the page


def test_plain_text_lines_are_wrapped_as_the_types_message() -> None:
    got = rules.preview(checked(demo_groups()), [ORDER, PAYMENT], RSYSLOG, raw=True)
    assert got["summary"]["accepted"] == 1 and got["summary"]["rejected"] == 1
    (line,) = got["records"][0]["lines"]
    assert json.loads(line["line"])["message"] == ORDER


# ---------------------------------------------------------------- diff


def test_the_diff_of_two_versions_shows_the_changed_entry() -> None:
    a = json.loads(APP_ORDERS.read_text())
    b = copy.deepcopy(a)
    save = b[0]["rules"][6]
    entries = json.loads(save["ruleGrammar"])
    entries[1]["name"] = "severity"
    save["ruleGrammar"] = json.dumps(entries)
    lines = rules.diff(json.dumps(a), json.dumps(b), "version 1", "version 2")
    assert lines[:2] == ["--- version 1", "+++ version 2"]
    changed = [ln for ln in lines[2:] if ln[:1] in "+-"]
    assert changed == [
        '-       {"ruleScope": "1", "name": "level", "type": "STRING"}',
        '+       {"ruleScope": "1", "name": "severity", "type": "STRING"}',
    ]
    assert "   7 saveAs" in "\n".join(lines)
    assert rules.diff(json.dumps(a), json.dumps(a), "version 1", "draft") == []


# ---------------------------------------------------------------- the endpoints


@pytest.fixture
def app(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Flask:
    base = with_users(load_config(CONF))
    meta = base.endpoints.meta_store.model_copy(
        update={"url": SecretStr(f"sqlite:///{tmp_path / 'meta.db'}")}
    )
    cfg: DbusConfig = base.model_copy(
        update={"endpoints": base.endpoints.model_copy(update={"meta_store": meta})}
    )
    from dbuslib.logstore import LogStore
    from logprocessor import rules as lr

    store = LogStore(meta.url.get_secret_value())
    store.create_schema()
    t, _ = store.add_table("applog", cfg.log_source("applog").schema_name("applog"), "app_orders")
    lr.import_groups(store, t, APP_ORDERS.read_text(), "app_orders.json", replace=True, active=True)
    lr.publish(store, t, accepts_all)
    store.dispose()
    sent: list[dict[str, Any]] = []

    def send(cfg: DbusConfig, ds: str, **extra: Any) -> int:
        sent.append({"ds": ds, **extra})
        return 41

    monkeypatch.setattr("logprocessor.reload.send", send)
    app = console_app(cfg, tmp_path)
    app.config["SENT"] = sent
    app.extensions["dbus_rules_engine"] = rule_engines.jvm()  # the engine on the jar the tests build
    return app


def logged_in(app: Flask, name: str) -> tuple[Any, dict[str, str]]:
    client = app.test_client()
    log_in(client, name)
    return client, {"X-CSRFToken": csrf_token(client, "/rules/"), "Accept": "application/json"}


API = "/rules/api/applog/app_orders"


def test_the_pages_list_the_tables_and_show_the_editor(app: Flask) -> None:
    client, _ = logged_in(app, "vi")
    index = client.get("/rules/").get_data(as_text=True)
    assert 'href="/rules/applog/app_orders"' in index
    editor = client.get("/rules/applog/app_orders").get_data(as_text=True)
    assert 'data-table="app_orders"' in editor and "rules.js" in editor
    assert 'id="publish"' not in editor and 'id="save-draft"' not in editor  # a viewer has no such control
    op, _ = logged_in(app, "op")
    editor = op.get("/rules/applog/app_orders").get_data(as_text=True)
    assert 'id="publish"' in editor and 'id="save-draft"' in editor
    info = client.get(API).get_json()
    assert info["version"] == 1 and info["draft"] == demo_groups()
    assert [v["version"] for v in info["versions"]] == [1] and info["fields"]["saveAs"] == [
        "ruleScope",
        "name",
        "type",
    ]
    assert client.get("/rules/api/applog/nope").status_code == 404
    assert "no such log table" in client.get("/rules/api/applog/nope").get_json()["error"]


def test_a_viewer_previews_but_cannot_save_or_publish(app: Flask) -> None:
    client, headers = logged_in(app, "vi")
    body = {"groups": demo_groups(), "records": [record(ORDER)]}
    got = client.post(f"{API}/preview", json=body, headers=headers)
    assert got.status_code == 200 and got.get_json()["summary"]["accepted"] == 1
    for action in ("draft", "publish"):
        refused = client.post(f"{API}/{action}", json=body, headers=headers)
        assert refused.status_code == 403 and "viewer" in refused.get_json()["error"]
    assert not Path(app.config["DBUS_AUDIT_LOG"]).exists() and app.config["SENT"] == []


def test_a_post_without_the_csrf_token_is_refused(app: Flask) -> None:
    client, _ = logged_in(app, "op")
    refused = client.post(
        f"{API}/publish", json={"groups": demo_groups()}, headers={"Accept": "application/json"}
    )
    assert refused.status_code == 400 and "CSRF" in refused.get_json()["error"]


def test_an_operator_saves_publishes_and_diffs_and_each_action_is_audited(app: Flask) -> None:
    client, headers = logged_in(app, "op")
    doc = demo_groups()
    doc[0]["rules"][6]["ruleGrammar"][1]["name"] = "severity"
    saved = client.post(f"{API}/draft", json={"groups": doc}, headers=headers)
    assert saved.status_code == 200, saved.get_json()
    assert client.get(API).get_json()["draft"] == doc
    diff = client.get(f"{API}/diff?a=1&b=draft").get_json()["lines"]
    assert '+       {"ruleScope": "1", "name": "severity", "type": "STRING"}' in diff

    done = client.post(f"{API}/publish", json={"groups": doc}, headers=headers).get_json()
    assert "published" in done, done
    assert done["published"] is True and done["version"] == 2 and done["reload"] == 41
    assert "version 2 published; new columns: log_time datetime, severity string" in done["message"]
    assert app.config["SENT"] == [{"ds": "applog", "table": "app_orders", "version": 2}]
    again = client.post(f"{API}/publish", json={}, headers=headers).get_json()
    assert again["published"] is False and "nothing to publish" in again["message"]
    assert client.get(f"{API}/diff?a=2&b=draft").get_json()["lines"] == []
    assert client.get(f"{API}/version/1").get_json()["groups"] == demo_groups()

    audit = [json.loads(ln) for ln in Path(app.config["DBUS_AUDIT_LOG"]).read_text().splitlines()]
    assert [(a["action"], a["user"]) for a in audit] == [
        ("rules-save-draft", "op"),
        ("rules-save-draft", "op"),
        ("rules-publish", "op"),
    ]
    assert audit[2]["version"] == 2 and audit[2]["table"] == "app_orders" and audit[2]["source"] == "applog"


def test_a_draft_with_problems_is_not_saved_and_the_answer_names_them(app: Flask) -> None:
    client, headers = logged_in(app, "op")
    doc = demo_groups()
    doc[0]["rules"][2]["ruleGrammar"][0]["ruleScope"] = "x"
    refused = client.post(f"{API}/publish", json={"groups": doc}, headers=headers)
    assert refused.status_code == 400
    assert refused.get_json()["error"].startswith("group 'app_orders' rule 3 (split) entry 1: ruleScope")
    assert client.get(API).get_json()["draft"] == demo_groups()  # nothing changed
    doc = demo_groups()
    doc[0]["rules"].pop()  # no saveAs: publish refuses it, naming the group
    refused = client.post(f"{API}/publish", json={"groups": doc}, headers=headers)
    assert refused.status_code == 400 and "['app_orders'] do not end in saveAs" in refused.get_json()["error"]
    assert client.get(API).get_json()["version"] == 1


def test_the_processors_answer_reads_as_the_cli_prints_it() -> None:
    from logprocessor.reload import describe

    applied = {"request_id": 7, "status": "applied", "versions": {"b": 1, "a": 2}, "switch": {"1": 9, "0": 4}}
    assert describe(applied) == (
        "applied",
        "applied: table versions a 2, b 1; new rules from partition 0 offset 4, partition 1 offset 9",
    )
    rejected = {
        "request_id": 7,
        "status": "rejected",
        "code": "LOG_RULE_INVALID",
        "reason": "x",
        "versions": {},
    }
    assert describe(rejected) == (
        "rejected",
        "LOG_RULE_INVALID: the log processor rejected the reload, table versions none stay: x",
    )
