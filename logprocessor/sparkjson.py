"""JSON the way Spark reads and re-writes it, in Python (pure): the reference side of the log processor's
adapters (docs/logs.md, Shipper records).

The log processor reads shipper records in the JVM with Jackson (``dbus.jvm.LogAdapter``), as Spark's JSON
functions read them, never with Python. The reference adapters (``logprocessor.adapters``) must accept,
refuse and render exactly what it does, so this module reproduces it:

- ``read_object(text)``: the object ``from_json`` finds, or None where it finds none. Like Spark, it reads
  the first JSON value of the text and ignores what follows it (``{"a":1} xyz`` is ``{"a":1}``); leading
  JSON whitespace (space, tab, CR, LF) is skipped, anything else before the value is an error. It keeps
  Jackson's limits: a number of at most 1000 digits (sign, point, exponent sign and a leading ``0.`` not
  counted), nesting at most 1000 deep, a key of at most 50,000 UTF-16 units, a string of at most
  20,000,000; ``NaN``, ``Infinity`` and single quotes are refused (the log processor's ``from_json``
  options). A key given twice keeps both pairs, in order (a struct field of ``from_json`` reads the last).
- ``text_of(value)``: the text ``from_json`` gives a field declared STRING: a string's content (an unpaired
  surrogate escape becomes ``?``, as Java's UTF-8 encoder writes it), any other value re-written by
  Jackson (``render``).
- ``render(value)``: Jackson's re-writing (``copyCurrentStructure``): compact, keys in input order, strings
  as ``quote`` writes them, integers exactly, other numbers as Java's ``Double.toString`` of the double
  they denote (``12.50`` -> ``12.5``, ``1e7`` -> ``1.0E7``, ``1e400`` -> ``"Infinity"``, quoted).
- ``render_exact(value)``: the JSON the adapters write (log_filebeat, log_ums): as ``render`` but every
  number exactly as written (``12.50`` stays ``12.50``), the way the JVM's adapter keeps them.
- ``quote(text)``: a JSON string as Jackson writes it: ``\\"``, ``\\\\``, ``\\b``, ``\\t``, ``\\n``,
  ``\\f``, ``\\r``, and ``\\u00XX`` (upper-case hex) for the other control characters; nothing else.

Known difference: ``java_double`` prints the shortest digits that read back as the same double (Python's
``repr``); Java 17's ``Double.toString`` prints other digits for a few doubles (``1e23`` ->
``9.999999999999999E22``). It matters only for a non-string field read as text, such as a host given as a
number with a fraction.
"""

from __future__ import annotations

import json
import math
import re
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from decimal import Decimal

JSON_WHITESPACE = " \t\n\r"
MAX_NUMBER_DIGITS = 1000
MAX_DEPTH = 1000
MAX_NAME_UNITS = 50_000
MAX_STRING_UNITS = 20_000_000

# A string (or an unterminated one, to the end: one pass, never quadratic), or a bracket.
_STRUCTURE = re.compile(r'"(?:[^"\\]|\\.)*(?:"|\\?\Z)|[\[\]{}]', re.DOTALL)
_SURROGATE = re.compile("[\ud800-\udfff]")
_ASTRAL = re.compile("[\ud800-\udfff\U00010000-\U0010ffff]")
_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r"}
_NEEDS_ESCAPE = re.compile(r'["\\\x00-\x1f]')


@dataclass(frozen=True)
class Number:
    """A JSON number as written (``text``); ``integer`` when it has neither a fraction nor an exponent."""

    text: str
    integer: bool


@dataclass(frozen=True)
class JsonObject:
    """A JSON object as Jackson streams it: every ``(key, value)`` pair in input order, duplicates kept."""

    pairs: tuple[tuple[str, JsonValue], ...]

    def get(self, key: str) -> JsonValue:
        """The value of the *last* pair named ``key`` (what ``from_json`` puts in a struct field), else
        None."""
        for name, value in reversed(self.pairs):
            if name == key:
                return value
        return None

    def has(self, key: str) -> bool:
        return any(name == key for name, _ in self.pairs)


