"""Rule sets as the model (logprocessor/grammar.py) over the meta store's text (dbuslib/logstore.py).

- ``load_rule_set``: what the processor runs, a source's published rules: every ``ok`` table in creation
  order, each with the groups of its current version in group order (the original's loading, spec §4.2);
  ``abort`` tables come apart (heartbeats only, no groups).
- ``draft``, ``import_groups``, ``publish``: what ``dbus logrules`` does to a table's draft.

Publishing is the original's *upgrade version* (spec §5.5), refused (``PublishRefused``, naming the groups or
the rule) unless:

1. the draft has at least one active group;
2. every active group parses, passes ``check_rule``, and the engine that runs it (the JVM's, ``engine``:
   logprocessor/rules_jvm.py) accepts it (a ``RuleError`` names group, rule position and operator);
3. every active group ends in ``saveAs``, whose entries each name one column index (the original ignored any
   other entry silently); its names are distinct and none is a UMS system field (``check_rule`` in 2);
4. all active groups' final ``saveAs`` are equal as sets of (name, type, ruleScope), and give the same
   columns in the same order, so one table has one schema.

Then version ``n + 1`` snapshots the active groups (the inactive ones are left out, as in the original) with
the output columns, and says whether they changed. Publishing groups equal to the current version's is a
no-op that says so: no new version, no new namespace.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from dbuslib.errors import DbusError
from dbuslib.logstore import LogStore, LogTable, NotFoundError, Published
from logprocessor.grammar import (
    SAVE_AS_TYPES,
    Column,
    Group,
    Rule,
    RuleError,
    TableRules,
    groups_from_json,
    groups_to_json,
    save_as_columns,
)

# The engine's judgement of a table's active groups before they run: its problems, each naming group, rule
# and operator (none: accepted). ``rules_jvm.engine(cfg)`` asks the JVM engine the processor runs.
Engine = Callable[[Sequence[Group]], list[str]]


class PublishRefused(DbusError):
    """The draft cannot be published (no active group, a group without saveAs, groups whose saveAs differ);
    the message names the groups. Nothing was written; the version in force stays."""

    code = "LOG_PUBLISH_REFUSED"


@dataclass(frozen=True)
class RuleSet:
    """A log source's published rules, as the processor runs them.

    ``tables``: the ``ok`` tables in creation order (a table never published has version 0 and no groups:
    it accepts nothing but still has heartbeats); ``aborted``: the ``abort`` tables (heartbeats only);
    ``columns_changed``: the tables whose current version changed the output columns of the one before."""

    ds: str
    schema: str
    tables: tuple[TableRules, ...]
    aborted: tuple[TableRules, ...] = ()
    columns_changed: frozenset[str] = frozenset()


@dataclass(frozen=True)
class PublishResult:
    """What ``publish`` did: ``published`` False when the draft equals version ``version`` (a no-op)."""

    table: str
    version: int
    published: bool
    groups: tuple[str, ...]
    columns: tuple[Column, ...]
    columns_changed: bool


def load_rule_set(store: LogStore, ds: str, schema: str) -> RuleSet:
    """The source's published rules (see the module docstring)."""
    ok, aborted, changed = [], [], set()
    for table, version in store.rule_set(ds, schema):
        rules = table_rules(table, version)
        if table.status == "ok":
            ok.append(rules)
        elif table.status == "abort":
            aborted.append(TableRules(table.table, table.version, (), rules.columns))
        if version is not None and version.columns_changed:
            changed.add(table.table)
    return RuleSet(ds, schema, tuple(ok), tuple(aborted), frozenset(changed))


def table_rules(table: LogTable, version: Published | None) -> TableRules:
    """One table at one published version (None: never published, no groups)."""
    if version is None:
        return TableRules(table.table, table.version, (), columns_from_json(table.columns))
    groups = groups_from_json(version.groups, f"{table.where} version {version.version}")
    return TableRules(table.table, version.version, groups, columns_from_json(version.columns))


def published_groups(store: LogStore, table: LogTable, version: int | None = None) -> tuple[Group, ...]:
    """The groups of a published version (default: the current one); PublishRefused when there is none."""
    found = store.published(table, version)
    if found is None:
        which = "" if version is None else f" {version}"
        msg = f"{table.where} has no published version{which} (dbus logrules publish makes one)"
        raise NotFoundError(msg)
    return table_rules(table, found).groups


def draft(store: LogStore, table: LogTable) -> tuple[Group, ...]:
    """The table's draft groups, parsed and checked (a RuleError names a broken rule)."""
    return tuple(_parse(table, g.name, g.rules, g.active) for g in store.draft(table))


