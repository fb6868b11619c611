"""saveAs names a log table may not have (issue #29, acceptance 4): a name of a UMS system field, which every
message of a log table carries already (a consumer building a dict would get the forged value), or a name two
entries give. Refused everywhere a rule is checked (``grammar.check_rule``): ``dbus logrules import``,
``check`` and ``publish``, the console's check (``console.rules.check_groups``) and the processor's load of a
published version, each message naming the group, the rule, the entry and the name."""

from __future__ import annotations

import json

import pytest
import rule_engines
import yaml
from hypothesis import given
from hypothesis import strategies as st
from rule_engines import accepts_all

from cli import main as dbus
from console.rules import check_groups
from dbuslib.config import DEFAULT_CONFIG
from logprocessor import rules
from logprocessor.grammar import Column, RuleError, groups_from_json, rule_from_json, save_as_name_problem
from logprocessor.logums import LogRow, build_message, heartbeat_message, log_namespace
from ums.build import build_termination_message
from ums.message import SYSTEM_NAMES

T = ["--source", "applog", "--table", "t"]


def _names_written() -> set[str]:
    """Every field name a log table's messages carry besides its saveAs columns: data (one column ``c``),
    heartbeat and termination messages as the processor writes them."""
    ns = log_namespace("log_rsyslog", "applog", "applog_schema", "t", 1, "vm")
    data = build_message(ns, [Column("c", "string")], [LogRow(0, 1, 0, 0, ("x",))], "UTC")
    beat = heartbeat_message(ns, 0, 1, 0, "UTC")
    end = build_termination_message(ns, "2026-11-29 00:00:00.000")
    return {f.name for m in (data, beat, end) for f in m.schema.fields} - {"c"}


SYSTEM = sorted(_names_written())


def save_as(*names: str) -> dict:
    entries = [{"ruleScope": str(i), "name": n, "type": "STRING"} for i, n in enumerate(names)]
    return {"ruleTypeName": "saveAs", "ruleGrammar": json.dumps(entries)}


def groups(*names: str) -> list[dict]:
    split = {"ruleTypeName": "split", "ruleGrammar": json.dumps([{"ruleScope": "0", "ruleType": "string"}])}
    return [{"groupName": "g", "rules": [split, save_as(*names)]}]


def test_the_system_fields_are_the_ones_log_messages_carry():
    assert SYSTEM == sorted(SYSTEM_NAMES) == ["ums_id_", "ums_op_", "ums_ts_", "ums_uid_"]


@pytest.mark.parametrize("name", SYSTEM + [n.upper() for n in SYSTEM] + ["Ums_Uid_"])
def test_a_system_field_name_is_refused_naming_group_rule_and_field(name):
    with pytest.raises(RuleError) as e:
        groups_from_json(groups("level", name), "rules.json")
    assert str(e.value).startswith(
        f"rules.json: group 'g' rule 2 (saveAs) entry 2: name {name!r} is a UMS system field "
        "(ums_id_, ums_op_, ums_ts_, ums_uid_)"
    )


@pytest.mark.parametrize(("first", "second"), [("level", "level"), ("level", "LEVEL"), ("a", "A")])
def test_a_name_given_twice_is_refused_naming_both_entries(first, second):
    expected = rf"group 'g' rule 2 \(saveAs\) entry 3: name '{second}' is entry 2's"
    with pytest.raises(RuleError, match=expected):
        groups_from_json(groups("x", first, second), "rules.json")


@given(st.sampled_from(SYSTEM), st.lists(st.booleans(), min_size=8, max_size=8))
def test_any_spelling_of_a_system_field_is_refused(name, upper):
    spelled = "".join(c.upper() if u else c for c, u in zip(name, upper + [False] * len(name), strict=False))
    assert save_as_name_problem(spelled, []) is not None


