"""Log tables' UMS messages built by the JVM: ``dbus.jvm.LogUmsUdf`` (binlog/jvm), one call per record for
every table, over what the rules UDF gave for the record's lines (docs/logs.md, How rules run on Spark).

Per table it gives the bytes ``logums.message_json`` gives: the table's rows of the record in order, each
row's index its position among them, a row whose ``ums_id_`` is out of range left out, null when no row is
left. tests/unit/test_logums_jvm.py compares it with ``logums.py`` on random rows."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import TYPE_CHECKING

from logprocessor.grammar import Column as SaveAsColumn

if TYPE_CHECKING:
    from pyspark.sql import Column, SparkSession

FUNCTION, CLASS = "dbus_log_ums", "dbus.jvm.LogUmsUdf"
SEPARATOR = "\x00"  # LogUmsUdf.SEPARATOR: between the tables, and their texts, given to its constructor


def table_messages(
    spark: SparkSession,
    tables: Sequence[tuple[str, Sequence[SaveAsColumn]]],
    partition: Column,
    offset: Column,
    ums_ts: Column,
    namespaces: Sequence[Column],
    results: Column,
) -> Column:
    """``array<string>``: per table of ``tables`` (name, saveAs columns), the UMS message (or null) of the
    rows it took in ``results`` (``array<LINE_TYPE>``, the rules UDF's), the record at ``partition`` and
    ``offset``, every row's ``ums_ts_`` the string ``ums_ts``, the table's namespace its Column in
    ``namespaces`` (``logums.log_namespace``'s text). One call per record: ``results`` reaches the JVM once
    for every table. A jar without the class fails here, before the query starts."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import ArrayType, StringType

    from dbuslib.errors import StackError
    from dbuslib.spark import jvm_class
    from logprocessor.logums import message_frame

    frames = [message_frame(columns) for _, columns in tables]
    heads = {head for head, _ in frames}
    if len(heads) > 1:
        msg = f"logprocessor: tables' messages start differently: {sorted(heads)}"
        raise ValueError(msg)
    head = heads.pop() if heads else message_frame(())[0]
    names = SEPARATOR.join(name for name, _ in tables)
    middles = SEPARATOR.join(middle for _, middle in frames)
    types = SEPARATOR.join("".join("d" if c.type == "double" else "s" for c in cols) for _, cols in tables)
    spec = SEPARATOR.join((head, names, middles, types))
    name = f"{FUNCTION}_{hashlib.sha256(spec.encode()).hexdigest()[:16]}"
    jvm = spark._jvm  # py4j's view of the JVM, untyped
    if jvm is None:  # pyspark sets it as the session starts
        msg = "logprocessor: the Spark session has no JVM"
        raise StackError(msg)
    cls = jvm_class(jvm, "dbus.jvm.LogUmsUdf", "logprocessor")
    jtype = jvm.org.apache.spark.sql.types.DataType.fromJson(ArrayType(StringType()).json())
    udf = cls(head, names, middles, types)
    spark._jsparkSession.udf().register(name, udf, jtype)  # py4j
    return F.call_function(name, partition, offset, ums_ts, F.array(*namespaces), results)
