"""UMS for log tables as Spark SQL expressions: what ``logprocessor.logums`` does in Python, byte for byte
(tests/unit/test_logprocessor_sql.py). Every function takes and returns plain Columns, so the job composes
them:

    ns = namespace_col("log_rsyslog", "applog", "applog_schema", "orders", 3, adapted.host)
    # array<struct<partition, offset, index, event_ms, values: array<string>>> of one record and table
    rows = ...
    tuples = F.transform(rows, lambda r: tuple_json_col(
        r.partition, r.offset, r.index, r.event_ms, r["values"], columns, "Asia/Shanghai"))
    message = message_json_col(ns, tuples, columns)
    key = data_key_col(ns, F.element_at(rows, 1).event_ms)

Before writing, a row's ``ums_id_problem_col`` and ``value_problem_col`` must be null; otherwise the line is
a line error (``LOG_LINE_UMS_ID_RANGE``, ``LOG_LINE_BAD_DOUBLE``), never a wrapped id or a lost row.

The JSON is ``ums.encoding.to_json``'s (Python's ``json.dumps``, compact): strings escaped as Jackson does
but with lower-case hex (``\\u001f``), and a DOUBLE written as Python writes a float: the shortest digits
that read back as the same double, plain from 10^-4 to 10^16, else ``1e+16``, ``1.5e-05``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from logprocessor.grammar import Column as SaveAsColumn
from logprocessor.logums import (
    DOUBLE_PATTERN,
    HEARTBEAT_STATUS,
    MAX_INDEX,
    MAX_OFFSET,
    MAX_PARTITION,
    OFFSET_SHIFT,
    PARTITION_SHIFT,
    user_fields,
)
from ums.encoding import dumps_compact
from ums.message import SYSTEM_FIELDS, ProtocolType
from ums.namespace import escape_part

if TYPE_CHECKING:
    from pyspark.sql import Column

UMS_TS_FORMAT = "yyyy-MM-dd HH:mm:ss.SSS"
# Control characters whose \u00XX escape holds a letter: Jackson writes it upper-case, Python lower-case.
_HEX_LETTER_CONTROLS = ("0B", "0E", "0F", "1A", "1B", "1C", "1D", "1E", "1F")


def namespace_col(log_type: str, ds: str, schema: str, table: str, version: int, host: Column) -> Column:
    """``<type>.<ds>.<schema>.<table>.<version>.<host>.0`` (``logums.log_namespace``), the host a Column."""
    from pyspark.sql import functions as F

    part = F.replace(F.replace(host, F.lit("%"), F.lit("%25")), F.lit("."), F.lit("%2E"))
    return F.concat(F.lit(namespace_head(log_type, ds, schema, table, version)), part, F.lit(".0"))


def namespace_head(log_type: str, ds: str, schema: str, table: str, version: int) -> str:
    """A log table's namespace before its host segment: ``<type>.<ds>.<schema>.<table>.<version>.``."""
    return ".".join(escape_part(p) for p in (log_type, ds, schema, table, str(version))) + "."


def ums_id_col(partition: Column, offset: Column, index: Column) -> Column:
    """``logums.ums_id`` as a bigint; null where ``ums_id_problem_col`` is not."""
    from pyspark.sql import functions as F

    value = (
        F.shiftleft(partition.cast("bigint"), PARTITION_SHIFT)
        .bitwiseOR(F.shiftleft(offset.cast("bigint"), OFFSET_SHIFT))
        .bitwiseOR(index.cast("bigint"))
    )
    return F.when(ums_id_problem_col(partition, offset, index).isNull(), value)


def ums_id_problem_col(partition: Column, offset: Column, index: Column) -> Column:
    """``logums.ums_id_problem``: the text of a ``LOG_LINE_UMS_ID_RANGE`` line error, or null."""
    from pyspark.sql import functions as F

    def text(what: Column, before: str, after: str) -> Column:
        return F.concat(F.lit(before), what.cast("string"), F.lit(after))

    return (
        F.when(
            ~partition.between(0, MAX_PARTITION),
            text(partition, "partition ", f" is outside 0..{MAX_PARTITION}, the partitions ums_id_ can hold"),
        )
        .when(
            ~offset.between(0, MAX_OFFSET),
            text(offset, "offset ", f" is outside 0..{MAX_OFFSET}, the offsets ums_id_ can hold"),
        )
        .when(
            ~index.between(0, MAX_INDEX),
            text(index, "row ", f" of the record is outside 0..{MAX_INDEX}, the rows ums_id_ can number"),
        )
    )


