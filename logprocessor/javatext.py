"""The original's string semantics in Python (pure): commons-lang 3 and java.lang, as its operators used them.

The original's operators are Java: ``StringUtils.strip``, ``splitByWholeSeparatorPreserveAllTokens``,
``substring`` with its clamping, ``String.split(regex)``, ``replaceAll`` with ``$1`` references,
``Long.valueOf``, ``Double.valueOf``. Each is reproduced here so that the operators in
``logprocessor.operators`` read like the spec (../shared/reference/dbus_log_spec.md §3).

Regexes are Java's dialect, run by Python's ``re`` (docs/logs.md, "Rule operators"): ``java_regex`` translates
what differs in spelling (``(?<name>..)``, ``\\k<name>``, ``\\Q..\\E``, ``\\z``, ``\\Z``) and compiles with
``re.ASCII``, since Java's ``\\d``, ``\\w``, ``\\s``, ``\\b`` and ``(?i)`` are ASCII unless asked otherwise.
A Java class operation (``[a-z&&[^x]]``, nested classes) is refused rather than read differently.
Positions count characters (code points); Java counted UTF-16 units, which differ only past U+FFFF.
"""

from __future__ import annotations

import math
import re
import warnings
from collections.abc import Callable, Iterable
from functools import lru_cache
from typing import Any

# Character.isWhitespace: the Unicode space, line and paragraph separators except the no-break ones
# (U+00A0, U+2007, U+202F), plus \t \n \x0b \f \r and the four information separators \x1c-\x1f.
JAVA_WHITESPACE = (
    " \t\n\x0b\x0c\r\x1c\x1d\x1e\x1f\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006"
    "\u2008\u2009\u200a\u2028\u2029\u205f\u3000"
)
_WHITESPACE_SPLIT = re.compile(f"[{re.escape(JAVA_WHITESPACE)}]")

INT_MIN, INT_MAX = -(2**31), 2**31 - 1
LONG_MIN, LONG_MAX = -(2**63), 2**63 - 1
_JAVA_INT = re.compile(r"[+-]?\d+")  # Integer.parseInt / Long.parseLong accept any Unicode decimal digit
_JAVA_DOUBLE = re.compile(r"[+-]?(NaN|Infinity|([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?)[fFdD]?")
_JAVA_HEX_DOUBLE = re.compile(
    r"([+-]?)0[xX]([0-9a-fA-F]+\.?[0-9a-fA-F]*|\.[0-9a-fA-F]+)[pP]([+-]?[0-9]+)[fFdD]?"
)


# ---------------------------------------------------------------- StringUtils


def strip_start(value: str, chars: str | None) -> str:
    """``StringUtils.stripStart``: ``None`` strips Java whitespace, ``""`` nothing."""
    return value.lstrip(JAVA_WHITESPACE if chars is None else chars)


def strip_end(value: str, chars: str | None) -> str:
    return value.rstrip(JAVA_WHITESPACE if chars is None else chars)


def strip(value: str, chars: str | None) -> str:
    return value.strip(JAVA_WHITESPACE if chars is None else chars)


def delete_chars(value: str, chars: str | None) -> str:
    """``StringUtils.replaceChars(value, chars, "")``: every character of ``chars`` removed."""
    return value.translate({ord(c): None for c in chars}) if chars else value


def split_by_whole_separator(value: str, separator: str | None) -> list[str]:
    """``StringUtils.splitByWholeSeparatorPreserveAllTokens``: empty tokens kept, a trailing one too;
    ``""`` gives no piece; a ``None`` or empty separator splits on each Java whitespace character.

    >>> split_by_whole_separator("a||b|", "|")
    ['a', '', 'b', '']
    """
    if value == "":
        return []
    if not separator:
        return _WHITESPACE_SPLIT.split(value)
    return value.split(separator)


