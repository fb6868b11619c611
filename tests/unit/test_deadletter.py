"""The dead-letter contract: every member present; a record too large to copy is pointed at, not carried."""

import json

from hypothesis import given
from hypothesis import strategies as st

from dbuslib.deadletter import MAX_VALUE_BYTES, DeadLetter, too_big


def letter(value, withheld=""):
    return DeadLetter(
        "RAW_BAD_RECORD", "bad", "demo.shop", 1, 42, b"shop.orders", value, "appender", withheld
    )


def test_a_record_above_the_limit_is_withheld_with_its_size_and_keeps_its_coordinates():
    d = json.loads(letter(b"x" * (MAX_VALUE_BYTES + 1)).to_json())
    assert d["value_base64"] is None and str(MAX_VALUE_BYTES + 1) in d["withheld"]
    assert (d["topic"], d["partition"], d["offset"]) == ("demo.shop", 1, 42)


def test_a_record_at_the_limit_is_carried():
    assert DeadLetter.from_json(letter(b"x" * MAX_VALUE_BYTES).to_json()).value == b"x" * MAX_VALUE_BYTES


def test_a_masked_reason_is_kept_whatever_the_size():
    d = json.loads(letter(b"x" * (MAX_VALUE_BYTES + 1), withheld="the table has masked columns").to_json())
    assert d["withheld"] == "the table has masked columns"


@given(st.one_of(st.none(), st.binary(max_size=64)), st.one_of(st.none(), st.binary(max_size=64)))
def test_round_trip(value, key):
    d = DeadLetter("C", "e", "t", 0, 1, key, value, "dispatcher")
    back = DeadLetter.from_json(d.to_json())
    assert back.value == value and back.offset == 1 and back.stage == "dispatcher"
    assert set(json.loads(d.to_json())) == {
        "code",
        "error",
        "stage",
        "topic",
        "partition",
        "offset",
        "key",
        "value_base64",
        "withheld",
    }


def test_the_spark_dead_letter_is_the_python_one():
    """dbuslib.deadletter.spark_value and spark_too_big give DeadLetter.to_json's JSON: base64 on one line
    (Spark's own base64 breaks it every 76 characters), every member present."""
    from jvm_jar import spark_session
    from pyspark.sql import functions as F

    from dbuslib.deadletter import spark_too_big, spark_value

    # the process's one session, made with the project's jar: a session made without it, then given the jar
    # by ADD JAR, fails the JVM tests after it in this process (a ClassCastException of SerializedLambda)
    spark = spark_session("test_deadletter", "dbus.jvm.LogCountsAgg")
    value = bytes(range(256)) * 3
    df = spark.createDataFrame(
        [("t", 2, 7, b"k", value)], "topic string, partition int, offset bigint, key binary, value binary"
    )
    row = df.select(
        spark_value(
            "s", F.lit("C"), F.lit("e"), F.col("key").cast("string"), F.lit(None).cast("string")
        ).alias("v"),
        spark_value("s", F.lit("C"), F.lit("e"), F.lit(None).cast("string"), F.lit("w")).alias("w"),
        spark_too_big(F.lit(MAX_VALUE_BYTES + 1)).alias("big"),
    ).first()
    assert json.loads(row.v) == json.loads(DeadLetter("C", "e", "t", 2, 7, b"k", value, "s").to_json())
    assert json.loads(row.w) == json.loads(DeadLetter("C", "e", "t", 2, 7, None, None, "s", "w").to_json())
    assert row.big == too_big(MAX_VALUE_BYTES + 1)
