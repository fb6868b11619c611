"""The log processor's per-batch counts in the JVM (logprocessor/jvm ``dbus.jvm.LogCountsAgg``,
logprocessor/counts_jvm.py): the aggregate is the text ``logprocessor.metrics`` computes (``fold`` then
``counts_json``) on seeded random metric strings (every kind, hosts with tabs and JSON escapes, emoji,
invalid texts, nulls, extreme ``n``), over several partitions; observed on a batch DataFrame with
``pyspark.sql.Observation``, and on a streaming query in micro-batch mode, where each batch's progress
holds it and the driver's ``BatchCounts`` makes the points of it.
"""

from __future__ import annotations

import os
import random

import jvm_jar
import pytest

from logprocessor import counts_jvm
from logprocessor import metrics as m

pytestmark = pytest.mark.jvm  # needs a JDK and the pyspark jars: `pytest -m "not jvm"` leaves it out

SEED = 16
HOSTS = ["vm", "", "db1.example.com", "tab\there", 'q"uote', "é 漢字 😀", "ctl\x01\x1f", "back\\slash"]
NAMES = ["app_orders", "", "LOG_RECORD_NOT_JSON", "http_access", "\u2028", "z"]
JUNK = [
    "",
    "rows",
    "rows\tvm\t3",
    "bytes\tvm\tt\t3",
    "rows\tvm\tt\tx",
    "rows\tvm\tt\t1e3",
    "rows\tvm\tt\t\u0663",
]


@pytest.fixture(scope="module")
def spark():
    return jvm_jar.spark_session("test_log_counts_jvm", "dbus.jvm.LogCountsAgg")


def _metric(rnd: random.Random) -> str | None:
    roll = rnd.randrange(12)
    if roll == 0:
        return None
    if roll == 1:
        return rnd.choice(JUNK)
    n = rnd.choice([0, 1, -1, 10**17, -(10**17), rnd.randrange(-5000, 5000)])  # 30 sums stay in a long
    text = m.format_metric(rnd.choice(m.KINDS), rnd.choice(HOSTS), rnd.choice(NAMES), n)
    return text.replace("\t", "\t+", 1) if roll == 2 and n >= 0 else text  # "+5" is an n too


def test_the_jvm_aggregate_is_the_python_fold(spark):
    from pyspark.sql import functions as F

    rnd = random.Random(SEED)
    groups = [[_metric(rnd) for _ in range(rnd.randrange(0, 30))] for _ in range(300)]
    groups += [["rows\tvm\tt\t" + "9" * 18, "heartbeat\tvm\tt\t-" + "9" * 18], ["rows\tvm\tt\t" + "9" * 19]]
    rows = [(g, t) for g, texts in enumerate(groups) for t in texts]
    df = spark.createDataFrame(rows, "g int, metric string").repartition(4)
    name = counts_jvm.register(spark)
    got = dict(df.groupBy("g").agg(F.call_function(name, F.col("metric")).alias("c")).collect())
    expected = {g: m.counts_json(m.fold(texts)) for g, texts in enumerate(groups) if texts}
    assert got == expected
    assert any("invalid" in v for v in got.values()) and any("\\t" in v for v in got.values())


def test_an_empty_input_is_an_empty_array(spark):
    from pyspark.sql import functions as F

    name = counts_jvm.register(spark)
    df = spark.createDataFrame([], "metric string")
    assert df.agg(F.call_function(name, F.col("metric"))).collect()[0][0] == "[]"


def test_observed_on_a_batch_dataframe(spark):
    from pyspark.sql import Observation

    texts = [
        "rows\tvm\ta\t3",
        "rows\tvm\ta\t4",
        "heartbeat\tvm\ta\t812",
        "error\t\tLOG_RECORD_NOT_JSON\t1",
        None,
    ]
    df = spark.createDataFrame([(t, i) for i, t in enumerate(texts)], "metric string, i int")
    obs = Observation(m.OBSERVATION)
    out = counts_jvm.observe(df, obs).drop(m.COLUMN)
    assert out.columns == ["i"] and out.count() == 5
    assert m.parse_counts(obs.get[m.FIELD]) == m.fold(texts)


def test_observed_on_a_streaming_query_each_batch_in_its_progress(spark, tmp_path):
    inbox = tmp_path / "in"
    inbox.mkdir()
    batches = [
        ["rows\tvm\tapp_orders\t3", "unknown\tvm\t\t1", "rows\tdb1\tapp_orders\t1"],
        ["heartbeat\tvm\tapp_orders\t250", "error\t\tLOG_RECORD_NOT_JSON\t1", "rows\tvm\tapp_orders\t2"],
    ]
    for k, texts in enumerate(batches):
        path = inbox / f"{k}.txt"
        path.write_text("\n".join(texts) + "\n")
        os.utime(path, (1_700_000_000 + k, 1_700_000_000 + k))  # the source reads the oldest file first
    stream = spark.readStream.option("maxFilesPerTrigger", 1).text(str(inbox))
    observed = counts_jvm.observe(stream.withColumnRenamed("value", m.COLUMN)).drop(m.COLUMN)
    query = (
        observed.writeStream.format("memory")
        .queryName("log_counts_stream")
        .option("checkpointLocation", str(tmp_path / "cp"))
        .trigger(availableNow=True)
        .start()
    )
    try:
        assert query.awaitTermination(120)
        progresses = list(query.recentProgress)  # as the driver's watcher gets them (dicts holding Rows)
    finally:
        query.stop()
    counted = [m.observed_counts(p) for p in progresses if p.get("numInputRows")]
    assert counted == [m.fold(texts) for texts in batches]

    bc = m.BatchCounts("applog", "applog_schema")
    lines = [p.to_line_protocol() for pr in progresses for p in bc.points(pr, 1000)]
    assert "dbus_heartbeat,ds=applog,host=vm,schema=applog_schema,table=app_orders " in "\n".join(lines)
    assert any(line.startswith("dbus_heartbeat") and "rows=5i" in line for line in lines)
    assert any(
        line.startswith("dbus_log,ds=applog,host=db1,kind=rows,table=app_orders count=1i") for line in lines
    )