def import_groups(
    store: LogStore, table: LogTable, text: str, where: str, *, replace: bool, active: bool
) -> tuple[Group, ...]:
    """Add the groups of an export file (``text``, named ``where`` in errors) to the table's draft, inactive
    unless ``active`` (the original imports them inactive); with ``replace`` they become the whole draft.
    Every rule is checked first: a bad file changes nothing."""
    groups = groups_from_json(text, where)
    if not groups:
        msg = f"{where}: no group in the file"
        raise RuleError(msg)
    store.add_groups(table, [(g.name, active, rules_to_json(g.rules)) for g in groups], replace=replace)
    return groups


def check(store: LogStore, table: LogTable, engine: Engine) -> tuple[tuple[Group, ...], tuple[Column, ...]]:
    """The table's active draft groups checked as ``publish`` checks them (rules 1 to 4 of the module
    docstring), and the columns they save; ``RuleError``/``PublishRefused`` name what fails. Writes
    nothing: ``dbus logrules check``."""
    rows = store.draft(table)
    active = [g for g in rows if g.active]
    if not active:
        inactive = ", ".join(repr(g.name) for g in rows) or "none"
        msg = (
            f"{table.where}: no active draft group to publish (inactive: {inactive}); "
            f"dbus logrules group --source {table.ds} --table {table.table} --group NAME --active"
        )
        raise PublishRefused(msg)
    groups = tuple(_parse(table, g.name, g.rules, True) for g in active)
    columns = check_save_as(table.where, groups)
    problems = engine(groups)  # what the processor's engine would refuse is refused now, not there
    if problems:
        raise RuleError(f"{table.where}: " + "; ".join(problems))
    return groups, columns


def publish(store: LogStore, table: LogTable, engine: Engine) -> PublishResult:
    """Publish the table's active draft groups as a new version (see the module docstring)."""
    groups, columns = check(store, table, engine)
    current = store.published(table)
    text = groups_to_json(groups)
    names = tuple(g.name for g in groups)
    if current is not None and json.loads(current.groups) == json.loads(text):
        return PublishResult(table.table, current.version, False, names, columns, False)
    changed = columns != columns_from_json(table.columns)
    new = store.publish(table, text, columns_to_json(columns), changed)
    return PublishResult(table.table, new.version, True, names, columns, changed)


def check_save_as(where: str, groups: tuple[Group, ...]) -> tuple[Column, ...]:
    """Each group ends in a usable saveAs and all agree (rules 3 and 4 of the module docstring); their
    columns. PublishRefused names the groups otherwise."""
    missing = [g.name for g in groups if not g.rules or g.rules[-1].op != "saveAs"]
    if missing:
        msg = f"{where}: active group(s) {missing} do not end in saveAs (it names the columns)"
        raise PublishRefused(msg)
    for g in groups:
        _check_entries(where, g)
    seen: dict[tuple[frozenset[tuple[str, str, str]], tuple[Column, ...]], list[str]] = {}
    for g in groups:
        seen.setdefault((_save_as_set(g), save_as_columns(g)), []).append(g.name)
    if len(seen) > 1:
        shown = "; ".join(f"{names} save {_show_columns(cols)}" for (_, cols), names in seen.items())
        msg = f"{where}: the active groups' saveAs differ (one table has one schema): {shown}"
        raise PublishRefused(msg)
    return save_as_columns(groups[0])


def _check_entries(where: str, g: Group) -> None:
    last = g.rules[-1]
    at = f"{where}: group {g.name!r} rule {len(g.rules)} (saveAs)"
    for i, e in enumerate(last.grammar, 1):
        if not (e.scope or "").isdigit():
            msg = f"{at} entry {i}: ruleScope {e.scope!r} is not a column index (0, 1, ...)"
            raise PublishRefused(msg)


def _save_as_set(g: Group) -> frozenset[tuple[str, str, str]]:
    return frozenset(
        (str(e.name), SAVE_AS_TYPES[str(e.type).upper()], str(e.scope)) for e in g.rules[-1].grammar
    )


def _show_columns(columns: tuple[Column, ...]) -> str:
    return "(" + ", ".join(f"{c.name} {c.type}" for c in columns) + ")"


def _parse(table: LogTable, name: str, rules: str, active: bool) -> Group:
    doc = [{"groupName": name, "rules": json.loads(rules)}]
    (group,) = groups_from_json(doc, table.where)
    return Group(group.name, group.rules, active)


def rules_to_json(rules: tuple[Rule, ...]) -> str:
    """A group's rules as stored in the draft: the export format's ``rules`` list."""
    return json.dumps([r.to_json() for r in rules], ensure_ascii=False)


def columns_to_json(columns: tuple[Column, ...]) -> str:
    return json.dumps([{"name": c.name, "type": c.type} for c in columns], ensure_ascii=False)


def columns_from_json(text: str) -> tuple[Column, ...]:
    return tuple(Column(c["name"], c["type"]) for c in json.loads(text))
