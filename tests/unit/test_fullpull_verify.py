"""verify's pure core: canonical values, rendering source rows, masking, and the compare by key."""

from __future__ import annotations

from datetime import datetime, timedelta
from decimal import Decimal

import pytest
from pydantic import SecretStr

from dbuslib.config import MaskRule
from fullpuller.canon import NULL, canonical, canonicalizer, digest
from fullpuller.verify import (
    VerifyError,
    compare,
    kept_by_design,
    layout,
    report,
    snapshot_pairs,
    source_renderer,
    success_marker,
)
from ums.masking import compile_rules
from ums.types import ColumnSpec, UmsType

T = UmsType


@pytest.mark.parametrize(
    ("ums_type", "a", "b"),
    [
        (T.INT, 42, "42"),
        (T.LONG, "18446744073709551615", 18446744073709551615),
        (T.FLOAT, 1.1, 1.100000023841858),  # a FLOAT column: equal at 32-bit precision
        (T.DOUBLE, 1e22, "1.0E22"),  # Spark's JSON text of 1e22
        (T.DOUBLE, -0.0, 0.0),
        (T.DECIMAL, "19.90", "19.9"),
        (T.DECIMAL, "0.000", "0"),
        (T.JSONOBJECT, '{"b":1,"a":[1,null]}', '{"a": [1, null], "b": 1}'),
    ],
)
def test_equal_by_type(ums_type, a, b):
    assert canonical(ums_type, a) == canonical(ums_type, b)


@pytest.mark.parametrize(
    ("ums_type", "a", "b"),
    [
        (T.DOUBLE, 1.1, 1.100000023841858),  # a DOUBLE column keeps 64 bits
        (T.STRING, "19.90", "19.9"),  # text compares as text
        (T.DATETIME, "2024-01-02 03:04:05", "2024-01-02 03:04:05.000"),
        (T.INT, 0, None),  # NULL is not 0
        (T.STRING, "", None),  # nor the empty string
    ],
)
def test_different_by_type(ums_type, a, b):
    assert canonical(ums_type, a) != canonical(ums_type, b)


def test_a_masked_text_in_a_numeric_column_compares_as_text():
    assert canonical(T.INT, "abc") == "abc"


def test_digest_does_not_confuse_column_boundaries():
    assert digest(("a\x1f", "b")) != digest(("a", "\x1fb"))
    assert digest(("ab", "")) != digest(("a", "b"))


COLUMNS = (
    ColumnSpec("id", "bigint(20) unsigned", False),
    ColumnSpec("price", "float"),
    ColumnSpec("amount", "decimal(10,2)"),
    ColumnSpec("at", "datetime(3)"),
    ColumnSpec("flags", "bit(3)"),
    ColumnSpec("doc", "json"),
    ColumnSpec("took", "time"),
    ColumnSpec("phone", "varchar(20)"),
)


def test_a_source_row_and_its_snapshot_row_hash_the_same():
    lay, mask = layout(COLUMNS, ("id",), "shop", "orders")
    assert mask is None
    render = source_renderer(lay.columns)
    # as pymysql gives it ...
    source = (
        7,
        1.1,
        Decimal("19.90"),
        datetime(2024, 1, 2, 3, 4, 5, 250000),  # noqa: DTZ001 (pymysql gives a DATETIME naive)
        b"\x05",
        '{"k": [1, null]}',
        timedelta(hours=51),
        "555",
    )
    # ... and as reconcile writes it (long and float typed, the rest UMS text)
    snapshot = (
        7,
        1.100000023841858,
        "19.90",
        "2024-01-02 03:04:05.250",
        "5",
        '{"k":[1,null]}',
        "51:00:00",
        "555",
    )
    [(key_a, hash_a)] = lay.pairs([render(source)])
    [(key_b, hash_b)] = lay.pairs([snapshot])
    assert (key_a, hash_a) == (key_b, hash_b) == ((("7",), hash_a))


def test_masked_columns_are_masked_on_the_source_side_before_comparing():
    rules = {
        "shop.*": {"phone": MaskRule(type="sha256", salt=SecretStr("s")), "amount": MaskRule(type="default")}
    }
    lay, mask = layout(COLUMNS, ("id",), "shop", "orders", compile_rules(rules))
    assert mask is not None and lay.masked
    assert lay.types[1:3] == (T.FLOAT, T.DECIMAL) and lay.types[-1] is T.STRING
    wire = source_renderer(lay.columns, mask)((7, None, Decimal("19.90"), None, None, None, None, "555"))
    assert wire[2] == "0" and wire[-1] not in ("555", None) and len(wire[-1]) == 64
    snapshot = (7, None, "0", None, None, None, None, wire[-1])
    assert list(lay.pairs([wire])) == list(lay.pairs([snapshot]))


