"""The shipper record adapters as Spark SQL expressions over the Kafka source's columns: what
``logprocessor.adapters`` does in Python, record for record (tests/unit/test_logprocessor_sql.py), with no
Python on the data path.

    raw = spark.readStream.format("kafka")...load()
    adapted = with_adapter(raw, AdapterSettings.of(cfg.log_source("applog")))
    # adds the column "adapted": struct<lines: array<string>, host: string, event_ms: bigint,
    #   kafka_time: boolean, heartbeat: boolean, heartbeat_ms: bigint, error: struct<code, message>>

``adapter_columns(settings, value, key, partition, offset, timestamp)`` gives the same as plain Columns
(``AdapterColumns``) for one ``select``; ``with_adapter`` parses each record once in a first projection and
derives the rest in a second. A record with an ``error`` has no lines and null host and times.

How the JSON is read (docs/logs.md, Shipper records): ``from_json`` with a struct of the fields an adapter
needs and ``_corrupt_record`` (a record that is not a JSON object is corrupt), ``NaN``/``Infinity`` and single
quotes refused. The adapters that re-write a record (log_filebeat's flatten, log_ums's tuples) first *mark*
its scalars with one ``regexp_replace`` each (``MARK_STRINGS``, ``MARK_SCALARS``): every string value becomes
``"\\u0002<its text>"`` and every number, ``true``, ``false`` and ``null`` ``"\\u0001<as written>"``, so that
``from_json`` into strings tells them apart and keeps numbers exactly as written; the ``UNMARK_*``
replacements undo it in the JSON text of a nested value.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, NamedTuple

from logprocessor.adapters import (
    BAD_HEARTBEAT,
    BAD_UMS,
    KEY_MS_PATTERN,
    MAX_EVENT_MS,
    NO_HOST,
    NO_MESSAGE,
    NOT_JSON,
    NOT_UTF8,
    TIME_PATTERN,
    TOO_LARGE,
    UMS_HEARTBEAT_MARK,
    AdapterSettings,
)

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

CORRUPT = "_corrupt_record"
JSON_OPTIONS = {"allowNonNumericNumbers": "false", "allowSingleQuotes": "false", "mode": "PERMISSIVE"}
STRUCT_OPTIONS = {**JSON_OPTIONS, "columnNameOfCorruptRecord": CORRUPT}
SCALAR_MARK = "\u0001"
STRING_MARK = "\u0002"

# Java regexes; possessive quantifiers, so a 1 MB record is one pass without backtracking.
_STRING = r'"(?:[^"\\]++|\\.)*+"'
_NUMBER = r"-?(?:0|[1-9][0-9]*+)(?:\.[0-9]++)?+(?:[eE][+-]?+[0-9]++)?+"
MARK_STRINGS = (rf'\G((?:[^"]++|{_STRING}(?=\s*+:))*+)"((?:[^"\\]++|\\.)*+)"', r'$1"\\u0002$2"')
MARK_SCALARS = (
    rf'\G((?:[^"0-9tfn-]++|{_STRING})*+)({_NUMBER}|true|false|null)(?![0-9A-Za-z.+-])',
    r'$1"\\u0001$2"',
)
# In Jackson's text of a nested value the marks are the escapes \u0001 and \u0002. Each pass skips every
# string but the marked values of its kind (keys, followed by ":", are never values).
_SKIP = r'(?:[^"]++|"(?!\\u000{m})(?:[^"\\]++|\\.)*+"|"\\u000{m}(?:[^"\\]++|\\.)*+"(?=:))*+'
UNMARK_SCALARS = (rf'\G({_SKIP.format(m=1)})"\\u0001([^"\\]*+)"(?!:)', "$1$2")
UNMARK_STRINGS = (rf'\G({_SKIP.format(m=2)})"\\u0002((?:[^"\\]++|\\.)*+)"(?!:)', '$1"$2"')


class Let:
    """Binds an intermediate value a type reads several times: in ``with_adapter`` it becomes a column of its
    own projection (``staged``), so Spark computes it once; in ``adapter_columns`` it stays inline."""

    def __init__(self, staged: bool) -> None:
        self.staged = staged
        self.columns: list[tuple[str, Column]] = []

    def __call__(self, name: str, value: Column) -> Column:
        if not self.staged:
            return value
        from pyspark.sql import functions as F

        column = f"_al_{name}"
        self.columns.append((column, value))
        return F.col(column)


class AdapterColumns(NamedTuple):
    """The adapter's outputs as Columns (see ``logprocessor.adapters.Adapted`` and ``RecordError``)."""

    lines: Column  # array<string>; empty for a heartbeat or an error
    host: Column  # string, the namespace segment
    event_ms: Column  # bigint
    kafka_time: Column  # boolean: event_ms is the Kafka timestamp
    heartbeat: Column  # boolean
    heartbeat_ms: Column  # bigint, null unless a heartbeat
    error: Column  # struct<code: string, message: string>, null unless the record is refused