def ums_uid_col(partition: Column, offset: Column, index: Column) -> Column:
    """``logums.ums_uid``: ``(partition * 10^13 + offset) * 10^6 + index`` as a decimal string."""
    from pyspark.sql import functions as F

    position = partition.cast("decimal(38,0)") * F.lit(10**13).cast("decimal(38,0)") + offset.cast(
        "decimal(38,0)"
    )
    return (position * F.lit(10**6).cast("decimal(38,0)") + index.cast("decimal(38,0)")).cast("string")


def ums_ts_col(epoch_ms: Column, timezone: str) -> Column:
    """``yyyy-MM-dd HH:mm:ss.SSS`` in ``timezone``, whatever the session's time zone (``logums.ums_ts``)."""
    from pyspark.sql import functions as F

    utc_wall = F.timestamp_add("MILLISECOND", epoch_ms, F.lit("1970-01-01 00:00:00").cast("timestamp_ntz"))
    local = F.convert_timezone(F.lit("UTC"), F.lit(timezone), utc_wall)
    return F.date_format(local, UMS_TS_FORMAT)


def data_key_col(namespace: Column, ums_ts_epoch_ms: Column) -> Column:
    """``logums.data_key``: ``data_increment_data.<namespace>.<ms>.wh_placeholder``."""
    from pyspark.sql import functions as F

    head = ProtocolType.DATA_INCREMENT_DATA.value
    return F.concat(
        F.lit(head + "."), namespace, F.lit("."), ums_ts_epoch_ms.cast("string"), F.lit(".wh_placeholder")
    )


def heartbeat_key_col(
    namespace: Column, time_ms: Column, tx_time_ms: Column, status: str = HEARTBEAT_STATUS
) -> Column:
    """``logums.heartbeat_key``:
    ``data_increment_heartbeat.<namespace>.<time>|<txTime>|<status>.wh_placeholder``."""
    from pyspark.sql import functions as F

    head = ProtocolType.DATA_INCREMENT_HEARTBEAT.value
    return F.concat(
        F.lit(head + "."),
        namespace,
        F.lit("."),
        time_ms.cast("string"),
        F.lit("|"),
        tx_time_ms.cast("string"),
        F.lit(f"|{status}.wh_placeholder"),
    )


def value_problem_col(values: Column, columns: Sequence[SaveAsColumn]) -> Column:
    """``logums.value_problem``: the text of a ``LOG_LINE_BAD_DOUBLE`` line error, or null."""
    from pyspark.sql import functions as F

    problem = F.lit(None).cast("string")
    for i, c in reversed(list(enumerate(columns))):
        if c.type == "double":
            v = F.try_element_at(values, F.lit(i + 1))
            bad = v.isNotNull() & _double(v).isNull()
            problem = F.when(bad, F.lit(f"column {c.name} (DOUBLE): not a finite number")).otherwise(problem)
    return problem


def tuple_json_col(
    partition: Column,
    offset: Column,
    index: Column,
    event_ms: Column,
    values: Column,
    columns: Sequence[SaveAsColumn],
    timezone: str,
) -> Column:
    """One payload entry, ``{"tuple":["<ums_id_>","<ums_ts_>","i","<ums_uid_>",...values]}``."""
    from pyspark.sql import functions as F

    parts = [
        F.lit('{"tuple":["'),
        ums_id_col(partition, offset, index).cast("string"),
        F.lit('","'),
        ums_ts_col(event_ms, timezone),
        F.lit('","i","'),
        ums_uid_col(partition, offset, index),
        F.lit('"'),
    ]
    for i, c in enumerate(columns):
        v = F.try_element_at(values, F.lit(i + 1))
        rendered = python_double(_double(v)) if c.type == "double" else python_quote(v)
        parts += [F.lit(","), F.coalesce(rendered, F.lit("null"))]
    parts.append(F.lit("]}"))
    return F.concat(*parts)


def message_json_col(namespace: Column, tuples: Column, columns: Sequence[SaveAsColumn]) -> Column:
    """``logums.message_json``: the message of ``tuples`` (``array<string>`` of ``tuple_json_col``)."""
    from pyspark.sql import functions as F

    head, middle = message_frame(columns)
    return F.concat(
        F.lit(head), python_quote(namespace), F.lit(middle), F.array_join(tuples, ","), F.lit("]}")
    )


