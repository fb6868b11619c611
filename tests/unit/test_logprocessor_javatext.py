"""logprocessor/javatext.py: the original's Java string semantics, case by case (the values Java gives)."""

from __future__ import annotations

import re

import pytest

from logprocessor.javatext import (
    double_value,
    java_regex,
    java_replacement,
    java_split,
    long_text,
    split_by_whole_separator,
    strip,
    substring,
    to_int,
)


@pytest.mark.parametrize(
    ("value", "separator", "pieces"),
    [
        ("a||b|", "|", ["a", "", "b", ""]),
        ("|a", "|", ["", "a"]),
        ("a<>b<>", "<>", ["a", "b", ""]),
        ("", "|", []),
        ("a  b", None, ["a", "", "b"]),
        (" a\u2003b\u00a0c ", "", ["", "a", "b\u00a0c", ""]),
    ],
)
def test_split_by_whole_separator_preserve_all_tokens(value, separator, pieces):
    assert split_by_whole_separator(value, separator) == pieces


@pytest.mark.parametrize(
    ("pattern", "value", "pieces"),
    [
        (",", "a,b,,", ["a", "b"]),
        (",", ",a", ["", "a"]),
        (",", "", [""]),
        (",", ",,", []),
        (",", "abc", ["abc"]),
        ("", "abc", ["a", "b", "c"]),
        ("(-)", "a-b", ["a", "b"]),
        (r"\s*\|\s*", "a | b |", ["a", "b"]),
    ],
)
def test_java_split(pattern, value, pieces):
    assert java_split(java_regex(pattern), value) == pieces


@pytest.mark.parametrize(
    ("value", "start", "end", "expected"),
    [
        ("0123456789", 1, 5, "1234"),
        ("0123456789", -3, None, "789"),
        ("0123456789", -1, 6, ""),
        ("abc", 20, None, ""),
        ("abc", -20, None, "abc"),
        ("abcdef", 0, -2, "abcd"),
        ("abcdef", 4, 2, ""),
        ("abc", 1, 99, "bc"),
        (None, 1, 2, None),
    ],
)
def test_substring_clamps_like_commons(value, start, end, expected):
    assert substring(value, start, end) == expected


@pytest.mark.parametrize(
    ("text", "n"),
    [("12", 12), ("+3", 3), ("-4", -4), ("٣", 3), ("x", 0), ("", 0), (None, 0), ("2147483648", 0), ("1 ", 0)],
)
def test_to_int_is_number_utils_to_int(text, n):
    assert to_int(text) == n


@pytest.mark.parametrize(
    ("text", "canonical"),
    [
        ("+007", "7"),
        ("-0", "0"),
        ("9223372036854775807", "9223372036854775807"),
        ("9223372036854775808", None),
        ("12abc", None),
        (" 12", None),
        ("1_000", None),
        ("", None),
    ],
)
def test_long_text_is_long_value_of(text, canonical):
    assert long_text(text) == canonical


@pytest.mark.parametrize(
    ("text", "number"),
    [
        ("45.50", 45.5),
        ("1e3", 1000.0),
        (" -2.5d ", -2.5),
        (".5", 0.5),
        ("5.", 5.0),
        ("0x1.8p1", 3.0),
        ("NaN", None),
        ("-Infinity", None),
        ("1e400", None),
        ("0x1p99999", None),  # Java: Infinity; Python's float.fromhex raised OverflowError
        ("45,50", None),
        ("1_0", None),
        ("٣", None),
        ("", None),
    ],
)
def test_double_value_is_a_finite_double_value_of(text, number):
    assert double_value(text) == number


def test_strip_uses_java_whitespace():
    assert strip("\u3000 a\x1c", None) == "a"
    assert strip("\u00a0a", None) == "\u00a0a"
    assert strip(" a ", "") == " a "


@pytest.mark.parametrize(
    ("pattern", "value", "groups"),
    [
        (r"(?<user>\w+)@(?<host>\w+)", "bob@h", ("bob", "h")),
        (r"(?<w>a)\k<w>", "xaa", ("a",)),
        (r"\Q(a)\E(b)", "(a)b", ("b",)),
        (r"(\d+)\z", "12\n34", ("34",)),
        (r"(\w+)", "été", ("t",)),
        (r"(?i)(ABC)", "xabc", ("abc",)),
        (r"([a-c]++)", "abcd", ("abc",)),
        (r"(?<=x)(y)", "xy", ("y",)),
    ],
)
def test_java_regex_spellings(pattern, value, groups):
    m = java_regex(pattern).search(value)
    assert m is not None and m.groups() == groups


@pytest.mark.parametrize("pattern", ["[a-z&&[^aeiou]]", "[a[b]]", "(a", r"\p{Alpha}"])
def test_java_regex_refuses_what_python_would_read_differently_or_cannot_read(pattern):
    with pytest.raises(re.error):
        java_regex(pattern)


@pytest.mark.parametrize(
    ("pattern", "replacement", "value", "expected"),
    [
        ("(a)(b)", "$2$1", "ab", "ba"),
        ("(a)", "$12", "a", "a2"),
        ("(a)", r"\$1", "a", "$1"),
        ("(?<y>a)", "${y}!", "a", "a!"),
        ("(a)|(b)", "[$2]", "a", "[]"),
        ("a", "$0$0", "a", "aa"),
    ],
)
def test_java_replacement(pattern, replacement, value, expected):
    rx = java_regex(pattern)
    assert rx.sub(java_replacement(rx, replacement), value) == expected


@pytest.mark.parametrize(
    ("replacement", "message"),
    [
        ("$2", "No group 2"),
        ("$x", "Illegal group reference"),
        ("${z}", "No group with name {z}"),
        ("a\\", "escaped"),
    ],
)
def test_java_replacement_refuses_what_java_throws_on(replacement, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        java_replacement(java_regex("(a)"), replacement)
