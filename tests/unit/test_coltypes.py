"""dbuslib.coltypes: which columns the extractor asks the catalog about, and the header's ``types``."""

from __future__ import annotations

import pytest

from dbuslib.coltypes import TypeCache, candidates, catalog_lookup, types_of
from dbuslib.errors import EndpointError

STRING, VARCHAR, BLOB = 254, 15, 252
COLUMNS = [
    ("id", 3, None, 0),
    ("a", STRING, "binary", 4),
    ("b", STRING, "binary", 16),
    ("c", STRING, "binary", 16),
    ("d", STRING, "binary", 8),
    ("e", STRING, "utf8mb4", 16),
    ("f", VARCHAR, "binary", 16),
    ("g", BLOB, "binary", 16),
]


def test_only_binary_4_and_16_columns_are_candidates():
    assert candidates(COLUMNS) == (("a", 4), ("b", 16), ("c", 16))


@pytest.mark.parametrize(
    ("catalog", "want"),
    [
        ([("a", "inet4"), ("b", "inet6"), ("c", "uuid")], {"a": "inet4", "b": "inet6", "c": "uuid"}),
        ([("a", "INET4"), ("b", "UUID")], {"a": "inet4", "b": "uuid"}),
        (
            [("a", "inet6"), ("b", "inet4")],
            {},
        ),  # the catalog's type is stored in another length: not this column
        ([("e", "uuid"), ("zz", "inet6")], {}),  # not a candidate / not in the table map
        ([], {}),
    ],
)
def test_types_keep_catalog_types_stored_as_the_binlog_column(catalog, want):
    assert types_of(candidates(COLUMNS), catalog) == want


def test_the_catalog_is_asked_once_per_table_shape_and_again_after_a_ddl():
    asked = []

    def lookup(schema, table):
        asked.append((schema, table))
        return [("b", "inet6")]

    cache = TypeCache(lookup)
    assert cache.types("s", "t", COLUMNS) == {"b": "inet6"}
    assert cache.types("s", "t", COLUMNS) == {"b": "inet6"}
    assert cache.types("s", "plain", [("id", 3, None, 0)]) == {}  # no candidate: never asked
    assert asked == [("s", "t")]
    cache.forget("s", "other")
    cache.types("s", "t", COLUMNS)
    assert len(asked) == 1
    cache.forget("s", "t")
    cache.types("s", "t", COLUMNS)
    cache.forget("s", "*")  # a DDL of the schema
    cache.types("s", "t", COLUMNS)
    assert len(asked) == 3


class _Cursor:
    def __init__(self, conn):
        self.conn = conn

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def execute(self, sql, args):
        if self.conn.broken:
            msg = "server has gone away"
            raise OSError(msg)
        self.conn.queries.append(args)

    def fetchall(self):
        return [("b", "inet6")]


class _Conn:
    def __init__(self, broken):
        self.broken, self.queries, self.closed = broken, [], False

    def cursor(self):
        return _Cursor(self)

    def close(self):
        self.closed = True


def test_a_dropped_connection_is_made_again_once():
    made = []

    def connect():
        made.append(_Conn(broken=len(made) == 0))
        return made[-1]

    lookup = catalog_lookup(connect)
    assert lookup("s", "t") == [("b", "inet6")]
    assert len(made) == 2 and made[0].closed and made[1].queries == [("s", "t")]
    assert lookup("s", "u") == [("b", "inet6")] and len(made) == 2  # kept open


def test_a_second_failure_is_a_retriable_endpoint_error():
    lookup = catalog_lookup(lambda: _Conn(broken=True))
    with pytest.raises(EndpointError, match="s.t .*gone away") as info:
        lookup("s", "t")
    assert info.value.retriable


def test_close_closes_the_connection_and_the_next_lookup_connects_again():
    made = []
    lookup = catalog_lookup(lambda: made.append(_Conn(broken=False)) or made[-1])
    cache = TypeCache(lookup)
    cache.types("s", "t", COLUMNS)
    cache.close()
    assert made[0].closed
    cache.close()  # twice is fine
    lookup("s", "t")
    assert len(made) == 2
