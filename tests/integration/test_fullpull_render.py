"""fullpuller.render on MariaDB: the tuple text MariaDB renders equals ums.values of the same rows.

The reference is ``ums.values.encode_column`` applied to the pymysql SELECT of the same rows, put in the
binlog decoder's form (``as_decoded``: BIT as int, TIMESTAMP aware UTC, SET as a set). Two columns are
read differently for the reference: FLOAT, because the text protocol sends it with 6 digits while the
binlog (and the full pull) has the exact float32 (the reference selects ``CAST(fl AS DOUBLE)``); and
nothing else. Equality is of parsed JSON values, so ``1e16`` and ``1e+16`` are the same number; MariaDB
prints a DOUBLE -0.0 as ``0`` (a JSON number equal to -0.0), noted in render.py.
"""

from __future__ import annotations

import json
import math
import struct
import time
from decimal import Decimal

import pymysql
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_rowdecode_types import COLUMNS, CREATE, MAX_ROW, MIN_ROW, NULL_ROW, ODD_ROW, as_decoded, multi_row_insert

from fullpuller.catalog import table_info
from fullpuller.render import SESSION_SQL, python_columns, select_sql, tuple_text
from ums.types import ColumnSpec
from ums.values import encode_column

pytestmark = pytest.mark.integration


def session(db) -> None:
    with db.cursor() as cur:
        for sql in SESSION_SQL:
            cur.execute(sql)
        cur.execute("SET sql_mode = ''")  # the ODD_ROW zero dates and the invalid ENUM need it


def rendered(db, info, where: str = "1 = 1") -> dict[int, list]:
    with db.cursor() as cur:
        cur.execute(select_sql(info, where) + " ORDER BY id")
        tuples = [json.loads("[" + tuple_text(row) + "]") for row in cur.fetchall()]
    return {t[0]: t for t in tuples}


def reference(db, info) -> dict[int, list]:
    """ums.values of what pymysql SELECTs (FLOAT read exactly as a DOUBLE, as the binlog has it)."""
    exprs = ", ".join(f"CAST(`{c.name}` AS DOUBLE)" if c.name in python_columns(info.columns) else f"`{c.name}`"
                      for c in info.columns)
    with db.cursor() as cur:
        cur.execute(f"SELECT {exprs} FROM every_type ORDER BY id")
        rows = cur.fetchall()
    return {row[0]: [json.loads(json.dumps(encode_column(c, as_decoded(c, v))))
                     for c, v in zip(info.columns, row, strict=True)] for row in rows}


def differences(got: dict[int, list], want: dict[int, list], columns) -> list[str]:
    assert sorted(got) == sorted(want)
    return [f"id={key} {c.name}: rendered {g!r:.80} ums.values {w!r:.80}"
            for key in want for c, g, w in zip(columns, got[key], want[key], strict=True)
            if g != w or type(g) is not type(w) and not isinstance(w, float)]


def test_every_type_renders_as_ums_values(writer_db):
    db, name = writer_db
    session(db)
    with db.cursor() as cur:
        cur.execute(CREATE)
        cur.execute(multi_row_insert(db, [MAX_ROW, MIN_ROW, ODD_ROW, NULL_ROW]))
    info = table_info(db, name, "every_type")
    assert [c.name for c in info.columns] == [n for n, _, _, _ in COLUMNS]
    got, want = rendered(db, info), reference(db, info)
    assert differences(got, want, info.columns) == []
    assert got[1][[n for n, *_ in COLUMNS].index("fl")] == 1.1  # exact float32, shortest repr
    assert got[2][[n for n, *_ in COLUMNS].index("fl")] == -3.1415927


def test_float_columns_are_spliced_in_python_and_other_tables_are_one_column(writer_db):
    db, name = writer_db
    session(db)
    with db.cursor() as cur:
        cur.execute("CREATE TABLE f (id INT PRIMARY KEY, a FLOAT, b VARCHAR(3), c FLOAT, d FLOAT)")
        cur.execute("INSERT INTO f VALUES (1, 0.1, 'x', NULL, 3.4028235e38), (2, NULL, NULL, -1e-45, 0)")
        cur.execute("CREATE TABLE plain (id INT PRIMARY KEY, b VARCHAR(3))")
        cur.execute("INSERT INTO plain VALUES (1, 'x')")
    info = table_info(db, name, "f")
    with db.cursor() as cur:
        cur.execute(select_sql(info, "1 = 1") + " ORDER BY id")
        rows = [tuple_text(r) for r in cur.fetchall()]
        cur.execute(select_sql(table_info(db, name, "plain"), "1 = 1"))
        plain = cur.fetchall()
    assert python_columns(info.columns) == ("a", "c", "d")
    assert rows == ['1,0.1,"x",null,3.4028235e+38', '2,null,null,-1e-45,0.0']
    assert plain == (('1,"x"',),)


