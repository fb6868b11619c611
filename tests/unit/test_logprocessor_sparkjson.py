"""logprocessor.sparkjson: JSON read and re-written the way Spark's from_json does (the JVM's adapter
agrees with the references that use it: test_record_jvm.py)."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from logprocessor.sparkjson import (
    JsonObject,
    Number,
    exact_text,
    java_double,
    quote,
    read_object,
    render,
    render_exact,
    text_of,
)


@pytest.mark.parametrize(
    ("text", "pairs"),
    [
        ('{"a":1}', (("a", Number("1", True)),)),
        (' \t\r\n{"a":"x"}', (("a", "x"),)),
        (
            '{"a":1} xyz',
            (("a", Number("1", True)),),
        ),  # what follows the first value is ignored, as by Jackson
        ('{"a":1}{"b":2}', (("a", Number("1", True)),)),
        ('{"a":1,"a":2}', (("a", Number("1", True)), ("a", Number("2", True)))),  # both kept, in order
        ("{}", ()),
    ],
)
def test_read_object_reads_the_first_object_as_jackson_streams_it(text, pairs):
    assert read_object(text) == JsonObject(pairs)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "   ",
        "[1]",
        '"x"',
        "1",
        "null",
        "{'a':1}",  # single quotes refused (allowSingleQuotes false)
        '{"a":NaN}',  # allowNonNumericNumbers false
        '{"a":Infinity}',
        '{"a":01}',
        '{"a":"x\ty"}',  # a raw control character in a string
        '{"a":1',
        "\ufeff{}",  # a byte order mark is not whitespace
        "\x0b{}",
        "\u00a0{}",
        "x{}",
    ],
)
def test_read_object_finds_none_where_spark_finds_no_object(text):
    assert read_object(text) is None


def test_jacksons_limits_hold():
    assert read_object('{"a":' + "9" * 1000 + "}") is not None
    assert read_object('{"a":-' + "9" * 1000 + "}") is not None  # the sign is not a digit
    assert read_object('{"a":' + "9" * 1001 + "}") is None
    assert read_object('{"a":0.' + "9" * 1000 + "}") is not None  # a leading "0." does not count
    assert read_object('{"a":1.' + "9" * 1000 + "}") is None
    assert read_object('{"a":' + "[" * 999 + "]" * 999 + "}") is not None  # 1000 deep
    assert read_object('{"a":' + "[" * 1000 + "]" * 1000 + "}") is None
    assert read_object('{"' + "k" * 50_000 + '":1}') is not None
    assert read_object('{"' + "k" * 50_001 + '":1}') is None


def test_deep_nesting_after_the_first_object_is_ignored_like_any_trailing_text():
    assert read_object('{"a":1}' + "[" * 5000) == JsonObject((("a", Number("1", True)),))


def test_an_unterminated_string_does_not_make_the_scan_quadratic():
    assert read_object('{"a' + '\\"' * 200_000 + "[" * 100) is None


@pytest.mark.parametrize(
    ("value", "text"),
    [
        ("plain", "plain"),
        ("\ud800x", "?x"),  # an unpaired surrogate escape, as Java's UTF-8 encoder writes it
        (None, None),
        (Number("12.50", False), "12.5"),
        (Number("-0", True), "0"),
        (Number("1e400", False), '"Infinity"'),
        (True, "true"),
        (
            JsonObject((("y", Number("1.50", False)), ("x", [Number("1", True), "s"]))),
            '{"y":1.5,"x":[1,"s"]}',
        ),
    ],
)
def test_text_of_is_what_from_json_gives_a_string_field(value, text):
    assert text_of(value) == text


def test_render_exact_keeps_numbers_as_written_and_render_rewrites_them_as_java():
    obj = read_object('{"a":12.50,"b":[1E5,-0,true,null],"c":{"d":"x\\u001fy"}}')
    assert render_exact(obj) == '{"a":12.50,"b":[1E5,-0,true,null],"c":{"d":"x\\u001Fy"}}'
    assert render(obj) == '{"a":12.5,"b":[100000.0,0,true,null],"c":{"d":"x\\u001Fy"}}'
    assert exact_text(obj.get("a")) == "12.50"
    assert exact_text(None) is None


@pytest.mark.parametrize(
    ("text", "quoted"),
    [
        ('a"b\\c', '"a\\"b\\\\c"'),
        ("\b\t\n\f\r", '"\\b\\t\\n\\f\\r"'),
        ("\x00\x0b\x1f", '"\\u0000\\u000B\\u001F"'),
        ("/ é \u2028 \x7f 😀", '"/ é \u2028 \x7f 😀"'),
    ],
)
def test_quote_escapes_like_jackson(text, quoted):
    assert quote(text) == quoted


@pytest.mark.parametrize(
    ("x", "text"),
    [
        (45.5, "45.5"),
        (100000.0, "100000.0"),
        (1e7, "1.0E7"),
        (12345678.9, "1.23456789E7"),
        (0.001, "0.001"),
        (0.0001, "1.0E-4"),
        (1.5e-5, "1.5E-5"),
        (-0.0, "-0.0"),
        (0.0, "0.0"),
        (1e20, "1.0E20"),
        (-1.2345678901234568e17, "-1.2345678901234568E17"),
    ],
)
def test_java_double_is_double_to_string_from_the_shortest_digits(x, text):
    assert java_double(x) == text


@given(st.floats(allow_nan=False, allow_infinity=False))
def test_java_double_reads_back_as_the_same_double(x):
    assert float(java_double(x)) == x


@given(st.text())
def test_read_object_never_raises(text):
    read_object(text)
    read_object("{" + text)
