"""fullpuller.catalog and fullpuller.split.plan on MariaDB: the catalog as information_schema gives it, and
plans whose shards hold every row of the table exactly once."""

from __future__ import annotations

from collections import Counter
from decimal import Decimal

import pytest

from fullpuller.catalog import primary_keys, table_info
from fullpuller.render import SESSION_SQL
from fullpuller.split import SplitError, SplitPlan, plan
from ums.types import ColumnSpec

pytestmark = pytest.mark.integration


def test_columns_keys_and_indexes_come_from_information_schema(writer_db):
    db, name = writer_db
    with db.cursor() as cur:
        cur.execute(
            "CREATE TABLE t (b VARCHAR(5) NOT NULL, a INT NOT NULL, c DATETIME(3), d CHAR(2) CHARACTER SET"
            " latin1, e INT, PRIMARY KEY (b, a), UNIQUE KEY u2 (e, d), UNIQUE KEY u1 (d),"
            " KEY k (c, e)) DEFAULT CHARSET=utf8mb4 COLLATE utf8mb4_unicode_ci"
        )
    info = table_info(db, name, "t")
    assert info.columns == (
        ColumnSpec("b", "varchar(5)", False),
        ColumnSpec("a", "int(11)", False),
        ColumnSpec("c", "datetime(3)", True),
        ColumnSpec("d", "char(2)", True),
        ColumnSpec("e", "int(11)", True),
    )
    assert info.primary_key == ("b", "a")
    assert info.unique_keys == (("d",), ("e", "d"))
    assert info.indexes == (("c", "e"),)
    assert info.collation("b") == ("utf8mb4", "utf8mb4_unicode_ci")
    assert info.collation("d") == ("latin1", "latin1_swedish_ci")
    assert info.collation("a") is None and info.column("B") == info.columns[0]


def test_table_without_keys_and_missing_table(writer_db, source):
    db, name = writer_db
    with db.cursor() as cur:
        cur.execute("CREATE TABLE bare (x INT)")
        cur.execute("CREATE TABLE keyed (k1 INT, k2 INT, PRIMARY KEY (k2, k1))")
    info = table_info(db, name, "bare")
    assert (info.primary_key, info.unique_keys, info.indexes) == ((), (), ())
    assert table_info(db, name, "nope") is None
    found = primary_keys(source.mysql, [(name, "bare"), (name, "nope"), (name, "keyed")])
    assert found == {(name, "bare"): (), (name, "nope"): None, (name, "keyed"): ("k2", "k1")}


# ---- fullpuller.split.plan on MariaDB: every row lands in exactly one shard ---------------------------


def setup(db, ddl: str, rows: list[tuple]) -> None:
    with db.cursor() as cur:
        for sql in SESSION_SQL:
            cur.execute(sql)
        cur.execute(ddl)
        if rows:
            marks = ",".join(["%s"] * len(rows[0]))
            cur.executemany(f"INSERT INTO t VALUES ({marks})", rows)


def pulled(db, name: str, shards, where: str | None = None) -> Counter:
    """Rows of every shard (with the request's WHERE), counted: each must come exactly once."""
    rows: Counter = Counter()
    with db.cursor() as cur:
        for shard in shards:
            extra = f" AND ({where})" if where else ""
            cur.execute(f"SELECT * FROM `{name}`.t WHERE ({shard.where}){extra}")
            rows.update(cur.fetchall())
    return rows


def check(db, name: str, *, where: str | None = None, **kwargs) -> SplitPlan:
    info = table_info(db, name, "t")
    result = plan(db, info, where=where, **kwargs)
    with db.cursor() as cur:
        cur.execute(f"SELECT * FROM t{f' WHERE ({where})' if where else ''}")
        expected = Counter(cur.fetchall())
    assert pulled(db, name, result.shards, where) == expected
    assert result.count == sum(expected.values())
    assert [s.index for s in result.shards] == list(range(len(result.shards)))
    return result


def test_int_primary_key_gives_equal_width_ranges(writer_db):
    db, name = writer_db
    setup(db, "CREATE TABLE t (id INT PRIMARY KEY, v INT)", [(i * 3, i) for i in range(-50, 950)])
    result = check(db, name, shard_size=100)
    assert (result.columns, result.source, len(result.shards)) == (("id",), "primary", 10)
    assert result.shards[0].where == "`id` < 150" and result.shards[-1].where.startswith("`id` >= ")


def test_bigint_unsigned_at_the_extremes(writer_db):
    db, name = writer_db
    keys = [0, 1, 2, 2**32, 2**63 - 1, 2**63, 2**64 - 3, 2**64 - 2, 2**64 - 1]
    setup(db, "CREATE TABLE t (id BIGINT UNSIGNED PRIMARY KEY)", [(k,) for k in keys])
    result = check(db, name, shard_size=2)
    assert len(result.shards) == 5 and result.shards[-1].lower is not None


def test_negative_ints_in_a_nullable_index_get_a_null_shard(writer_db):
    db, name = writer_db
    rows = [(i, None if i % 7 == 0 else -i * 1000) for i in range(1, 200)]
    setup(db, "CREATE TABLE t (x INT, n INT, KEY (n))", rows)
    result = check(db, name, shard_size=30)
    assert (result.columns, result.source) == (("n",), "index")
    assert result.shards[-1].where == "`n` IS NULL"


def test_decimal_key_is_cut_at_boundary_rows(writer_db):
    db, name = writer_db
    setup(
        db,
        "CREATE TABLE t (d DECIMAL(20,5) PRIMARY KEY)",
        [(Decimal(i) / 7,) for i in range(-60, 60)] + [(Decimal("-999999999999999.99999"),)],
    )
    result = check(db, name, shard_size=13)
    assert len(result.shards) == 10 and result.shards[1].lower.startswith("-")


