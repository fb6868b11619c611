"""logprocessor/rules.py over a SQLite meta store: import and export in the original's format (spec §8.2),
publish as the original's upgrade version (§5.5) with its refusals, and the rule set the processor loads in
the original's order (§4.2: tables in creation order, then groups in group order)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import rule_engines
from rule_engines import accepts_all

from dbuslib.logstore import NotFoundError
from logprocessor import rules
from logprocessor.grammar import Column, RuleError, groups_to_json

SAMPLE = Path(__file__).resolve().parents[2] / "conf" / "demo" / "logrules" / "order_events.json"
COLUMNS_5_7 = (
    Column("log_time", "datetime"),
    Column("level", "string"),
    Column("order_id", "long"),
    Column("amount", "double"),
    Column("src_host", "string"),
)


def rule(op: str, *entries: dict) -> dict:
    return {"ruleTypeName": op, "ruleGrammar": json.dumps(list(entries))}


def save_as(*cols: tuple[str, str, str]) -> dict:
    return rule("saveAs", *({"ruleScope": s, "name": n, "type": t} for s, n, t in cols))


SPLIT = rule("split", {"ruleScope": "0", "ruleType": "string", "ruleParamter": " "})
AB = save_as(("0", "a", "STRING"), ("1", "b", "LONG"))


def group(name: str, *rule_list: dict) -> dict:
    return {"groupName": name, "rules": list(rule_list)}


def table(store, name="t"):
    return store.add_table("applog", "applog_schema", name)[0]


def fresh(store, name="t"):
    return store.need_table("applog", "applog_schema", name)


def load(store, t, *groups: dict, active=True, replace=True):
    return rules.import_groups(
        store, t, json.dumps(list(groups)), "rules.json", replace=replace, active=active
    )


# ---------------------------------------------------------------- import and export


def test_the_sample_file_round_trips_through_the_draft_and_a_published_version(log_store):
    store = log_store
    t = table(store)
    text = SAMPLE.read_text()
    rules.import_groups(store, t, text, str(SAMPLE), replace=False, active=True)
    assert groups_to_json(rules.draft(store, t)) + "\n" == text
    done = rules.publish(store, t, accepts_all)
    assert (done.version, done.published, done.columns, done.columns_changed) == (1, True, COLUMNS_5_7, True)
    assert groups_to_json(rules.published_groups(store, fresh(store))) + "\n" == text


def test_import_adds_inactive_groups_after_the_draft_like_the_original(log_store):
    store = log_store
    t = table(store)
    load(store, t, group("first", SPLIT, AB), active=True)
    load(store, t, group("second", AB), group("third", AB), active=False, replace=False)
    assert [(g.name, g.active) for g in rules.draft(store, t)] == [
        ("first", True),
        ("second", False),
        ("third", False),
    ]


def test_the_console_key_and_unknown_keys_are_dropped_on_import(log_store):
    store = log_store
    t = table(store)
    entry = {"key": "k-81", "ruleScope": "0", "ruleType": "string", "ruleParamter": " ", "extra": 1}
    load(store, t, group("g", rule("split", entry), AB))
    (g,) = json.loads(groups_to_json(rules.draft(store, t)))
    assert json.loads(g["rules"][0]["ruleGrammar"]) == [
        {"ruleScope": "0", "ruleParamter": " ", "ruleType": "string"}
    ]


@pytest.mark.parametrize(
    ("doc", "expected"),
    [
        ("{not json", r"rules.json: not JSON"),
        ('{"groupName": "g"}', r"rules.json: expected a list of groups"),
        ("[]", r"rules.json: no group in the file"),
        ('[{"rules": []}]', r"rules.json: group 1: groupName is missing"),
        (
            json.dumps([group("ok", AB), group("bad", SPLIT, rule("splt"))]),
            r"rules.json: group 'bad' rule 2 \(splt\): unknown operator 'splt'",
        ),
        (
            json.dumps([group("g", rule("filter", {"ruleScope": "1 ", "ruleParamter": "x"}))]),
            r"group 'g' rule 1 \(filter\) entry 1: ruleScope: ruleScope '1 ' is none of",
        ),
        (
            json.dumps([group("g", rule("regexExtract", {"ruleScope": "0", "ruleParamter": "(a"}))]),
            r"group 'g' rule 1 \(regexExtract\) entry 1: ruleParamter '\(a' is not a valid regex",
        ),
    ],
)
def test_a_bad_file_is_refused_naming_the_rule_and_changes_nothing(log_store, doc, expected):
    store = log_store
    t = table(store)
    load(store, t, group("kept", AB))
    with pytest.raises(RuleError, match=expected):
        rules.import_groups(store, t, doc, "rules.json", replace=True, active=True)
    assert [g.name for g in rules.draft(store, t)] == ["kept"]


# ---------------------------------------------------------------- publish


def test_publish_snapshots_the_active_groups_in_group_order(log_store):
    store = log_store
    t = table(store)
    load(store, t, group("z", SPLIT, AB), group("off", SPLIT), group("a", AB))
    store.set_active(t, "off", False)
    done = rules.publish(store, t, accepts_all)
    assert (done.groups, done.columns) == (("z", "a"), (Column("a", "string"), Column("b", "long")))
    assert [g.name for g in rules.published_groups(store, fresh(store))] == ["z", "a"]


def test_publishing_the_rules_in_force_again_is_a_no_op(log_store):
    store = log_store
    t = table(store)
    load(store, t, group("g", SPLIT, AB))
    assert rules.publish(store, t, accepts_all).version == 1
    again = rules.publish(store, fresh(store), accepts_all)
    assert (again.published, again.version) == (False, 1)
    assert len(store.versions(fresh(store))) == 1


def test_a_version_records_whether_its_columns_changed(log_store):
    store = log_store
    t = table(store)
    load(store, t, group("g", AB))
    assert rules.publish(store, t, accepts_all).columns_changed  # the first: from no columns
    load(store, fresh(store), group("g", SPLIT, AB))
    same = rules.publish(store, fresh(store), accepts_all)
    load(store, fresh(store), group("g", SPLIT, save_as(("0", "a", "STRING"), ("1", "b", "DOUBLE"))))
    retyped = rules.publish(store, fresh(store), accepts_all)
    assert (same.version, same.columns_changed, retyped.version, retyped.columns_changed) == (
        2,
        False,
        3,
        True,
    )
    assert [v.columns_changed for v in store.versions(fresh(store))] == [True, False, True]


def test_save_as_entries_in_another_order_are_the_same_schema(log_store):
    store = log_store
    t = table(store)
    load(store, t, group("g1", AB), group("g2", save_as(("1", "b", "long"), ("0", "a", "string"))))
    assert rules.publish(store, t, accepts_all).columns == (Column("a", "string"), Column("b", "long"))


@pytest.mark.parametrize(
    ("groups", "expected"),
    [
        ([group("g", SPLIT)], r"active group\(s\) \['g'\] do not end in saveAs"),
        ([group("g", AB, SPLIT), group("h", AB)], r"\['g'\] do not end in saveAs"),
        ([group("empty")], r"\['empty'\] do not end in saveAs"),
        (
            [group("g", AB), group("h", save_as(("0", "a", "STRING"), ("2", "b", "LONG")))],
            r"saveAs differ \(one table has one schema\): \['g'\] save \(a string, b long\); "
            r"\['h'\] save \(a string, b long\)",
        ),
        (
            [group("g", AB), group("h", AB), group("i", save_as(("0", "a", "STRING")))],
            r"\['g', 'h'\] save \(a string, b long\); \['i'\] save \(a string\)",
        ),
        (
            [group("g", save_as(("0", "a", "STRING"), ("-1", "b", "LONG")))],
            r"group 'g' rule 1 \(saveAs\) entry 2: ruleScope '-1' is not a column index",
        ),
    ],
)
def test_publish_refuses_groups_that_do_not_agree_naming_them(log_store, groups, expected):
    store = log_store
    t = table(store)
    load(store, t, *groups)
    with pytest.raises(rules.PublishRefused, match=expected):
        rules.publish(store, t, accepts_all)
    assert fresh(store).version == 0


def test_publish_refuses_a_draft_without_an_active_group(log_store):
    store = log_store
    t = table(store)
    load(store, t, group("g", AB), active=False)
    with pytest.raises(rules.PublishRefused, match=r"no active draft group to publish \(inactive: 'g'\)"):
        rules.publish(store, t, accepts_all)


def test_publish_refuses_a_stored_rule_that_no_longer_checks_naming_it(log_store):
    store = log_store
    t = table(store)
    bad = json.dumps([SPLIT, rule("trim", {"ruleScope": "x", "ruleOperate": "both"}), AB])
    store.add_groups(t, [("g", True, bad)], replace=False)  # written past the checks: an older DBus
    with pytest.raises(
        RuleError, match=r"applog.applog_schema.t: group 'g' rule 2 \(trim\) entry 1: ruleScope"
    ):
        rules.publish(store, t, accepts_all)


@pytest.mark.jvm
def test_publish_asks_the_engine_that_runs_the_rules_and_refuses_what_it_refuses(log_store):
    """A regex Python's ``re`` reads (the grammar check) but Java does not is refused at publish, by the JVM's
    engine (logprocessor/rules_jvm.py, ``dbus.jvm.LogRulesCheck``), naming group, rule and operator; the same
    text as a plain string (split of ruleType string) is no regex and is accepted, as are the demo's rules."""
    store = log_store
    engine = rule_engines.jvm()
    t = table(store)
    python_only = rule("split", {"ruleScope": "0", "ruleType": "regex", "ruleParamter": "(?P<x>;)"})
    load(store, t, group("g", SPLIT, python_only, AB))
    with pytest.raises(
        RuleError,
        match=r"applog.applog_schema.t: group 'g' rule 2 \(split\): ruleParamter '\(\?P<x>;\)' is not a "
        r"valid Java regex: ",
    ):
        rules.publish(store, t, engine)
    assert fresh(store).version == 0
    plain = rule("split", {"ruleScope": "0", "ruleType": "string", "ruleParamter": "(?P<x>;)"})
    load(store, fresh(store), group("g", plain, AB))
    assert rules.publish(store, fresh(store), engine).version == 1
    other = table(store, "demo")
    rules.import_groups(store, other, SAMPLE.read_text(), str(SAMPLE), replace=True, active=True)
    assert rules.publish(store, other, engine).version == 1


