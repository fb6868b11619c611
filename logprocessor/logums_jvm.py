"""A log table's UMS message built by the JVM: ``dbus.jvm.LogUmsUdf`` (binlog/jvm), one call per record and
table, over what the rules UDF gave for the record's lines (docs/logs.md, How rules run on Spark).

It gives the bytes ``logums.message_json`` gives (and ``logums_sql.message_json_col`` over
``tuple_json_col``, the Spark SQL form, which Spark interprets in the higher-order functions that pick the
table's rows: tens of times slower): the table's rows of the record in order, each row's index its position
among them, a row whose ``ums_id_`` is out of range left out, null when no row is left.
tests/unit/test_logums_jvm.py compares it with ``logums.py`` on random rows.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import TYPE_CHECKING

from logprocessor.grammar import Column as SaveAsColumn

if TYPE_CHECKING:
    from pyspark.sql import Column, SparkSession

FUNCTION, CLASS = "dbus_log_ums", "dbus.jvm.LogUmsUdf"


def table_message(
    spark: SparkSession,
    table: str,
    columns: Sequence[SaveAsColumn],
    partition: Column,
    offset: Column,
    ums_ts: Column,
    namespace: Column,
    results: Column,
) -> Column:
    """The UMS message (a string, or null) of the rows ``table`` took in ``results`` (``array<LINE_TYPE>``,
    the rules UDF's), the record at ``partition``/``offset``, every row's ``ums_ts_`` the string ``ums_ts``
    and its namespace ``namespace`` (``logums_sql.namespace_col``). A jar without the class fails here."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import StringType

    from dbuslib.errors import StackError
    from logprocessor.logums_sql import message_frame

    head, middle = message_frame(columns)
    types = "".join("d" if c.type == "double" else "s" for c in columns)
    key = "\x00".join((table, head, middle, types))
    name = f"{FUNCTION}_{hashlib.sha256(key.encode()).hexdigest()[:16]}"
    jvm = spark._jvm  # type: ignore[attr-defined]  # py4j's view of the JVM, untyped
    cls = jvm.dbus.jvm.LogUmsUdf
    if type(cls).__name__ == "JavaPackage":
        msg = "logprocessor: dbus.jvm.LogUmsUdf is not on Spark's classpath (`make stack-up` builds it)"
        raise StackError(msg)
    jtype = jvm.org.apache.spark.sql.types.DataType.fromJson(StringType().json())
    spark._jsparkSession.udf().register(name, cls(table, head, middle, types), jtype)  # type: ignore[attr-defined]  # py4j
    return F.call_function(name, partition, offset, ums_ts, namespace, results)
