"""dbuslib/logstore.py on SQLite: log tables in creation order, the draft's groups in group order, published
versions written once, and the refusals that name the table or group."""

from __future__ import annotations

import pytest

from dbuslib.logstore import BadNameError, ConflictError, NotFoundError

RULES = '[{"ruleTypeName": "saveAs", "ruleGrammar": "[]"}]'


def test_tables_come_in_creation_order_and_add_table_is_idempotent(log_store):
    store = log_store
    b, created_b = store.add_table("applog", "applog_schema", "b_table")
    a, created_a = store.add_table("applog", "applog_schema", "a_table")
    again, created = store.add_table("applog", "applog_schema", "b_table")
    store.add_table("other", "other_schema", "c")
    assert (created_b, created_a, created) == (True, True, False)
    assert again == b
    assert [t.table for t in store.tables("applog", "applog_schema")] == ["b_table", "a_table"]
    assert (b.status, b.version, b.columns, b.where) == ("ok", 0, "[]", "applog.applog_schema.b_table")


@pytest.mark.parametrize("name", ["", "-x", "a.b", "a b", "x" * 65, "tö"])
def test_a_table_name_that_cannot_be_part_of_a_namespace_is_refused(log_store, name):
    store = log_store
    with pytest.raises(BadNameError, match="log table name"):
        store.add_table("applog", "s", name)


def test_an_unknown_table_names_the_known_ones_and_the_command(log_store):
    store = log_store
    store.add_table("applog", "s", "orders")
    with pytest.raises(NotFoundError) as e:
        store.need_table("applog", "s", "ordres")
    assert str(e.value) == (
        "applog.s.ordres: no such log table (known: orders); "
        "dbus logrules add-table --source applog --table ordres creates it"
    )


def test_draft_groups_keep_their_order_and_replace_makes_the_whole_draft(log_store):
    store = log_store
    t, _ = store.add_table("applog", "s", "t")
    store.add_groups(t, [("z", True, RULES), ("a", False, RULES)], replace=False)
    store.add_groups(t, [("m", False, RULES)], replace=False)
    assert [(g.name, g.active) for g in store.draft(t)] == [("z", True), ("a", False), ("m", False)]
    store.add_groups(t, [("n", True, RULES), ("z", True, RULES)], replace=True)
    assert [g.name for g in store.draft(t)] == ["n", "z"]


def test_a_group_name_the_draft_has_is_a_conflict_and_nothing_is_added(log_store):
    store = log_store
    t, _ = store.add_table("applog", "s", "t")
    store.add_groups(t, [("a", True, RULES)], replace=False)
    with pytest.raises(ConflictError, match=r"group\(s\) named \['a'\] already.*--replace"):
        store.add_groups(t, [("new", True, RULES), ("a", True, RULES)], replace=False)
    with pytest.raises(ConflictError, match=r"\['b'\] given more than once"):
        store.add_groups(t, [("b", True, RULES), ("b", True, RULES)], replace=True)
    with pytest.raises(BadNameError, match="contains a control character"):
        store.add_groups(t, [("a\nb", True, RULES)], replace=True)
    assert [g.name for g in store.draft(t)] == ["a"]


def test_set_active_names_the_groups_when_the_group_is_unknown(log_store):
    store = log_store
    t, _ = store.add_table("applog", "s", "t")
    store.add_groups(t, [("a", False, RULES)], replace=False)
    store.set_active(t, "a", True)
    store.set_active(t, "a", True)  # again: no change, no error
    assert store.draft(t)[0].active
    with pytest.raises(NotFoundError, match=r"no draft group 'b' \(groups: 'a'\)"):
        store.set_active(t, "b", False)


def test_publish_moves_the_version_and_keeps_every_snapshot(log_store):
    store = log_store
    t, _ = store.add_table("applog", "s", "t")
    v1 = store.publish(t, "[1]", '[{"name": "a", "type": "string"}]', True)
    t1 = store.need_table("applog", "s", "t")
    v2 = store.publish(t1, "[2]", '[{"name": "a", "type": "string"}]', False)
    t2 = store.need_table("applog", "s", "t")
    assert (v1.version, v2.version, t2.version) == (1, 2, 2)
    assert t2.columns == '[{"name": "a", "type": "string"}]'
    assert [(v.version, v.groups, v.columns_changed) for v in store.versions(t2)] == [
        (1, "[1]", True),
        (2, "[2]", False),
    ]
    assert store.published(t2) == v2
    assert store.published(t2, 1) == v1
    assert store.published(t, 3) is None


def test_a_publish_from_a_stale_read_is_refused(log_store):
    store = log_store
    t, _ = store.add_table("applog", "s", "t")
    store.publish(t, "[1]", "[]", False)
    with pytest.raises(ConflictError, match="another publish made a version after version 0"):
        store.publish(t, "[other]", "[]", False)
    assert [v.groups for v in store.versions(t)] == ["[1]"]


def test_rule_set_gives_every_table_in_creation_order_with_its_current_version(log_store):
    store = log_store
    a, _ = store.add_table("applog", "s", "a")
    b, _ = store.add_table("applog", "s", "b")
    store.add_table("applog", "s", "never")
    store.publish(b, "[b1]", "[]", True)
    store.publish(a, "[a1]", "[]", True)
    store.publish(store.need_table("applog", "s", "a"), "[a2]", "[]", False)
    store.set_status(b, "abort")
    got = [(t.table, t.status, v and v.groups) for t, v in store.rule_set("applog", "s")]
    assert got == [("a", "ok", "[a2]"), ("b", "abort", "[b1]"), ("never", "ok", None)]


def test_drop_source_removes_its_tables_groups_and_versions_only(log_store):
    store = log_store
    t, _ = store.add_table("applog", "applog_schema", "t")
    store.add_groups(t, [("g", True, "[]")], replace=False)
    store.publish(t, "[1]", "[]", True)
    store.add_table("applog", "applog_schema", "u")
    other, _ = store.add_table("other", "other_schema", "t")
    store.add_groups(other, [("g", True, "[]")], replace=False)
    assert store.drop_source("applog") == 2
    assert store.tables("applog", "applog_schema") == [] and store.rule_set("applog", "applog_schema") == []
    assert [g.name for g in store.draft(other)] == ["g"]
    assert store.drop_source("applog") == 0