def message_frame(columns: Sequence[SaveAsColumn]) -> tuple[str, str]:
    """The text of a table's message before its quoted namespace, and between it and the first tuple."""
    protocol = ProtocolType.DATA_INCREMENT_DATA
    fields = SYSTEM_FIELDS[protocol] + user_fields(columns)
    fields_json = dumps_compact(
        [{"name": f.name, "type": f.type.value, "nullable": f.nullable, "encoded": f.encoded} for f in fields]
    )
    head = f'{{"protocol":{{"type":"{protocol.value}","version":"1.3"}},"schema":{{"namespace":'
    return head, f',"fields":{fields_json},"batchId":0}},"payload":['


def heartbeat_json_col(
    namespace: Column, partition: Column, offset: Column, epoch_ms: Column, timezone: str
) -> Column:
    """``logums.heartbeat_message`` as JSON: ``[ums_id_, ums_ts_]`` of the heartbeat record."""
    from pyspark.sql import functions as F

    head, middle = heartbeat_frame()
    return F.concat(
        F.lit(head),
        python_quote(namespace),
        F.lit(middle),
        ums_id_col(partition, offset, F.lit(0)).cast("string"),
        F.lit('","'),
        ums_ts_col(epoch_ms, timezone),
        F.lit('"]}]}'),
    )


def heartbeat_frame() -> tuple[str, str]:
    """The text of a heartbeat message before its quoted namespace, and between it and its ``ums_id_``."""
    protocol = ProtocolType.DATA_INCREMENT_HEARTBEAT
    fields = SYSTEM_FIELDS[protocol]
    fields_json = dumps_compact(
        [{"name": f.name, "type": f.type.value, "nullable": f.nullable, "encoded": f.encoded} for f in fields]
    )
    head = f'{{"protocol":{{"type":"{protocol.value}","version":"1.3"}},"schema":{{"namespace":'
    return head, f',"fields":{fields_json},"batchId":0}},"payload":[{{"tuple":["'


# ---------------------------------------------------------------- JSON values as Python writes them


def python_quote(text: Column) -> Column:
    """A JSON string as ``json.dumps(ensure_ascii=False)`` writes it; null stays null. Jackson's
    ``to_json`` escapes the same characters; only the hex of a control character's ``\\u00XX`` differs
    in case, and the rare string holding one is fixed in a lambda (interpreted, so the generated code of a
    wide row stays small)."""
    from pyspark.sql import functions as F

    j = F.to_json(F.array(text))
    quoted = F.substring(j, F.lit(2), F.length(j) - 2)

    def lower_hex(q: Column) -> Column:
        for letter in "ABCDEF":  # an escape only: its backslash not itself escaped
            q = F.regexp_replace(q, rf"((?<!\\)(?:\\\\)*+\\u00[01]){letter}", f"$1{letter.lower()}")
        return q

    fixed = F.try_element_at(F.transform(F.array(quoted), lower_hex), F.lit(1))
    return F.when(text.rlike(r"[\x0B\x0E\x0F\x1A-\x1F]"), fixed).otherwise(quoted)


def python_double(x: Column) -> Column:
    """A finite double as Python's ``repr`` (``json.dumps``) writes it; null stays null.

    Digits: Java's ``Double.toString`` ``D`` (it reads back as ``x``). Java 17 prints more digits than needed
    for a few doubles (``1e23`` as ``9.999999999999999E22``), so when ``D`` cut to one digit less, rounded
    down or up, also reads back as ``x``, the shortest length is searched (in a lambda: interpreted, rare):
    at each length the two candidates around ``D``, the rounded-up one when both read back (Python takes the
    one nearer to ``x``: they differ only when ``D``'s dropped digits are exactly a half, 1 random double in
    25,000). Layout: plain from 10^-4 to 10^16 (``100000.0``, ``0.0001``), else ``1e+16``, ``1.5e-05``."""
    from pyspark.sql import functions as F

    java = x.cast("string")  # 45.5, 100000.0, 1.0E20, 1.5E-5, -0.0
    negative = F.startswith(java, F.lit("-"))
    unsigned = F.regexp_replace(java, "^-", "")
    mantissa = F.substring_index(unsigned, "E", 1)
    whole = F.substring_index(mantissa, ".", 1)
    fraction = F.substring_index(mantissa, ".", -1)
    leading = F.length(fraction) - F.length(F.regexp_replace(fraction, "^0+", ""))
    exponent = (
        F.when(F.instr(unsigned, "E") > 0, F.substring_index(unsigned, "E", -1).try_cast("int"))
        .when(whole != "0", F.length(whole) - 1)
        .otherwise(-leading - 1)
    )
    digits = _strip_zeros(F.regexp_replace(F.regexp_replace(mantissa, "[.]", ""), "^0+", ""))
    d = F.struct(x.alias("x"), digits.alias("digits"), exponent.alias("exponent"))
    n = F.length(digits)
    shorter = (n > 1) & (
        _reads_back(_candidate(d, n - 1, "down"), x) | _reads_back(_candidate(d, n - 1, "up"), x)
    )
    found = F.try_element_at(F.transform(F.array(d), _shortest), F.lit(1))
    body = F.when(shorter, _layout(found["digits"], found["exponent"])).otherwise(_layout(digits, exponent))
    signed = F.concat(F.when(negative, F.lit("-")).otherwise(F.lit("")), body)
    return F.when(x == 0, F.when(negative, F.lit("-0.0")).otherwise(F.lit("0.0"))).otherwise(signed)


