"""dbusclient.replica_keys: the replica's key columns from the source's declarations, exact or refused.

Table-driven: each declaration's column type per target (MariaDB, MySQL 8, PostgreSQL), and the keys
refused at the targets' limits (the boundaries measured on MariaDB 10.11: VARCHAR(768) utf8mb4 is a
primary key, 769 is not, 767 with an INT is, 766 with a DECIMAL(20,0) is not; on PostgreSQL 673 4-byte
characters are a key's index row, 674 are not). With hypothesis: any key
of any declared columns is either refused, naming the replica and a column of the key, or made of exact
forms only (NO PAD binary collations, VARBINARY, PostgreSQL's "C") that fit the target's limit, and it is
refused exactly when the largest key the source could hold does not fit.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from sqlalchemy.dialects import mysql, postgresql

from dbusclient.replica_keys import (
    MARIADB_KEY_BYTES,
    MARIADB_MAXLEN,
    POSTGRESQL_KEY_BYTES,
    UTF8_MAXLEN,
    KeyRefused,
    SourceColumn,
    key_lengths,
    key_types,
)
from ums.types import UmsType, ums_type_for

DIALECTS = {"mariadb": mysql.dialect(), "mysql": mysql.dialect(), "postgresql": postgresql.dialect()}
NOPAD = "CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin"


def derive(dialect: str, *columns: tuple[str, str, str | None]) -> dict[str, str]:
    """The compiled key types of columns (name, column_type, charset) on ``dialect``."""
    declared = {n: SourceColumn(n, t, cs, f"{cs}_general_ci" if cs else None) for n, t, cs in columns}
    types = {n: ums_type_for(t) for n, t, _ in columns}
    out = key_types("orders", tuple(declared), types, dialect, declared)
    return {n: t.compile(dialect=DIALECTS[dialect]) for n, t in out.items()}


@pytest.mark.parametrize(
    ("column_type", "charset", "mariadb", "mysql8", "pg"),
    [
        (
            "varchar(300)",
            "utf8mb4",
            f"VARCHAR(300) {NOPAD}",
            "VARCHAR(300) CHARACTER SET utf8mb4 COLLATE utf8mb4_0900_bin",
            'TEXT COLLATE "C"',
        ),
        (
            "char(10)",
            "latin1",
            "VARCHAR(10) CHARACTER SET latin1 COLLATE latin1_nopad_bin",
            "VARCHAR(10) CHARACTER SET utf8mb4 COLLATE utf8mb4_0900_bin",
            'TEXT COLLATE "C"',
        ),
        (
            "varchar(20)",
            "utf8mb3",
            "VARCHAR(20) CHARACTER SET utf8mb3 COLLATE utf8mb3_nopad_bin",
            "VARCHAR(20) CHARACTER SET utf8mb4 COLLATE utf8mb4_0900_bin",
            'TEXT COLLATE "C"',
        ),
        (
            "varchar(20)",
            "big5",
            f"VARCHAR(20) {NOPAD}",  # a character set not listed: utf8mb4
            "VARCHAR(20) CHARACTER SET utf8mb4 COLLATE utf8mb4_0900_bin",
            'TEXT COLLATE "C"',
        ),
        (
            "enum('a','bbb')",
            "utf8mb4",
            f"VARCHAR(3) {NOPAD}",
            "VARCHAR(3) CHARACTER SET utf8mb4 COLLATE utf8mb4_0900_bin",
            'TEXT COLLATE "C"',
        ),
        (
            "tinytext",
            "utf8mb4",
            f"VARCHAR(255) {NOPAD}",
            "VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_0900_bin",
            'TEXT COLLATE "C"',
        ),
        (
            "uuid",
            None,
            f"VARCHAR(36) {NOPAD}",
            "VARCHAR(36) CHARACTER SET utf8mb4 COLLATE utf8mb4_0900_bin",
            'TEXT COLLATE "C"',
        ),
        ("varbinary(16)", None, "VARBINARY(16)", "VARBINARY(16)", "BYTEA"),
        ("binary(16)", None, "VARBINARY(16)", "VARBINARY(16)", "BYTEA"),
        ("int(11)", None, "INTEGER", "INTEGER", "INTEGER"),
        ("bigint(20) unsigned", None, "NUMERIC(20, 0)", "NUMERIC(20, 0)", "NUMERIC(20, 0)"),
        ("datetime(3)", None, "DATETIME(6)", "DATETIME(6)", "TIMESTAMP(6) WITHOUT TIME ZONE"),
    ],
)
def test_a_key_column_takes_the_sources_length_in_an_exact_form(column_type, charset, mariadb, mysql8, pg):
    column = ("k", column_type, charset)
    assert derive("mariadb", column) == {"k": mariadb}
    assert derive("mysql", column) == {"k": mysql8}
    assert derive("postgresql", column) == {"k": pg}


def test_keys_that_differ_by_trailing_spaces_or_case_never_get_a_pad_space_or_folding_collation():
    for charset in MARIADB_MAXLEN:
        (made,) = derive("mariadb", ("k", "varchar(10)", charset)).values()
        assert made.endswith(f"COLLATE {charset}_nopad_bin"), made


def test_an_undeclared_string_key_takes_what_the_rest_of_the_key_leaves():
    types = {"k": UmsType.STRING, "n": UmsType.INT, "j": UmsType.STRING}
    out = key_types("orders", ("k", "n", "j"), types, "mariadb")
    assert [out[c].compile(dialect=DIALECTS["mariadb"]) for c in ("k", "n", "j")] == [
        f"VARCHAR(383) {NOPAD}",  # (3072 - 4) / 2 bytes each, 4 a character
        "INTEGER",
        f"VARCHAR(383) {NOPAD}",
    ]
    pg = key_types("orders", ("k",), {"k": UmsType.STRING}, "postgresql")
    assert pg["k"].compile(dialect=DIALECTS["postgresql"]) == 'TEXT COLLATE "C"'


@pytest.mark.parametrize(
    ("dialect", "columns"),
    [
        ("mariadb", [("k", "varchar(768)", "utf8mb4")]),
        ("mariadb", [("k", "varchar(767)", "utf8mb4"), ("n", "int(11)", None)]),
        ("mariadb", [("k", "varchar(3072)", "latin1")]),
        ("mariadb", [("k", "varchar(1024)", "utf8mb3")]),
        ("mariadb", [("k", "varchar(384)", "utf8mb4"), ("j", "varchar(384)", "utf8mb4")]),
        ("mariadb", [("k", "varbinary(3072)", None)]),
        ("mariadb", [("k", "datetime(6)", None), ("j", "varchar(766)", "utf8mb4")]),
        ("postgresql", [("k", "varchar(673)", "utf8mb4")]),
        (
            "postgresql",
            [("k", "varchar(334)", "utf8mb4"), ("n", "int", None), ("j", "varchar(333)", "utf8mb4")],
        ),
        (
            "postgresql",
            [("k", "varchar(300)", "utf8mb4"), ("b", "varchar(10)", "utf8mb4"), ("n", "int", None)],
        ),
    ],
)
def test_a_key_at_the_targets_limit_is_made(dialect, columns):
    assert set(derive(dialect, *columns)) == {c[0] for c in columns}


@pytest.mark.parametrize(
    ("dialect", "columns", "column"),
    [
        ("mariadb", [("k", "varchar(769)", "utf8mb4")], "k"),
        ("mariadb", [("k", "varchar(768)", "utf8mb4"), ("n", "int(11)", None)], "k"),
        ("mariadb", [("n", "decimal(20,0)", None), ("j", "varchar(766)", "utf8mb4")], "j"),
        ("mariadb", [("k", "varchar(385)", "utf8mb4"), ("j", "varchar(384)", "utf8mb4")], "k"),
        ("mariadb", [("note", "text", "utf8mb4")], "note"),
        ("mariadb", [("doc", "json", None)], "doc"),
        ("mariadb", [("k", "varbinary(3073)", None)], "k"),
        ("postgresql", [("k", "varchar(700)", "utf8mb4")], "k"),
        ("postgresql", [("k", "varchar(674)", "utf8mb4")], "k"),
        ("postgresql", [("k", "varchar(1400)", "latin1")], "k"),  # 2 bytes a character in UTF-8
        ("mysql", [("k", "varchar(1000)", "latin1")], "k"),  # MySQL 8 keeps it as utf8mb4
        ("mariadb", [("k", "point", None)], "k"),  # a type whose longest value is not known
    ],
)
def test_a_key_the_target_cannot_hold_is_refused_naming_table_and_column(dialect, columns, column):
    with pytest.raises(KeyRefused, match=rf"replica orders: key column '{column}'") as refused:
        derive(dialect, *columns)
    assert refused.value.code == "CLIENT_SINK_KEY"


STRING_TYPES = st.sampled_from(["varchar", "char", "varbinary", "binary"])
CHARSETS = st.sampled_from([*MARIADB_MAXLEN, "big5"])
FIXED = st.sampled_from(["int", "bigint", "double", "date", "datetime(6)", "decimal(65,30)"])


@st.composite
def key_columns(draw) -> list[tuple[str, str, str | None]]:
    out = []
    for i in range(draw(st.integers(1, 4))):
        if draw(st.booleans()):
            base = draw(STRING_TYPES)
            out.append((f"c{i}", f"{base}({draw(st.integers(1, 4000))})", draw(CHARSETS)))
        else:
            out.append((f"c{i}", draw(FIXED), None))
    return out


def largest(dialect: str, columns: list[tuple[str, str, str | None]]) -> int:
    """The bytes of the largest key the source could hold, in the target's index (an independent model)."""
    pg = dialect == "postgresql"
    fixed = {"int": 4, "bigint": 16 if pg else 9, "double": 8, "date": 4 if pg else 3, "datetime(6)": 8}
    total = 8 if pg else 0  # PostgreSQL: the index row's header
    for _, column_type, charset in columns:
        if "(" in column_type and column_type.split("(")[0] in ("varchar", "char", "varbinary", "binary"):
            n = int(column_type.split("(")[1].rstrip(")"))
            per = 1 if "binary" in column_type else (UTF8_MAXLEN if pg else MARIADB_MAXLEN).get(charset, 4)
            if dialect == "mysql" and "binary" not in column_type:
                per = 4
            size = n * per + (4 if pg else 0)  # PostgreSQL: a varlena's header
        else:
            size = fixed.get(column_type, 48 if pg else 30)
        total += (size + 7) // 8 * 8 if pg else size  # PostgreSQL aligns each column to 8
    return total