def test_layout_needs_the_key_among_the_columns():
    with pytest.raises(VerifyError, match="primary key"):
        layout(COLUMNS, ("nope",), "shop", "orders")
    with pytest.raises(VerifyError, match="primary key"):
        layout(COLUMNS, (), "shop", "orders")


def _pairs(rows):
    canon = canonicalizer([T.LONG, T.STRING])
    return [((canon(r)[0],), digest(canon(r))) for r in rows]


def test_compare_finds_each_kind_of_difference():
    source = _pairs([(1, "a"), (2, "b"), (3, "c"), (4, None)])
    snapshot = _pairs([(1, "a"), (2, "B"), (4, None), (5, "e")])
    c = compare(snapshot, source, key_names=("id",))
    assert (c.missing, c.extra, c.different) == ((("3",),), (("5",),), (("2",),))
    assert (c.missing_count, c.extra_count, c.different_count) == (1, 1, 1)
    assert (c.source_rows, c.snapshot_rows, c.equal) == (4, 4, False)
    assert report(c, "shop.t") == [
        "missing in snapshot: id=3",
        "extra in snapshot: id=5",
        "different: id=2",
        "shop.t: 4 source rows, 4 snapshot rows: 1 missing in snapshot, 1 extra in snapshot, 1 different",
    ]


def test_compare_equal_and_order_does_not_matter():
    rows = [(i, str(i)) for i in range(50)]
    c = compare(_pairs(rows), reversed(_pairs(rows)))
    assert c.equal and c.source_rows == c.snapshot_rows == 50
    assert report(c, "shop.t")[-1] == "shop.t: 50 source rows, 50 snapshot rows: equal, 0 differences"


def test_compare_lists_at_most_limit_keys_but_counts_all():
    c = compare([], _pairs([(i, "x") for i in range(30)]), limit=3, key_names=("id",))
    assert len(c.missing) == 3 and c.missing_count == 30
    assert report(c, "t")[3] == "missing in snapshot: ... and 27 more"


def test_a_column_set_difference_is_not_equal():
    c = compare([], [], only_in_source=("added",))
    assert not c.equal
    assert report(c, "t")[0] == "columns only in source: ['added'], only in snapshot: []"


@pytest.mark.parametrize(
    ("only_replica", "made", "kept", "others"),
    [
        (("gone",), ("id", "v", "gone"), ("gone",), ()),  # dropped by a version, kept by default
        (("added_by_hand",), ("id", "v"), (), ("added_by_hand",)),  # not the replicate's: a difference
        (("gone", "extra"), ("gone",), ("gone",), ("extra",)),
        ((), ("gone",), (), ()),
    ],
)
def test_a_replica_column_kept_by_design_is_listed_not_a_difference(only_replica, made, kept, others):
    assert kept_by_design(only_replica, made) == (kept, others)
    c = compare([], [], only_in_snapshot=others, kept=kept)
    assert c.equal is not bool(others)
    lines = report(c, "shop.t")
    said = f"columns the replica keeps, dropped on the source (not compared): {list(kept)}"
    assert (said in lines) is bool(kept)
    assert lines[-1].endswith("equal, 0 differences") is not bool(others)


def test_null_key_shows_as_null():
    c = compare([], [((NULL,), b"x")], key_names=("id",))
    assert report(c, "t")[0] == "missing in snapshot: id=NULL"


def test_a_snapshot_with_success_and_no_parts_says_where_the_parts_went(tmp_path):
    """What reconcile on a cluster master with a local --out left: the executors' parts on their disks,
    the driver's _SUCCESS here."""
    lay, _ = layout(COLUMNS, ("id",), "shop", "orders")
    snapshot = tmp_path / "orders.parquet"
    snapshot.mkdir()
    with pytest.raises(VerifyError, match=r"no Parquet part files$"):
        snapshot_pairs(str(snapshot), lay)
    (snapshot / "_SUCCESS").write_bytes(b"")
    assert success_marker(str(snapshot)) and success_marker(f"file://{snapshot}")
    with pytest.raises(VerifyError) as e:
        snapshot_pairs(str(snapshot), lay)
    assert "no Parquet part files but a _SUCCESS marker: written on the executors' local disks?" in str(
        e.value
    )
    assert "use a shared filesystem for reconcile's --out" in str(e.value).lower()


def test_no_success_marker_where_there_is_none(tmp_path):
    assert not success_marker(str(tmp_path / "nowhere"))
    assert not success_marker(str(tmp_path))


def test_a_snapshot_that_is_not_there_says_so(tmp_path):
    lay, _ = layout(COLUMNS, ("id",), "shop", "orders")
    missing = tmp_path / "nowhere.parquet"
    with pytest.raises(VerifyError, match=r"nowhere.parquet: no such file or folder \(`dbus reconcile"):
        snapshot_pairs(str(missing), lay)
