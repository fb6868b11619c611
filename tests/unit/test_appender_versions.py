import pytest

from appender.versions import Reason, compatible, on_rows, on_truncate, version_at
from ums import ColumnSpec

V0 = (ColumnSpec("id", "int", False), ColumnSpec("name", "varchar(10)", True))


def cols(*specs):
    return tuple(ColumnSpec(n, t, True) for n, t in specs)


@pytest.mark.parametrize(
    ("new", "same"),
    [
        (cols(("id", "int"), ("name", "varchar(20)")), True),  # longer varchar: string -> string
        (cols(("id", "bigint"), ("name", "varchar(10)")), False),  # int -> long
        (cols(("id", "int"), ("name", "varchar(10)"), ("email", "text")), False),  # added
        (cols(("id", "int")), False),  # dropped
        (cols(("name", "varchar(10)"), ("id", "int")), False),  # reordered: tuples are positional
    ],
)
def test_compatibility_follows_the_original(new, same):
    assert compatible(V0, new) is same


def test_first_rows_open_version_0_and_an_incompatible_change_opens_the_next():
    first = on_rows(None, V0, at=100)
    assert (first.new.version, first.new.reason, first.ends) == (0, Reason.FIRST, None)
    assert on_rows(first.new, cols(("id", "int"), ("name", "varchar(99)")), at=200) is None
    change = on_rows(first.new, cols(("id", "bigint"), ("name", "varchar(10)")), at=300)
    assert (change.new.version, change.new.since, change.ends) == (1, 300, first.new)


def test_truncate_bumps_with_the_same_columns():
    v0 = on_rows(None, V0, at=100).new
    change = on_truncate(v0, at=150)
    assert (change.new.version, change.new.columns, change.new.reason) == (1, V0, Reason.TRUNCATE)
    assert on_truncate(None, at=150) is None


def test_replay_uses_the_version_valid_at_that_position():
    v0 = on_rows(None, V0, at=100).new
    v1 = on_rows(v0, cols(("id", "bigint"), ("name", "varchar(10)")), at=300).new
    history = [v0, v1]
    assert version_at(history, 99) is None
    assert version_at(history, 100) == v0
    assert version_at(history, 299) == v0
    assert version_at(history, 300) == v1
    assert on_rows(v1, V0, at=200) is None  # an old event replayed: served by version_at, no new version


def test_compare_names_added_dropped_and_retyped_columns():
    from appender.versions import compare
    from ums import ColumnSpec

    old = (ColumnSpec("id", "int"), ColumnSpec("a", "varchar(10)"), ColumnSpec("b", "int"))
    new = (ColumnSpec("id", "bigint"), ColumnSpec("a", "varchar(20)"), ColumnSpec("c", "date"))
    assert compare(old, new) == {
        "compatible": False,
        "added": ["c"],
        "dropped": ["b"],
        "changed": [
            {"name": "id", "before": "int", "after": "bigint"},
            {"name": "a", "before": "varchar(10)", "after": "varchar(20)"},
        ],
    }
    assert compare(old, old)["compatible"] is True
