"""Log rules as data (pure): the original DBus rule model, its JSON, and the ``ruleScope`` selector.

A log table has rule *groups*; a group is an ordered list of *rules*; a rule is an operator name and its
*grammar*, a list of entries whose JSON keys are the original's, misspelling included
(docs/logs.md, ../shared/reference/dbus_log_spec.md §2)::

    {"ruleTypeName": "split", "ruleGrammar": "[{\\"ruleScope\\":\\"1\\",\\"ruleType\\":\\"string\\",
                                                \\"ruleParamter\\":\\" | \\"}]"}

The original's export file is a list of groups, each ``{"groupName": .., "rules": [rule, ...]}``;
``groups_from_json`` reads it and ``groups_to_json`` writes it back, so a rule set round-trips.

Everything here is checked once, when rules are loaded or published: an unknown operator, a bad
``ruleScope``, a missing parameter or an invalid regex raises ``RuleError`` naming the group, the rule's
position (1-based, as the console shows it), the operator and the field. What can only fail on a line
(column 0 is not JSON, an index still negative after adding the row's width) is the operators' business.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field, fields, replace
from typing import Any

from dbuslib.errors import DbusError
from logprocessor.javatext import java_regex, java_replacement
from logprocessor.jsontext import JsonTextError, compile_path, dotted_keys
from ums.message import SYSTEM_NAMES

# The 16 operators, in the console's menu order (excludeField is the one the menu leaves out).
OPERATORS = (
    "flattenUms",
    "keyFilter",
    "toIndex",
    "filter",
    "trim",
    "replace",
    "split",
    "subString",
    "concat",
    "select",
    "saveAs",
    "prefixOrAppend",
    "regexExtract",
    "jsonPath",
    "excludeField",
    "flattenJsonArray",
)

# saveAs types (case-insensitive) -> UMS field types (spec §5.4); TIMESTAMP is DATETIME's alias.
SAVE_AS_TYPES = {
    "STRING": "string",
    "LONG": "long",
    "DOUBLE": "double",
    "DATETIME": "datetime",
    "TIMESTAMP": "datetime",
}

_JSON_KEYS = {
    "scope": "ruleScope",
    "param": "ruleParamter",
    "operate": "ruleOperate",
    "rule_type": "ruleType",
    "sub_start": "subStart",
    "sub_start_type": "subStartType",
    "sub_end": "subEnd",
    "sub_end_type": "subEndType",
    "filter_key": "filterKey",
    "name": "name",
    "type": "type",
}
_FROM_JSON = {v: k for k, v in _JSON_KEYS.items()}


class RuleError(DbusError):
    """A rule set that cannot run: the message names the table, group, rule position, operator and field."""

    code = "LOG_RULE_INVALID"


@dataclass(frozen=True)
class Entry:
    """One ``RuleGrammar`` object. Every field is the original's text (``None`` when absent)."""

    scope: str | None = None
    param: str | None = None
    operate: str | None = None
    rule_type: str | None = None
    sub_start: str | None = None
    sub_start_type: str | None = None
    sub_end: str | None = None
    sub_end_type: str | None = None
    filter_key: str | None = None
    name: str | None = None
    type: str | None = None

    def to_json(self) -> dict[str, str]:
        """The original's object: only the keys that are set."""
        return {_JSON_KEYS[f.name]: v for f in fields(self) if (v := getattr(self, f.name)) is not None}


@dataclass(frozen=True)
class Rule:
    """One operator and its grammar entries."""

    op: str
    grammar: tuple[Entry, ...] = ()

    def to_json(self) -> dict[str, str]:
        return {
            "ruleTypeName": self.op,
            "ruleGrammar": json.dumps([e.to_json() for e in self.grammar], ensure_ascii=False),
        }


@dataclass(frozen=True)
class Group:
    """A rule group: its rules run in order; the first rule that leaves no rows rejects the line."""

    name: str
    rules: tuple[Rule, ...]
    active: bool = True

    def to_json(self) -> dict[str, Any]:
        return {"groupName": self.name, "rules": [r.to_json() for r in self.rules]}


