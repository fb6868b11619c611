"""Column masking ("desensitization", spec 4): config rules compiled once, applied to UMS fields and tuples.

Pure: no I/O. ``compile_rules`` turns ``Source.masking`` (``{"schema.table" glob: {column: MaskRule}}``)
into a ``MaskPlan`` at startup; ``plan.for_table(schema, table, fields)`` gives the ``TableMask`` of one
table version (cached), which rewrites the schema fields once and then every payload tuple::

    plan = compile_rules(source.masking)
    mask = plan.for_table("shop", "customers", schema.fields)      # None: nothing to mask
    fields = mask.fields                                            # encoded=true, maybe type string
    payload = tuple(mask.apply_row(t) for t in message.payload)

Values are the JSON wire values of ``UmsMessage.payload`` (long/decimal as strings, binary as Base64).
Guarantees, per masked column:

- NULL stays NULL (a NULL carries no secret, and a NOT NULL column stays valid).
- A rule never raises: any exception, and any result that is not a valid wire value of the output
  type, yields the output type's default value (``DEFAULTS``) and is counted in ``TableMask.errors``.
- md5/sha256/murmur3/regex never return the clear value: a result equal to its input is replaced by
  the default too. The output equals the clear value only when the clear value *is* the rule's
  constant (the ``replace`` literal, or the default), or for ``truncate`` on a value no longer than
  ``length`` (truncate limits size, it does not hide).
- Fields already ``encoded`` (masked upstream, e.g. by the full puller) are never masked again, and
  the system fields ``ums_*_`` are never masked.
"""

from __future__ import annotations

import base64
import fnmatch
import hashlib
import json
import math
import re
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any, Protocol

from ums.decode import check_wire_value, decode_value
from ums.errors import UmsError
from ums.message import SYSTEM_NAMES, UmsField
from ums.scalars import INT_MAX, INT_MIN, JsonValue
from ums.types import UmsType


class MaskError(UmsError):
    """A masking rule that cannot be compiled (bad regex template, missing mmh3, system column)."""

    code = "UMS_BAD_MASK"


class RuleLike(Protocol):
    """The shape of ``dbuslib.config.MaskRule`` (duck-typed: ``ums`` does not import ``dbuslib``); read-only
    members, as that frozen model's are (and its ``type`` is a Literal of str)."""

    @property
    def type(self) -> str: ...
    @property
    def value(self) -> str | None: ...
    @property
    def salt(self) -> Any: ...  # pydantic SecretStr or None
    @property
    def salt_field(self) -> str | None: ...
    @property
    def pattern(self) -> str | None: ...
    @property
    def replacement(self) -> str | None: ...
    @property
    def length(self) -> int | None: ...


_T = UmsType
_STRINGS = frozenset({_T.STRING, _T.RAW})

# The value a masked column gets for the ``default`` rule and on every fallback, by *output* type.
DEFAULTS: Mapping[UmsType, JsonValue] = {
    _T.STRING: "*",
    _T.RAW: "*",
    _T.JSONOBJECT: '"*"',
    _T.BINARY: "Kg==",  # Base64 of "*"
    _T.INT: 0,
    _T.LONG: "0",
    _T.DECIMAL: "0",
    _T.FLOAT: 0.0,
    _T.DOUBLE: 0.0,
    _T.BOOLEAN: False,
    _T.DATE: "1970-01-01",
    _T.DATETIME: "1970-01-01 00:00:00.000",
}


# ---------------------------------------------------------------- value functions (module level: picklable)


def wire_text(value: JsonValue) -> str:
    """The text a rule works on: strings as they are, numbers and booleans as their JSON text."""
    return value if isinstance(value, str) else json.dumps(value)


def _hash(algo: str, value: JsonValue, salt: str) -> str:
    return hashlib.new(algo, (wire_text(value) + salt).encode("utf-8")).hexdigest()


def _murmur3(value: JsonValue, salt: str) -> str:
    import mmh3  # only rules that use murmur3 need it (checked in compile_rules)

    return mmh3.hash_bytes((wire_text(value) + salt).encode("utf-8"), 0, True).hex()


def _regex(pattern: re.Pattern[str], replacement: str, value: JsonValue, salt: str) -> JsonValue:
    match = pattern.fullmatch(wire_text(value))
    return match.expand(replacement) if match else DEFAULTS[_T.STRING]


def _truncate(length: int | None, value: JsonValue, salt: str) -> str:
    return wire_text(value)[:length]