@given(st.lists(st.text(min_size=1, max_size=8), max_size=6))
def test_distinct_names_that_are_no_system_field_are_accepted(names):
    folded = [n.casefold() for n in names]
    ok = len(set(folded)) == len(folded) and not set(folded) & {n.casefold() for n in SYSTEM}
    try:
        rule_from_json(save_as(*names), "group 'g' rule 1")
    except RuleError:
        assert not ok
    else:
        assert ok


# ---------------------------------------------------------------- every place a rule is checked


@pytest.fixture
def config(tmp_path, monkeypatch):
    raw = yaml.safe_load(DEFAULT_CONFIG.read_text())
    raw["log_sources"] = {"applog": {"type": "log_rsyslog"}}
    raw["endpoints"]["meta_store"]["url"] = f"sqlite:///{tmp_path / 'meta.db'}"
    raw.setdefault("spark", {})["jars_file"] = str(rule_engines.jars_file(tmp_path))  # publish asks the JVM
    path = tmp_path / "dbus.yaml"
    path.write_text(yaml.safe_dump(raw))
    monkeypatch.setenv("DBUS_CONFIG", str(path))
    return path


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = dbus.main(["logrules", *argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("name", SYSTEM)
def test_dbus_logrules_import_check_and_publish_refuse_a_system_field(config, capsys, tmp_path, name):
    assert run(capsys, "add-table", *T)[0] == 0
    file = tmp_path / "rules.json"
    file.write_text(json.dumps(groups("level", name)))
    code, _, err = run(capsys, "import", *T, str(file), "--active")
    assert code == 2, err
    assert f"group 'g' rule 2 (saveAs) entry 2: name '{name}' is a UMS system field" in err

    file.write_text(json.dumps(groups("level", "msg")))  # a good draft: check and publish pass
    assert run(capsys, "import", *T, str(file), "--active", "--replace")[0] == 0
    code, out, _ = run(capsys, "check", *T)
    assert (code, out) == (
        0,
        "applog.applog_schema.t: the active groups ['g'] check: columns level string, msg string\n",
    )

    from dbuslib.logstore import LogStore

    store = LogStore(f"sqlite:///{tmp_path / 'meta.db'}")
    try:  # a draft written past the checks (an older DBus): check and publish refuse it, naming it
        t = store.need_table("applog", "applog_schema", "t")
        store.add_groups(t, [("g", True, json.dumps(groups("level", name)[0]["rules"]))], replace=True)
    finally:
        store.dispose()
    for action in ("check", "publish"):
        code, _, err = run(capsys, action, *T, *(("--no-reload",) if action == "publish" else ()))
        assert code == 2, (action, err)
        where = "applog.applog_schema.t: group 'g' rule 2 (saveAs) entry 2"
        assert f"LOG_RULE_INVALID: {where}: name '{name}'" in err


@pytest.mark.parametrize("name", SYSTEM)
def test_the_console_check_names_group_rule_and_field(name):
    doc = [{"groupName": "g", "active": True, "rules": groups("level", name)[0]["rules"]}]
    checked, problems = check_groups(doc)
    assert checked == ()
    [p] = problems
    assert (p["group"], p["rule"], p["op"]) == ("g", 2, "saveAs")
    assert f"group 'g' rule 2 (saveAs) entry 2: name '{name}' is a UMS system field" in p["message"]


def test_the_processor_refuses_a_published_version_with_a_system_field(log_store):
    store = log_store
    t = store.add_table("applog", "applog_schema", "t")[0]
    store.add_groups(t, [("g", True, json.dumps(groups("level", "msg")[0]["rules"]))], replace=True)
    rules.publish(store, t, accepts_all)
    t = store.need_table("applog", "applog_schema", "t")
    store.publish(t, json.dumps(groups("level", "ums_id_")), json.dumps([]), False)  # past the checks
    with pytest.raises(RuleError, match=r"version 2: group 'g' rule 2 \(saveAs\) entry 2: name 'ums_id_'"):
        rules.load_rule_set(store, "applog", "applog_schema")