@dataclass(frozen=True)
class Column:
    """An output column of a table, from its groups' final ``saveAs``: name and UMS type."""

    name: str
    type: str


@dataclass(frozen=True)
class TableRules:
    """The published rules of one log table at one version."""

    table: str
    version: int
    groups: tuple[Group, ...]
    columns: tuple[Column, ...] = field(default=())


# ---------------------------------------------------------------- ruleScope


@dataclass(frozen=True)
class Scope:
    """A parsed ``ruleScope`` (spec §2.2). ``kind``: ``all`` | ``index`` | ``range`` | ``list``.
    ``resolve(n)`` gives the column indexes for a row of ``n`` columns; negative numbers are relative
    to ``n`` and may still be negative (an error on that line in most operators)."""

    kind: str
    values: tuple[int, ...] = ()
    end: int | None = None  # range only: None = to the end
    empty_as_written: bool = False  # range only: "a:a" as written is empty whatever n is

    def resolve(self, n: int) -> list[int]:
        if self.kind == "all":
            return list(range(n))
        if self.kind in ("index", "list"):
            return [v + n if v < 0 else v for v in self.values]
        if self.empty_as_written:
            return []
        start = self.values[0] + n if self.values[0] < 0 else self.values[0]
        end = n if self.end is None else (self.end + n if self.end < 0 else self.end)
        return list(range(start, end)) if start <= end else []

    def first(self, n: int) -> int:
        """The first index (toIndex, saveAs targets); a scope with none is an error on that line."""
        got = self.resolve(n)
        if not got:
            msg = "ruleScope selects no column"
            raise IndexError(msg)
        return got[0]


_INDEX = re.compile(r"-?[0-9]+")
_RANGE = re.compile(r"-?[0-9]+:-?[0-9]*")
_LIST = re.compile(r"-?([0-9]+)(,-?[0-9]+)+")


def parse_scope(text: str | None) -> Scope:
    """``*`` / ``0:`` all, ``k``, ``a:b`` / ``a:``, ``i,j,k``; anything else (spaces, ``null``) raises
    ``ValueError``, in the original's order of patterns."""
    if text is None:
        msg = "ruleScope is missing"
        raise ValueError(msg)
    if text in ("*", "0:"):
        return Scope("all")
    if _INDEX.fullmatch(text):
        return Scope("index", (int(text),))
    if _RANGE.fullmatch(text):
        a, b = text.split(":")
        return Scope("range", (int(a),), int(b) if b else None, empty_as_written=bool(b) and a == b)
    if _LIST.fullmatch(text):
        return Scope("list", tuple(int(v) for v in text.split(",")))
    msg = f"ruleScope {text!r} is none of *, k, a:b, a:, i,j,k"
    raise ValueError(msg)


# ---------------------------------------------------------------- reading and checking


def entry_from_json(obj: Any) -> Entry:
    """One grammar object; keys other than the original's (the console's ``key``) are ignored."""
    if not isinstance(obj, dict):
        msg = f"a grammar entry must be an object, got {type(obj).__name__}"
        raise ValueError(msg)
    values = {}
    for k, v in obj.items():
        if k in _FROM_JSON and v is not None:
            values[_FROM_JSON[k]] = v if isinstance(v, str) else json.dumps(v)
    return Entry(**values)


def rule_from_json(obj: Any, where: str) -> Rule:
    """``{"ruleTypeName": .., "ruleGrammar": "<json text>" | [..]}``; ``where`` names it in errors."""
    if not isinstance(obj, dict) or "ruleTypeName" not in obj:
        msg = f"{where}: a rule must be an object with ruleTypeName and ruleGrammar"
        raise RuleError(msg)
    op, raw = obj["ruleTypeName"], obj.get("ruleGrammar", "[]")
    where = f"{where} ({op})"
    try:
        items = json.loads(raw) if isinstance(raw, str) else raw
        if items is None:
            items = []
        if not isinstance(items, list):
            msg = "ruleGrammar must be a JSON array"
            raise ValueError(msg)
        rule = Rule(op, tuple(entry_from_json(i) for i in items))
    except ValueError as e:
        msg = f"{where}: ruleGrammar: {e}"
        raise RuleError(msg) from None
    check_rule(rule, where)
    return rule


