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
from every_type import (
    COLUMNS,
    CREATE,
    MAX_ROW,
    MIN_ROW,
    NULL_ROW,
    ODD_ROW,
    as_decoded,
    multi_row_insert,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fullpuller.catalog import table_info
from fullpuller.render import (
    SESSION_SQL,
    binary_columns,
    python_columns,
    select_sql,
    splice_binaries,
    tuple_text,
)
from ums.types import ColumnSpec
from ums.values import encode_column

pytestmark = pytest.mark.integration


def session(db) -> None:
    with db.cursor() as cur:
        for sql in SESSION_SQL:
            cur.execute(sql)
        cur.execute("SET sql_mode = ''")  # the ODD_ROW zero dates and the invalid ENUM need it


def row_text(info, row) -> str:
    """A row of ``select_sql`` -> its tuple text, as the shard reader makes it (fullpuller/source.py):
    ``tuple_text`` of the leading columns, long binary values spliced in from the trailing ones."""
    n = len(row) - binary_columns(info.columns)
    return splice_binaries(tuple_text(row[:n]).encode(), row[n:]).decode()


def rendered(db, info, where: str = "1 = 1") -> dict[int, list]:
    with db.cursor() as cur:
        cur.execute(select_sql(info, where) + " ORDER BY id")
        tuples = [json.loads("[" + row_text(info, row) + "]") for row in cur.fetchall()]
    return {t[0]: t for t in tuples}


def reference(db, info) -> dict[int, list]:
    """ums.values of what pymysql SELECTs (FLOAT read exactly as a DOUBLE, as the binlog has it)."""
    exprs = ", ".join(
        f"CAST(`{c.name}` AS DOUBLE)" if c.name in python_columns(info.columns) else f"`{c.name}`"
        for c in info.columns
    )
    with db.cursor() as cur:
        cur.execute(f"SELECT {exprs} FROM every_type ORDER BY id")
        rows = cur.fetchall()
    return {
        row[0]: [
            json.loads(json.dumps(encode_column(c, as_decoded(c, v))))
            for c, v in zip(info.columns, row, strict=True)
        ]
        for row in rows
    }


def differences(got: dict[int, list], want: dict[int, list], columns) -> list[str]:
    assert sorted(got) == sorted(want)
    return [
        f"id={key} {c.name}: rendered {g!r:.80} ums.values {w!r:.80}"
        for key in want
        for c, g, w in zip(columns, got[key], want[key], strict=True)
        if g != w or type(g) is not type(w) and not isinstance(w, float)
    ]


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
        rows = [row_text(info, r) for r in cur.fetchall()]
        cur.execute(select_sql(table_info(db, name, "plain"), "1 = 1"))
        plain = cur.fetchall()
    assert python_columns(info.columns) == ("a", "c", "d")
    assert rows == ['1,0.1,"x",null,3.4028235e+38', "2,null,null,-1e-45,0.0"]
    assert plain == (('1,"x"',),)


def test_json_columns_render_compact_json_text(writer_db):
    """A MySQL JSON column (jsonobject): the value is the compact JSON text, as ums.values writes the
    decoded object. MariaDB's JSON is LONGTEXT, so the spec is forced to ``json`` here. Compared parsed:
    MariaDB's JSON_COMPACT and json.dumps may escape differently."""
    db, name = writer_db
    session(db)
    docs = ['{"k": [1, 2.5, null, true, "😀"], "n": {"x": -1}}', "[]", '"a\\"b"', '{"e": "\\u00e9\\n"}']
    with db.cursor() as cur:
        cur.execute("CREATE TABLE j (id INT PRIMARY KEY, js JSON)")
        cur.executemany("INSERT INTO j VALUES (%s, %s)", list(enumerate(docs)))
    info = table_info(db, name, "j")
    info = type(info)(**{**info.__dict__, "columns": (info.columns[0], ColumnSpec("js", "json"))})
    with db.cursor() as cur:
        cur.execute(select_sql(info, "1 = 1") + " ORDER BY id")
        got = [json.loads("[" + row_text(info, r) + "]")[1] for r in cur.fetchall()]
    want = [encode_column(info.columns[1], json.loads(d)) for d in docs]
    assert [json.loads(g) for g in got] == [json.loads(w) for w in want]
    assert got[0] == want[0]  # same text when nothing needs escaping


def latin1(text: str) -> str:
    """Characters MariaDB's latin1 (which is cp1252) and Python's agree on; others become '?'."""
    return "".join(ch if " " <= ch <= "~" or "\xa0" <= ch <= "\xff" else "?" for ch in text)


def _float32(bits: int) -> float:
    return struct.unpack("<f", struct.pack("<I", bits))[0]


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    doubles=st.lists(st.floats(allow_nan=False, allow_infinity=False), min_size=1, max_size=40),
    floats=st.lists(st.integers(0, 2**32 - 1).map(_float32).filter(math.isfinite), min_size=40, max_size=40),
    decimals=st.lists(
        st.decimals(min_value=-(10**8), max_value=10**8, places=2).map(lambda d: d + 0),
        min_size=40,
        max_size=40,
    ),
    texts=st.lists(
        st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=20),
        min_size=40,
        max_size=40,
    ),
    blobs=st.lists(st.binary(max_size=120), min_size=40, max_size=40),
)
def test_random_values_render_exactly(writer_db, doubles, floats, decimals, texts, blobs):
    db, name = writer_db
    session(db)
    with db.cursor() as cur:
        cur.execute(
            "CREATE TABLE IF NOT EXISTS r (id INT PRIMARY KEY, db DOUBLE, fl FLOAT, de DECIMAL(12,2),"
            " vc VARCHAR(40), tx TEXT CHARACTER SET latin1, vb VARBINARY(200)) DEFAULT CHARSET=utf8mb4"
        )
        cur.execute("DELETE FROM r")
        rows = [
            (i, d, f, dec, t, latin1(t), b)
            for i, (d, f, dec, t, b) in enumerate(
                zip(doubles * 40, floats, decimals, texts, blobs, strict=False)
            )
        ]
        cur.executemany(
            "INSERT INTO r VALUES (%s, %s, %s, %s, %s, %s, %s)",
            [(i, repr(d), repr(f), dec, t, lt, b) for i, d, f, dec, t, lt, b in rows],
        )
    info = table_info(db, name, "r")
    with db.cursor() as cur:
        cur.execute(select_sql(info, "1 = 1") + " ORDER BY id")
        got = [json.loads("[" + row_text(info, r) + "]") for r in cur.fetchall()]
    want = [
        [json.loads(json.dumps(encode_column(c, v))) for c, v in zip(info.columns, row, strict=True)]
        for row in rows
    ]
    assert got == want
    assert all(isinstance(Decimal(g[3]), Decimal) and g[3] == w[3] for g, w in zip(got, want, strict=True))