def _candidate(d: Column, p: Column | int, way: str) -> Column:
    """``struct<digits, exponent>``: ``D`` (``d.digits``) cut to ``p`` digits, rounded down (a prefix) or up
    (Java's ``%.{p-1}e``, half up, which may carry into the exponent)."""
    from pyspark.sql import functions as F

    p = F.lit(p) if isinstance(p, int) else p
    if way == "down":
        return F.struct(
            F.substring(d["digits"], F.lit(1), p).alias("digits"), d["exponent"].alias("exponent")
        )
    up = F.printf(F.concat(F.lit("%."), (p - 1).cast("string"), F.lit("e")), F.abs(d["x"]))
    return F.struct(
        _strip_zeros(F.regexp_replace(F.substring_index(up, "e", 1), "[.]", "")).alias("digits"),
        F.substring_index(up, "e", -1).try_cast("int").alias("exponent"),
    )


def _reads_back(c: Column, x: Column) -> Column:
    """Whether the candidate ``c`` (``struct<digits, exponent>``) reads back as ``|x|``."""
    from pyspark.sql import functions as F

    text = F.concat(F.lit("0."), c["digits"], F.lit("E"), (c["exponent"] + 1).cast("string"))
    return text.try_cast("double") == F.abs(x)


def _shortest(d: Column) -> Column:
    """The shortest ``struct<digits, exponent>`` that reads back as ``d.x`` (in a lambda: interpreted, for
    rare doubles only)."""
    from pyspark.sql import functions as F

    found = []
    for p in range(1, 18):
        up, down = _candidate(d, p, "up"), _candidate(d, p, "down")
        found.append(F.when(_reads_back(up, d["x"]), up).when(_reads_back(down, d["x"]), down))
    return F.coalesce(*found)


def _strip_zeros(digits: Column) -> Column:
    from pyspark.sql import functions as F

    return F.regexp_replace(digits, "(?<=.)0+$", "")


def _layout(digits: Column, exponent: Column) -> Column:
    """Python's layout of ``d.ddd * 10^exponent`` (digits without sign, point or trailing zeros)."""
    from pyspark.sql import functions as F

    n = F.length(digits)
    plain_big = F.concat(
        F.rpad(F.substring(digits, F.lit(1), exponent + 1), exponent + 1, "0"),
        F.lit("."),
        F.coalesce(F.nullif(F.substring(digits, exponent + 2, F.lit(1 << 30)), F.lit("")), F.lit("0")),
    )
    plain_small = F.concat(F.lit("0."), F.repeat(F.lit("0"), -exponent - 1), digits)
    scientific = F.concat(
        F.substring(digits, 1, 1),
        F.when(n > 1, F.concat(F.lit("."), F.substring(digits, 2, 1 << 30))).otherwise(F.lit("")),
        F.lit("e"),
        F.when(exponent < 0, F.lit("-")).otherwise(F.lit("+")),
        F.when(F.abs(exponent) < 10, F.lit("0")).otherwise(F.lit("")),
        F.abs(exponent).cast("string"),
    )
    return (
        F.when((exponent >= 0) & (exponent < 16), plain_big)
        .when((exponent >= -4) & (exponent < 0), plain_small)
        .otherwise(scientific)
    )


def _double(text: Column) -> Column:
    """A DOUBLE value as a finite double, else null (``logums._double``)."""
    from pyspark.sql import functions as F

    x = text.try_cast("double")
    finite = ~F.isnan(x) & (F.abs(x) != F.lit(float("inf")))
    return F.when(text.rlike(rf"^(?:{DOUBLE_PATTERN})\z") & finite, x)