@given(key_columns(), st.sampled_from(["mariadb", "mysql", "postgresql"]))
def test_any_key_is_made_exact_within_the_limit_or_refused_by_name(columns, dialect):
    limit = POSTGRESQL_KEY_BYTES if dialect == "postgresql" else MARIADB_KEY_BYTES
    names = [c[0] for c in columns]
    try:
        made = derive(dialect, *columns)
    except KeyRefused as e:
        assert largest(dialect, columns) > limit, str(e)
        assert "replica orders: key column '" in str(e) and str(e).split("'")[1] in names
        return
    assert largest(dialect, columns) <= limit
    assert list(made) == names
    for text in made.values():
        if "VARCHAR" in text:
            assert text.endswith(("_nopad_bin", "utf8mb4_0900_bin")), text
        if text.startswith("TEXT"):
            assert text == 'TEXT COLLATE "C"'


@pytest.mark.parametrize(
    ("dialect", "columns", "lengths"),
    [
        ("mariadb", [("k", "varchar(300)", "utf8mb4"), ("n", "int", None)], (300, None)),
        ("postgresql", [("k", "varchar(300)", "utf8mb4"), ("b", "varbinary(16)", None)], (300, 16)),
        ("mariadb", [("k", "enum('a','bbb')", "utf8mb4")], (3,)),
    ],
)
def test_the_longest_key_value_the_sink_takes_per_column(dialect, columns, lengths):
    declared = {n: SourceColumn(n, t, cs) for n, t, cs in columns}
    types = {n: ums_type_for(t) for n, t, _ in columns}
    assert key_lengths("orders", tuple(declared), types, dialect, declared) == lengths
    undeclared = key_lengths("orders", ("k",), {"k": UmsType.STRING}, dialect)
    assert undeclared == ((768,) if dialect == "mariadb" else (None,))
