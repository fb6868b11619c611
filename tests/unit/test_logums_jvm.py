"""Log tables' UMS messages built in the JVM (logprocessor/jvm ``dbus.jvm.LogUmsUdf``,
logprocessor/logums_jvm.py) are the bytes ``logprocessor.logums.message_json`` gives, table by table, on
seeded random records: rows of two tables among rows of a third, over several lines; values with every JSON
escape, emoji, nulls, short rows; DOUBLE values as random bit patterns, random decimal texts and texts that
are no finite number (written as null, as the Spark SQL form writes them); partitions, offsets and row
indexes at and past the limits of ``ums_id_`` (such a row left out, no row left: null)."""

from __future__ import annotations

import random
import struct

import jvm_jar
import pytest

from logprocessor.grammar import Column
from logprocessor.logums import LogRow, log_namespace, message_json, ums_id_problem, ums_ts, value_problem

pytestmark = pytest.mark.jvm  # needs a JDK and the pyspark jars: `pytest -m "not jvm"` leaves it out

SEED = 16
TABLE, OTHER = "order_events", "http_access"  # and rows of "ignored", a table the UDF is not given
OTHER_COLUMNS = (Column("path", "string"), Column("rt_s", "double"))
COLUMNS = (
    Column("log_time", "datetime"),
    Column("level", "string"),
    Column("amount", "double"),
    Column("note", "string"),
    Column("rate", "double"),
)
STRINGS = [
    "",
    "plain",
    'q"uote',
    "back\\slash",
    "tab\tnl\ncr\r",
    "ctl\x00\x01\x02\x08\x0b\x0c\x1a\x1f",
    "é ü 漢字 😀",
    "\u2028\u2029\x7f",
    "/slash/",
    "{}",
]
BAD_DOUBLES = ["NaN", "1e400", "-1e999", " 1", "0x10", "abc", "1.2.3", "Infinity", "", "+", "."]
RESULTS = (
    "array<struct<rows:array<struct<table:string,index:int,row:array<string>>>,"
    "errors:array<struct<table:string,error:string>>,unmatched:boolean>>"
)


@pytest.fixture(scope="module")
def spark():
    return jvm_jar.spark_session("test_logums_jvm", "dbus.jvm.LogUmsUdf")


def _double(rnd: random.Random) -> str:
    kind = rnd.randrange(6)
    if kind == 0:
        x = struct.unpack("d", rnd.randbytes(8))[0]
        return repr(x) if x == x and abs(x) != float("inf") else "1.5"
    if kind == 1:
        return f"{rnd.randint(1, 10 ** rnd.randint(1, 20))}e{rnd.randint(-330, 310)}"
    if kind == 2:
        return f"{rnd.uniform(-1e6, 1e6):.{rnd.randint(0, 20)}f}"
    if kind == 3:
        return rnd.choice(["45.50", "0.0001", "1e16", "1e-5", ".5", "5.", "-0", "0.0", "1e23", "5e-324"])
    if kind == 4:
        return rnd.choice(BAD_DOUBLES)
    return f"{rnd.randint(0, 10**30)}"


def _values(rnd: random.Random, columns: tuple[Column, ...]) -> list[str | None]:
    values: list[str | None] = []
    for c in columns:
        if rnd.random() < 0.1:
            values.append(None)
        elif c.type == "double":
            values.append(_double(rnd))
        else:
            values.append(rnd.choice(STRINGS) + str(rnd.randrange(1000)))
    if rnd.random() < 0.05:
        values = values[: rnd.randrange(len(values))]  # a short row: the missing values null
    return values


def _record(rnd: random.Random, k: int):
    partition = rnd.choice([0, 1, 3, 255, 256, -1]) if rnd.random() < 0.2 else rnd.randrange(256)
    offset = rnd.choice([0, 2**43 - 1, 2**43, -5]) if rnd.random() < 0.2 else rnd.randrange(2**43)
    many = k == 0  # past the 4096 rows ums_id_ can number
    lines = []
    for _ in range(1 if many else rnd.randrange(0, 4)):
        rows = []
        for _ in range(4100 if many else rnd.randrange(0, 5)):
            table = TABLE if many else rnd.choice([TABLE, TABLE, OTHER, "ignored"])
            columns = OTHER_COLUMNS if table == OTHER else COLUMNS
            rows.append((table, 0, None if rnd.random() < 0.03 else _values(rnd, columns)))
        lines.append((rows, [], not rows))
    ms = rnd.randrange(0, 4102444800000)
    host = rnd.choice(["app-01_prod", "a%25b", 'q"h', "h\x01"])
    return partition, offset, ms, host, lines


def _expected(table, columns, partition, offset, ms, host, lines, timezone):
    ns = log_namespace("log_rsyslog", "applog", "applog_schema", table, 3, host)
    rows = [row for rows, _, _ in lines for name, _, row in rows if name == table]
    ok = []
    for i, row in enumerate(rows):
        if ums_id_problem(partition, offset, i) is not None:
            continue
        values = list(row or ())[: len(columns)]
        values += [None] * (len(columns) - len(values))
        for c, (v, column) in enumerate(zip(values, columns, strict=True)):
            if value_problem([v], [column]) is not None:
                values[c] = None  # not a finite number: null
        ok.append(LogRow(partition, offset, i, ms, tuple(values)))
    return message_json(ns, columns, ok, timezone) if ok else None


def test_the_jvm_messages_are_the_python_messages(spark):
    from pyspark.sql import functions as F

    from logprocessor.logums_jvm import table_messages

    rnd = random.Random(SEED)
    records = [_record(rnd, k) for k in range(400)]
    timezone = "Asia/Shanghai"
    tables = [(TABLE, COLUMNS), (OTHER, OTHER_COLUMNS)]
    rows = [  # each table's namespace and the ums_ts_ text, as the processor gives them to the UDF
        (
            *record,
            [
                str(log_namespace("log_rsyslog", "applog", "applog_schema", t, 3, record[3]))
                for t, _ in tables
            ],
            ums_ts(record[2], timezone),
        )
        for record in records
    ]
    df = spark.createDataFrame(
        rows,
        f"partition int, offset bigint, ms bigint, host string, results {RESULTS}, "
        "ns array<string>, ts string",
    )
    messages = table_messages(
        spark,
        tables,
        F.col("partition"),
        F.col("offset"),
        F.col("ts"),
        [F.col("ns")[k] for k in range(len(tables))],
        F.col("results"),
    )
    got = [tuple(r.m) for r in df.select(messages.alias("m")).collect()]
    differ = []
    for record, actual in zip(records, got, strict=True):
        expected = tuple(_expected(t, c, *record, timezone) for t, c in tables)
        if actual != expected:
            differ.append((record[:4], expected, actual))
    assert not differ, "\n\n".join(f"{r}\n  python: {e}\n  jvm:    {a}" for r, e, a in differ[:3])
    for k in range(len(tables)):  # both kinds reached, for each table
        assert any(m[k] is None for m in got) and sum(m[k] is not None for m in got) > 100


def test_doubles_as_python_writes_them(spark):
    import json

    rnd = random.Random(SEED + 1)
    texts = [_double(rnd) for _ in range(3000)] + BAD_DOUBLES
    jvm = spark._jvm.dbus.jvm.LogUmsUdf
    for text in texts:
        fine = value_problem([text], [Column("x", "double")]) is None
        expected = json.dumps(float(text)) if fine else None
        assert jvm.pythonDouble(text) == expected, text