def to_int(text: str | None) -> int:
    """``NumberUtils.toInt``: ``Integer.parseInt``, or 0 when it fails."""
    if text is None or not _JAVA_INT.fullmatch(text):
        return 0
    n = int(text)
    return n if INT_MIN <= n <= INT_MAX else 0


def index_of(value: str | None, search: str | None) -> int:
    """``StringUtils.indexOf``: -1 when either is ``None`` or nothing is found."""
    return -1 if value is None or search is None else value.find(search)


def last_index_of(value: str | None, search: str | None) -> int:
    return -1 if value is None or search is None else value.rfind(search)


def substring(value: str | None, start: int, end: int | None = None) -> str | None:
    """``StringUtils.substring``: negative positions count from the end, then clamp; start > end is ``""``.

    >>> substring("0123456789", -3), substring("0123456789", 1, 5), substring("abc", -1, 1)
    ('789', '1234', '')
    """
    if value is None:
        return None
    n = len(value)
    if end is None:
        start = max(start + n if start < 0 else start, 0)
        return "" if start > n else value[start:]
    end = min(end + n if end < 0 else end, n)
    start = start + n if start < 0 else start
    if start > end:
        return ""
    return value[max(start, 0) : max(end, 0)]


# ---------------------------------------------------------------- numbers (saveAs types, spec §5.4)


def long_text(value: str) -> str | None:
    """``Long.valueOf(value).toString()``, or ``None`` when it would throw (``"+007"`` -> ``"7"``)."""
    if not _JAVA_INT.fullmatch(value):
        return None
    n = int(value)
    return str(n) if LONG_MIN <= n <= LONG_MAX else None


def double_value(value: str) -> float | None:
    """``Double.valueOf(value)`` when it is a finite number, else ``None``. Java trims characters <= space
    and accepts a ``d``/``f`` suffix and hexadecimal ``0x1.8p1``; ``NaN``, ``Infinity`` and overflow are not
    finite and give ``None`` (a UMS double is a JSON number)."""
    text = value.strip("".join(map(chr, range(33))))
    if m := _JAVA_HEX_DOUBLE.fullmatch(text):
        try:
            number = float.fromhex(f"{m[1]}0x{m[2]}p{m[3]}")
        except OverflowError:  # Java gives Infinity: not finite either
            return None
    elif _JAVA_DOUBLE.fullmatch(text):
        number = float(text.rstrip("fFdD"))
    else:
        return None
    return number if math.isfinite(number) else None


# ---------------------------------------------------------------- regexes


def _translate(pattern: str) -> str:
    """Java spellings -> Python's; everything else passes through (and fails in ``re`` if Python lacks it)."""
    out: list[str] = []
    i, n, in_class = 0, len(pattern), False
    while i < n:
        c = pattern[i]
        if c == "\\" and i + 1 < n:
            d = pattern[i + 1]
            if d == "Q":
                end = pattern.find("\\E", i + 2)
                literal = pattern[i + 2 :] if end < 0 else pattern[i + 2 : end]
                out.append(re.escape(literal))
                i = n if end < 0 else end + 2
                continue
            if not in_class and d in "zZ":
                out.append(r"\Z" if d == "z" else r"(?=\n?\Z)")
            elif not in_class and d == "k" and pattern.startswith("<", i + 2) and ">" in pattern[i + 3 :]:
                close = pattern.index(">", i + 3)
                out.append(f"(?P={pattern[i + 3 : close]})")
                i = close + 1
                continue
            else:
                out.append(pattern[i : i + 2])
            i += 2
            continue
        if in_class:
            if c == "[" or pattern.startswith("&&", i):
                msg = f"a Java character-class operation ({c!r} in a class at {i}) is not supported"
                raise re.error(msg)
            in_class = c != "]"
        elif c == "[":
            in_class = True
            skip = 2 if pattern.startswith("^]", i + 1) else 1 if pattern.startswith("]", i + 1) else 0
            out.append(pattern[i : i + 1 + skip])
            i += 1 + skip
            continue
        elif pattern.startswith("(?<", i) and i + 3 < n and pattern[i + 3].isalpha():
            out.append("(?P<")
            i += 3
            continue
        out.append(c)
        i += 1
    return "".join(out)