JsonValue = str | Number | bool | None | JsonObject | list["JsonValue"]


class _Refused(ValueError):
    """A document Jackson (or the VARIANT builder) refuses."""


def read_object(text: str) -> JsonObject | None:
    """The JSON object at the start of ``text`` as Spark's ``from_json`` reads it, or None when Spark finds
    no object there (an error, another kind of value, or only whitespace)."""
    start = len(text) - len(text.lstrip(JSON_WHITESPACE))
    if start == len(text) or text[start] != "{":
        return None
    depth = _depth(text, start) if text.count("[") + text.count("{") > 64 else 64
    if depth > MAX_DEPTH:
        return None
    if len(text) > MAX_STRING_UNITS and _longest_string(text) > MAX_STRING_UNITS:
        return None
    decoder = json.JSONDecoder(
        object_pairs_hook=_pairs,
        parse_int=_int,
        parse_float=_float,
        parse_constant=_constant,
    )
    try:
        with _deep(depth):
            value, _ = decoder.raw_decode(text, start)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, JsonObject) else None


def text_of(value: JsonValue) -> str | None:
    """What ``from_json`` gives for a field declared STRING: None for null, a string's content, else
    ``render``."""
    if value is None:
        return None
    if isinstance(value, str):
        return _unsurrogate(value)
    return render(value)


def render(value: JsonValue) -> str:
    """Jackson's compact re-writing of a parsed value (see the module docstring)."""
    with _deep(_value_depth(value)):
        return _render(value, _number)


def render_exact(value: JsonValue) -> str:
    """``render`` with every number exactly as written: ``{"a":12.50}`` stays ``{"a":12.50}``."""
    with _deep(_value_depth(value)):
        return _render(value, lambda n: n.text)


def exact_text(value: JsonValue) -> str | None:
    """A value as an adapter reads a field it re-writes: None for null, a string's content (unpaired
    surrogates as ``?``), a number as written, ``true``/``false``, an object or array by ``render_exact``."""
    if value is None:
        return None
    if isinstance(value, str):
        return _unsurrogate(value)
    return render_exact(value)


def copy_quote(text: str) -> str:
    """A string inside a nested value as Jackson's ``copyCurrentStructure`` writes it: as ``quote``, and
    every UTF-16 surrogate (an unpaired one, or either half of a character above U+FFFF) as ``\\uXXXX``:
    ``"😀"`` -> ``"\\uD83D\\uDE00"``."""
    escaped = quote(text, keep_surrogates=True)
    if _ASTRAL.search(escaped) is None:
        return escaped
    return _ASTRAL.sub(lambda m: "".join(f"\\u{u:04X}" for u in _utf16(m.group())), escaped)


def quote(text: str, keep_surrogates: bool = False) -> str:
    """A JSON string as Jackson writes it (``to_json``): ``a"b`` -> ``"a\\"b"``, control characters
    escaped."""
    text = text if keep_surrogates else _unsurrogate(text)
    if _NEEDS_ESCAPE.search(text) is None:
        return f'"{text}"'
    return '"' + _NEEDS_ESCAPE.sub(lambda m: _ESCAPES.get(m.group(), f"\\u{ord(m.group()):04X}"), text) + '"'


def java_double(x: float) -> str:
    """Java's ``Double.toString`` for a finite double, from its shortest digits: ``100000.0``, ``0.001``,
    ``1.0E7``, ``1.5E-5``, ``-0.0``. Plain notation for 10^-3 <= |x| < 10^7, else scientific."""
    if x == 0:
        return "-0.0" if math.copysign(1.0, x) < 0 else "0.0"
    sign = "-" if x < 0 else ""
    digits_tuple, exponent = Decimal(repr(abs(x))).normalize().as_tuple()[1:]
    digits = "".join(map(str, digits_tuple))
    sci = int(exponent) + len(digits) - 1  # x = d.ddd * 10^sci
    if 1e-3 <= abs(x) < 1e7:
        if sci >= 0:
            whole = digits[: sci + 1].ljust(sci + 1, "0")
            return f"{sign}{whole}.{digits[sci + 1 :] or '0'}"
        return f"{sign}0.{'0' * (-sci - 1)}{digits}"
    return f"{sign}{digits[0]}.{digits[1:] or '0'}E{sci}"