def test_case_insensitive_varchar_with_non_ascii(writer_db):
    db, name = writer_db
    words = ["a", "A", "á", "b", "B ", "é", "E", "e", "z😀", "Z😀", "", " ", "ß", "ss", "x'y", "\\", "ñ", "N"]
    rows = [(i, w, w.upper().replace("😀", "?")) for i, w in enumerate(words * 3)] + [(100, None, None)]
    setup(
        db,
        "CREATE TABLE t (i INT, s VARCHAR(10) COLLATE utf8mb4_general_ci, l VARCHAR(10) CHARACTER SET"
        " latin1, KEY (s), KEY (l)) DEFAULT CHARSET=utf8mb4",
        rows,
    )
    result = check(db, name, split_col="s", shard_size=4)
    assert "COLLATE utf8mb4_general_ci" in result.shards[1].where
    assert len(result.shards) > 5
    latin = check(db, name, shard_size=5)  # indexes are taken in name order: l, then s
    assert latin.columns == ("l",)
    assert "_latin1 X'" in latin.shards[1].where


def test_binary_and_varbinary_keys(writer_db):
    db, name = writer_db
    blobs = [b"", b"\x00", b"\x00\x00", b"'", b"\xff", b"\xff\xff\xff", b"a", b"A", b"\x80abc", b"\\"]
    setup(
        db,
        "CREATE TABLE t (vb VARBINARY(8) PRIMARY KEY, bn BINARY(4), KEY (bn))",
        [(b, b[:4]) for b in blobs],
    )
    assert check(db, name, shard_size=3).source == "primary"
    assert len(check(db, name, split_col="bn", shard_size=2).shards) > 3


def test_composite_int_varchar_primary_key(writer_db):
    db, name = writer_db
    rows = [(i % 5, w, i) for i, w in enumerate(["a", "b", "é", "Z", "", "x y", "a b", "c"] * 5)]
    setup(
        db,
        "CREATE TABLE t (a INT, b VARCHAR(5), v INT, PRIMARY KEY (a, b))"
        " DEFAULT CHARSET=utf8mb4 COLLATE utf8mb4_bin",
        list({r[:2]: r for r in rows}.values()),
    )
    result = check(db, name, shard_size=4)
    assert (result.columns, len(result.shards)) == (("a", "b"), 10)
    assert " OR (`a` = " in result.shards[3].where


def test_composite_requested_with_nullable_columns(writer_db):
    db, name = writer_db
    rows = [(i, None if i % 4 == 0 else i % 3, None if i % 5 == 0 else f"k{i % 6}") for i in range(60)]
    setup(db, "CREATE TABLE t (id INT PRIMARY KEY, a INT, b VARCHAR(5))", rows)
    result = check(db, name, split_col="a, b", shard_size=7)
    assert result.shards[-1].where == "(`a` IS NULL OR `b` IS NULL)"


def test_datetime_and_enum_keys(writer_db):
    db, name = writer_db
    rows = [
        (i, f"2024-01-{1 + i % 28:02d} 00:00:{i % 60:02d}.{i:06d}", ["small", "medium", "large"][i % 3])
        for i in range(50)
    ]
    setup(
        db,
        "CREATE TABLE t (id INT PRIMARY KEY, d DATETIME(6), e ENUM('small','medium','large'),"
        " KEY (d), KEY (e))",
        rows,
    )
    assert len(check(db, name, split_col="d", shard_size=6).shards) == 10
    assert len(check(db, name, split_col="e", shard_size=10).shards) == 4  # 3 values, plus NULLs


def test_table_without_primary_key_uses_an_index_or_is_one_shard(writer_db):
    db, name = writer_db
    setup(db, "CREATE TABLE t (x INT, y INT)", [(i % 10, i) for i in range(100)])
    bare = check(db, name, shard_size=10)
    assert (bare.source, [s.where for s in bare.shards]) == ("none", ["1 = 1"]) and bare.warning
    with db.cursor() as cur:
        cur.execute("ALTER TABLE t ADD KEY (y, x)")
    indexed = check(db, name, shard_size=10)
    assert (indexed.columns, indexed.source, len(indexed.shards)) == (("y",), "index", 11)


def test_empty_table_and_a_where_that_selects_nothing(writer_db):
    db, name = writer_db
    setup(db, "CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(3))", [])
    assert [s.where for s in check(db, name, shard_size=10).shards] == ["1 = 1"]
    with db.cursor() as cur:
        cur.executemany("INSERT INTO t VALUES (%s, %s)", [(i, str(i % 3)) for i in range(100)])
    nothing = check(db, name, shard_size=10, where="v = 'zzz'")
    assert (nothing.count, [s.where for s in nothing.shards]) == (0, ["1 = 1"])
    some = check(db, name, shard_size=10, where="v = '1' OR id > 90")
    assert some.count == 39 and len(some.shards) == 4


def test_shard_size_minus_one_is_one_shard(writer_db):
    db, name = writer_db
    setup(db, "CREATE TABLE t (id INT PRIMARY KEY)", [(i,) for i in range(30)])
    result = check(db, name, shard_size=-1)
    assert (result.columns, result.source, len(result.shards), result.count) == ((), "none", 1, 30)


def test_unknown_split_column_on_a_real_table(writer_db):
    db, name = writer_db
    setup(db, "CREATE TABLE t (id INT PRIMARY KEY)", [])
    with pytest.raises(SplitError) as err:
        plan(db, table_info(db, name, "t"), split_col="nope")
    assert err.value.code == "FULLPULL_BAD_SPLIT_COL"