@pytest.mark.jvm
def test_the_engine_refuses_a_rule_set_it_cannot_read_and_says_why():
    from logprocessor.rules_jvm import checker

    check = checker(rule_engines.classpath())
    assert check.problems('{"groups": []}') == []
    with pytest.raises(
        RuleError, match="the log rule engine cannot read the rules: log rules: not a rule set"
    ):
        check.problems("[not json")
    assert check.problems('{"groups": []}') == []  # and it answers the next question


def test_export_of_a_table_never_published_says_so(log_store):
    store = log_store
    t = table(store)
    with pytest.raises(NotFoundError, match="applog.applog_schema.t has no published version "):
        rules.published_groups(store, t)
    with pytest.raises(NotFoundError, match="has no published version 3 "):
        rules.published_groups(store, t, 3)


# ---------------------------------------------------------------- the processor's rule set


def test_the_rule_set_is_ok_tables_in_creation_order_then_groups_in_group_order(log_store):
    store = log_store
    second, first, aborted, never = (table(store, n) for n in ("second", "first", "aborted", "never"))
    load(store, first, group("f2", SPLIT, AB), group("f1", AB))
    rules.publish(store, first, accepts_all)
    load(store, second, group("s", AB))
    rules.publish(store, second, accepts_all)
    load(store, fresh(store, "second"), group("s", SPLIT, AB))
    rules.publish(store, fresh(store, "second"), accepts_all)
    load(store, aborted, group("x", AB))
    rules.publish(store, aborted, accepts_all)
    store.set_status(aborted, "abort")
    load(store, never, group("n", AB))  # a draft only

    got = rules.load_rule_set(store, "applog", "applog_schema")
    assert [(t.table, t.version, [g.name for g in t.groups]) for t in got.tables] == [
        ("second", 2, ["s"]),
        ("first", 1, ["f2", "f1"]),
        ("never", 0, []),
    ]
    assert [(t.table, t.version, t.groups) for t in got.aborted] == [("aborted", 1, ())]
    assert got.tables[1].columns == (Column("a", "string"), Column("b", "long"))
    assert got.columns_changed == {"first", "aborted"}  # second's version 2 kept version 1's columns
    assert got.tables[0].groups[0].rules[0].op == "split"