def with_adapter(
    df: DataFrame,
    settings: AdapterSettings,
    value: str = "value",
    key: str = "key",
    partition: str = "partition",
    offset: str = "offset",
    timestamp: str = "timestamp",
    out: str = "adapted",
) -> DataFrame:
    """``df`` with the struct column ``out`` (the ``AdapterColumns``). Projections in turn: the record parsed
    once, the intermediate values a type reads several times (``Let``), the type's outputs and the error,
    the outputs of refused records nulled; each reads plain columns of the one before, so Spark neither
    computes a value twice nor compiles one huge method."""
    from pyspark.sql import functions as F

    parsed = parse_record(settings, F.col(value), F.col(key))
    df = df.withColumns({f"_ap_{n}": c for n, c in parsed.items()})
    let = Let(staged=True)
    pcols = {n: F.col(f"_ap_{n}") for n in parsed}
    raw = raw_outputs(settings, pcols, F.col(partition), F.col(offset), F.col(timestamp), let)
    for name, column in let.columns:  # one projection each: a later one may read an earlier one
        df = df.withColumn(name, column)
    df = df.withColumns({f"_ao_{n}": c for n, c in raw._asdict().items()})
    cols = final_outputs(AdapterColumns(*(F.col(f"_ao_{n}") for n in AdapterColumns._fields)))
    lets = [n for n, _ in let.columns]
    dropped = [f"_ap_{n}" for n in parsed] + lets + [f"_ao_{n}" for n in AdapterColumns._fields]
    return df.withColumn(out, F.struct(*(c.alias(n) for n, c in cols._asdict().items()))).drop(*dropped)


def adapter_columns(
    settings: AdapterSettings,
    value: Column,
    key: Column,
    partition: Column,
    offset: Column,
    timestamp: Column,
) -> AdapterColumns:
    """The adapter's outputs over the Kafka source's columns, for one ``select`` (Spark's subexpression
    elimination shares the parse; ``with_adapter`` is the safer form for a query)."""
    raw = raw_outputs(
        settings, parse_record(settings, value, key), partition, offset, timestamp, Let(staged=False)
    )
    return final_outputs(raw)


def parse_record(settings: AdapterSettings, value: Column, key: Column) -> dict[str, Column]:
    """The record read once (the expensive part): its size, text, UTF-8 validity, key text, and ``from_json``
    of the fields its type reads (log_filebeat, log_ums: also of the marked record)."""
    from pyspark.sql import functions as F

    text = value.cast("string")
    key_text = key.cast("string")
    fields = {
        "size": F.octet_length(value),
        "text": text,
        "utf8": F.is_valid_utf8(text),
        "key": F.when(F.is_valid_utf8(key_text), key_text),
        "json": F.from_json(text, _SCHEMAS[settings.log_type], STRUCT_OPTIONS),
    }
    if settings.log_type == "log_filebeat":
        fields["marked"] = F.from_json(mark(text), "map<string,string>", JSON_OPTIONS)
    if settings.log_type == "log_ums":
        fields["marked"] = F.from_json(mark(text), "struct<schema:string,payload:string>", JSON_OPTIONS)
    return fields