def groups_from_json(doc: Any, where: str = "rules") -> tuple[Group, ...]:
    """The original's export format (a list of ``{groupName, rules}``) or JSON text of it."""
    if isinstance(doc, (str, bytes)):
        try:
            doc = json.loads(doc)
        except ValueError as e:
            msg = f"{where}: not JSON: {e}"
            raise RuleError(msg) from None
    if not isinstance(doc, list):
        msg = f"{where}: expected a list of groups ({{groupName, rules}})"
        raise RuleError(msg)
    groups = []
    for gi, g in enumerate(doc, 1):
        if not isinstance(g, dict) or not isinstance(g.get("groupName"), str) or not g["groupName"]:
            msg = f"{where}: group {gi}: groupName is missing"
            raise RuleError(msg)
        name = g["groupName"]
        rules = g.get("rules") or []
        if not isinstance(rules, list):
            msg = f"{where}: group {name!r}: rules must be a list"
            raise RuleError(msg)
        groups.append(
            Group(
                name,
                tuple(rule_from_json(r, f"{where}: group {name!r} rule {i}") for i, r in enumerate(rules, 1)),
                active=g.get("status", "active") != "inactive",
            )
        )
    return tuple(groups)


def groups_to_json(groups: tuple[Group, ...]) -> str:
    """The export file: what ``groups_from_json`` reads back to the same groups."""
    return json.dumps([g.to_json() for g in groups], ensure_ascii=False, indent=2)


_NEEDS_SCOPE = frozenset(OPERATORS) - {"flattenUms", "keyFilter", "excludeField"}
_REGEX_PARAM = {"regexExtract"}  # always a regex; filter/keyFilter/replace/split when ruleType says so


def check_rule(rule: Rule, where: str) -> None:
    """What the original fails on for every line, refused once instead (spec §2.2, §3)."""
    if rule.op not in OPERATORS:
        msg = f"{where}: unknown operator {rule.op!r}; known: {', '.join(OPERATORS)}"
        raise RuleError(msg)
    for i, e in enumerate(rule.grammar, 1):
        at = f"{where} entry {i}"
        if rule.op in _NEEDS_SCOPE and not (rule.op == "saveAs" and e.scope is not None):
            try:
                parse_scope(e.scope)
            except ValueError as err:
                msg = f"{at}: ruleScope: {err}"
                raise RuleError(msg) from None
        if rule.op == "flattenUms" and e.param is None:
            msg = f"{at}: ruleParamter (the namespace to keep) is missing"
            raise RuleError(msg)
        if rule.op == "keyFilter" and not e.filter_key:
            msg = f"{at}: filterKey is missing"
            raise RuleError(msg)
        if rule.op == "toIndex" and e.param is None:
            msg = f"{at}: ruleParamter (the JSON key) is missing"
            raise RuleError(msg)
        if rule.op == "saveAs":
            if not e.name:
                msg = f"{at}: name is missing"
                raise RuleError(msg)
            if e.type is None or e.type.upper() not in SAVE_AS_TYPES:
                msg = f"{at}: type {e.type!r} is none of {', '.join(SAVE_AS_TYPES)}"
                raise RuleError(msg)
        if rule.op == "regexExtract" and e.param is None:
            msg = f"{at}: ruleParamter (the regex) is missing"
            raise RuleError(msg)
        _check_regex(rule.op, e, at)
        _check_path(rule.op, e, at)
    if rule.op == "saveAs":
        _check_save_as_names(rule.grammar, where)