def test_rendering_speed_200k_rows(writer_db, capsys):
    """Not a timed assertion: prints rows/s for a 7-column table read through an SSCursor."""
    db, name = writer_db
    session(db)
    with db.cursor() as cur:
        cur.execute(
            "CREATE TABLE speed (id INT PRIMARY KEY, a BIGINT, b VARCHAR(40), c DECIMAL(12,2),"
            " d DATETIME(3), e DOUBLE, f VARBINARY(16))"
        )
        cur.execute(
            "INSERT INTO speed SELECT seq, seq * 1000003, CONCAT('name ', seq, ' é'), seq / 7,"
            " '2024-01-01' + INTERVAL seq SECOND, seq / 3, UNHEX(MD5(seq))"
            " FROM seq_1_to_200000"
        )
    info = table_info(db, name, "speed")
    with db.cursor(pymysql.cursors.SSCursor) as cur:
        start = time.perf_counter()
        cur.execute(select_sql(info, "1 = 1"))
        rows = sum(1 for row in cur if row_text(info, row))
        seconds = time.perf_counter() - start
    assert rows == 200000
    with capsys.disabled():
        print(f"\nrender: {rows} rows of 7 columns in {seconds:.2f} s = {rows / seconds:,.0f} rows/s")


# ---------------------------------------------------------------- INET4 / INET6 / UUID end to end