def raw_outputs(
    settings: AdapterSettings,
    p: Mapping[str, Column],
    partition: Column,
    offset: Column,
    timestamp: Column,
    let: Let,
) -> AdapterColumns:
    """The type's outputs and the error from ``parse_record``'s columns (outputs not yet nulled on error)."""
    from pyspark.sql import functions as F

    kafka_ms = F.least(F.greatest(F.unix_millis(timestamp), F.lit(0)), F.lit(MAX_EVENT_MS))
    out = _BY_TYPE[settings.log_type](settings, p, let)
    where = F.concat(
        F.lit("record at partition "), partition.cast("string"), F.lit(", offset "), offset.cast("string")
    )

    def fail(code: str, what: Column | str) -> Column:
        text = F.lit(what) if isinstance(what, str) else what
        return F.struct(F.lit(code).alias("code"), F.concat(where, F.lit(": "), text).alias("message"))

    valid = p["json"].isNotNull() & p["json"][CORRUPT].isNull()
    size_text = F.concat(
        p["size"].cast("string"),
        F.lit(f" bytes, over processor.max_line_bytes ({settings.max_record_bytes})"),
    )
    error = F.when(p["size"] > settings.max_record_bytes, fail(TOO_LARGE, size_text))
    if out.heartbeat_key is not None and out.heartbeat_error is not None:
        bad_key = F.when(out.heartbeat_error.isNotNull(), fail(BAD_HEARTBEAT, out.heartbeat_error))
        error = error.when(out.heartbeat_key, bad_key)
    error = (
        error.when(p["size"].isNull() | (p["size"] == 0), fail(NOT_JSON, "no value (null or empty)"))
        .when(~p["utf8"], fail(NOT_UTF8, "not UTF-8"))
        .when(~valid, fail(NOT_JSON, "not a JSON object"))
    )
    for code, condition, what in out.checks:
        error = error.when(condition, fail(code, what))
    return AdapterColumns(
        lines=F.when(~out.heartbeat, out.lines).otherwise(F.array().cast("array<string>")),
        host=out.host,
        event_ms=F.coalesce(out.event_ms, kafka_ms),
        kafka_time=out.event_ms.isNull() | F.lit(out.always_kafka),
        heartbeat=out.heartbeat,
        heartbeat_ms=F.when(out.heartbeat, F.coalesce(out.heartbeat_ms, out.event_ms, kafka_ms)),
        error=error,
    )


def final_outputs(raw: AdapterColumns) -> AdapterColumns:
    """``raw_outputs`` with a refused record's outputs nulled (its lines empty)."""
    from pyspark.sql import functions as F

    ok = raw.error.isNull()
    return AdapterColumns(
        lines=F.when(ok, raw.lines).otherwise(F.array().cast("array<string>")),
        host=F.when(ok, raw.host),
        event_ms=F.when(ok, raw.event_ms),
        kafka_time=F.when(ok, raw.kafka_time),
        heartbeat=F.when(ok, raw.heartbeat),
        heartbeat_ms=F.when(ok, raw.heartbeat_ms),
        error=raw.error,
    )


# ---------------------------------------------------------------- JSON and time helpers


def jackson_quote(text: Column) -> Column:
    """A string as Jackson writes it (``sparkjson.quote``): ``to_json(array(x))`` without the brackets."""
    from pyspark.sql import functions as F

    j = F.to_json(F.array(text))
    return F.substring(j, F.lit(2), F.length(j) - 2)


def mark(text: Column) -> Column:
    """The record with every string value and every scalar marked (see the module docstring)."""
    from pyspark.sql import functions as F

    return F.regexp_replace(F.regexp_replace(text, *MARK_STRINGS), *MARK_SCALARS)


def unmark(text: Column) -> Column:
    """The JSON text of a nested value of a marked record, as it was written (numbers as written)."""
    from pyspark.sql import functions as F

    return F.regexp_replace(F.regexp_replace(text, *UNMARK_SCALARS), *UNMARK_STRINGS)


def marked_json(value: Column) -> Column:
    """A value of a marked record as JSON (``sparkjson.render_exact``)."""
    from pyspark.sql import functions as F

    return (
        F.when(F.startswith(value, F.lit(SCALAR_MARK)), F.substring(value, 2, 1 << 30))
        .when(F.startswith(value, F.lit(STRING_MARK)), jackson_quote(F.substring(value, 2, 1 << 30)))
        .otherwise(unmark(value))
    )


def marked_text(value: Column) -> Column:
    """A value of a marked record as text (``sparkjson.exact_text``): null for null, a string's content."""
    from pyspark.sql import functions as F

    return (
        F.when(value == F.lit(SCALAR_MARK + "null"), F.lit(None).cast("string"))
        .when(
            F.startswith(value, F.lit(SCALAR_MARK)) | F.startswith(value, F.lit(STRING_MARK)),
            F.substring(value, 2, 1 << 30),
        )
        .otherwise(unmark(value))
    )


