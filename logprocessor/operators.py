"""The 16 log rule operators as pure functions, ``rows -> rows``: the reference of the JVM's rule engine
(``dbus.jvm.logrules.Engine``, the one the processor runs; tests/unit/test_logrules_jvm.py holds them equal),
and what ``dbus logrules test`` and the console's preview run.

A row is ``list[str | None]`` (``None`` only from a ``regexExtract`` group that did not take part); after
``saveAs`` a row holds typed values (``str``, ``float`` for DOUBLE, ``None``). Each operator takes its
grammar entries (``logprocessor.grammar.Entry``) and a list of rows and returns a list of rows; an empty
list means "this group does not accept the line". A rule that breaks on a line raises ``LineError``;
``run_group`` turns it into a ``GroupResult`` naming the group, the rule's position and its operator::

    >>> from logprocessor.grammar import Entry, Group, Rule
    >>> rule = Rule("split", (Entry(scope="0", rule_type="string", param=" | "),))
    >>> run_rule(rule, [["a | b"]])
    [['a', 'b']]

Semantics are the original's (../shared/reference/dbus_log_spec.md §2-§3), with the fixes listed in
docs/logs.md ("Where DBus differs from the original"). Every example is a golden case in
tests/golden/logrules/<operator>.yaml. The operators that read the row as it was before the rule (trim,
prefixOrAppend, subString, split, regexExtract) compute each scope column's new cells (the last entry on a
column wins) and rebuild the row by position, so a column that becomes 0 or several cells never shifts
another (the original's index shift, fixed).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from logprocessor import regexbudget
from logprocessor.grammar import (
    SAVE_AS_TYPES,
    Column,
    Entry,
    Group,
    Rule,
    parse_scope,
    save_as_columns,
    save_as_entries,
    with_save_as,
)
from logprocessor.javatext import (
    delete_chars,
    double_value,
    index_of,
    java_regex,
    java_replacement,
    last_index_of,
    long_text,
    split_by_whole_separator,
    split_matches,
    strip,
    strip_end,
    strip_start,
    substring,
    to_int,
)
from logprocessor.jsontext import (
    JsonTextError,
    Num,
    as_text,
    compile_path,
    dotted_keys,
    dumps,
    loads,
    loads_object,
)

Row = list[Any]  # list[str | None]; after saveAs list[str | float | None]
Grammar = tuple[Entry, ...]

# excludeField's keys, hard-coded in the original (ExcludeFieldRule).
EXCLUDED_KEYS = ("path", "@timestamp", "@version", "host", "message", "type")

# The dead-letter codes of a line that breaks a rule (docs/errors.md): the processor's (job.py, LogRecordUdf).
LINE_ERROR = "LOG_LINE_RULE_ERROR"
BUDGET_ERROR = regexbudget.CODE  # LOG_RULE_BUDGET: a regex ran past processor.regex_budget_ms on the line


class LineError(Exception):
    """A rule broke on this line (column 0 not a JSON object, a negative column, a DOUBLE that is not a
    number, a regex over its budget, ...): the line goes to the dead-letter topic with the rule named and
    ``code``, never silently dropped."""

    def __init__(self, reason: str, code: str = LINE_ERROR) -> None:
        super().__init__(reason)
        self.reason = reason
        self.code = code


@dataclass(frozen=True)
class LineFailure:
    """Where and why a line broke a group: ``message`` is what the dead-letter record says."""

    group: str
    position: int  # 1-based, as the console numbers rules
    op: str
    reason: str
    code: str = LINE_ERROR  # the dead letter's code: LOG_LINE_RULE_ERROR, or LOG_RULE_BUDGET

    @property
    def message(self) -> str:
        return f"group {self.group!r} rule {self.position} ({self.op}): {self.reason}"


@dataclass(frozen=True)
class GroupResult:
    """One group on one line: its rows (empty = not accepted), its output columns, or the failure."""

    group: str
    rows: list[Row]
    columns: tuple[Column, ...]
    failure: LineFailure | None = None

    @property
    def accepted(self) -> bool:
        return bool(self.rows)


@dataclass(frozen=True)
class Step:
    """The rows after rule ``position`` (``dbus logrules test``, the console's "run to this rule")."""

    position: int
    op: str
    rows: list[Row] = field(default_factory=list)
    error: str | None = None
    code: str | None = None  # with error: the dead letter's code (LINE_ERROR, or BUDGET_ERROR: over budget)


# ---------------------------------------------------------------- shared pieces


def _scope(e: Entry, n: int) -> list[int]:
    """The entry's columns on a row of ``n``; a column still negative after adding ``n`` breaks the line."""
    try:
        cols = parse_scope(e.scope).resolve(n)
    except ValueError as err:
        msg = f"ruleScope: {err}"
        raise LineError(msg) from None
    for c in cols:
        if c < 0:
            msg = f"ruleScope {e.scope!r} selects column {c} of a {n}-column row"
            raise LineError(msg)
    return cols


def _in_range(e: Entry, n: int) -> list[int]:
    return [c for c in _scope(e, n) if c < n]


def _regex(text: str | None) -> re.Pattern[str]:
    if text is None:
        msg = "ruleParamter (the regex) is missing"
        raise LineError(msg)
    try:
        return java_regex(text)
    except re.error as err:
        msg = f"ruleParamter {text!r} is not a valid regex: {err}"
        raise LineError(msg) from None


def _not_null(value: Any, col: int) -> str:
    """The cell's text where the original threw on ``null``."""
    if value is None:
        msg = f"column {col} is null"
        raise LineError(msg)
    return str(value)


def _column0_object(row: Row) -> dict[str, Any]:
    if not row:
        msg = "the row has no column 0"
        raise LineError(msg)
    try:
        return loads_object(row[0])
    except JsonTextError as err:
        msg = f"column 0: {err}"
        raise LineError(msg) from None


def _rebuild(row: Row, grammar: Grammar, cells: Cells) -> Row:
    """Each in-range scope column replaced by ``cells(entry, original value, column)`` (last entry wins),
    the row rebuilt by position."""
    new: dict[int, list[Any]] = {}
    for e in grammar:
        for col in _in_range(e, len(row)):
            new[col] = cells(e, row[col], col)
    if not new:
        return list(row)
    return [v for i, cell in enumerate(row) for v in new.get(i, (cell,))]


Cells = Callable[[Entry, Any, int], list[Any]]


def _per_row(rows: Iterable[Row], grammar: Grammar, cells: Cells) -> list[Row]:
    return [_rebuild(row, grammar, cells) for row in rows]


# ---------------------------------------------------------------- filters


def flatten_ums(grammar: Grammar, rows: list[Row]) -> list[Row]:
    """§3.1: keeps a row whose column 0 JSON ``namespace`` contains any ``ruleParamter``."""
    out = []
    for row in rows:
        ns = as_text(_column0_object(row).get("namespace"))
        if ns is not None and any(e.param is not None and e.param in ns for e in grammar):
            out.append(row)
    return out


def _test(e: Entry, value: str | None, col: int | None = None) -> bool | None:
    """One filter/keyFilter test: ``None`` when the entry's ``ruleType`` is neither string nor regex."""
    if e.rule_type == "string":
        hit = value is not None and e.param is not None and e.param in value
    elif e.rule_type == "regex":
        _regex(e.param)
        if value is None and col is not None:
            msg = f"column {col} is null"
            raise LineError(msg)
        hit = value is not None and regexbudget.search(str(e.param), value) is not None
    else:
        return None
    return hit if e.operate == "==" else not hit


def _key_text(obj: dict[str, Any], key: str | None) -> str | None:
    """fastjson's ``getString(key)``: a missing key (a ``null`` one too) is ``None``."""
    return None if key is None else as_text(obj.get(key))


def key_filter(grammar: Grammar, rows: list[Row]) -> list[Row]:
    """§3.2: keeps a row when any entry's test on column 0's JSON ``filterKey`` passes; a missing key is
    ``None``: never contains, never matches (``!=`` accepts it)."""
    out = []
    for row in rows:
        if not grammar:
            continue
        obj = _column0_object(row)
        if any(_test(e, _key_text(obj, e.filter_key)) for e in grammar):
            out.append(row)
    return out


def filter_rows(grammar: Grammar, rows: list[Row]) -> list[Row]:
    """§3.4: for every entry, every scope column overwrites one verdict: the last evaluation wins.
    A column >= n is tested as ``""``; an entry of another ``ruleType`` leaves the verdict as it was."""
    out = []
    for row in rows:
        ok = False
        for e in grammar:
            for col in _scope(e, len(row)):
                verdict = _test(e, row[col] if col < len(row) else "", col)
                ok = ok if verdict is None else verdict
        if ok:
            out.append(row)
    return out


# ---------------------------------------------------------------- JSON to columns


def to_index(grammar: Grammar, rows: list[Row]) -> list[Row]:
    """§3.3: column 0's JSON keys into columns; a slot is the entry's first scope index (gaps collapse,
    the last entry on a slot wins); strings as they are, missing or null ``""``, others their JSON text."""
    out = []
    for row in rows:
        obj = _column0_object(row)
        slots: dict[int, str] = {}
        for e in grammar:
            try:
                slot = parse_scope(e.scope).first(len(row))
            except ValueError as err:
                msg = f"ruleScope: {err}"
                raise LineError(msg) from None
            except IndexError:
                msg = f"ruleScope {e.scope!r} selects no column"
                raise LineError(msg) from None
            if slot < 0:
                msg = f"ruleScope {e.scope!r} selects column {slot} of a {len(row)}-column row"
                raise LineError(msg)
            slots[slot] = _key_text(obj, e.param) or ""
        out.append([slots[k] for k in sorted(slots)])
    return out


def exclude_field(grammar: Grammar, rows: list[Row]) -> list[Row]:
    """§3.15: column 0's JSON without path, @timestamp, @version, host, message, type; one column."""
    kept = ({k: v for k, v in _column0_object(row).items() if k not in EXCLUDED_KEYS} for row in rows)
    return [[dumps(obj)] for obj in kept]


def _json_for_path(value: Any, col: int) -> Any:
    """Strict JSON; text that does not start with ``{`` or ``[`` is a scalar (the original's lenient
    json-smart read ``not json`` so: a path finds nothing in it); a broken object or array breaks the line."""
    text = "" if value is None else str(value)
    try:
        return loads(text)
    except JsonTextError as err:
        if text.lstrip()[:1] in ("{", "["):
            msg = f"column {col}: {err}"
            raise LineError(msg) from None
        return text


def _json_path_cell(path_text: str | None, value: Any, col: int) -> str:
    try:
        path = compile_path(path_text)
    except JsonTextError as err:
        raise LineError(str(err)) from None
    hits = path.find(_json_for_path(value, col))
    if path.definite and not hits:
        return ""
    found = hits[0] if path.definite else hits
    return found if isinstance(found, str) and not isinstance(found, Num) else dumps(found)


def json_path(grammar: Grammar, rows: list[Row]) -> list[Row]:
    """§3.14: appends, per entry and scope column, the path's result (a string as it is, anything else its
    JSON text, nothing found ``""``); the source columns stay. Subset: ``logprocessor.jsontext.JsonPath``."""
    out = []
    for row in rows:
        added = [_json_path_cell(e.param, row[c], c) for e in grammar for c in _in_range(e, len(row))]
        out.append([*row, *added])
    return out


def _flatten_array(value: Any) -> list[str] | None:
    """The elements' texts (null ``""``); ``None`` when the text is not a JSON array."""
    if not value:
        return []
    try:
        arr = loads(str(value))
    except JsonTextError:
        return None
    if not isinstance(arr, list):
        return None
    return ["" if x is None else str(as_text(x)) for x in arr]


def _with(obj: dict[str, Any], key: str, value: Any) -> dict[str, Any]:
    """A copy of ``obj`` with ``key``'s value replaced where it stands."""
    return {**obj, key: value}


def _set_in(obj: Any, keys: tuple[str, ...], value: Any) -> Any:
    return value if not keys else _with(obj, keys[0], _set_in(obj[keys[0]], keys[1:], value))


def _flatten_path(value: Any, path: str, col: int) -> list[str]:
    """Top-level ``p``: one object per element of ``obj[p]``; nested ``a.b``: one object whose ``a`` is a
    list of copies of ``a``, each with ``b`` = one element. No array there: nothing."""
    try:
        keys = dotted_keys(path)
        obj = loads_object(None if value is None else str(value))
    except JsonTextError as err:
        msg = f"column {col}: {err}"
        raise LineError(msg) from None
    if path in obj:
        arr = obj[path]
        return [dumps(_with(obj, path, x)) for x in arr] if isinstance(arr, list) else []
    parent: Any = obj
    for k in keys[:-1]:
        if not isinstance(parent, dict) or k not in parent:
            return []
        parent = parent[k]
    arr = parent.get(keys[-1]) if isinstance(parent, dict) else None
    if not isinstance(arr, list):
        return []
    return [dumps(_set_in(obj, keys[:-1], [_with(parent, keys[-1], x) for x in arr]))]


def flatten_json_array(grammar: Grammar, rows: list[Row]) -> list[Row]:
    """§3.16: one output row per element, column ``c`` replaced; each entry and scope column explodes the
    original row on its own. A row that yields nothing is dropped."""
    out: list[Row] = []
    for row in rows:
        for e in grammar:
            for col in _in_range(e, len(row)):
                if e.param:
                    values = _flatten_path(row[col], e.param, col)
                elif (got := _flatten_array(row[col])) is None:
                    break  # not a JSON array: the original stops this entry's columns for this row
                else:
                    values = got
                out.extend([*row[:col], v, *row[col + 1 :]] for v in values)
    return out


# ---------------------------------------------------------------- column rewrites


def _trim_cell(e: Entry, value: Any, col: int) -> list[Any]:
    if value is None:
        return [None]
    strips = {"left": strip_start, "right": strip_end, "both": strip}
    fn = strips.get(e.operate or "")
    return [fn(value, e.param) if fn else delete_chars(value, e.param)]


def trim(grammar: Grammar, rows: list[Row]) -> list[Row]:
    """§3.5: left/right/both strip the characters of ``ruleParamter`` (``null``: whitespace) from the ends;
    any other operate (``all``) deletes them everywhere. Reads the original row."""
    return _per_row(rows, grammar, _trim_cell)


def _replace_cell(e: Entry, value: Any) -> Any:
    if value is None:
        return None
    replacement = e.operate or ""
    if e.rule_type == "string":
        return value.replace(e.param, replacement) if e.param else value
    if e.param is None:
        return value
    rx = _regex(e.param)
    if not regexbudget.search(e.param, value):
        return value
    try:
        expand = java_replacement(rx, replacement)
    except (ValueError, IndexError) as err:
        msg = f"ruleOperate {replacement!r}: {err}"
        raise LineError(msg) from None
    return regexbudget.sub(e.param, expand, value)


def replace(grammar: Grammar, rows: list[Row]) -> list[Row]:
    """§3.6: ``string`` replaces literally; any other ``ruleType`` (also none) is a Java ``replaceAll``
    (``$1`` references). Entries compose: each reads what the previous one wrote."""
    out = []
    for row in rows:
        new = list(row)
        for e in grammar:
            for col in _in_range(e, len(new)):
                new[col] = _replace_cell(e, new[col])
        out.append(new)
    return out


def _split_cell(e: Entry, value: Any, col: int) -> list[Any]:
    text = _not_null(value, col)
    if e.rule_type == "string":
        return list(split_by_whole_separator(text, e.param))
    _regex(e.param)
    return split_matches(text, regexbudget.finditer(str(e.param), text))


def split(grammar: Grammar, rows: list[Row]) -> list[Row]:
    """§3.7: the column becomes its pieces, in place. ``string``: whole separator, empty tokens kept, ``""``
    gives no piece; otherwise Java ``String.split`` (trailing empty pieces dropped)."""
    return _per_row(rows, grammar, _split_cell)


def _sub_string_cell(e: Entry, value: Any, col: int) -> list[Any]:
    kinds = (e.sub_start_type, e.sub_end_type)
    if kinds == ("index", "index"):
        start, end = to_int(e.sub_start), None if e.sub_end is None else to_int(e.sub_end)
    elif kinds == ("index", "string"):
        marker = e.sub_end or ""
        start, end = to_int(e.sub_start), last_index_of(value, marker) + len(marker)
    elif kinds == ("string", "index"):
        start, end = index_of(value, e.sub_start), None if e.sub_end is None else to_int(e.sub_end)
    elif kinds == ("string", "string"):
        start = index_of(value, e.sub_start)
        end = None if e.sub_end is None else last_index_of(value, e.sub_end) + len(e.sub_end)
    else:
        return []  # the original's quirk: the column is removed
    return [substring(value, start, end)]


def sub_string(grammar: Grammar, rows: list[Row]) -> list[Row]:
    """§3.8: commons ``substring`` with the original's formulas (a string end includes its marker, from the
    last one; a marker not found is -1). Any other type pair removes the column. Reads the original row."""
    return _per_row(rows, grammar, _sub_string_cell)


def _prefix_cell(e: Entry, value: Any, col: int) -> list[Any]:
    param, text = e.param or "", "" if value is None else value
    return [param + text if e.operate == "before" else text + param]


def prefix_or_append(grammar: Grammar, rows: list[Row]) -> list[Row]:
    """§3.12: ``before`` puts ``ruleParamter`` in front, anything else after. Reads the original row."""
    return _per_row(rows, grammar, _prefix_cell)


def _extract_cell(e: Entry, value: Any, col: int) -> list[Any]:
    _regex(e.param)
    m = regexbudget.search(str(e.param), _not_null(value, col))
    return list(m.groups()) if m else []


def regex_extract(grammar: Grammar, rows: list[Row]) -> list[Row]:
    """§3.13: the column becomes the first match's groups 1..g (``None`` for one that did not take part);
    no match removes the column. A scope column >= n changes nothing."""
    return _per_row(rows, grammar, _extract_cell)


def concat(grammar: Grammar, rows: list[Row]) -> list[Row]:
    """§3.9: joins the in-range scope columns' original values with ``ruleParamter`` (``null``: ``""``);
    the joined columns go, by position, and the text stands where the first of them was."""
    out = []
    for row in rows:
        joined: dict[int, list[str]] = {}
        used: set[int] = set()
        for e in grammar:
            cols = _in_range(e, len(row))
            if cols:
                text = (e.param or "").join("" if row[c] is None else row[c] for c in cols)
                joined.setdefault(cols[0], []).append(text)
                used.update(cols)
        out.append([v for i, cell in enumerate(row) for v in joined.get(i, [] if i in used else [cell])])
    return out


def select(grammar: Grammar, rows: list[Row]) -> list[Row]:
    """§3.10: a new row of the scope columns in scope order (repeats allowed); columns >= n skipped."""
    return [[row[c] for e in grammar for c in _in_range(e, len(row))] for row in rows]


# ---------------------------------------------------------------- saveAs


def _datetime_text(text: str) -> str:
    """The original's ``dateValue``: no space -> the first ``:`` becomes one; cut to 26 characters."""
    if " " not in text and ":" in text:
        text = text.replace(":", " ", 1)
    return text[:26]


def typed_value(e: Entry, value: Any) -> Any:
    """A saveAs cell as its UMS value (spec §5.4): LONG canonical when numeric, else the text as is;
    DOUBLE a float (not a finite number breaks the line); DATETIME ``_datetime_text``; ``None`` stays."""
    if value is None:
        return None
    if e.type is None:
        msg = f"saveAs {e.name!r} has no type"
        raise LineError(msg)
    kind = SAVE_AS_TYPES.get(e.type.upper(), "string")
    text = str(value)
    if kind == "long":
        canonical = long_text(text)
        return text if canonical is None else canonical
    if kind == "double":
        number = double_value(text)
        if number is None:
            msg = f"saveAs column {e.name!r} (DOUBLE): {text!r} is not a number"
            raise LineError(msg)
        return number
    return _datetime_text(text) if kind == "datetime" else text


def save_as(grammar: Grammar, rows: list[Row]) -> list[Row]:
    """§3.11: the typed row, one value per entry with an all-digit scope, ordered by column then entry
    (``grammar.save_as_columns`` names them); a column the row lacks is ``""``."""
    entries = save_as_entries(grammar)
    return [[typed_value(e, row[k] if k < len(row) else "") for k, e in entries] for row in rows]


# ---------------------------------------------------------------- rules and groups

OPERATIONS: dict[str, Callable[[Grammar, list[Row]], list[Row]]] = {
    "flattenUms": flatten_ums,
    "keyFilter": key_filter,
    "toIndex": to_index,
    "filter": filter_rows,
    "trim": trim,
    "replace": replace,
    "split": split,
    "subString": sub_string,
    "concat": concat,
    "select": select,
    "saveAs": save_as,
    "prefixOrAppend": prefix_or_append,
    "regexExtract": regex_extract,
    "jsonPath": json_path,
    "excludeField": exclude_field,
    "flattenJsonArray": flatten_json_array,
}


def run_rule(rule: Rule, rows: list[Row]) -> list[Row]:
    """One rule on rows; ``LineError`` when it breaks on them."""
    op = OPERATIONS.get(rule.op)
    if op is None:
        msg = f"unknown operator {rule.op!r}"
        raise LineError(msg)
    return op(rule.grammar, rows)


def _apply(rules: tuple[Rule, ...], position: int, rows: list[Row]) -> list[Row]:
    if position > 1 and rules[position - 2].op == "saveAs":
        msg = "a rule after saveAs (saveAs must be the group's last rule)"
        raise LineError(msg)
    try:
        return run_rule(rules[position - 1], rows)
    except regexbudget.OverBudget as e:
        raise LineError(e.reason, BUDGET_ERROR) from None
    except re.error as e:  # a regex only the thread engine refuses (regexbudget)
        msg = f"ruleParamter is not a valid regex: {e}"
        raise LineError(msg) from None


def run_group(group: Group, line: str, budget_ms: int | None = None) -> GroupResult:
    """The group on one line, as the processor runs it (an empty saveAs appended when the last rule is not
    one): its rows, or none from the first rule that leaves none, or the failure. Never raises.

    Each regex runs on a cell within ``budget_ms`` (``processor.regex_budget_ms``; None: that of the
    surrounding ``regexbudget.budget`` block, by default 100): past it the line fails with ``code``
    ``BUDGET_ERROR`` (logprocessor/regexbudget.py)."""
    rules = with_save_as(group).rules
    columns = save_as_columns(group)
    rows: list[Row] = [[line]]
    with regexbudget.budget(budget_ms):
        for position, rule in enumerate(rules, 1):
            try:
                rows = _apply(rules, position, rows)
            except LineError as e:
                failure = LineFailure(group.name, position, rule.op, e.reason, e.code)
                return GroupResult(group.name, [], columns, failure)
            if not rows:
                break
    return GroupResult(group.name, rows, columns)


def steps(group: Group, line: str, upto: int | None = None, budget_ms: int | None = None) -> list[Step]:
    """The rows after each of the group's rules (1..``upto``), as written (no saveAs appended); the list
    ends at the first rule that leaves no rows or breaks (its ``error`` and ``code``).

    ``budget_ms`` as for ``run_group``: a regex over it ends the list with a step whose ``code`` is
    ``BUDGET_ERROR`` (``LOG_RULE_BUDGET``) and whose ``error`` says which regex, its budget and the text's
    length, as the processor's dead letter does. Each regex call takes at most about ``budget_ms``."""
    if upto is not None and not 1 <= upto <= len(group.rules):
        msg = f"upto {upto}: group {group.name!r} has rules 1..{len(group.rules)}"
        raise ValueError(msg)
    rows: list[Row] = [[line]]
    out: list[Step] = []
    with regexbudget.budget(budget_ms):
        for position, rule in enumerate(group.rules[:upto], 1):
            try:
                rows = _apply(group.rules, position, rows)
            except LineError as e:
                out.append(Step(position, rule.op, [], e.reason, e.code))
                break
            out.append(Step(position, rule.op, rows))
            if not rows:
                break
    return out