def _constant(constant: JsonValue, value: JsonValue, salt: str) -> JsonValue:
    return constant


_HIDING = frozenset({"md5", "sha256", "murmur3", "regex"})  # must never return their input


# ---------------------------------------------------------------- one column


@dataclass(frozen=True)
class ColumnMask:
    """The compiled rule of one column for one input type. Call it on one wire value.

    ``mask(value, salt)`` -> masked wire value of ``out_type``; ``salt`` is the clear value of the
    ``salt_field`` column (ignored otherwise). Never raises; failures go to ``errors``.
    """

    name: str
    rule: str  # MaskRule.type
    pattern: str  # the "schema.table" glob the rule came from
    in_type: UmsType
    out_type: UmsType
    salt_field: str | None
    encode: Callable[[JsonValue, str], JsonValue] = field(repr=False)
    fixed_salt: str = field(default="", repr=False)
    errors: Counter[str] = field(default_factory=Counter, compare=False, repr=False)

    def __call__(self, value: JsonValue, salt: JsonValue = None) -> JsonValue:
        if value is None:
            return None
        try:
            salt_text = self.fixed_salt if self.salt_field is None else _salt_text(salt)
            out = self.encode(value, salt_text)
            if check_wire_value(self.out_type, out) is not None or self._leaks(out, value):
                msg = "result is not a valid masked value"
                raise ValueError(msg)
            return out
        except Exception:
            self.errors[self.name] += 1
            return DEFAULTS[self.out_type]

    def _leaks(self, out: JsonValue, value: JsonValue) -> bool:
        """A hiding rule gave back its input (as value or as text) rather than the default."""
        if self.rule not in _HIDING or out == DEFAULTS[self.out_type]:
            return False
        return out == value or out == wire_text(value)


def _salt_text(salt: JsonValue) -> str:
    return "" if salt is None else wire_text(salt)


@dataclass(frozen=True)
class MaskColumn:
    """One masked column of a bound table: tuple ``index``, ``salt_index`` (or None) and the function.

    A batch (Spark/Arrow) caller applies ``mask(values[index], values[salt_index])`` column by column,
    always passing the *input* (clear) salt column.
    """

    index: int
    salt_index: int | None
    mask: ColumnMask


# ---------------------------------------------------------------- compiled rules


@dataclass(frozen=True)
class _Rule:
    """A validated rule, independent of the column type; ``column_mask`` resolves it for one type."""

    rule: RuleLike = field(repr=False)
    pattern: str
    regex: re.Pattern[str] | None = None

    def column_mask(self, name: str, in_type: UmsType, errors: Counter[str]) -> ColumnMask:
        rule = self.rule
        out_type, encode = _BUILDERS[rule.type](self, in_type)
        salt = rule.salt.get_secret_value() if rule.salt is not None else ""
        return ColumnMask(
            name, rule.type, self.pattern, in_type, out_type, rule.salt_field, encode, salt, errors
        )


def _build_default(r: _Rule, t: UmsType) -> tuple[UmsType, Callable]:
    return t, partial(_constant, DEFAULTS[t])


def _build_replace(r: _Rule, t: UmsType) -> tuple[UmsType, Callable]:
    converted = replace_value(r.rule.value or "", t)
    out_type = t if converted is not None else _T.STRING
    return out_type, partial(_constant, r.rule.value if converted is None else converted)


def _build_hash(algo: str, r: _Rule, t: UmsType) -> tuple[UmsType, Callable]:
    return _T.STRING, partial(_hash, algo)


def _build_murmur3(r: _Rule, t: UmsType) -> tuple[UmsType, Callable]:
    return _T.STRING, _murmur3


def _build_regex(r: _Rule, t: UmsType) -> tuple[UmsType, Callable]:
    assert r.regex is not None, "_compile_rule compiles the pattern of every regex rule"
    return _T.STRING, partial(_regex, r.regex, r.rule.replacement or "")


def _build_truncate(r: _Rule, t: UmsType) -> tuple[UmsType, Callable]:
    return (t if t in _STRINGS else _T.STRING), partial(_truncate, r.rule.length)


_BUILDERS: dict[str, Callable[[_Rule, UmsType], tuple[UmsType, Callable]]] = {
    "default": _build_default,
    "replace": _build_replace,
    "md5": partial(_build_hash, "md5"),
    "sha256": partial(_build_hash, "sha256"),
    "murmur3": _build_murmur3,
    "regex": _build_regex,
    "truncate": _build_truncate,
}