@lru_cache(maxsize=512)
def java_regex(pattern: str) -> re.Pattern[str]:
    """A Java regex compiled by ``re`` (``search`` is Java's ``find``); ``re.error`` when it does not compile
    or uses a Java class operation (``&&``, a nested ``[..]``), which ``re`` would read differently."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)
        try:
            return re.compile(_translate(pattern), re.ASCII)
        except FutureWarning as w:
            msg = f"a Java character-class operation is not supported ({w})"
            raise re.error(msg) from None
        except (OverflowError, RecursionError) as e:
            raise re.error(str(e)) from None


def java_split(regex: re.Pattern[str], value: str) -> list[str]:
    """``String.split(regex)``: no leading empty piece for a zero-width match at 0, trailing empty pieces
    removed, no match -> the whole value (``""`` gives ``[""]``); groups are not pieces (unlike re.split)."""
    return split_matches(value, regex.finditer(value))


def split_matches(value: str, matches: Iterable[Any]) -> list[str]:
    """``java_split`` of ``value`` at ``matches``, the regex's matches in it (found within a budget by
    logprocessor/regexbudget.py)."""
    pieces, index = [], 0
    for m in matches:
        if m.end() == 0:
            continue
        pieces.append(value[index : m.start()])
        index = m.end()
    if index == 0:
        return [value]
    pieces.append(value[index:])
    while pieces and pieces[-1] == "":
        pieces.pop()
    return pieces


def java_replacement(regex: re.Pattern[str], replacement: str) -> Callable[[re.Match[str]], str]:
    """``Matcher.appendReplacement``'s reading of ``replacement``: ``$n`` (as many digits as name a group),
    ``${name}``, ``\\x`` = x; a group that did not take part adds nothing. ValueError where Java throws."""
    parts: list[str | int] = []
    i, n = 0, len(replacement)
    while i < n:
        c = replacement[i]
        if c == "\\":
            if i + 1 == n:
                msg = "character to be escaped is missing"
                raise ValueError(msg)
            parts.append(replacement[i + 1])
            i += 2
        elif c == "$":
            i = _group_ref(regex, replacement, i + 1, parts)
        else:
            parts.append(c)
            i += 1

    def expand(m: re.Match[str]) -> str:
        return "".join(p if isinstance(p, str) else (m.group(p) or "") for p in parts)

    return expand


def _group_ref(regex: re.Pattern[str], text: str, i: int, parts: list[str | int]) -> int:
    """Reads the reference after a ``$`` at ``text[i:]`` into ``parts``; returns the next position."""
    if i == len(text):
        msg = "Illegal group reference: group index is missing"
        raise ValueError(msg)
    if text[i] == "{":
        close = i + 1
        while close < len(text) and text[close].isascii() and text[close].isalnum():
            close += 1
        name = text[i + 1 : close]
        if not name or close == len(text) or text[close] != "}":
            msg = f"Illegal group reference {text[i - 1 : close + 1]!r}"
            raise ValueError(msg)
        if name not in regex.groupindex:
            msg = f"No group with name {{{name}}}"
            raise ValueError(msg)
        parts.append(regex.groupindex[name])
        return close + 1
    if not ("0" <= text[i] <= "9"):
        msg = "Illegal group reference"
        raise ValueError(msg)
    ref, i = int(text[i]), i + 1
    while i < len(text) and "0" <= text[i] <= "9" and ref * 10 + int(text[i]) <= regex.groups:
        ref, i = ref * 10 + int(text[i]), i + 1
    if ref > regex.groups:
        msg = f"No group {ref}"
        raise ValueError(msg)
    parts.append(ref)
    return i