def test_json_columns_render_compact_json_text(writer_db):
    """A MySQL JSON column (jsonobject): the value is the compact JSON text, as ums.values writes the
    decoded object. MariaDB's JSON is LONGTEXT, so the spec is forced to ``json`` here. Compared parsed:
    MariaDB's JSON_COMPACT and json.dumps may escape differently."""
    db, name = writer_db
    session(db)
    docs = ['{"k": [1, 2.5, null, true, "😀"], "n": {"x": -1}}', "[]", '"a\\"b"', "{\"e\": \"\\u00e9\\n\"}"]
    with db.cursor() as cur:
        cur.execute("CREATE TABLE j (id INT PRIMARY KEY, js JSON)")
        cur.executemany("INSERT INTO j VALUES (%s, %s)", list(enumerate(docs)))
    info = table_info(db, name, "j")
    info = type(info)(**{**info.__dict__, "columns": (info.columns[0], ColumnSpec("js", "json"))})
    with db.cursor() as cur:
        cur.execute(select_sql(info, "1 = 1") + " ORDER BY id")
        got = [json.loads("[" + tuple_text(r) + "]")[1] for r in cur.fetchall()]
    want = [encode_column(info.columns[1], json.loads(d)) for d in docs]
    assert [json.loads(g) for g in got] == [json.loads(w) for w in want]
    assert got[0] == want[0]  # same text when nothing needs escaping


def latin1(text: str) -> str:
    """Characters MariaDB's latin1 (which is cp1252) and Python's agree on; others become '?'."""
    return "".join(ch if " " <= ch <= "~" or "\xa0" <= ch <= "\xff" else "?" for ch in text)


def _float32(bits: int) -> float:
    return struct.unpack("<f", struct.pack("<I", bits))[0]


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(doubles=st.lists(st.floats(allow_nan=False, allow_infinity=False), min_size=1, max_size=40),
       floats=st.lists(st.integers(0, 2**32 - 1).map(_float32).filter(math.isfinite), min_size=40, max_size=40),
       decimals=st.lists(st.decimals(min_value=-10**8, max_value=10**8, places=2).map(lambda d: d + 0), min_size=40, max_size=40),
       texts=st.lists(st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=20),
                      min_size=40, max_size=40),
       blobs=st.lists(st.binary(max_size=120), min_size=40, max_size=40))
def test_random_values_render_exactly(writer_db, doubles, floats, decimals, texts, blobs):
    db, name = writer_db
    session(db)
    with db.cursor() as cur:
        cur.execute("CREATE TABLE IF NOT EXISTS r (id INT PRIMARY KEY, db DOUBLE, fl FLOAT, de DECIMAL(12,2),"
                    " vc VARCHAR(40), tx TEXT CHARACTER SET latin1, vb VARBINARY(200)) DEFAULT CHARSET=utf8mb4")
        cur.execute("DELETE FROM r")
        rows = [(i, d, f, dec, t, latin1(t), b)
                for i, (d, f, dec, t, b) in enumerate(zip(doubles * 40, floats, decimals, texts, blobs))]
        cur.executemany("INSERT INTO r VALUES (%s, %s, %s, %s, %s, %s, %s)",
                        [(i, repr(d), repr(f), dec, t, lt, b) for i, d, f, dec, t, lt, b in rows])
    info = table_info(db, name, "r")
    with db.cursor() as cur:
        cur.execute(select_sql(info, "1 = 1") + " ORDER BY id")
        got = [json.loads("[" + tuple_text(r) + "]") for r in cur.fetchall()]
    want = [[json.loads(json.dumps(encode_column(c, v))) for c, v in zip(info.columns, row, strict=True)]
            for row in rows]
    assert got == want
    assert all(isinstance(Decimal(g[3]), Decimal) and g[3] == w[3] for g, w in zip(got, want, strict=True))


def test_rendering_speed_200k_rows(writer_db, capsys):
    """Not a timed assertion: prints rows/s for a 7-column table read through an SSCursor."""
    db, name = writer_db
    session(db)
    with db.cursor() as cur:
        cur.execute("CREATE TABLE speed (id INT PRIMARY KEY, a BIGINT, b VARCHAR(40), c DECIMAL(12,2),"
                    " d DATETIME(3), e DOUBLE, f VARBINARY(16))")
        cur.execute("INSERT INTO speed SELECT seq, seq * 1000003, CONCAT('name ', seq, ' é'), seq / 7,"
                    " '2024-01-01' + INTERVAL seq SECOND, seq / 3, UNHEX(MD5(seq))"
                    " FROM seq_1_to_200000")
    info = table_info(db, name, "speed")
    with db.cursor(pymysql.cursors.SSCursor) as cur:
        start = time.perf_counter()
        cur.execute(select_sql(info, "1 = 1"))
        rows = sum(1 for row in cur if tuple_text(row))
        seconds = time.perf_counter() - start
    assert rows == 200000
    with capsys.disabled():
        print(f"\nrender: {rows} rows of 7 columns in {seconds:.2f} s = {rows / seconds:,.0f} rows/s")