def replace_value(literal: str, ums_type: UmsType) -> JsonValue:
    """The ``replace`` literal as a wire value of ``ums_type``, or None when it is not one.

    ``"0"`` -> ``0`` for int, ``"1.5"`` -> ``1.5`` for double, ``"true"`` -> ``True`` for boolean,
    Base64 of the UTF-8 text for binary; long/decimal/date/datetime/jsonobject keep the text when it
    is valid for the type. None means the column becomes ``string`` and carries the literal.
    """
    candidate: JsonValue = literal
    try:
        if ums_type is _T.INT:
            candidate = int(literal)
            if not INT_MIN <= candidate <= INT_MAX:
                return None
        elif ums_type in (_T.FLOAT, _T.DOUBLE):
            candidate = float(literal)
            if not math.isfinite(candidate):
                return None
        elif ums_type is _T.BOOLEAN:
            candidate = {"true": True, "false": False}[literal]
        elif ums_type is _T.BINARY:
            candidate = base64.b64encode(literal.encode("utf-8")).decode("ascii")
        decode_value(ums_type, candidate)
    except (ValueError, KeyError, UmsError):
        return None
    return candidate


def _compile_rule(pattern: str, column: str, rule: RuleLike) -> _Rule:
    where = f"masking.{pattern}.{column}"
    if column in SYSTEM_NAMES:
        msg = f"{where}: the system field {column} cannot be masked"
        raise MaskError(msg)
    if rule.type not in _BUILDERS:
        msg = f"{where}: unknown mask type {rule.type!r} (known: {', '.join(sorted(_BUILDERS))})"
        raise MaskError(msg)
    if rule.salt_field == column:
        msg = f"{where}: salt_field cannot be the masked column itself"
        raise MaskError(msg)
    if rule.type == "murmur3":
        _need_mmh3(where)
    regex = None
    if rule.type == "regex":
        try:
            regex = re.compile(rule.pattern or "")
            regex.sub(rule.replacement or "", "")  # parses the template: bad group references fail here
        except re.error as e:
            msg = f"{where}: pattern {rule.pattern!r} / replacement {rule.replacement!r}: {e}"
            raise MaskError(msg) from None
    return _Rule(rule, pattern, regex)


def _need_mmh3(where: str) -> None:
    try:
        import mmh3  # noqa: F401
    except ImportError:
        msg = f"{where}: murmur3 needs the mmh3 package (pip install mmh3)"
        raise MaskError(msg) from None


# ---------------------------------------------------------------- table patterns


@dataclass(frozen=True)
class _TablePattern:
    """One ``schema.table`` glob; ``*`` and ``?`` never cross the dot."""

    text: str
    schema: re.Pattern[str]
    table: re.Pattern[str]
    rules: Mapping[str, _Rule] = field(repr=False)

    @property
    def specificity(self) -> tuple[bool, bool, int, str]:
        """Higher wins: literal table, then literal schema, then more literal characters, then text."""
        schema, table = self.text.split(".")
        return (_literal(table), _literal(schema), len(re.sub(r"[*?\[\]]", "", self.text)), self.text)

    def matches(self, schema: str, table: str) -> bool:
        return bool(self.schema.fullmatch(schema) and self.table.fullmatch(table))


def _literal(part: str) -> bool:
    return not any(c in part for c in "*?[")


def _glob(part: str) -> re.Pattern[str]:
    return re.compile(fnmatch.translate(part))


# ---------------------------------------------------------------- table mask


@dataclass(frozen=True)
class TableRules:
    """The rules of one table by column: for each column, the most specific pattern that names it."""

    schema: str
    table: str
    rules: Mapping[str, _Rule]

    def source_of(self, column: str) -> str | None:
        """The ``schema.table`` pattern whose rule masks ``column``, or None."""
        rule = self.rules.get(column)
        return rule.pattern if rule else None


