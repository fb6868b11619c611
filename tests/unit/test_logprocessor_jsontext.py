"""logprocessor/jsontext.py: JSON text kept as written, and the jsonPath / flattenJsonArray path subsets."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from logprocessor.jsontext import (
    JsonTextError,
    as_text,
    compile_path,
    dotted_keys,
    dumps,
    loads,
    loads_object,
)


@pytest.mark.parametrize(
    ("text", "compact"),
    [
        ('{"b": 12.50, "a": [1, -0, 1E5, {"x": null}]}', '{"b":12.50,"a":[1,-0,1E5,{"x":null}]}'),
        ('{"s": "tab\\there \\"q\\" \\u00e9 /"}', '{"s":"tab\\there \\"q\\" é /"}'),
        ("[true, false, null]", "[true,false,null]"),
        ('"x"', '"x"'),
        ('{"a": 1, "a": 2}', '{"a":2}'),
    ],
)
def test_dumps_is_compact_in_input_order_numbers_as_written(text, compact):
    assert dumps(loads(text)) == compact


@pytest.mark.parametrize("text", ["NaN", '{"a": Infinity}', "{'a': 1}", "{a: 1}", "", "[1,]", "[" * 100_000])
def test_loads_is_strict_json(text):
    with pytest.raises(JsonTextError, match="not JSON"):
        loads(text)


@pytest.mark.parametrize(("text", "kind"), [("[1]", "an array"), ("5", "a number"), ('"s"', "a string")])
def test_loads_object_names_what_it_got(text, kind):
    with pytest.raises(JsonTextError, match=f"not a JSON object \\({kind}\\)"):
        loads_object(text)


@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(),
        lambda c: st.lists(c) | st.dictionaries(st.text(), c),
    )
)
def test_compact_text_reads_back_the_same(value):
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    assert dumps(loads(text)) == text


@pytest.mark.parametrize(
    ("value", "text"),
    [(None, None), ("s", "s"), (True, "true"), (loads("5.0"), "5.0"), (loads('{"a": [1]}'), '{"a":[1]}')],
)
def test_as_text_is_fastjson_get_string(value, text):
    assert as_text(value) == text


DOC = loads(  # numbers are Num, a str: "1"
    '{"user":{"name":"bob"},"tags":["a","b"],"a.b":1,"items":[{"id":1},{"id":2,"x":{"id":3}}]}'
)


@pytest.mark.parametrize(
    ("path", "definite", "found"),
    [
        ("$", True, [DOC]),
        ("$.user.name", True, ["bob"]),
        ("user.name", True, ["bob"]),
        ("$['a.b']", True, ["1"]),
        ('$["user"]["name"]', True, ["bob"]),
        ("$.tags[1]", True, ["b"]),
        ("$.tags[-1]", True, ["b"]),
        ("$.tags[2]", True, []),
        ("$.user[0]", True, []),
        ("$.nope.name", True, []),
        ("$.tags[*]", False, ["a", "b"]),
        ("$.user.*", False, ["bob"]),
        ("$.items[*].id", False, ["1", "2"]),
        ("$..id", False, ["1", "2", "3"]),
        ("$..['name']", False, ["bob"]),
    ],
)
def test_json_path_subset(path, definite, found):
    compiled = compile_path(path)
    assert (compiled.definite, compiled.find(DOC)) == (definite, found)


@pytest.mark.parametrize(
    "path",
    [
        None,
        "",
        "$.items[?(@.id)]",
        "$.tags[0:1]",
        "$.tags[0,1]",
        "$['a','b']",
        "$.tags.length()",
        "$..*",
        "$.a b",
    ],
)
def test_json_path_outside_the_subset_is_refused(path):
    with pytest.raises(JsonTextError):
        compile_path(path)


def test_dotted_keys():
    assert dotted_keys("order.items") == ("order", "items")
    for path in ["$.items", "items[0]", "a..b", ".a", "a.*"]:
        with pytest.raises(JsonTextError, match="is not keys joined by dots"):
            dotted_keys(path)
