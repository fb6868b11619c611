"""schema.table as users type it: split and quote are inverse."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ums.names import quote_table, split_table


@pytest.mark.parametrize(
    ("text", "parts"),
    [
        ("shop.orders", ("shop", "orders")),
        ("shop.t.dot", ("shop", "t.dot")),
        ("shop.`t.dot`", ("shop", "t.dot")),
        ("`my.db`.`t.dot`", ("my.db", "t.dot")),
        ("`a``b`.c", ("a`b", "c")),
        ("shöp.ordres", ("shöp", "ordres")),
    ],
)
def test_split(text, parts):
    assert split_table(text) == parts


@pytest.mark.parametrize("text", ["orders", "shop.", ".orders", "`shop.orders", "shop.`t`x", "", "`a`b.c"])
def test_split_refuses_what_is_not_schema_dot_table(text):
    with pytest.raises(ValueError, match="schema.table|backquote"):
        split_table(text)


name = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=12)


@given(name, name)
def test_quote_then_split_gives_the_names_back(schema, table):
    assert split_table(quote_table(schema, table)) == (schema, table)