def parse_time(text: Column, timezone: str) -> Column:
    """``adapters.parse_time``: epoch ms of an RFC 3339 time (or one without a zone, in ``timezone``), else
    null.

    The regex decides what is a time; Spark's own parser (``try_to_timestamp``, java.time underneath) reads
    it, the separators made uniform (``z`` -> ``Z``, ``,`` -> ``.``, a space -> ``T``) and a time without a
    zone given the source's zone by name (pattern ``VV``), so the session's time zone never counts."""
    from pyspark.sql import functions as F

    ok = text.rlike(rf"^(?:{TIME_PATTERN})\z")
    length = F.length(text)
    colon = F.substring(text, -6, 1).isin("+", "-") & (length >= 25)  # +08:00
    plain = F.substring(text, -5, 1).isin("+", "-") & (length >= 24) & ~colon  # +0800: given its colon
    zoned = F.substring(text, -1, 1).isin("Z", "z") | colon | plain
    head = F.translate(text, "z, ", "Z.T")
    with_colon = F.concat(F.substring(head, F.lit(1), length - 2), F.lit(":"), F.substring(head, -2, 2))
    uniform = F.when(plain, with_colon).when(zoned, head).otherwise(F.concat(head, F.lit(timezone)))
    ms = F.unix_millis(F.try_to_timestamp(uniform, F.lit("yyyy-MM-dd'T'HH:mm:ss[.SSSSSSSSS]VV")))
    return F.when(ok & (ms >= 0) & (ms <= MAX_EVENT_MS), ms)


# ---------------------------------------------------------------- the types


class _Out(NamedTuple):
    lines: Column
    host: Column
    event_ms: Column  # null: the Kafka timestamp
    heartbeat: Column
    heartbeat_ms: Column  # null: the event time
    checks: list[tuple[str, Column, Column | str]]  # (code, refused when, what) after the common checks
    always_kafka: bool = False
    heartbeat_key: Column | None = None  # log_ums: the key marks a heartbeat (decided before the value)
    heartbeat_error: Column | None = None


def _segment(host: Column) -> Column:
    from pyspark.sql import functions as F

    return F.replace(host, F.lit("."), F.lit("_"))


def _contains(text: Column, part: str) -> Column:
    from pyspark.sql import functions as F

    return F.coalesce(F.instr(text, part) > 0, F.lit(False))


def _rsyslog(s: AdapterSettings, p: Mapping[str, Column], let: Let) -> _Out:
    from pyspark.sql import functions as F

    j = p["json"]
    message = j["message"]
    beat = let(
        "beat", F.when(_contains(message, s.heartbeat_type), F.from_json(message, _BEAT, STRUCT_OPTIONS))
    )
    files = s.heartbeat_files
    from_file = F.lit(True) if files is None else j["path"].isin(*files) if files else F.lit(False)
    is_beat = F.coalesce(
        beat.isNotNull() & beat[CORRUPT].isNull() & (beat["type"] == s.heartbeat_type) & from_file,
        F.lit(False),
    )
    return _Out(
        lines=F.array(p["text"]),
        host=_segment(j["host"]),
        event_ms=parse_time(j["timestamp"], s.timezone),
        heartbeat=is_beat,
        heartbeat_ms=parse_time(beat["@timestamp"], s.timezone),
        checks=[
            (NO_MESSAGE, message.isNull(), 'no "message"'),
            (NO_HOST, F.coalesce(j["host"], F.lit("")) == "", 'no "host"'),
        ],
    )


def _logstash(s: AdapterSettings, p: Mapping[str, Column], let: Let) -> _Out:
    from pyspark.sql import functions as F

    j = p["json"]
    event = parse_time(j["@timestamp"], s.timezone)
    return _Out(
        lines=F.array(p["text"]),
        host=_segment(j["host"]),
        event_ms=event,
        heartbeat=F.coalesce(j["type"] == s.heartbeat_type, F.lit(False)),
        heartbeat_ms=event,
        checks=[(NO_HOST, F.coalesce(j["host"], F.lit("")) == "", 'no "host"')],
    )