@dataclass(frozen=True)
class TableMask:
    """The masking of one table version (one fields tuple): output fields, columns, row function.

    ``errors`` counts, per column name, the values that fell back to the default since start.
    """

    rules: TableRules
    fields_in: tuple[UmsField, ...]
    fields: tuple[UmsField, ...]
    columns: tuple[MaskColumn, ...]
    error_counts: Counter[str] = field(compare=False, repr=False)

    @property
    def errors(self) -> int:
        """Values that fell back to the default (exception or invalid result), all columns."""
        return sum(self.error_counts.values())

    def apply_fields(self, fields: tuple[UmsField, ...]) -> tuple[UmsField, ...]:
        """Masked schema fields: ``encoded=true`` and maybe type ``string``. Idempotent."""
        return self.fields if fields == self.fields_in else _bind(self.rules, fields).fields

    def for_fields(self, fields: tuple[UmsField, ...]) -> TableMask:
        """The same rules bound to ``fields`` (another version of the table); ``self`` for its own."""
        return self if fields == self.fields_in else _bind(self.rules, fields)

    def apply_row(self, values: tuple[JsonValue, ...]) -> tuple[JsonValue, ...]:
        """One payload tuple (aligned with ``fields_in``) -> the masked tuple."""
        out = list(values)
        for col in self.columns:
            salt = values[col.salt_index] if col.salt_index is not None else None
            out[col.index] = col.mask(values[col.index], salt)
        return tuple(out)


def _bind(rules: TableRules, fields: tuple[UmsField, ...]) -> TableMask:
    index = {f.name: i for i, f in enumerate(fields)}
    errors: Counter[str] = Counter()
    out_fields = list(fields)
    columns = []
    for i, f in enumerate(fields):
        rule = rules.rules.get(f.name)
        if rule is None or f.encoded or f.name in SYSTEM_NAMES:
            continue
        mask = rule.column_mask(f.name, f.type, errors)
        salt_index = index.get(mask.salt_field) if mask.salt_field else None
        if mask.salt_field and salt_index is None:  # salt column absent: every value gets the default
            mask = replace(mask, encode=_missing_salt(mask.salt_field))
        columns.append(MaskColumn(i, salt_index, mask))
        out_fields[i] = replace(f, type=mask.out_type, encoded=True)
    return TableMask(rules, fields, tuple(out_fields), tuple(columns), errors)


def _missing_salt(salt_field: str) -> Callable[[JsonValue, str], JsonValue]:
    return partial(_fail_salt, salt_field)


def _fail_salt(salt_field: str, value: JsonValue, salt: str) -> JsonValue:
    msg = f"salt_field {salt_field!r} is not a field of this table"
    raise KeyError(msg)


# ---------------------------------------------------------------- the plan


class MaskPlan:
    """All masking rules of one source, compiled. Lookups are cached per table and per fields tuple."""

    def __init__(self, patterns: tuple[_TablePattern, ...]) -> None:
        self.patterns = tuple(sorted(patterns, key=lambda p: p.specificity, reverse=True))
        self._rules: dict[tuple[str, str], TableRules | None] = {}
        self._masks: dict[tuple[str, str, tuple[UmsField, ...]], TableMask | None] = {}

    @property
    def has_rules(self) -> bool:
        """Whether the source masks any column at all."""
        return bool(self.patterns)

    def rules_for(self, schema: str, table: str) -> TableRules | None:
        """The column rules of ``schema.table``, merged over every matching pattern (most specific first)."""
        key = (schema, table)
        if key not in self._rules:
            merged: dict[str, _Rule] = {}
            for p in self.patterns:
                if p.matches(schema, table):
                    for column, rule in p.rules.items():
                        merged.setdefault(column, rule)
            self._rules[key] = TableRules(schema, table, merged) if merged else None
        return self._rules[key]

    def for_table(self, schema: str, table: str, fields: tuple[UmsField, ...]) -> TableMask | None:
        """The mask of one table version, or None when none of its fields is masked."""
        key = (schema, table, fields)
        if key not in self._masks:
            rules = self.rules_for(schema, table)
            mask = _bind(rules, fields) if rules else None
            self._masks[key] = mask if mask and mask.columns else None
        return self._masks[key]

    @property
    def errors(self) -> int:
        """Fallbacks to the default over every table mask handed out so far."""
        return sum(m.errors for m in self._masks.values() if m is not None)


def compile_rules(masking: Mapping[str, Mapping[str, RuleLike]]) -> MaskPlan:
    """``Source.masking`` -> ``MaskPlan``; MaskError names ``masking.<pattern>.<column>`` on a bad rule."""
    patterns = []
    for text, columns in masking.items():
        schema, table = text.split(".")
        rules = {column: _compile_rule(text, column, rule) for column, rule in columns.items()}
        patterns.append(_TablePattern(text, _glob(schema), _glob(table), rules))
    return MaskPlan(tuple(patterns))
