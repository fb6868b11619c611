"""Log rule groups compiled to Spark SQL expressions (pure): no Python runs per line.

The original's row model in SQL types: a row is ``array<string>``, a rule maps ``array<array<string>>`` to
``array<array<string>>`` (spec §2). ``rules_sql`` gives an expression whose value is
``struct<rows: array<array<string>>, err: string>``: the output rows (empty = the group does not accept the
line) or the line error naming group, rule position and operator, as ``logprocessor.operators`` words it::

    group 'orders' rule 2 (toIndex): column 0: not a JSON object

The state ``(rows, err)`` is threaded through the rules; each rule is an ``IF`` on "no rows left" (the state
passes through: rejected, or already broken), then on "a row breaks the rule" (the error, no rows), else its
new rows. Errors are values: nothing on the data path raises, whatever the line, ANSI mode on or off.

Every operator of spec §3 with the fixes of docs/logs.md is higher-order SQL over arrays (``transform``,
``filter``, ``aggregate``, ``flatten``, ``concat``, ``try_element_at``, ``regexp_extract``, ``split``,
``from_json``, ``to_json``); the Python reference (``logprocessor.operators``) and the golden cases of
tests/golden/logrules/ say what each must give. A value bound once and read several times goes through
``_Sql.let`` (a one-element ``transform``), so an expression grows linearly with the rules. Parameters are
SQL literals made by ``sql_string`` (plain, raw ``r'..'`` or hex), so no escaping can go wrong.

JSON (docs/logs.md, How rules run on Spark): compact, keys in input order, numbers exactly as written.
Spark's JSON reader (Jackson) re-prints numbers through a double (``12.50`` -> ``12.5``), so a text is
*marked* before it is parsed: a ``regexp_replace`` chained with ``\\G`` over the text, skipping strings, turns
each number into a JSON string holding a marker and the number as written (``"\\u000112.50"``); where the
kind of a value matters (jsonPath, excludeField, flattenJsonArray) ``true``, ``false``, ``null`` are marked
the same way and every string value gets a marker of its own (``"\\u0002"`` + its text). What is read back is
unmarked. Nested values come back as Jackson writes them: compact, keys in input order, non-ASCII as UTF-8,
control characters and characters past U+FFFF (as their two surrogates) as ``\\uXXXX`` in upper-case hex.
A parse is strict: the text is wrapped in ``[..]`` and must hold one value, so text after the value is
refused, and Jackson's leniencies (single quotes, ``NaN``) are switched off.

``tables_sql`` is the table level (spec §4.3): tables in order, active groups in order; ``multi_table``
tries every group of every table (a line can land in several tables), otherwise the first group that yields
rows wins. Each ``saveAs`` types its cells (spec §5.4): LONG canonical when numeric, else as written; DOUBLE
the number (Spark's text of the double), a line error naming the column when not a finite number; DATETIME
without a space gets its first ``:`` turned into one, cut to 26 characters.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from logprocessor import javaregex
from logprocessor.grammar import (
    SAVE_AS_TYPES,
    Entry,
    Group,
    Rule,
    RuleError,
    TableRules,
    parse_scope,
    with_save_as,
)

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

GROUP_TYPE = "struct<rows:array<array<string>>,err:string>"
ROW_TYPE = "struct<table:string,index:int,row:array<string>>"
ERROR_TYPE = "struct<table:string,error:string>"
# tables_sql per line: the rows each table took (index: the row's position among that table's rows for this
# line), the line errors (table and message), and whether no group of any table accepted the line.
LINE_TYPE = f"struct<rows:array<{ROW_TYPE}>,errors:array<{ERROR_TYPE}>,unmatched:boolean>"

EMPTY_ROW = "CAST(array() AS array<string>)"
EMPTY_ROWS = "CAST(array() AS array<array<string>>)"
EMPTY_INTS = "CAST(array() AS array<int>)"
NULL = "CAST(NULL AS STRING)"
JSON_OPTIONS = "map('allowSingleQuotes', 'false', 'allowNonNumericNumbers', 'false')"
EXCLUDED_KEYS = ("path", "@timestamp", "@version", "host", "message", "type")  # excludeField, spec §3.15
NULL_TEXT, EMPTY_TEXT = "'null'", "''"
AFTER_SAVE_AS = "a rule after saveAs (saveAs must be the group's last rule)"

# Marking (module docstring). _STRING is a JSON string; the \G chain never lets a match start inside one.
_STRING = r'"[^"\\]*+(?:\\.[^"\\]*+)*+"'
_NUMBER = r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?"
_NOT_AFTER = r"(?![0-9A-Za-z.+-]|\s*:)"  # a whole token, and not a key
# numbers only, for toIndex, keyFilter, flattenUms (JSON null reads as SQL NULL, like a missing key)
MARK_NUMBERS = (rf'\G((?:[^"0-9-]++|{_STRING})*+)({_NUMBER}){_NOT_AFTER}', r'$1"\\u0001$2"')
# string values (keys stay), then every scalar: jsonPath, excludeField, flattenJsonArray
MARK_STRINGS = (rf'\G((?:[^"]++|{_STRING}(?=\s*:))*+)"([^"\\]*+(?:\\.[^"\\]*+)*+)"', r'$1"\\u0002$2"')
MARK_SCALARS = (
    rf'\G((?:[^"0-9tfn-]++|{_STRING})*+)({_NUMBER}|true|false|null){_NOT_AFTER}',
    r'$1"\\u0001$2"',
)
SCALAR_MARK, STRING_MARK = "\u0001", "\u0002"
# in Jackson's text of a nested value the markers are escapes; (?!:) leaves keys alone
UNMARK_SCALARS = (r'"\\u0001([^"]*)"(?!:)', "$1")
UNMARK_STRINGS = (r'"\\u0002([^"\\]*+(?:\\.[^"\\]*+)*+)"(?!:)', '"$1"')
_BRACKETED = r"^\[(.*)\]$"  # to_json(array(v)) is [<v as a JSON string>]
_NOT_OPENING = r"[^,\[{]"  # what is not , [ or {: a JSON text has at most 1 + count(, [ {) values
# Jackson's re-printing of a number (an integer as written, a double as Double.toString) or nested JSON:
# a value read so may differ from the text, and is read again from the marked text
_REPRINTED = r"^(?:[\[{]|-?(?:[0-9]+(?:\.[0-9]+(?:E-?[0-9]+)?)?|Infinity)$)"
_LEADING_BRACKET = r"^[\s\p{IsWhite_Space}\x1c-\x1f]*[\[{]"  # Python's str.lstrip() then "{" or "["


class CompileError(RuleError):
    """A rule the Spark compiler cannot express: refused when rules are loaded or published, the message
    naming group, rule position and operator."""


def sql_string(text: str) -> str:
    """A Spark SQL string literal whose value is exactly ``text``: plain when nothing needs escaping, raw
    (``r'..'``) when only backslashes do, ``chr(39)`` for quotes, else the UTF-8 bytes in hex. Hex too for ``${``, which Spark's
    variable substitution would rewrite anywhere in the SQL text (``spark.sql.variable.substitute``)."""
    if "${" not in text and "'" not in text:
        if "\\" not in text:
            return f"'{text}'"
        if (len(text) - len(text.rstrip("\\"))) % 2 == 0:
            return f"r'{text}'"
    if "${" not in text and "\\" not in text:  # quotes as chr(39), folded to one literal by the optimizer
        return "concat(" + ", chr(39), ".join(f"'{part}'" for part in text.split("'")) + ")"
    return f"CAST(X'{text.encode().hex().upper()}' AS STRING)"


def java_literal_regex(text: str) -> str:
    """A Java regex matching ``text`` literally: every ASCII character that is not a letter or a digit is
    escaped, which Java always reads as that character."""
    return "".join(f"\\{c}" if c.isascii() and not c.isalnum() else c for c in text)


def _ident(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _text(v: str) -> str:
    """A Python repr-like quoting of a SQL string, for messages (``'45,50'``)."""
    return f"concat('''', {v}, '''')"


# ---------------------------------------------------------------- the SQL builder


class _Sql:
    """Fresh names, ``let``, and the plan's columns.

    ``let`` binds a value evaluated once. At the top of a single-row rule (``top``) it becomes a column of
    the plan (``hoists``), computed by its own projection where whole-stage codegen compiles it; inside a
    lambda it is a one-element ``transform``. Code that builds a lambda, or a value that must stay lazy
    (inside an ``IF``), is generated under ``nested()``."""

    def __init__(self, prefix: str = "_") -> None:
        self.prefix = prefix
        self.count = 0
        self.top = False
        self.hoists: list[tuple[str, str]] = []

    def var(self, stem: str) -> str:
        self.count += 1
        return f"{self.prefix}{stem}{self.count}"

    def let(self, value: str, body: Callable[[str], str], stem: str = "v") -> str:
        """``body(v)`` with ``v`` bound to ``value``, which is evaluated once."""
        v = self.var(stem)
        if self.top:
            self.hoists.append((v, value))
            return body(v)
        return f"element_at(transform(array({value}), {v} -> {body(v)}), 1)"

    @contextmanager
    def nested(self) -> Iterator[None]:
        """Inside a lambda (or a lazy branch): ``let`` does not hoist."""
        saved, self.top = self.top, False
        try:
            yield
        finally:
            self.top = saved

    def first_error(self, items: str, field: str = "e") -> str:
        """The first non-null ``field`` of an array of structs."""
        a, y = self.var("a"), self.var("y")
        return f"aggregate({items}, {NULL}, ({a}, {y}) -> coalesce({a}, {y}.{field}))"


@dataclass(frozen=True)
class _Step:
    """What a rule does to one row (SQL over the row's lambda variable ``r``):

    - ``kind`` ``map``: ``body(r)`` is the new row; ``filter``: whether the row stays; ``flat``: the row's
      output rows; ``both``: ``struct<o: output rows, e: reason>`` (error and output share work).
    - ``error(r)``: the reason the row breaks the rule, or NULL (not for ``both``), checked before ``body``.
    """

    kind: str
    body: Callable[[str], str]
    error: Callable[[str], str] | None = None


def _out(rows: str, err: str = NULL) -> str:
    return f"named_struct('o', {rows}, 'e', {err})"


def _first_of(*errors: str | None) -> str | None:
    found = [e for e in errors if e is not None and e != NULL]
    if not found:
        return None
    return found[0] if len(found) == 1 else f"coalesce({', '.join(found)})"


# ---------------------------------------------------------------- scopes against size(r)


def _adj(k: int, n: str) -> str:
    return str(k) if k >= 0 else f"({n} - {-k})"


class _Scope:
    """An entry's ``ruleScope`` as SQL over a row ``r`` (its size ``n``)."""

    def __init__(self, entry: Entry, r: str) -> None:
        self.scope = parse_scope(entry.scope)
        self.text = str(entry.scope)
        self.r = r
        self.n = f"size({r})"

    def bounds(self) -> tuple[str, str]:
        sc = self.scope
        if sc.kind == "all":
            return "0", self.n
        end = self.n if sc.end is None else _adj(sc.end, self.n)
        return _adj(sc.values[0], self.n), end

    def empty(self) -> bool:
        return self.scope.kind == "range" and self.scope.empty_as_written

    def contains(self, i: str) -> str:
        """Whether column ``i`` (0 <= i < n) is in the scope."""
        sc = self.scope
        if sc.kind == "all":
            return "true"
        if sc.kind == "index":
            return f"{i} = {_adj(sc.values[0], self.n)}"
        if sc.kind == "list":
            return f"{i} IN ({', '.join(_adj(k, self.n) for k in sc.values)})"
        if self.empty():
            return "false"
        start, end = self.bounds()
        return f"({i} >= {start} AND {i} < {end})"

    def indexes(self) -> str:
        """The resolved columns in order (array<int>), as ``Scope.resolve``."""
        sc = self.scope
        if sc.kind in ("index", "list"):
            return f"array({', '.join(_adj(k, self.n) for k in sc.values)})"
        if self.empty():
            return EMPTY_INTS
        start, end = self.bounds()
        return f"IF({start} < {end}, sequence({start}, {end} - 1), {EMPTY_INTS})"

    def in_range(self) -> str:
        """The resolved columns below n, in order (the operators' ``_in_range``)."""
        if self.scope.kind == "all":
            return self.indexes()
        return f"filter({self.indexes()}, _k -> _k < {self.n})"

    def negative(self) -> str | None:
        """The reason when the scope resolves to a column still below 0 (a line error), else NULL; None
        when it never can."""
        sc = self.scope
        if sc.kind in ("index", "list") and any(k < 0 for k in sc.values):
            cases = " ".join(f"WHEN {_adj(k, self.n)} < 0 THEN {_adj(k, self.n)}" for k in sc.values if k < 0)
            column = f"CASE {cases} END"
        elif sc.kind == "range" and not self.empty() and sc.values[0] < 0:
            start, end = self.bounds()
            column = f"IF({start} < 0 AND {start} < {end}, {start}, NULL)"
        else:
            return None
        message = f"concat({sql_string(f'ruleScope {self.text!r} selects column ')}, c, ' of a ', {self.n}, '-column row')"
        return f"element_at(transform(array({column}), c -> IF(c IS NULL, {NULL}, {message})), 1)"

    def first(self) -> tuple[str, str]:
        """(non-empty, first index): toIndex's slot."""
        sc = self.scope
        if sc.kind in ("index", "list"):
            return "true", _adj(sc.values[0], self.n)
        if self.empty():
            return "false", "0"
        start, end = self.bounds()
        return f"{start} < {end}", start

    def last(self) -> tuple[str, str]:
        """(non-empty, last index): filter's "last evaluation wins"."""
        sc = self.scope
        if sc.kind in ("index", "list"):
            return "true", _adj(sc.values[-1], self.n)
        if self.empty():
            return "false", "0"
        start, end = self.bounds()
        return f"{start} < {end}", f"({end} - 1)"


def _cell(r: str, i: str) -> str:
    """Column ``i`` of row ``r``; NULL past the end, and (never read: a line error first) below 0."""
    return f"try_element_at({r}, IF({i} >= 0, ({i}) + 1, NULL))"


def _null_column(s: _Scope) -> str:
    """The reason when an in-range scope column is null ("column 1 is null"), else NULL."""
    if s.scope.kind == "index":
        k = _adj(s.scope.values[0], s.n)
        return f"IF({k} < {s.n} AND {_cell(s.r, k)} IS NULL, concat('column ', {k}, ' is null'), {NULL})"
    found = f"try_element_at(filter({s.in_range()}, _k -> {_cell(s.r, '_k')} IS NULL), 1)"
    return f"IF({found} IS NULL, {NULL}, concat('column ', {found}, ' is null'))"


def _scope_errors(rule: Rule, r: str, nulls: Callable[[Entry], bool] = lambda e: False) -> str | None:
    """The first entry's reason, in entry order: a column still negative, then (where ``nulls(entry)``) a
    null in-range column."""
    errors = []
    for e in rule.grammar:
        s = _Scope(e, r)
        errors.append(_first_of(s.negative(), _null_column(s) if nulls(e) else None))
    return _first_of(*errors)


# fn(entry, value, column) -> (SQL, scalar): the column's new cell (scalar) or cells (an array)
CellsFn = Callable[[Entry, str, str], tuple[str, bool]]


def _per_column(sql: _Sql, r: str, entries: Sequence[Entry], fn: CellsFn) -> str:
    """Each column through ``fn`` of the *last* entry whose scope holds it, reading the original value; the
    row rebuilt by position (trim, prefixOrAppend, subString, split, regexExtract). Cheapest first: one cell
    per column is a plain ``transform``; one entry on one column a splice; else per-column arrays."""
    if not entries:
        return r
    c, i = "_c", "_i"
    with sql.nested():
        made = [(e, *fn(e, c, i)) for e in reversed(entries)]
    if all(scalar for _, _, scalar in made):
        whens = " ".join(f"WHEN {_Scope(e, r).contains(i)} THEN {sql}" for e, sql, _ in made)
        return f"transform({r}, ({c}, {i}) -> CASE {whens} ELSE {c} END)"
    if len(entries) == 1 and parse_scope(entries[0].scope).kind == "index":
        s = _Scope(entries[0], r)
        k = _adj(s.scope.values[0], s.n)
        cells, scalar = fn(entries[0], _cell(r, k), k)
        cells = f"array({cells})" if scalar else cells
        return f"IF({k} < {s.n}, concat(slice({r}, 1, {k}), {cells}, slice({r}, {k} + 2, {s.n})), {r})"
    whens = " ".join(
        f"WHEN {_Scope(e, r).contains(i)} THEN {sql if not scalar else f'array({sql})'}"
        for e, sql, scalar in made
    )
    return f"flatten(transform({r}, ({c}, {i}) -> CASE {whens} ELSE array({c}) END))"


# ---------------------------------------------------------------- JSON


def _mark(text: str, *marks: tuple[str, str]) -> str:
    for pattern, replacement in marks:
        text = f"regexp_replace({text}, {sql_string(pattern)}, {sql_string(replacement)})"
    return text


def _parse(text: str, sql: _Sql, element_type: str) -> str:
    """The one JSON value of ``text`` as ``element_type``; NULL when the text is not exactly one JSON value of
    that kind (the ``[..]`` around it makes text after the value an error)."""
    parsed = f"from_json(concat('[', {text}, ']'), 'array<{element_type}>', {JSON_OPTIONS})"
    return sql.let(parsed, lambda a: f"IF(size({a}) = 1, try_element_at({a}, 1), NULL)", "j")


def _not_object(r: str) -> str:
    """Why column 0 of ``r`` is not a JSON object, as the reference words it."""
    c0 = _cell(r, "0")
    return (
        f"CASE WHEN size({r}) = 0 THEN 'the row has no column 0' WHEN {c0} IS NULL "
        f"THEN 'column 0: null is not a JSON object' ELSE 'column 0: not a JSON object' END"
    )


def _unmark_nested(v: str) -> str:
    return _mark(v, UNMARK_SCALARS, UNMARK_STRINGS)


def _number_text(v: str) -> str:
    """A value read from a MARK_NUMBERS parse as fastjson's ``getString``: a string as it is, a number as
    written, nested JSON compact; NULL for a missing key or JSON null."""
    return (
        f"CASE WHEN startswith({v}, {sql_string(SCALAR_MARK)}) THEN substr({v}, 2) "
        f"WHEN startswith({v}, '{{') OR startswith({v}, '[') THEN {_mark(v, UNMARK_SCALARS)} ELSE {v} END"
    )


def _json_quote(v: str) -> str:
    """``v`` as a JSON string, escaped as Jackson escapes (like the nested texts)."""
    return f"regexp_extract(to_json(array({v})), {sql_string(_BRACKETED)}, 1)"


def _json_text(v: str) -> str:
    """A fully marked value as its JSON text (a string quoted)."""
    return (
        f"CASE WHEN startswith({v}, {sql_string(STRING_MARK)}) THEN {_json_quote(f'substr({v}, 2)')} "
        f"WHEN startswith({v}, {sql_string(SCALAR_MARK)}) THEN substr({v}, 2) ELSE {_unmark_nested(v)} END"
    )


def _cell_text(v: str, null: str) -> str:
    """A fully marked value as a cell: a string unquoted, JSON null ``null``, others their JSON text."""
    return (
        f"CASE WHEN startswith({v}, {sql_string(STRING_MARK)}) THEN substr({v}, 2) "
        f"WHEN {v} = {sql_string(SCALAR_MARK + 'null')} THEN {null} ELSE {_json_text(v)} END"
    )


def _object(v: str, sql: _Sql) -> str:
    """A fully marked value that is an object, as its map; NULL for anything else."""
    return _parse(f"IF(startswith({v}, '{{'), {v}, NULL)", sql, "map<string,string>")


def _array(v: str, sql: _Sql) -> str:
    """A fully marked value that is an array, as its elements; NULL for anything else."""
    return _parse(f"IF(startswith({v}, '['), {v}, NULL)", sql, "array<string>")


def _object_text(m: str, sql: _Sql, key: str | None = None, value: str | None = None) -> str:
    """The object ``m`` (a fully marked map) as JSON text; with ``key``, that key's value replaced by the JSON
    text ``value``."""
    e = sql.var("e")
    text = _json_text(f"{e}.value")
    if key is not None:
        text = f"IF({e}.key = {sql_string(key)}, {value}, {text})"
    pairs = f"transform(map_entries({m}), {e} -> concat({_json_quote(f'{e}.key')}, ':', {text}))"
    return f"concat('{{', array_join({pairs}, ','), '}}')"


# ---------------------------------------------------------------- jsonPath (the reference's subset)

_PATH_TOKEN = re.compile(
    r"""\.\.(?P<scan>[^.\[\]()\s*]+)
      | \.\.\[\s*(?P<scanq>'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")\s*\]
      | \.(?P<star>\*)
      | \.(?P<name>[^.\[\]()\s*]+)
      | \[\s*(?P<quoted>'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")\s*\]
      | \[\s*(?P<index>-?[0-9]+)\s*\]
      | \[\s*(?P<all>\*)\s*\]
    """,
    re.VERBOSE,
)


def json_path_steps(text: str | None) -> list[tuple[str, str | int]] | None:
    """A JsonPath of the subset ``logprocessor.jsontext.compile_path`` accepts, as steps ``(kind, arg)``:
    ``key``, ``index``, ``all``, ``scan``; None outside it."""
    if text is None or not text.strip():
        return None
    body = text.strip()
    body = body[1:] if body.startswith("$") else "." + body if not body.startswith("[") else body
    steps: list[tuple[str, str | int]] = []
    pos = 0
    while pos < len(body):
        m = _PATH_TOKEN.match(body, pos)
        if not m:
            return None
        if m["scan"] or m["scanq"]:
            steps.append(("scan", m["scan"] or re.sub(r"\\(.)", r"\1", m["scanq"][1:-1])))
        elif m["star"] or m["all"]:
            steps.append(("all", "*"))
        elif m["name"] or m["quoted"]:
            steps.append(("key", m["name"] or re.sub(r"\\(.)", r"\1", m["quoted"][1:-1])))
        else:
            steps.append(("index", int(m["index"])))
        pos = m.end()
    return steps


def _children(v: str, sql: _Sql) -> str:
    """A fully marked value's children in order: an object's values, an array's elements, else none."""
    return f"coalesce(map_values({_object(v, sql)}), {_array(v, sql)}, CAST(array() AS array<string>))"


def _path_step(nodes: str, kind: str, arg: str | int, sql: _Sql) -> str:
    """The nodes one step further (arrays of fully marked values, document order)."""
    x = sql.var("n")
    if kind == "key":
        one = sql.let(
            f"try_element_at({_object(x, sql)}, {sql_string(str(arg))})",
            lambda h: f"IF({h} IS NULL, {EMPTY_ROW}, array({h}))",
            "h",
        )
    elif kind == "index":
        k = int(arg)

        def pick(a: str) -> str:
            inside = f"{k} < size({a})" if k >= 0 else f"{-k} <= size({a})"
            return f"IF({a} IS NOT NULL AND {inside}, array(try_element_at({a}, {k + 1 if k >= 0 else k})), {EMPTY_ROW})"

        one = sql.let(_array(x, sql), pick, "a")
    elif kind == "all":
        one = _children(x, sql)
    else:
        one = _deep_scan(x, str(arg), sql)
    return f"flatten(transform({nodes}, {x} -> {one}))"


def _deep_scan(root: str, key: str, sql: _Sql) -> str:
    """``..key``: the key's values at any depth, a node's own before its descendants'. A loop by
    ``aggregate``: a stack of nodes still to visit, one popped per turn; the number of turns is bounded by
    the nodes the text can hold (one more than its ``,``, ``[`` and ``{``)."""
    turns = f"sequence(0, length(regexp_replace({root}, {sql_string(_NOT_OPENING)}, '')))"
    st, t = sql.var("st"), sql.var("t")

    def visit(top: str) -> str:
        hit = sql.let(
            f"try_element_at({_object(top, sql)}, {sql_string(key)})",
            lambda h: f"IF({h} IS NULL, {EMPTY_ROW}, array({h}))",
            "h",
        )
        rest = f"slice({st}.stack, 2, size({st}.stack))"
        return f"named_struct('stack', concat({_children(top, sql)}, {rest}), 'out', concat({st}.out, {hit}))"

    step = f"IF(size({st}.stack) = 0, {st}, {sql.let(f'try_element_at({st}.stack, 1)', visit, 'top')})"
    start = f"named_struct('stack', array({root}), 'out', {EMPTY_ROW})"
    return f"aggregate({turns}, {start}, ({st}, {t}) -> {step}, {st} -> {st}.out)"


# ---------------------------------------------------------------- the operators


class _Compiler:
    def __init__(self, sql: _Sql) -> None:
        self.sql = sql

    def step(self, rule: Rule) -> _Step:
        method = getattr(self, f"op_{rule.op}", None)
        if method is None:
            return _Step("both", lambda r: _out(EMPTY_ROWS, sql_string(f"unknown operator {rule.op!r}")))
        step: _Step = method(rule)
        if rule.op in ("excludeField", "jsonPath", "flattenJsonArray"):  # rare: no hoisting, all lazy
            return _Step(step.kind, self._nested(step.body), step.error and self._nested(step.error))
        return step

    def _nested(self, fn: Callable[[str], str]) -> Callable[[str], str]:
        def run(r: str) -> str:
            with self.sql.nested():
                return fn(r)

        return run

    # --------------------------------------------------------- tests shared by filter and keyFilter

    @staticmethod
    def _test(e: Entry, v: str) -> str | None:
        """``== hit`` / ``!= not hit`` (any other operate negates); None for another ruleType. A null value
        or parameter never contains or matches."""
        if e.rule_type == "string":
            hit = "false" if e.param is None else f"coalesce(contains({v}, {sql_string(e.param)}), false)"
        elif e.rule_type == "regex":
            hit = f"coalesce(regexp({v}, {sql_string(e.param or '')}), false)"
        else:
            return None
        return hit if e.operate == "==" else f"NOT {hit}"

    # --------------------------------------------------------- positional

    def op_filter(self, rule: Rule) -> _Step:
        def keep(r: str) -> str:
            whens = []
            for e in reversed(rule.grammar):
                s = _Scope(e, r)
                nonempty, last = s.last()
                test = self._test(e, f"IF({last} < size({r}), {_cell(r, last)}, '')")
                if test is not None:  # an entry of another ruleType leaves the verdict as it was
                    whens.append(f"WHEN {nonempty} THEN {test}")
            return f"CASE {' '.join(whens)} ELSE false END" if whens else "false"

        def error(r: str) -> str:
            # all entries, in order: a negative column, or a regex on a null column
            errors = []
            for e in rule.grammar:
                s = _Scope(e, r)
                null = None
                if e.rule_type == "regex":
                    found = f"try_element_at(filter({s.indexes()}, _k -> _k >= 0 AND _k < size({r}) AND {_cell(r, '_k')} IS NULL), 1)"
                    null = f"IF({found} IS NULL, {NULL}, concat('column ', {found}, ' is null'))"
                errors.append(_first_of(s.negative(), null))
            return _first_of(*errors) or NULL

        return _Step("filter", keep, error)

    def _columns(self, rule: Rule, fn: CellsFn, nulls: bool = False) -> _Step:
        def body(r: str) -> str:
            return _per_column(self.sql, r, rule.grammar, fn)

        def error(r: str) -> str:
            return _scope_errors(rule, r, lambda e: nulls) or NULL

        return _Step("map", body, error)

    def op_trim(self, rule: Rule) -> _Step:
        def fn(e: Entry, v: str, i: str) -> tuple[str, bool]:
            chars = e.param
            if e.operate in ("left", "right", "both"):
                if chars is None:  # Character.isWhitespace, as commons-lang strips with a null set
                    ws = r"[\p{javaWhitespace}]+"
                    pattern = {"left": f"^{ws}", "right": f"{ws}$"}.get(e.operate, f"^{ws}|{ws}$")
                    return f"regexp_replace({v}, {sql_string(pattern)}, '')", True
                if chars == "":
                    return v, True
                side = {"left": "LEADING", "right": "TRAILING", "both": "BOTH"}[e.operate]
                return f"trim({side} {sql_string(chars)} FROM {v})", True
            if not chars:
                return v, True
            return f"translate({v}, {sql_string(chars)}, '')", True

        return self._columns(rule, fn)

    def op_prefixOrAppend(self, rule: Rule) -> _Step:
        def fn(e: Entry, v: str, i: str) -> tuple[str, bool]:
            p = sql_string(e.param or "")
            text = f"coalesce({v}, '')"
            return (f"concat({p}, {text})" if e.operate == "before" else f"concat({text}, {p})"), True

        return self._columns(rule, fn)

    def op_subString(self, rule: Rule) -> _Step:
        sql = self.sql

        def to_int(text: str | None) -> str:  # NumberUtils.toInt: 0 when it is not an int
            if text is None or not re.fullmatch(r"[+-]?[0-9]+", text) or not -(2**31) <= int(text) < 2**31:
                return "0"
            return str(int(text))

        def fn(e: Entry, v: str, i: str) -> tuple[str, bool]:
            kinds = (e.sub_start_type, e.sub_end_type)
            if kinds not in (
                ("index", "index"),
                ("index", "string"),
                ("string", "index"),
                ("string", "string"),
            ):
                return EMPTY_ROW, False  # the original's quirk: the column is removed

            def cut(n: str) -> str:
                if e.sub_start_type == "index":
                    start = to_int(e.sub_start)
                elif e.sub_start is None:
                    start = "-1"
                else:
                    start = f"(instr({v}, {sql_string(e.sub_start)}) - 1)"
                end: str | None
                if e.sub_end is None:
                    end = None
                elif e.sub_end_type == "index":
                    end = to_int(e.sub_end)
                elif e.sub_end == "":
                    end = n
                else:
                    found = f"instr(reverse({v}), {sql_string(e.sub_end[::-1])})"
                    end = f"(IF({found} = 0, -1, {n} - {found} - {len(e.sub_end)} + 1) + {len(e.sub_end)})"
                # commons-lang StringUtils.substring: negatives count from the end, then clamped
                if end is None:
                    return sql.let(
                        f"greatest(IF({start} < 0, {start} + {n}, {start}), 0)",
                        lambda s: f"IF({s} > {n}, '', substr({v}, {s} + 1))",
                        "s",
                    )
                bounds = (
                    f"named_struct('s', IF({start} < 0, {start} + {n}, {start}), "
                    f"'e', least(IF({end} < 0, {end} + {n}, {end}), {n}))"
                )
                return sql.let(
                    bounds,
                    lambda b: (
                        f"IF({b}.s > {b}.e, '', substr({v}, greatest({b}.s, 0) + 1, "
                        f"greatest({b}.e, 0) - greatest({b}.s, 0)))"
                    ),
                    "b",
                )

            return f"IF({v} IS NULL, NULL, {sql.let(f'length({v})', cut, 'n')})", True

        return self._columns(rule, fn)

    def op_split(self, rule: Rule) -> _Step:
        sql = self.sql

        def fn(e: Entry, v: str, i: str) -> tuple[str, bool]:
            if e.rule_type == "string":  # commons-lang splitByWholeSeparatorPreserveAllTokens
                pattern = r"\p{javaWhitespace}" if not e.param else java_literal_regex(e.param)
                return f"IF({v} = '', {EMPTY_ROW}, split({v}, {sql_string(pattern)}, -1))", False
            if e.param is None:
                return EMPTY_ROW, False  # the error below breaks the line first

            def trimmed(p: str) -> str:  # String.split: trailing empty pieces dropped
                k, j = sql.var("k"), sql.var("j")
                last = f"array_max(transform({p}, ({k}, {j}) -> IF({k} != '', {j} + 1, 0)))"
                return f"slice({p}, 1, coalesce({last}, 0))"

            pieces = sql.let(f"split({v}, {sql_string(e.param)}, -1)", trimmed, "p")
            return f"IF({v} = '', array(''), {pieces})", False

        def error(r: str) -> str:
            errors = []
            for e in rule.grammar:
                s = _Scope(e, r)
                missing = None
                if e.rule_type != "string" and e.param is None:
                    missing = f"IF(size({s.in_range()}) > 0, 'ruleParamter (the regex) is missing', {NULL})"
                errors.append(_first_of(s.negative(), _null_column(s), missing))
            return _first_of(*errors) or NULL

        return _Step("map", lambda r: _per_column(self.sql, r, rule.grammar, fn), error)

    def op_regexExtract(self, rule: Rule) -> _Step:
        def fn(e: Entry, v: str, i: str) -> tuple[str, bool]:
            pattern = e.param or ""
            p = sql_string(pattern)
            values = []
            for k, g in enumerate(javaregex.groups(pattern), 1):
                value = f"regexp_extract({v}, {p}, {k})"
                # Spark gives "" for a group that took no part; the original null (javaregex explains)
                values.append(f"nullif({value}, '')" if g.optional and not g.can_be_empty else value)
            found = f"array({', '.join(values)})" if values else EMPTY_ROW
            return f"IF(regexp({v}, {p}), {found}, {EMPTY_ROW})", False

        return self._columns(rule, fn, nulls=True)

    def op_replace(self, rule: Rule) -> _Step:
        def fn(e: Entry, v: str) -> str:
            replacement = e.operate or ""
            if e.rule_type == "string":
                if not e.param:
                    return v
                return f"replace({v}, {sql_string(e.param)}, {sql_string(replacement)})"
            if e.param is None:
                return v
            return f"regexp_replace({v}, {sql_string(e.param)}, {sql_string(replacement)})"

        def body(r: str) -> str:
            out = r
            for e in rule.grammar:  # entries compose: each reads what the previous one wrote
                s = _Scope(e, r)
                v, i = self.sql.var("c"), self.sql.var("i")
                out = f"transform({out}, ({v}, {i}) -> IF({s.contains(i)}, {fn(e, v)}, {v}))"
            return out

        return _Step("map", body, lambda r: _scope_errors(rule, r) or NULL)

    def op_concat(self, rule: Rule) -> _Step:
        """Every entry reads the original row: its in-range columns joined (null as ""), the text where its
        first column was, the joined columns removed by position (fix 2)."""
        sql = self.sql

        def body(r: str) -> str:
            if not rule.grammar:
                return r
            entries = []
            for e in rule.grammar:
                s = _Scope(e, r)
                entries.append(
                    sql.let(
                        s.in_range(),
                        lambda idx, e=e: (
                            f"named_struct('cols', {idx}, 'first', try_element_at({idx}, 1), "
                            f"'text', array_join(transform({idx}, _k -> coalesce({_cell(r, '_k')}, '')), "
                            f"{sql_string(e.param or '')}))"
                        ),
                        "x",
                    )
                )

            def rebuild(js: str) -> str:
                c, p, j = sql.var("c"), sql.var("p"), sql.var("j")
                used = f"flatten(transform({js}, {j} -> {j}.cols))"
                texts = f"transform(filter({js}, {j} -> {j}.first = {p}), {j} -> {j}.text)"
                return (
                    f"flatten(transform({r}, ({c}, {p}) -> "
                    f"IF(exists({js}, {j} -> {j}.first = {p}), {texts}, "
                    f"IF(array_contains({used}, {p}), {EMPTY_ROW}, array({c})))))"
                )

            return sql.let(f"array({', '.join(entries)})", rebuild, "js")

        return _Step("map", body, lambda r: _scope_errors(rule, r) or NULL)

    def op_select(self, rule: Rule) -> _Step:
        def part(e: Entry, r: str) -> str:
            s = _Scope(e, r)
            general = f"transform({s.in_range()}, _k -> {_cell(r, '_k')})"
            if s.scope.kind in ("index", "list") and min(s.scope.values) >= 0:  # all in range: no lambda
                cells = ", ".join(f"try_element_at({r}, {k + 1})" for k in s.scope.values)
                return f"IF(size({r}) > {max(s.scope.values)}, array({cells}), {general})"
            return general

        def body(r: str) -> str:
            parts = [part(e, r) for e in rule.grammar]
            if not parts:
                return EMPTY_ROW
            return parts[0] if len(parts) == 1 else f"concat({', '.join(parts)})"

        return _Step("map", body, lambda r: _scope_errors(rule, r) or NULL)

    def op_saveAs(self, rule: Rule) -> _Step:
        """The typed row (spec §3.11, §5.4): one cell per entry with an all-digit scope, ordered by column
        then entry; a column the row lacks is ""."""
        kept = sorted(
            ((int(e.scope), i, e) for i, e in enumerate(rule.grammar) if e.scope and e.scope.isdigit()),
            key=lambda t: t[:2],
        )
        types = [None if e.type is None else SAVE_AS_TYPES.get(e.type.upper(), "string") for _, _, e in kept]
        doubles = [j for j, t in enumerate(types) if t == "double"]

        def body(r: str) -> str:
            if not kept:
                return _out(f"array({EMPTY_ROW})")
            cells = ", ".join(f"IF(size({r}) > {k}, try_element_at({r}, {k + 1}), '')" for k, _, _ in kept)

            def typed(v: str) -> str:
                def with_doubles(d: str) -> str:
                    out = []
                    for j, t in enumerate(types):
                        cell = f"element_at({v}, {j + 1})"
                        if t == "double":
                            out.append(f"CAST(element_at({d}, {doubles.index(j) + 1}) AS STRING)")
                        else:
                            out.append(_typed(cell, t))
                    whens = []
                    for j, (_, _, e) in enumerate(kept):
                        cell = f"element_at({v}, {j + 1})"
                        if types[j] is None:
                            whens.append(
                                f"WHEN {cell} IS NOT NULL THEN {_out(EMPTY_ROWS, sql_string(f'saveAs {e.name!r} has no type'))}"
                            )
                        elif types[j] == "double":
                            x = f"element_at({d}, {doubles.index(j) + 1})"
                            bad = f"{cell} IS NOT NULL AND ({x} IS NULL OR isnan({x}) OR abs({x}) = double('infinity'))"
                            message = f"concat({sql_string(f'saveAs column {e.name!r} (DOUBLE): ')}, {_text(cell)}, ' is not a number')"
                            whens.append(f"WHEN {bad} THEN {_out(EMPTY_ROWS, message)}")
                    row = _out(f"array(array({', '.join(out)}))")
                    return f"CASE {' '.join(whens)} ELSE {row} END" if whens else row

                if not doubles:
                    return with_doubles("NULL")
                casts = ", ".join(f"try_cast(element_at({v}, {j + 1}) AS DOUBLE)" for j in doubles)
                return self.sql.let(f"array({casts})", with_doubles, "d")

            return self.sql.let(f"array({cells})", typed, "v")

        return _Step("both", body)

    # --------------------------------------------------------- JSON

    def _column0(
        self, rule: Rule, marks: tuple[tuple[str, str], ...], on_object: Callable[[str, str], str]
    ) -> _Step:
        """A rule on column 0 as a JSON object: ``on_object(r, m)`` gives ``_out``."""

        def body(r: str) -> str:
            parsed = _parse(_mark(_cell(r, "0"), *marks), self.sql, "map<string,string>")
            return self.sql.let(
                parsed,
                lambda m: f"IF({m} IS NULL, {_out(EMPTY_ROWS, _not_object(r))}, {on_object(r, m)})",
                "m",
            )

        return _Step("both", body)

    def column0_run(self, rules: Sequence[Rule], first: int, group: str, line_map: str | None) -> _Step:
        """flattenUms, keyFilter (with entries) and a final toIndex at positions ``first``.. as one step that
        parses column 0 once (spec §3.1-§3.3). The text is parsed as it is; only when a value the rules read
        is a number or nested JSON (Jackson would re-print it) is it parsed again, marked, for the text as
        written. ``line_map``: the line already parsed (the group's first rules, on the line itself).
        Per row ``struct<o, e, pos>``: ``e`` the full message, ``pos`` its rule's position (a rule runs on
        every row before the next rule runs, so the lowest position is the line's error)."""
        sql = self.sql
        keys: list[str] = []
        for rule in rules:
            for e in rule.grammar:
                key = {"flattenUms": "namespace", "keyFilter": e.filter_key, "toIndex": e.param}[rule.op]
                if key is not None and key not in keys:
                    keys.append(key)

        def where(i: int) -> str:
            return f"group '{group}' rule {first + i} ({rules[i].op}): "

        def failed(i: int, reason: str) -> str:
            return f"named_struct('o', {EMPTY_ROWS}, 'e', concat({sql_string(where(i))}, {reason}), 'pos', {first + i})"

        def body(r: str) -> str:
            c0 = _cell(r, "0")
            parsed = line_map if line_map is not None else _parse(c0, sql, "map<string,string>")

            def with_map(pv: str) -> str:
                inexact = " OR ".join(
                    f"coalesce(regexp(try_element_at({pv}, {sql_string(k)}), {sql_string(_REPRINTED)}), false)"
                    for k in keys
                )

                def with_marked(pm: str) -> str:
                    def value(key: str) -> str:
                        fast = f"try_element_at({pv}, {sql_string(key)})"
                        if not keys:
                            return fast
                        return f"IF({pm} IS NULL, {fast}, {_number_text(f'try_element_at({pm}, {sql_string(key)})')})"

                    dropped = f"named_struct('o', {EMPTY_ROWS}, 'e', {NULL}, 'pos', 0)"
                    whens = [f"WHEN {pv} IS NULL THEN {failed(0, _not_object(r))}"]
                    row = r
                    for i, rule in enumerate(rules):
                        if rule.op == "toIndex":
                            error, row = self._to_index(rule, r, value)
                            if error is not None:
                                whens.append(f"WHEN {error} IS NOT NULL THEN {failed(i, error)}")
                        else:
                            whens.append(f"WHEN NOT ({self._keep(rule, value)}) THEN {dropped}")
                    ok = f"named_struct('o', array({row}), 'e', {NULL}, 'pos', 0)"
                    return f"CASE {' '.join(whens)} ELSE {ok} END"

                if not keys:
                    return with_marked(NULL)
                with sql.nested():  # parsed again only when needed
                    again = _parse(_mark(c0, MARK_NUMBERS), sql, "map<string,string>")
                marked = f"IF({pv} IS NOT NULL AND ({inexact}), {again}, NULL)"
                return sql.let(marked, with_marked, "pm")

            return sql.let(parsed, with_map, "pv")

        return _Step("run", body)

    def _keep(self, rule: Rule, value: Callable[[str], str]) -> str:
        """Whether flattenUms or keyFilter keeps the row (``value(key)``: a key's text, NULL when missing)."""
        if rule.op == "flattenUms":
            ns = value("namespace")
            tests = [f"contains({ns}, {sql_string(e.param)})" for e in rule.grammar if e.param is not None]
            return f"coalesce({' OR '.join(tests)}, false)" if tests else "false"
        tests = []
        for e in rule.grammar:
            test = self._test(e, value(e.filter_key or ""))
            if test is not None:  # another ruleType matches nothing
                tests.append(test)
        return " OR ".join(tests) or "false"

    def _to_index(self, rule: Rule, r: str, value: Callable[[str], str]) -> tuple[str | None, str]:
        """toIndex's (error, row): a slot is the entry's first scope column against the input row's width;
        the last entry on a slot wins; the row is the slots' values in slot order (gaps collapse); a
        missing key or JSON null is ""."""
        sql = self.sql

        def text(e: Entry) -> str:
            return f"coalesce({value(e.param or '')}, '')"

        errors = []
        for e in rule.grammar:
            s = _Scope(e, r)
            nonempty, slot = s.first()
            negative = f"concat({sql_string(f'ruleScope {s.text!r} selects column ')}, {slot}, ' of a ', size({r}), '-column row')"
            errors.append(
                f"CASE WHEN NOT ({nonempty}) THEN {sql_string(f'ruleScope {s.text!r} selects no column')} "
                f"WHEN {slot} < 0 THEN {negative} END"
            )
        static = [parse_scope(e.scope) for e in rule.grammar]
        if all(sc.kind in ("index", "list") and sc.values[0] >= 0 for sc in static):  # no error possible
            slots = {sc.values[0]: e for sc, e in zip(static, rule.grammar, strict=True)}
            return None, f"array({', '.join(text(slots[k]) for k in sorted(slots))})" if slots else EMPTY_ROW
        items = ", ".join(
            f"named_struct('s', {_Scope(e, r).first()[1]}, 'v', {text(e)})" for e in rule.grammar
        )
        x, y, q, a, b = (sql.var(t) for t in "xyqab")

        def ordered(t: str) -> str:
            last = (
                f"filter({t}, ({x}, {q}) -> NOT exists(slice({t}, {q} + 2, size({t})), {y} -> {y}.s = {x}.s))"
            )
            by_slot = f"array_sort({last}, ({a}, {b}) -> CASE WHEN {a}.s < {b}.s THEN -1 WHEN {a}.s > {b}.s THEN 1 ELSE 0 END)"
            return f"transform({by_slot}, {x} -> {x}.v)"

        return _first_of(*errors), sql.let(f"array({items})", ordered, "t")

    def op_keyFilter(self, rule: Rule) -> _Step:
        """Only without entries (with entries it runs in ``column0_run``): keeps nothing, reads nothing."""
        return _Step("filter", lambda r: "false")

    def op_excludeField(self, rule: Rule) -> _Step:
        keys = ", ".join(sql_string(k) for k in EXCLUDED_KEYS)

        def on_object(r: str, m: str) -> str:
            kept = f"map_filter({m}, (_k, _v) -> NOT _k IN ({keys}))"
            return _out(f"array(array({_object_text(kept, self.sql)}))")

        return self._column0(rule, (MARK_STRINGS, MARK_SCALARS), on_object)

    def op_jsonPath(self, rule: Rule) -> _Step:
        """Per entry and in-range scope column, the path's result appended: one value for a definite path (a
        string as it is, others their JSON text, nothing found ""), a JSON array of every match otherwise.
        Text that is not JSON and does not start with ``{`` or ``[`` is a string the path finds nothing in
        (``$`` finds the text); broken JSON that does start so breaks the line."""
        sql = self.sql
        paths = [json_path_steps(e.param) for e in rule.grammar]

        def result(e: Entry, steps: list[tuple[str, str | int]] | None, cell: str, k: str) -> str:
            if steps is None:
                return _out(NULL, sql_string(f"JsonPath {e.param!r} is outside the supported subset"))
            definite = all(kind in ("key", "index") for kind, _ in steps)

            def on_root(root: str) -> str:
                nodes = f"array({root})"
                for kind, arg in steps:
                    nodes = _path_step(nodes, kind, arg, sql)
                if definite:
                    found = sql.let(
                        nodes,
                        lambda ns: (
                            f"IF(size({ns}) = 0, '', {_cell_text(f'try_element_at({ns}, 1)', NULL_TEXT)})"
                        ),
                        "ns",
                    )
                else:
                    found = f"concat('[', array_join(transform({nodes}, _f -> {_json_text('_f')}), ','), ']')"
                return _out(found)

            text = f"coalesce({cell}, '')"
            parsed = _parse(_mark(text, MARK_STRINGS, MARK_SCALARS), sql, "string")
            broken = f"concat('column ', {k}, ': not JSON')"
            return sql.let(
                parsed,
                lambda p: (
                    f"CASE WHEN {p} IS NOT NULL THEN {on_root(p)} "
                    f"WHEN regexp({text}, {sql_string(_LEADING_BRACKET)}) THEN {_out(NULL, broken)} "
                    f"ELSE {on_root(f'concat({sql_string(STRING_MARK)}, {text})')} END"
                ),
                "p",
            )

        def body(r: str) -> str:
            parts = []
            for e, steps in zip(rule.grammar, paths, strict=True):
                k = sql.var("k")
                parts.append(
                    f"transform({_Scope(e, r).in_range()}, {k} -> {result(e, steps, _cell(r, k), k)})"
                )
            if not parts:
                return _out(f"array({r})")
            found = parts[0] if len(parts) == 1 else f"concat({', '.join(parts)})"
            return sql.let(
                found,
                lambda x: _out(f"array(concat({r}, transform({x}, _y -> _y.o)))", sql.first_error(x)),
                "x",
            )

        return _negative_first(rule, _Step("both", body))

    def op_flattenJsonArray(self, rule: Rule) -> _Step:
        """One output row per element, column c replaced; each entry and in-range scope column explodes the
        original row on its own, the outputs concatenated (spec §3.16)."""
        sql = self.sql

        def replaced(r: str, c: str, text: str) -> str:
            v, i = sql.var("c"), sql.var("i")
            return f"transform({r}, ({v}, {i}) -> IF({i} = {c}, {text}, {v}))"

        def elements_form(r: str, s: _Scope) -> str:
            """No path: column c a JSON array (empty or null: no element); a column that is not one stops
            the entry's other columns."""
            c = sql.var("k")
            cell = _cell(r, c)
            arr = _parse(_mark(cell, MARK_STRINGS, MARK_SCALARS), sql, "array<string>")

            def per_col(a: str) -> str:
                rows = f"transform({a}, _el -> {replaced(r, c, _cell_text('_el', EMPTY_TEXT))})"
                return f"IF(coalesce({cell}, '') = '', named_struct('ok', true, 'o', {EMPTY_ROWS}), named_struct('ok', {a} IS NOT NULL, 'o', coalesce({rows}, {EMPTY_ROWS})))"

            cols = f"transform({s.in_range()}, {c} -> {sql.let(arr, per_col, 'a')})"

            def upto_failure(x: str) -> str:
                ok = f"transform({x}, _y -> _y.ok)"
                keep = f"IF(array_contains({ok}, false), array_position({ok}, false) - 1, size({x}))"
                return f"flatten(transform(slice({x}, 1, {keep}), _y -> _y.o))"

            return f"transform({sql.let(cols, upto_failure, 'x')}, _o -> {_out('array(_o)')})"

        def path_form(r: str, s: _Scope, path: str) -> str:
            """A key: column c a JSON object. ``p`` a key of it: one row per element of its array, the object
            with ``p`` = the element; ``a.b``: one row, ``a`` replaced by the list of copies of ``a`` each with
            ``b`` = one element (the list empty when the array is). No array there: nothing."""
            keys = path.split(".")
            c = sql.var("k")
            cell = _cell(r, c)
            if any(not k for k in keys) or re.search(r"[$\[\]*()?@'\"]", path):
                bad = sql_string(f": path {path!r} is not keys joined by dots (order.items)")
                return f"transform({s.in_range()}, {c} -> {_out(EMPTY_ROWS, f'concat({chr(39)}column {chr(39)}, {c}, {bad})')})"

            def top(m: str, key: str) -> str:
                def rows(a: str) -> str:
                    each = f"transform({a}, _el -> {replaced(r, c, _object_text(m, sql, key, _json_text('_el')))})"
                    return f"coalesce({each}, {EMPTY_ROWS})"

                return sql.let(_array(f"try_element_at({m}, {sql_string(key)})", sql), rows, "a")

            def nested(m: str) -> str:
                def set_at(obj: str, at: list[str]) -> str:
                    """``obj`` as text with the value at ``at`` (the parent) replaced by its list of copies; NULL
                    when the path is not there."""
                    inner = _object(f"try_element_at({obj}, {sql_string(at[0])})", sql)
                    if len(at) > 1:
                        return sql.let(
                            inner,
                            lambda im: (
                                f"IF({im} IS NULL, NULL, {_object_text(obj, sql, at[0], set_at(im, at[1:]))})"
                            ),
                            "o",
                        )

                    def copies(pm: str) -> str:
                        def listed(a: str) -> str:
                            each = (
                                f"transform({a}, _el -> {_object_text(pm, sql, keys[-1], _json_text('_el'))})"
                            )
                            return f"IF({a} IS NULL, NULL, concat('[', array_join({each}, ','), ']'))"

                        return sql.let(
                            _array(f"try_element_at({pm}, {sql_string(keys[-1])})", sql), listed, "a"
                        )

                    return sql.let(
                        inner,
                        lambda pm: (
                            f"IF({pm} IS NULL, NULL, {sql.let(copies(pm), lambda t: f'IF({t} IS NULL, NULL, {_object_text(obj, sql, at[0], t)})', 't')})"
                        ),
                        "o",
                    )

                return sql.let(
                    set_at(m, keys[:-1]),
                    lambda t: f"IF({t} IS NULL, {EMPTY_ROWS}, array({replaced(r, c, t)}))",
                    "t",
                )

            def on_object(m: str) -> str:
                if len(keys) == 1:
                    return top(m, path)
                # a key with a dot of its own is a top-level key first
                return f"IF(map_contains_key({m}, {sql_string(path)}), {top(m, path)}, {nested(m)})"

            parsed = _parse(_mark(cell, MARK_STRINGS, MARK_SCALARS), sql, "map<string,string>")
            not_object = f"concat('column ', {c}, IF({cell} IS NULL, ': null is not a JSON object', ': not a JSON object'))"
            per_col = sql.let(
                parsed,
                lambda m: f"IF({m} IS NULL, {_out(EMPTY_ROWS, not_object)}, {_out(on_object(m))})",
                "m",
            )
            return f"transform({s.in_range()}, {c} -> {per_col})"

        def body(r: str) -> str:
            parts = []
            for e in rule.grammar:
                s = _Scope(e, r)
                parts.append(path_form(r, s, e.param) if e.param else elements_form(r, s))
            if not parts:
                return _out(EMPTY_ROWS)
            items = parts[0] if len(parts) == 1 else f"concat({', '.join(parts)})"
            return sql.let(
                items, lambda x: _out(f"flatten(transform({x}, _y -> _y.o))", sql.first_error(x)), "x"
            )

        return _negative_first(rule, _Step("both", body))


def _negative_first(rule: Rule, step: _Step) -> _Step:
    """``step`` (kind ``both``) after the entries' negative-column check."""

    def body(r: str) -> str:
        error = _scope_errors(rule, r)
        if error is None:
            return step.body(r)
        return f"IF({error} IS NOT NULL, {_out(EMPTY_ROWS, error)}, {step.body(r)})"

    return _Step("both", body)


def _typed(v: str, ums_type: str | None) -> str:
    """A saveAs cell for its UMS type (spec §5.4), DOUBLE aside (op_saveAs); NULL stays NULL."""
    if ums_type == "long":  # Long.valueOf: digits with an optional sign, else the text as it was
        return f"IF(coalesce(regexp({v}, '^[+-]?[0-9]+$'), false), coalesce(CAST(try_cast({v} AS BIGINT) AS STRING), {v}), {v})"
    if ums_type == "datetime":
        first = f"concat(substring_index({v}, ':', 1), ' ', substr({v}, instr({v}, ':') + 1))"
        return f"left(IF(contains({v}, ' ') OR NOT contains({v}, ':'), {v}, {first}), 26)"
    return v


# ---------------------------------------------------------------- rules, groups, tables


def _apply_rows(sql: _Sql, state: str, step: _Step, where: str) -> str:
    """A rows state (``struct<rows, err>``) after one rule: passed through when no row is left, else the
    rule's rows or its error. Everything inside lambdas over the rows."""
    prefix = sql_string(f"{where}: ")

    def broken(e: str) -> str:
        return _rows(EMPTY_ROWS, f"concat({prefix}, {e})")

    def run(s: str) -> str:
        rows, r = f"{s}.rows", sql.var("r")
        body = step.body(r)
        if step.kind == "run":  # full messages; the lowest rule position first, then the first row
            y = sql.var("y")

            def first(x: str) -> str:
                found = f"transform(filter({x}, {y} -> {y}.e IS NOT NULL), {y} -> named_struct('pos', {y}.pos, 'e', {y}.e))"
                return f"array_min({found}).e"

            return sql.let(
                f"transform({rows}, {r} -> {body})",
                lambda x: sql.let(
                    first(x),
                    lambda e: (
                        f"IF({e} IS NULL, {_rows(f'flatten(transform({x}, _y -> _y.o))')}, {_rows(EMPTY_ROWS, e)})"
                    ),
                    "e",
                ),
                "x",
            )
        if step.kind == "both":
            return sql.let(
                f"transform({rows}, {r} -> {body})",
                lambda x: sql.let(
                    sql.first_error(x),
                    lambda e: (
                        f"IF({e} IS NULL, {_rows(f'flatten(transform({x}, _y -> _y.o))')}, {broken(e)})"
                    ),
                    "e",
                ),
                "x",
            )
        out = {
            "map": f"transform({rows}, {r} -> {body})",
            "filter": f"filter({rows}, {r} -> {body})",
        }[step.kind]
        error = step.error(r) if step.error else NULL
        if error == NULL:
            return _rows(out)
        a = sql.var("a")
        first = f"aggregate({rows}, {NULL}, ({a}, {r}) -> coalesce({a}, {error}))"
        return sql.let(first, lambda e: f"IF({e} IS NULL, {_rows(out)}, {broken(e)})", "e")

    with sql.nested():
        return sql.let(state, lambda s: f"IF(size({s}.rows) = 0, {s}, {run(s)})", "s")


def _apply_row(sql: _Sql, s: str, step: _Step, where: str) -> str:
    """A single-row state (``struct<row, err>``, row NULL: no row) after one rule; ``s`` names the state
    before it. The rule's top-level values become plan columns (``sql.hoists``)."""
    prefix = sql_string(f"{where}: ")
    row = f"{s}.row"
    passed = f"WHEN {row} IS NULL THEN {s}"
    sql.top = True
    try:
        if step.kind in ("both", "run"):
            b = sql.let(f"IF({row} IS NULL, NULL, {step.body(row)})", lambda v: v, "b")
            message = f"{b}.e" if step.kind == "run" else f"concat({prefix}, {b}.e)"
            return (
                f"CASE {passed} WHEN {b}.e IS NOT NULL THEN {_row(NULL_ROW, message)} "
                f"ELSE {_row(f'try_element_at({b}.o, 1)')} END"
            )
        error = step.error(row) if step.error else NULL
        whens = [passed]
        if error != NULL:
            e = sql.let(f"IF({row} IS NULL, NULL, {error})", lambda v: v, "e")
            whens.append(f"WHEN {e} IS NOT NULL THEN {_row(NULL_ROW, f'concat({prefix}, {e})')}")
        if step.kind == "filter":
            return f"CASE {' '.join(whens)} WHEN {step.body(row)} THEN {s} ELSE {_row(NULL_ROW)} END"
        return f"CASE {' '.join(whens)} ELSE {_row(step.body(row))} END"
    finally:
        sql.top = False


_COLUMN0 = ("flattenUms", "keyFilter", "toIndex")


def _run_length(rules: Sequence[Rule], start: int) -> int:
    """How many rules from ``start`` make one ``column0_run``: flattenUms and keyFilters with entries, then
    at most one toIndex (it changes the rows); 0 when ``rules[start]`` starts none."""
    end = start
    while (
        end < len(rules)
        and rules[end].op in _COLUMN0
        and (rules[end].op != "keyFilter" or rules[end].grammar)
    ):
        end += 1
        if rules[end - 1].op == "toIndex":
            break
    return end - start


def _rows(rows: str, err: str = NULL) -> str:
    return f"named_struct('rows', {rows}, 'err', {err})"


def _row(row: str, err: str = NULL) -> str:
    return f"named_struct('row', {row}, 'err', {err})"


NULL_ROW = "CAST(NULL AS array<string>)"


@dataclass(frozen=True)
class Plan:
    """Named SQL columns in layers: a column reads the line's columns and columns of earlier layers (of its
    own group). ``result`` names the column with the answer.

    Two renderings of the same SQL: ``apply`` adds each layer as one projection (``withColumns``), so
    whole-stage codegen compiles the chain and each column is computed once (Spark keeps a projection
    whose column is read twice apart from the next); ``expression`` nests the columns as ``let`` bindings
    in one expression (evaluated by Spark's interpreter inside ``transform``; for tests and previews)."""

    layers: tuple[tuple[tuple[str, str], ...], ...]
    result: str

    def columns(self) -> list[tuple[str, str]]:
        return [column for layer in self.layers for column in layer]

    def expression(self) -> str:
        text = self.result
        for name, value in reversed(self.columns()):
            text = f"element_at(transform(array({value}), {name} -> {text}), 1)"
        return text

    def apply(self, df: DataFrame, out: str) -> DataFrame:
        """``df`` with the column ``out`` added (the plan's columns added, then dropped)."""
        from pyspark.sql import functions as F

        kept = df.columns
        for layer in self.layers:
            df = df.withColumns({name: F.expr(value) for name, value in layer})
        return df.select(*[F.col(_ident(c)) for c in kept], F.col(self.result).alias(out))


def _rules_columns(
    sql: _Sql, rules: Sequence[Rule], start: str, group: str, single: bool, line_map: str | None
) -> tuple[list[tuple[str, str]], str]:
    """The columns (in order) that apply ``rules`` to the state ``start``; the last one is the rows state
    (``struct<rows, err>``). ``single``: ``start`` is a single-row state; it stays one until a
    flattenJsonArray, which may make several rows."""
    compiler = _Compiler(sql)
    columns: list[tuple[str, str]] = []
    state = sql.var("s")
    columns.append((state, start))
    i = 0
    while i < len(rules):
        rule, position = rules[i], i + 1
        where = f"group '{group}' rule {position} ({rule.op})"
        after_save_as = i > 0 and rules[i - 1].op == "saveAs"
        run = 0 if after_save_as else _run_length(rules, i)
        if run:
            step = compiler.column0_run(rules[i : i + run], position, group, line_map if i == 0 else None)
        elif after_save_as:
            step = _Step("both", lambda r: _out(EMPTY_ROWS, sql_string(AFTER_SAVE_AS)))
        else:
            step = compiler.step(rule)
        i += run or 1
        if single and rule.op == "flattenJsonArray":
            single = False
            rows_state = sql.var("s")
            columns.append(
                (
                    rows_state,
                    _rows(f"IF({state}.row IS NULL, {EMPTY_ROWS}, array({state}.row))", f"{state}.err"),
                )
            )
            state = rows_state
        sql.hoists = []
        value = _apply_row(sql, state, step, where) if single else _apply_rows(sql, state, step, where)
        columns.extend(sql.hoists)
        state = sql.var("s")
        columns.append((state, value))
    if single:
        columns.append(
            (
                sql.var("s"),
                _rows(f"IF({state}.row IS NULL, {EMPTY_ROWS}, array({state}.row))", f"{state}.err"),
            )
        )
    return columns, columns[-1][0]


def rules_plan(rules: Sequence[Rule], rows: str, group: str, single: bool = False, prefix: str = "_") -> Plan:
    """``rules`` applied in order to ``rows`` (SQL of type ``array<array<string>>``), as
    ``operators.run_group`` applies them; errors name ``group``. The result is ``struct<rows: array<
    array<string>>, err: string>``: the output rows (empty: not accepted) or the line error. ``single``:
    ``rows`` holds one row, run as a single-row state (what groups on a line do)."""
    sql = _Sql(prefix)
    start = _row(f"try_element_at({rows}, 1)") if single else _rows(rows)
    columns, result = _rules_columns(sql, rules, start, group, single, None)
    return Plan(tuple((c,) for c in columns), result)


def rules_sql(rules: Sequence[Rule], rows: str, group: str, single: bool = False) -> str:
    """``rules_plan`` as one expression."""
    return rules_plan(rules, rows, group, single).expression()


def line_map_sql(line: str, sql: _Sql | None = None) -> str:
    """The line parsed as a JSON object (``map<string,string>``, Jackson's texts), NULL when it is not one:
    what the first flattenUms/keyFilter/toIndex of every group reads, parsed once per line."""
    return _parse(f"CAST({_ident(line)} AS STRING)", sql or _Sql(), "map<string,string>")


def _group_columns(
    sql: _Sql, group: Group, line: str, line_map: str | None
) -> tuple[list[tuple[str, str]], str]:
    start = _row(f"array(CAST({_ident(line)} AS STRING))")
    return _rules_columns(sql, with_save_as(group).rules, start, group.name, True, line_map)


def group_plan(group: Group, line: str = "line", prefix: str = "__dbus_") -> Plan:
    """A group on the column ``line`` (the adapter's output) as the processor runs it: an empty ``saveAs``
    appended when its last rule is not one (``grammar.with_save_as``). Result: ``struct<rows, err>``."""
    columns, result = _group_columns(_Sql(prefix), group, line, None)
    return Plan(tuple((c,) for c in columns), result)


def group_sql(group: Group, line: str = "line") -> str:
    """``group_plan`` as one expression."""
    return group_plan(group, line).expression()


def _table_rows(table: str, rows: str) -> str:
    return f"transform({rows}, (_row, _n) -> named_struct('table', {sql_string(table)}, 'index', _n, 'row', _row))"


def tables_plan(
    tables: Sequence[TableRules], line: str = "line", multi_table: bool = True, prefix: str = "__dbus_"
) -> Plan:
    """``LINE_TYPE`` of the column ``line`` through every table's active groups in order (spec §4.3).
    ``multi_table`` tries every group of every table; otherwise the first group that yields rows wins (the
    groups after it run, but neither their rows nor their errors count: as if they had not run). A group
    that breaks on the line adds an error and yields nothing. The line is parsed as JSON once for all the
    groups that start by reading it (flattenUms, keyFilter, toIndex). The groups run side by side: layer
    ``k`` holds the ``k``-th column of every group."""
    sql = _Sql(prefix)
    groups = [(t.table, g) for t in tables for g in t.groups if g.active]
    empty_rows = f"CAST(array() AS array<{ROW_TYPE}>)"
    empty_errors = f"CAST(array() AS array<{ERROR_TYPE}>)"
    result = sql.var("line")
    if not groups:
        return Plan(
            ((result, f"named_struct('rows', {empty_rows}, 'errors', {empty_errors}, 'unmatched', true)"),),
            result,
        )
    shared: list[tuple[str, str]] = []
    line_map = None
    if any(_run_length(with_save_as(g).rules, 0) for _, g in groups):
        sql.top = True
        sql.hoists = []
        line_map = sql.let(line_map_sql(line, sql), lambda v: v, "lm")
        sql.top = False
        shared = sql.hoists
    per_group = [_group_columns(sql, g, line, line_map) for _, g in groups]
    states = [name for _, name in per_group]

    if multi_table:
        per_table = []
        for table in dict.fromkeys(t for t, _ in groups):
            rows = [f"{states[i]}.rows" for i, (t, _) in enumerate(groups) if t == table]
            per_table.append(_table_rows(table, rows[0] if len(rows) == 1 else f"concat({', '.join(rows)})"))
        all_rows = per_table[0] if len(per_table) == 1 else f"concat({', '.join(per_table)})"
        errors = [
            f"IF({state}.err IS NULL, {empty_errors}, array(named_struct('table', {sql_string(t)}, 'error', {state}.err)))"
            for (t, _), state in zip(groups, states, strict=True)
        ]
        rows_name = sql.var("rows")
        final = [
            ((rows_name, all_rows),),
            (
                (
                    result,
                    f"named_struct('rows', {rows_name}, 'errors', concat({', '.join(errors)}), 'unmatched', size({rows_name}) = 0)",
                ),
            ),
        ]
    else:
        # the first group with rows wins; the errors of the groups before it count: one column per group
        acc = sql.var("acc")
        final = [((acc, f"named_struct('won', false, 'rows', {empty_rows}, 'errors', {empty_errors})"),)]
        for (table, _), state in zip(groups, states, strict=True):
            error = f"named_struct('table', {sql_string(table)}, 'error', {state}.err)"
            won = f"named_struct('won', true, 'rows', {_table_rows(table, f'{state}.rows')}, 'errors', {acc}.errors)"
            errors = f"IF({state}.err IS NULL, {acc}.errors, array_append({acc}.errors, {error}))"
            lost = f"named_struct('won', false, 'rows', {empty_rows}, 'errors', {errors})"
            nxt = sql.var("acc")
            final.append(((nxt, f"IF({acc}.won, {acc}, IF(size({state}.rows) > 0, {won}, {lost}))"),))
            acc = nxt
        final.append(
            (
                (
                    result,
                    f"named_struct('rows', {acc}.rows, 'errors', {acc}.errors, 'unmatched', NOT {acc}.won)",
                ),
            )
        )

    depth = max(len(columns) for columns, _ in per_group)
    layers: list[tuple[tuple[str, str], ...]] = [tuple(shared)] if shared else []
    for k in range(depth):
        layers.append(tuple(columns[k] for columns, _ in per_group if k < len(columns)))
    return Plan(tuple(layers) + tuple(final), result)


def tables_sql(tables: Sequence[TableRules], line: str = "line", multi_table: bool = True) -> str:
    """``tables_plan`` as one expression."""
    return tables_plan(tables, line, multi_table).expression()


# ---------------------------------------------------------------- with a session


def tables_column(tables: Sequence[TableRules], line: str = "line", multi_table: bool = True) -> Column:
    """``tables_sql`` as a Column (needs an active SparkSession). The processor uses
    ``tables_plan(...).apply(df, out)``, several times faster (``Plan``)."""
    from pyspark.sql import functions as F

    return F.expr(tables_sql(tables, line, multi_table))


def regexes(group: Group) -> list[tuple[str, str]]:
    """(where, pattern) of every parameter the group hands to Java as a regex."""
    found = []
    for position, rule in enumerate(group.rules, 1):
        for e in rule.grammar:
            is_regex = (
                rule.op == "regexExtract"
                or (e.rule_type == "regex" and rule.op in ("filter", "keyFilter"))
                or (rule.op in ("split", "replace") and e.rule_type != "string")
            )
            if is_regex and e.param is not None:
                found.append((f"group '{group.name}' rule {position} ({rule.op})", e.param))
    return found


def java_regex_errors(groups: Sequence[Group], jvm: Any) -> list[str]:
    """What ``java.util.regex.Pattern`` refuses among the groups' regexes (``jvm``: py4j's view, e.g.
    ``spark.sparkContext._jvm``). The reference reads regexes with Python's ``re`` (grammar.check_rule);
    a pattern only Java refuses would fail the query on its first line, so it is refused before."""
    bad = []
    for group in groups:
        for where, pattern in regexes(group):
            try:
                jvm.java.util.regex.Pattern.compile(pattern)
            except Exception as e:
                lines = str(e).strip().splitlines()
                bad.append(
                    f"{where}: ruleParamter {pattern!r} is not a valid Java regex: {lines[-1] if lines else e}"
                )
    return bad