def utf16_units(text: str) -> int:
    """Java's ``String.length()``: characters above U+FFFF count twice."""
    return len(text) + sum(1 for c in text if ord(c) > 0xFFFF)


# ---------------------------------------------------------------- reading


def _pairs(pairs: list[tuple[str, JsonValue]]) -> JsonObject:
    for key, _ in pairs:
        if utf16_units(key) > MAX_NAME_UNITS:
            raise _Refused(key[:20])
    return JsonObject(tuple(pairs))


def _int(text: str) -> Number:
    if len(text) - text.startswith("-") > MAX_NUMBER_DIGITS:
        raise _Refused(text[:20])
    return Number(text, True)


def _float(text: str) -> Number:
    mantissa, _, exponent = text.lower().partition("e")
    whole, _, fraction = mantissa.lstrip("-").partition(".")
    digits = (0 if whole == "0" else len(whole)) + len(fraction) + len(exponent.lstrip("+-"))
    if digits > MAX_NUMBER_DIGITS:
        raise _Refused(text[:20])
    return Number(text, False)


def _constant(text: str) -> Number:
    raise _Refused(text)


def _depth(text: str, start: int) -> int:
    """The deepest nesting of the first JSON value from ``start`` (strings skipped), stopping at its end."""
    depth = deepest = 0
    for match in _STRUCTURE.finditer(text, start):
        token = match.group()
        if token in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif token in "]}":
            depth -= 1
            if depth <= 0:
                break
    return deepest


def _longest_string(text: str) -> int:
    return max(
        (utf16_units(m.group()) - 2 for m in _STRUCTURE.finditer(text) if len(m.group()) > 1), default=0
    )


@contextmanager
def _deep(depth: int) -> Iterator[None]:
    """Room on the stack for ``depth`` nested values (Jackson allows 1000, Python's default is 1000
    frames)."""
    old = sys.getrecursionlimit()
    need = 3 * depth + 200
    if need > old - 100:
        sys.setrecursionlimit(old + need)
    try:
        yield
    finally:
        sys.setrecursionlimit(old)


def _value_depth(value: JsonValue) -> int:
    stack, deepest = [(value, 1)], 0
    while stack:
        item, level = stack.pop()
        if isinstance(item, JsonObject):
            deepest = max(deepest, level)
            stack.extend((v, level + 1) for _, v in item.pairs)
        elif isinstance(item, list):
            deepest = max(deepest, level)
            stack.extend((v, level + 1) for v in item)
    return deepest


# ---------------------------------------------------------------- writing


def _render(value: JsonValue, number: Callable[[Number], str], top: bool = True) -> str:
    """A string at the top is a Spark string written by ``to_json`` (``quote``); inside an object or array
    it is Jackson's copy of the parsed text (``copy_quote``)."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, str):
        return quote(value) if top else copy_quote(value)
    if isinstance(value, Number):
        return number(value)
    if isinstance(value, JsonObject):
        return "{" + ",".join(f"{copy_quote(k)}:{_render(v, number, False)}" for k, v in value.pairs) + "}"
    return "[" + ",".join(_render(v, number, False) for v in value) + "]"


def _number(number: Number) -> str:
    if number.integer:
        return str(int(number.text))
    x = float(number.text)
    if math.isinf(x):
        return '"-Infinity"' if x < 0 else '"Infinity"'
    return java_double(x)


def _utf16(char: str) -> tuple[int, ...]:
    code = ord(char)
    if code < 0x10000:
        return (code,)
    code -= 0x10000
    return (0xD800 + (code >> 10), 0xDC00 + (code & 0x3FF))


def _unsurrogate(text: str) -> str:
    if _SURROGATE.search(text) is None:
        return text
    return text.encode("utf-8", "replace").decode("utf-8")