def save_as_name_problem(name: str, earlier: list[str]) -> str | None:
    """Why a ``saveAs`` column may not be called ``name`` after the rule's ``earlier`` names, or None: a
    name of the UMS system fields every log message carries (``ums_id_``, ``ums_ts_``, ``ums_op_``,
    ``ums_uid_``; a heartbeat's are among them) would give the message two fields of that name, and a name
    given twice two columns of one name. Compared without case: a SQL replica's columns ignore it."""
    folded = name.casefold()
    system = sorted(SYSTEM_NAMES)
    if folded in {n.casefold() for n in system}:
        listed = ", ".join(system)
        return f"name {name!r} is a UMS system field ({listed}): a log table's message has it already"
    for j, other in enumerate(earlier, 1):
        if other.casefold() == folded:
            return f"name {name!r} is entry {j}'s name too ({other!r}): each column needs its own name"
    return None


def _check_save_as_names(grammar: tuple[Entry, ...], where: str) -> None:
    names: list[str] = []
    for i, e in enumerate(grammar, 1):
        name = e.name or ""
        problem = save_as_name_problem(name, names)
        if problem is not None:
            msg = f"{where} entry {i}: {problem}"
            raise RuleError(msg)
        names.append(name)


def _check_regex(op: str, e: Entry, at: str) -> None:
    """A Java regex (``logprocessor.javatext.java_regex``) where the operator reads one: regexExtract always,
    filter/keyFilter with ruleType regex, split and replace unless ruleType is string (spec §3). Only
    replace runs without one (nothing replaced); replace's ``$n`` references must name groups."""
    is_regex = (
        op in _REGEX_PARAM
        or (e.rule_type == "regex" and op in ("filter", "keyFilter"))
        or (op in ("split", "replace") and e.rule_type != "string")
    )
    if not is_regex:
        return
    if e.param is None:
        if op != "replace":
            msg = f"{at}: ruleParamter (the regex) is missing"
            raise RuleError(msg)
        return
    try:
        rx = java_regex(e.param)
    except re.error as err:
        msg = f"{at}: ruleParamter {e.param!r} is not a valid regex: {err}"
        raise RuleError(msg) from None
    if op == "replace":
        try:
            java_replacement(rx, e.operate or "")
        except ValueError as err:
            msg = f"{at}: ruleOperate {e.operate!r} is not a valid replacement: {err}"
            raise RuleError(msg) from None


def _check_path(op: str, e: Entry, at: str) -> None:
    """jsonPath's path in the supported JsonPath subset; flattenJsonArray's, when set, keys joined by dots."""
    try:
        if op == "jsonPath":
            compile_path(e.param)
        elif op == "flattenJsonArray" and e.param:
            dotted_keys(e.param)
    except JsonTextError as err:
        msg = f"{at}: ruleParamter: {err}"
        raise RuleError(msg) from None


def with_save_as(group: Group) -> Group:
    """The group as the processor runs it: an empty ``saveAs`` appended when the last rule is not one
    (the original's rule, spec §3.11: such a group's rows carry no user columns)."""
    if group.rules and group.rules[-1].op == "saveAs":
        return group
    return replace(group, rules=(*group.rules, Rule("saveAs", ())))


def save_as_entries(grammar: tuple[Entry, ...]) -> list[tuple[int, Entry]]:
    """The saveAs entries that make columns, in output order: a ``ruleScope`` of decimal digits only
    (negative and range scopes are ignored, as in the original), by column index, then entry order."""
    keyed = [(int(e.scope), i, e) for i, e in enumerate(grammar) if e.scope and e.scope.isdecimal()]
    return [(k, e) for k, _, e in sorted(keyed, key=lambda t: t[:2])]


def save_as_columns(group: Group) -> tuple[Column, ...]:
    """The output columns of a group: its final saveAs entries in output order (spec §3.11); a type the
    original did not know is its default, string."""
    last = with_save_as(group).rules[-1]
    return tuple(
        Column(e.name or "", SAVE_AS_TYPES.get(str(e.type).upper(), "string"))
        for _, e in save_as_entries(last.grammar)
    )
