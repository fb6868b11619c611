"""The 7-part namespace: str() and parse()."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ums.errors import BadNamespaceError
from ums.namespace import Namespace


@pytest.mark.parametrize(
    ("namespace", "text"),
    [
        (Namespace("mysql", "demo", "shop", "orders", 3), "mysql.demo.shop.orders.3.0.0"),
        (Namespace("mysql", "db1", "schema1", "testtable", 5), "mysql.db1.schema1.testtable.5.0.0"),
        (
            Namespace("mysql", "demo", "shop", "orders", 0, "0", "orders_07"),
            "mysql.demo.shop.orders.0.0.orders_07",
        ),
        (Namespace("mysql", "demo!topo", "shop", "orders", 2, "0", "*"), "mysql.demo!topo.shop.orders.2.0.*"),
    ],
)
def test_str_and_parse_are_inverse(namespace, text):
    assert str(namespace) == text
    assert Namespace.parse(text) == namespace


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("mysql.demo.shop.orders.3.0", "7 dot-separated parts, got 6"),
        ("mysql.demo.shop.orders.3.0.0.0", "got 8"),
        ("mysql.demo.shop.orders.v3.0.0", "version 'v3'"),
        ("mysql.demo.shop.orders.-1.0.0", "version '-1'"),
        ("mysql..shop.orders.3.0.0", "ds_alias ''"),
        ("mysql.demo.shop.orders.3..0", "db_partition ''"),
        ("", "got 1"),
    ],
)
def test_parse_rejects_bad_namespaces_naming_them(text, reason):
    with pytest.raises(BadNamespaceError, match=reason) as info:
        Namespace.parse(text)
    assert repr(text) in str(info.value)
    assert info.value.code == "UMS_BAD_NAMESPACE"


@pytest.mark.parametrize(
    "kwargs",
    [
        {"version": -1},
        {"version": True},
        {"version": "3"},
        {"schema": ""},
        {"table": None},
    ],
)
def test_constructor_validates_parts(kwargs):
    parts = {"ds_type": "mysql", "ds_alias": "demo", "schema": "shop", "table": "orders", "version": 1}
    with pytest.raises(BadNamespaceError, match="namespace"):
        Namespace(**{**parts, **kwargs})


part = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1)


@given(part, part, part, part, st.integers(0, 10**6), part, part)
def test_parse_of_str_round_trips(ds_type, alias, schema, table, version, db_part, table_part):
    namespace = Namespace(ds_type, alias, schema, table, version, db_part, table_part)
    assert Namespace.parse(str(namespace)) == namespace


@pytest.mark.parametrize(
    ("table", "text"),
    [
        ("t.dot", "mysql.demo.shop.t%2Edot.0.0.0"),
        ("100%", "mysql.demo.shop.100%25.0.0.0"),
        ("a%2Eb", "mysql.demo.shop.a%252Eb.0.0.0"),
        (".", "mysql.demo.shop.%2E.0.0.0"),
    ],
)
def test_dots_and_percents_in_names_are_escaped_so_the_text_keeps_seven_parts(table, text):
    namespace = Namespace("mysql", "demo", "shop", table, 0)
    assert str(namespace) == text
    assert len(text.split(".")) == 7
    assert Namespace.parse(text) == namespace
