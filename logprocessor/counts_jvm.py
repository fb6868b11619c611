"""The log processor's per-batch counts, observed on its output: ``dbus.jvm.LogCountsAgg`` (binlog/jvm), an
aggregate of the ``metric`` column (the contract of logprocessor/metrics.py) registered as
``dbus_log_counts``, and ``observe`` that attaches it to a DataFrame with ``Dataset.observe``, so each batch
progress's ``observedMetrics`` holds ``{"dbus_log_counts": {"counts": "<the aggregate's JSON>"}}``
(read by ``dbuslib.stagemetrics`` on the driver). The aggregate runs inside the query's own tasks: no extra
pass over the data, no Python per row.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from logprocessor.metrics import COLUMN, FIELD, OBSERVATION

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, Observation, SparkSession

FUNCTION, CLASS = "dbus_log_counts", "dbus.jvm.LogCountsAgg"


def register(spark: SparkSession) -> str:
    """Registers ``dbus_log_counts(metric)`` in ``spark`` (once per session is enough; again is harmless)
    and returns its name. StackError when the jar lacks the class."""
    from dbuslib.errors import StackError
    from dbuslib.spark import jvm_class

    jvm = spark._jvm  # py4j's view of the JVM, untyped
    if jvm is None:  # pyspark sets it as the session starts
        msg = "logprocessor: the Spark session has no JVM"
        raise StackError(msg)
    cls = jvm_class(jvm, CLASS, "logprocessor")
    udaf = jvm.org.apache.spark.sql.functions.udaf(cls(), jvm.org.apache.spark.sql.Encoders.STRING())
    spark._jsparkSession.udf().register(FUNCTION, udaf)  # py4j
    return FUNCTION


def observe(df: DataFrame, name: str | Observation = OBSERVATION, column: str = COLUMN) -> DataFrame:
    """``df`` observed under ``name``: the aggregate of its ``column`` per batch (a streaming query's
    progress's ``observedMetrics[name]["counts"]``; a batch DataFrame's with a ``pyspark.sql.Observation``,
    its ``get["counts"]`` once an action ran)."""
    from pyspark.sql import functions as F

    function = register(df.sparkSession)
    return df.observe(name, F.call_function(function, F.col(column)).alias(FIELD))