INET_DDL = "CREATE TABLE hosts (id INT PRIMARY KEY, a INET4, b INET6, c UUID, d BINARY(16), note VARCHAR(20))"
INET_FILL = (
    "INSERT INTO hosts SELECT seq,"
    " CAST(UNHEX(LPAD(HEX(seq * 2654435761 % 4294967296), 8, '0')) AS INET4),"
    " CAST(UNHEX(CONCAT(IF(seq % 3 = 0, REPEAT('0', 20), CONCAT('2001', LPAD(HEX(seq), 16, '0'))),"
    " IF(seq % 3 = 0, 'ffff', ''), LPAD(HEX(seq), 8, '0'), IF(seq % 3 = 0, '', '0000'))) AS INET6),"
    " IF(seq % 7 = 0, NULL, UUID()), UNHEX(MD5(seq)), CONCAT('n', seq) FROM seq_1_to_{n}"
)


def _cli(cfg_path, *args: str, timeout: float = 600):
    import os
    import subprocess
    import sys

    from extractor_env import REPO

    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    return subprocess.run(
        [sys.executable, "-m", "cli.main", "--config", str(cfg_path), *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )


def test_inet_and_uuid_tables_full_pull_reconcile_and_verify_with_0_differences(tmp_path, source):
    """Extractor, dispatcher, appender and full puller as deployed on a table with INET4, INET6, UUID and
    BINARY(16) columns: increments before and after a full pull, then ``dbus reconcile`` and ``dbus
    verify`` (which SELECTs the source): 0 differences. Increments and the pull carry the INET/UUID
    columns as ``string`` with SELECT's text, BINARY(16) as ``binary``. A second table keyed by a UUID
    (one shard: the splitter cannot split on UUID) verifies too. One more change: verify fails."""
    import uuid as uuidlib
    from concurrent.futures import ThreadPoolExecutor

    from fullpull_env import FullPullEnv, cleanup_fullpull, wait_for_row
    from pipeline_env import make_pipeline_env

    from cli.stages import Stages
    from dbuslib import kafka, mysql

    database = f"dbus_test_{uuidlib.uuid4().hex[:12]}"
    writer = mysql.connect(source.mysql, as_writer=True)
    with writer.cursor() as cur:
        cur.execute(f"CREATE DATABASE `{database}`")
        cur.execute(f"USE `{database}`")
        cur.execute(INET_DDL)
        cur.execute(INET_FILL.format(n=2000))  # before the extractor starts: only the pull has these
        # a UUID primary key (the splitter cannot split on it: one shard) with an INET6 column; not named
        # "n": reconcile uses a column of that name itself (AMBIGUOUS_REFERENCE, reported)
        cur.execute("CREATE TABLE tokens (id UUID PRIMARY KEY, ip INET6, hits INT)")
        cur.execute("INSERT INTO tokens SELECT UUID(), b, id FROM hosts WHERE id <= 300")
    env = make_pipeline_env(tmp_path, database)
    stages = Stages(env.cfg, env.ds, tmp_path / "stage-logs")
    table = f"{database}.hosts"
    topic = env.cfg.source(env.ds).topics.name("result", env.ds, database, "hosts")
    pool = ThreadPoolExecutor(2)  # dbus commands that run beside another
    try:
        for stage in ("extractor", "dispatcher", "appender", "fullpuller"):
            stages.start(stage)
        stages.wait_ready("extractor", "dispatcher", "appender", "fullpuller")
        with writer.cursor() as cur:  # increments before the pull
            cur.execute(
                "UPDATE hosts SET b = '2001:db8::ff00:42:8329',"
                " c = '123e4567-e89b-12d3-a456-426655440000' WHERE id = 1"
            )
            cur.execute(
                "UPDATE hosts SET a = '10.1.2.3', b = '::ffff:1.2.3.4', c = NULL WHERE id BETWEEN 10 AND 60"
            )
            cur.execute(
                "INSERT INTO hosts VALUES (5001, '0.0.0.0', '::',"
                " '00000000-0000-0000-0000-000000000000', x'00', 'zeros'),"
                " (5002, NULL, '1::1:1:1:1:1:1', UUID(), NULL, 'one zero group')"
            )
            cur.execute("DELETE FROM hosts WHERE id BETWEEN 100 AND 120")
            cur.execute("UPDATE tokens SET ip = '::1' WHERE hits BETWEEN 1 AND 20")
            cur.execute("DELETE FROM tokens WHERE hits BETWEEN 21 AND 30")
        pulls = pool.map(  # both requests at once, each followed to its end
            lambda name: _cli(
                env.cfg_path,
                "fullpull",
                "request",
                "--source",
                env.ds,
                "--table",
                name,
                "--follow",
                "--wait",
                "300",
            ),
            (table, f"{database}.tokens"),
        )
        for out in list(pulls):
            assert out.returncode == 0, out.stdout + out.stderr
        with writer.cursor() as cur:  # increments after the pull
            cur.execute(
                "UPDATE hosts SET b = 'fe80::1', a = '192.168.0.1', c = UUID() WHERE id IN (2, 3, 5001)"
            )
            cur.execute(
                "INSERT INTO hosts VALUES (5003, '1.2.3.4', '::1.2.3.4', UUID(), x'ff', 'v4 compatible')"
            )
            cur.execute("INSERT INTO tokens VALUES (UUID(), '1::1:1:1:1:1:1', 9999)")
            cur.execute("UPDATE tokens SET hits = -hits WHERE hits BETWEEN 31 AND 40")
            cur.execute("UPDATE tokens SET ip = 'fe80::d4a1' WHERE hits = 41")  # the tokens' drain marker
            cur.execute("UPDATE hosts SET note = 'drain-marker' WHERE id = 4")
        wait_for_row(env.cfg, topic, "drain-marker", 300)
        tokens_topic = env.cfg.source(env.ds).topics.name("result", env.ds, database, "tokens")
        wait_for_row(env.cfg, tokens_topic, "fe80::d4a1", 300)
        stages.stop_all()  # free the cores for the checks
        snapshot = tmp_path / "snapshot"
        reconciling = pool.submit(  # its Spark starts while this process reads the topic
            _cli, env.cfg_path, "reconcile", "--source", env.ds, "--table", table, "--out", str(snapshot)
        )

        messages = [json.loads(r.value) for r in kafka.read_range(env.cfg.endpoints.kafka, [topic])]
        messages = [
            m for m in messages if m["schema"]["namespace"].split(".")[3] == "hosts"
        ]  # topic per schema
        kinds = {m["protocol"]["type"] for m in messages}
        assert {"data_increment_data", "data_initial_data"} <= kinds
        for m in messages:
            if m["protocol"]["type"] in ("data_increment_data", "data_initial_data"):
                types = {f["name"]: f["type"] for f in m["schema"]["fields"]}
                assert (types["a"], types["b"], types["c"], types["d"]) == ("string",) * 3 + ("binary",), m
        increments = [
            t["tuple"]
            for m in messages
            if m["protocol"]["type"] == "data_increment_data"
            for t in m["payload"]
        ]
        pair = ["2001:db8::ff00:42:8329", "123e4567-e89b-12d3-a456-426655440000"]
        assert pair in [t[6:8] for t in increments]
        assert ["0.0.0.0", "::", "00000000-0000-0000-0000-000000000000", "AAAAAAAAAAAAAAAAAAAAAA=="] in [
            t[5:9] for t in increments
        ]
        assert "1::1:1:1:1:1:1" in [t[6] for t in increments]

        out = reconciling.result()
        assert out.returncode == 0, out.stdout + out.stderr
        out = _cli(env.cfg_path, "verify", "--source", env.ds, "--table", table, "--snapshot", str(snapshot))
        print(out.stdout)
        assert out.returncode == 0, out.stdout + out.stderr
        assert "equal, 0 differences" in out.stdout, out.stdout
        snapshot_tokens = tmp_path / "snapshot-tokens"
        out = _cli(
            env.cfg_path,
            "reconcile",
            "--source",
            env.ds,
            "--table",
            f"{database}.tokens",
            "--out",
            str(snapshot_tokens),
        )
        assert out.returncode == 0, out.stdout + out.stderr
        out = _cli(
            env.cfg_path,
            "verify",
            "--source",
            env.ds,
            "--table",
            f"{database}.tokens",
            "--snapshot",
            str(snapshot_tokens),
        )
        print(out.stdout)
        assert out.returncode == 0 and "equal, 0 differences" in out.stdout, out.stdout + out.stderr
        with writer.cursor() as cur:
            cur.execute("UPDATE hosts SET b = '::2' WHERE id = 5")
        out = _cli(env.cfg_path, "verify", "--source", env.ds, "--table", table, "--snapshot", str(snapshot))
        assert out.returncode == 1 and "different: id=5" in out.stdout, out.stdout + out.stderr
    finally:
        pool.shutdown()  # a reconcile still running when a check failed ends before its topics go
        cleanup_fullpull(FullPullEnv(env, writer, stages))


def test_a_grouped_read_gives_the_rows_texts_and_reads_a_cut_group_row_by_row(writer_db, source, monkeypatch):
    """render.grouped_sql through fullpuller.source's reader: the same tuple texts as the row-by-row read
    (strings holding newlines, NUL, backslashes, quotes and emoji, NULLs, negative and sparse keys), and
    the same again when every group is longer than group_concat_max_len (each read again row by row)."""
    from dataclasses import replace

    from pymysql.cursors import SSCursor

    from dbuslib import mysql
    from fullpuller import render
    from fullpuller.source import ShardJob, _grouped, _rows

    db, name = writer_db
    session(db)
    texts = ["a\nb", "nul\0x", 'q"\\', "\U0001f600 é", None, "", "\x01\x1f"]
    with db.cursor() as cur:
        cur.execute(
            "CREATE TABLE g (id BIGINT PRIMARY KEY, s VARCHAR(40), d DECIMAL(12,2), t DATETIME(3),"
            " e ENUM('new','paid'), n INT)"
        )
        values = [
            (i * 7 - 3000, texts[i % len(texts)], i / 4, f"2024-01-02 03:04:{i % 60:02d}.5", "paid", None)
            for i in range(2000)
        ]
        cur.executemany("INSERT INTO g VALUES (%s, %s, %s, %s, %s, %s)", values)
    db.commit()
    info = table_info(db, name, "g")
    assert render.group_column(info, ("id",)) == "id"
    where = "`id` >= -2500"
    job = ShardJob(
        config="",
        ds="demo",
        schema=name,
        table="g",
        namespace=f"mysql.demo.{name}.g.1.0.0",
        columns=[],
        batch_id=1,
        ums_id="1",
        ums_ts="",
        shard=0,
        sql=select_sql(info, where),
        zk_shard_path="",
        fetch_rows=1000,
        tuples_per_message=500,
        max_message_bytes=1_000_000,
        progress_interval_s=1.0,
        grouped_sql=render.grouped_sql(info, "id", where),
        group_column="id",
    )

    def read(how) -> list[bytes]:
        conn = mysql.connect(source.mysql, cursorclass=SSCursor, use_unicode=False)
        try:
            with conn.cursor() as cur:
                for stmt in SESSION_SQL:
                    cur.execute(stmt)
                return [t for fetch in how(cur) for t in fetch]
        finally:
            conn.close()

    rows = read(lambda cur: _rows(job, cur))
    assert len(rows) == sum(1 for v in values if v[0] >= -2500) > 1900
    assert sorted(read(lambda cur: _grouped(job, cur, source))) == sorted(rows)
    monkeypatch.setattr(render, "GROUP_SESSION_SQL", "SET SESSION group_concat_max_len = 300")
    assert sorted(read(lambda cur: _grouped(replace(job), cur, source))) == sorted(rows)