def _filebeat(s: AdapterSettings, p: Mapping[str, Column], let: Let) -> _Out:
    from pyspark.sql import functions as F

    def inner(e: Column) -> Column:
        obj = F.from_json(e["value"], "map<string,string>", JSON_OPTIONS)
        prefixed = F.transform(
            F.map_entries(obj),
            lambda i: F.struct(
                F.concat(e["key"], F.lit("."), i["key"]).alias("key"), i["value"].alias("value")
            ),
        )
        return F.when(F.startswith(e["value"], F.lit("{")), prefixed).otherwise(F.array(e))

    entries = let("entries", F.flatten(F.transform(F.map_entries(p["marked"]), inner)))

    def last(name: str) -> Column:
        found = F.filter(entries, lambda e: e["key"] == name)
        return let(
            f"last_{name.replace('.', '_').replace('@', '')}",
            marked_text(F.try_element_at(found, F.lit(-1))["value"]),
        )

    host = F.coalesce(F.nullif(last("beat.hostname"), F.lit("")), F.nullif(last("host.name"), F.lit("")))
    line = F.concat(
        F.lit("{"),
        F.array_join(
            F.transform(
                entries, lambda e: F.concat(jackson_quote(e["key"]), F.lit(":"), marked_json(e["value"]))
            ),
            ",",
        ),
        F.lit("}"),
    )
    beat = let("beat", F.from_json(last("message"), _BEAT, STRUCT_OPTIONS))
    own = F.when(beat[CORRUPT].isNull(), parse_time(beat["@timestamp"], s.timezone))
    return _Out(
        lines=F.array(line),
        host=_segment(host),
        event_ms=parse_time(last("@timestamp"), s.timezone),
        heartbeat=_contains(last("type"), s.heartbeat_type),
        heartbeat_ms=own,
        checks=[(NO_HOST, host.isNull(), 'no "beat.hostname" (nor "host.name")')],
    )


def _flume(s: AdapterSettings, p: Mapping[str, Column], let: Let) -> _Out:
    from pyspark.sql import functions as F

    j, key, text = p["json"], p["key"], p["text"]
    key_ms = F.when(key.rlike(rf"^{KEY_MS_PATTERN}\z"), key.try_cast("bigint"))
    rest = F.substring(F.regexp_replace(text, r"^[ \t\n\r]+", ""), 2, 1 << 30)
    line = F.when(key.isNull(), text).otherwise(
        F.concat(F.lit('{"timestamp":'), jackson_quote(key), F.lit(","), rest)
    )
    return _Out(
        lines=F.array(line),
        host=_segment(j["host"]),
        event_ms=F.when(key_ms <= MAX_EVENT_MS, key_ms),
        heartbeat=_contains(j["type"], s.heartbeat_type),
        heartbeat_ms=parse_time(j["@timestamp"], s.timezone),
        checks=[(NO_HOST, F.coalesce(j["host"], F.lit("")) == "", 'no "host"')],
    )


def _json(s: AdapterSettings, p: Mapping[str, Column], let: Let) -> _Out:
    from pyspark.sql import functions as F

    j = p["json"]
    host = F.lit(s.json_host or "")
    return _Out(
        lines=F.array(p["text"]),
        host=_segment(host),
        event_ms=F.lit(None).cast("bigint"),
        heartbeat=_contains(j["type"], s.heartbeat_type),
        heartbeat_ms=parse_time(j["@timestamp"], s.timezone),
        checks=[(NO_HOST, host == "", "no host: a log_json source needs its host in the configuration")],
        always_kafka=True,
    )


def _ums(s: AdapterSettings, p: Mapping[str, Column], let: Let) -> _Out:
    from pyspark.sql import functions as F

    def when_starts(text: Column, prefix: str, then: Column) -> Column:
        return F.when(F.startswith(text, F.lit(prefix)), then)

    top = p["marked"]
    schema = let(
        "schema",
        when_starts(
            top["schema"],
            "{",
            F.from_json(top["schema"], "struct<namespace:string,fields:string>", JSON_OPTIONS),
        ),
    )
    ns_marked = schema["namespace"]
    namespace = let("namespace", F.substring(ns_marked, 2, 1 << 30))
    parts = let("parts", F.split(namespace, r"\.", -1))
    ns_ok = F.coalesce(F.startswith(ns_marked, F.lit(STRING_MARK)) & (F.size(parts) == 7), F.lit(False))
    fields = when_starts(schema["fields"], "[", F.from_json(schema["fields"], "array<string>", JSON_OPTIONS))
    names_marked = let(
        "names_marked",
        F.transform(
            fields, lambda f: when_starts(f, "{", F.from_json(f, "struct<name:string>", JSON_OPTIONS)["name"])
        ),
    )
    names_ok = F.coalesce(F.forall(names_marked, lambda n: F.startswith(n, F.lit(STRING_MARK))), F.lit(False))
    names = let("names", F.transform(names_marked, lambda n: F.substring(n, 2, 1 << 30)))
    payload = when_starts(top["payload"], "[", F.from_json(top["payload"], "array<string>", JSON_OPTIONS))
    tuples_marked = let(
        "tuples_marked",
        F.transform(
            payload,
            lambda t: when_starts(t, "{", F.from_json(t, "struct<tuple:string>", JSON_OPTIONS)["tuple"]),
        ),
    )
    tuples_ok = F.coalesce(F.forall(tuples_marked, lambda t: F.startswith(t, F.lit("["))), F.lit(False))
    tuples = let(
        "tuples", F.transform(tuples_marked, lambda t: F.from_json(t, "array<string>", JSON_OPTIONS))
    )
    lengths_ok = F.coalesce(F.forall(tuples, lambda t: F.size(t) == F.size(names)), F.lit(False))
    ns_item = F.concat(F.lit('"namespace":'), jackson_quote(namespace))

    def line(values: Column) -> Column:
        items = F.transform(
            values, lambda v, i: F.struct(F.try_element_at(names, i + 1).alias("n"), v.alias("v"))
        )
        kept = F.filter(items, lambda x: x["n"] != "namespace")
        rendered = F.transform(
            kept, lambda x: F.concat(jackson_quote(x["n"]), F.lit(":"), marked_json(x["v"]))
        )
        return F.concat(F.lit("{"), F.array_join(F.concat(rendered, F.array(ns_item)), ","), F.lit("}"))

    ts_at = F.array_position(names, "ums_ts_")
    first_ts = F.when(ts_at > 0, F.try_element_at(F.try_element_at(tuples, F.lit(1)), ts_at.cast("int")))
    first_text = let(
        "first_ts", F.when(F.startswith(first_ts, F.lit(STRING_MARK)), F.substring(first_ts, 2, 1 << 30))
    )
    event = parse_time(first_text, s.timezone)
    host = F.concat_ws("_", *(F.try_element_at(parts, F.lit(i)) for i in (2, 3, 4, 6)))
    key = p["key"]
    hb_key = F.coalesce(_contains(key, UMS_HEARTBEAT_MARK), F.lit(False))
    key_parts = let("key_parts", F.split(key, r"\.", -1))
    times = F.when(F.size(key_parts) == 10, F.split(F.try_element_at(key_parts, F.lit(9)), r"\|", -1))
    tx = let("tx", F.try_element_at(times, F.lit(2)))
    tx_ms = F.when(tx.rlike(rf"^{KEY_MS_PATTERN}\z"), tx.try_cast("bigint"))
    tx_ok = F.coalesce(tx_ms <= MAX_EVENT_MS, F.lit(False))
    shape = "data_increment_heartbeat.<namespace>.<time>|<txTime>|...wh_placeholder"
    hb_host = F.concat_ws("_", *(F.try_element_at(key_parts, F.lit(i)) for i in (3, 4, 5, 7)))
    return _Out(
        lines=F.when(hb_key, F.array().cast("array<string>")).otherwise(F.transform(tuples, line)),
        host=_segment(F.when(hb_key, hb_host).otherwise(host)),
        event_ms=F.when(hb_key, tx_ms).otherwise(event),
        heartbeat=hb_key,
        heartbeat_ms=F.when(hb_key, tx_ms),
        checks=[
            (BAD_UMS, ~ns_ok, "not a UMS message: schema.namespace is not a 7-part string"),
            (BAD_UMS, ~names_ok, "not a UMS message: schema.fields is not a list of fields with a name"),
            (BAD_UMS, ~tuples_ok, "not a UMS message: payload is not a list of tuples"),
            (BAD_UMS, ~lengths_ok, "not a UMS message: a tuple's length differs from the fields'"),
        ],
        heartbeat_key=hb_key,
        heartbeat_error=F.when(~tx_ok, F.lit(f"a heartbeat key not of the form {shape}")),
    )


_BEAT = f"struct<type:string,`@timestamp`:string,{CORRUPT}:string>"
_SCHEMAS = {
    "log_rsyslog": f"struct<host:string,path:string,timestamp:string,message:string,{CORRUPT}:string>",
    "log_logstash": f"struct<host:string,`@timestamp`:string,type:string,{CORRUPT}:string>",
    "log_logstash_json": f"struct<host:string,`@timestamp`:string,type:string,{CORRUPT}:string>",
    "log_filebeat": f"struct<{CORRUPT}:string>",
    "log_flume": f"struct<host:string,type:string,`@timestamp`:string,{CORRUPT}:string>",
    "log_json": f"struct<type:string,`@timestamp`:string,{CORRUPT}:string>",
    "log_ums": f"struct<{CORRUPT}:string>",
}
_BY_TYPE = {
    "log_rsyslog": _rsyslog,
    "log_logstash": _logstash,
    "log_logstash_json": _logstash,
    "log_filebeat": _filebeat,
    "log_flume": _flume,
    "log_json": _json,
    "log_ums": _ums,
}
