"""Reconcile: a table's full pull and increments, read from its result topic, -> one snapshot.

Usage: dbus reconcile --source demo --table shop.orders --out /data/orders.parquet [--master M]
           [--format parquet|jdbc --jdbc-table db.orders]
   or: mapfile -t args < <(dbus spark args)
       spark-submit "${args[@]}" fullpuller/reconcile.py --config conf/dbus.yaml --source demo
           --table shop.orders --out /data/orders.parquet

The job reads the table's result topic (``topics.result``) with Spark's Kafka batch source, from the
earliest offsets to the end offsets taken when it starts, keeps the data messages of the table
(``data_increment_data`` and ``data_initial_data``), and keeps per primary key the tuple with the
greatest ``ums_id_`` (ties: the greatest ``ums_uid_``, both compared as numbers). A key whose winner is
a delete (``d``, or a before image ``b`` whose update moved the row to another key) is dropped. All row
work runs in the JVM; Python only looks at the distinct (namespace, fields) pairs, and joins the chunks of
records above the Kafka record limit (header ``ums_chunk``, rare: one huge row each) on the driver with
``ums.chunks.Reassembler``. See docs/reconcile.md.

Result, printed as one JSON line::

    {"table": "shop.orders", "rows": 1000, "deletes_applied": 12, "messages_read": 40, "tuples_read": 1500,
     "max_ums_id": 1030000012345678, "versions": [0, 1], "topic": "demo.shop.result", "out": "/data/o"}

On a cluster master the executors write the Parquet parts, on their machines: ``--out`` must then be a
URI of a filesystem every worker and the driver share (``hdfs://``, ``s3a://``, or ``file:///shared/...``
on a volume mounted on every worker); a plain path is refused (``check_out``), as the parts would land on
the executors' local disks and only ``_SUCCESS`` on the driver's.

Exit codes: 0 written, 1 failed (no data, Spark error), 2 bad configuration or arguments (a plain ``--out``
path on a cluster master among them), 3 an endpoint could not be reached.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from dbuslib.errors import ConfigError, DbusError
from ums.errors import BadNamespaceError
from ums.message import Op, ProtocolType
from ums.namespace import Namespace

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

    from dbuslib.config import DbusConfig, KafkaEndpoint

DATA_TYPES = (ProtocolType.DATA_INCREMENT_DATA.value, ProtocolType.DATA_INITIAL_DATA.value)
SYSTEM_COLUMNS = ("ums_id_", "ums_ts_", "ums_op_", "ums_uid_")
GONE_OPS = (Op.DELETE.value, Op.BEFORE.value)  # a winner with these ops means: no row under this key

# Spark type of a snapshot column by UMS type, where the UMS text casts exactly; the rest stay strings. A
# UMS long is Spark's long (Parquet int64) when its source column is signed BIGINT, INT UNSIGNED or BIT(n)
# up to 63 bits; BIGINT UNSIGNED and BIT(64) reach 2^64-1, and a column whose source type is not known may
# be one of them: decimal(20,0) (a long's try_cast gave null above 2^63-1). See ``OutColumn.spark_type``.
SPARK_TYPES = {
    "int": "int",
    "long": "bigint",
    "float": "double",
    "double": "double",
    "boolean": "boolean",
}
WIDE_LONG = "decimal(20,0)"
# integer COLUMN_TYPEs (base names) whose every value fits a signed 64-bit long, signed or unsigned
_INT64_BASES = frozenset({"tinyint", "smallint", "mediumint", "int", "integer", "year", "bool", "boolean"})
_BIT_INT64_WIDTH = 63

# Tuple values are read as strings: Spark's JSON parser gives a number token as its text (42 -> "42",
# 1.1 -> "1.1", 1e22 -> "1.0E22"), so int/long/decimal keep every digit and floats cast back exactly.
_HEADER = (
    "protocol STRUCT<type: STRING>, schema STRUCT<namespace: STRING, "
    "fields: ARRAY<STRUCT<name: STRING, type: STRING, encoded: BOOLEAN>>>"
)
_MESSAGE = _HEADER + ", payload ARRAY<STRUCT<tuple: ARRAY<STRING>>>"
_SEEN = "__dbus_seen"  # tuples seen per key (not "n": a user column may be called so)
_UID_ORDER = "__dbus_uid_order"  # ums_uid_ as decimal(38,0): 25 digits do not fit a long


class NoPrimaryKeyError(DbusError):
    """The table has no primary key and none was given: reconcile cannot tell rows apart."""

    code = "RECONCILE_NO_PRIMARY_KEY"
    exit_code = 2


class NoDataError(DbusError):
    """The result topic holds no data message of the table (or the table's columns lack the key)."""

    code = "RECONCILE_NO_DATA"


# ---------------------------------------------------------------- pure core


@dataclass(frozen=True)
class OutColumn:
    """One snapshot column: a field of the table's newest version. ``{"name": "id", "ums_type": "long",
    "encoded": false, "column_type": "bigint(20) unsigned"}``; ``ums_type`` is ``string`` when the
    version's messages disagree; ``column_type`` the source column's MySQL COLUMN_TYPE (None: not known)."""

    name: str
    ums_type: str
    encoded: bool = False
    column_type: str | None = None

    @property
    def spark_type(self) -> str:
        if self.ums_type == "long" and not fits_int64(self.column_type):
            return WIDE_LONG
        return SPARK_TYPES.get(self.ums_type, "string")


def fits_int64(column_type: str | None) -> bool:
    """Whether every value of a source column of this COLUMN_TYPE fits a signed 64-bit long: signed
    BIGINT, the smaller integers signed or not, BIT(n) up to 63 bits. ``"bigint(20)"`` -> True,
    ``"bigint(20) unsigned"``, ``"bit(64)"``, ``"serial"`` (BIGINT UNSIGNED) and None -> False."""
    from ums.errors import BadColumnTypeError
    from ums.types import parse_column_type

    if column_type is None:
        return False
    try:
        parsed = parse_column_type(column_type)
    except BadColumnTypeError:
        return False
    if parsed.base == "bit":
        width = parsed.args.strip() or "1"
        return width.isascii() and width.isdigit() and int(width) <= _BIT_INT64_WIDTH
    if parsed.base == "bigint":  # ZEROFILL implies UNSIGNED (COLUMN_TYPE shows both)
        return not parsed.unsigned and "zerofill" not in column_type.lower()
    return parsed.base in _INT64_BASES


def with_column_types(columns: Sequence[OutColumn], column_types: dict[str, str]) -> tuple[OutColumn, ...]:
    """``columns`` with their source ``column_type`` from ``column_types`` (column name -> COLUMN_TYPE,
    matched as MariaDB matches names: case-insensitively); a column not there keeps None."""
    from dataclasses import replace

    folded = {name.lower(): t for name, t in column_types.items()}
    return tuple(
        replace(c, column_type=column_types.get(c.name, folded.get(c.name.lower()))) for c in columns
    )


@dataclass(frozen=True)
class ReconcileResult:
    """What a run read and wrote; ``max_ums_id`` is None only for an empty snapshot."""

    table: str
    rows: int
    deletes_applied: int
    messages_read: int
    tuples_read: int
    max_ums_id: int | None
    versions: tuple[int, ...]
    topic: str
    out: str
    reset_ums_id: int | None = None  # keys whose winner is older are gone (fullpuller/resets.py)


def order_key(ums_id: str | int, ums_uid: str | int) -> tuple[int, int]:
    """The merge order of a tuple: ``ums_id_``, then ``ums_uid_``, as numbers (never as text)."""
    return int(ums_id), int(ums_uid)


def merge(tuples: Iterable[tuple[Any, str | int, str | int, str, Any]]) -> dict[Any, Any]:
    """The reconcile rule in plain Python (the Spark job applies the same rule in the JVM).

    ``tuples`` are ``(key, ums_id_, ums_uid_, ums_op_, row)`` in any order; the result maps each key
    whose winning tuple (greatest ``order_key``) is not a delete or before image to that tuple's row.
    """
    best: dict[Any, tuple[tuple[int, int], str, Any]] = {}
    for key, ums_id, ums_uid, op, row in tuples:
        order = order_key(ums_id, ums_uid)
        if key not in best or order > best[key][0]:
            best[key] = (order, op, row)
    return {key: row for key, (_, op, row) in best.items() if op not in GONE_OPS}


def table_versions(
    heads: Iterable[tuple[str, Sequence[Any]]], schema: str, table: str
) -> dict[str, tuple[Namespace, tuple[Any, ...]]]:
    """The namespaces of ``schema.table`` among ``(namespace text, fields)`` pairs: text -> parsed, fields.

    Unparseable namespaces and other tables are left out. One namespace may come with several field
    lists (a masking rule changed between messages); the last one seen is kept for the version list.
    """
    found: dict[str, tuple[Namespace, tuple[Any, ...]]] = {}
    for text, fields in heads:
        try:
            ns = Namespace.parse(text)
        except BadNamespaceError:
            continue
        if ns.schema == schema and ns.table == table:
            found[text] = (ns, tuple(fields))
    return found


def output_columns(field_lists: Iterable[Sequence[Any]]) -> tuple[OutColumn, ...]:
    """Snapshot columns from the field lists of the newest version: user fields in order; a field whose
    type differs between the lists becomes ``string``; ``encoded`` if any list says so.

    Each field is a mapping or object with ``name``, ``type`` and ``encoded``.
    """
    names: list[str] = []
    types: dict[str, set[str]] = {}
    encoded: dict[str, bool] = {}
    for fields in field_lists:
        for f in fields:
            name, ums_type, enc = _get(f, "name"), _get(f, "type"), bool(_get(f, "encoded"))
            if name in SYSTEM_COLUMNS:
                continue
            if name not in types:
                names.append(name)
                types[name], encoded[name] = set(), False
            types[name].add(ums_type)
            encoded[name] = encoded[name] or enc
    return tuple(OutColumn(n, min(types[n]) if len(types[n]) == 1 else "string", encoded[n]) for n in names)


def newest(
    versions: dict[str, tuple[Namespace, tuple[Any, ...]]], fields_seen: Iterable[tuple[str, Sequence[Any]]]
) -> tuple[int, list[Sequence[Any]]]:
    """The newest version number and every field list seen under it."""
    top = max(ns.version for ns, _ in versions.values())
    return top, [f for text, f in fields_seen if text in versions and versions[text][0].version == top]


def _get(field: Any, key: str) -> Any:
    return field[key] if isinstance(field, dict) else getattr(field, key)


def check_out(out: str, master: str, fmt: str = "parquet") -> None:
    """ConfigError when a Parquet ``out`` is a plain path (no scheme) and ``master`` is not local: its
    executors, on other machines, would write the parts on their own disks (and the driver a lone
    ``_SUCCESS`` on its). A URI with a scheme is taken as the user's word that every worker reaches it
    (``hdfs://nn/x``, ``s3a://b/x``, ``file:///shared/x`` on a volume mounted everywhere)."""
    from dbuslib import spark

    if fmt != "parquet" or not out or spark.is_local(master):
        return
    if spark.scheme(out) == "file" and not out.startswith("file:"):
        msg = (
            f"--out {out} is a path on this machine, and the master {master} runs the executors elsewhere: "
            "each would write its Parquet parts on its own disk. Use a shared filesystem URI that every "
            "worker and this machine reach: hdfs://namenode:8020/path, s3a://bucket/path, or "
            "file:///shared/path on a volume mounted on every worker"
        )
        raise ConfigError(msg)


def parse_table(text: str) -> tuple[str, str]:
    """``shop.orders`` -> ``("shop", "orders")`` (``ums.names.split_table``: a dotted name in backquotes)."""
    from ums.names import split_table

    try:
        return split_table(text)
    except ValueError as e:
        msg = f"--table {e}"
        raise ValueError(msg) from None


# ---------------------------------------------------------------- per-row formats (docs/formats.md)

_OPS = {"c": Op.INSERT.value, "u": Op.UPDATE.value, "d": Op.DELETE.value, "r": Op.INSERT.value}
# what the per-row decode gives per tuple: the UMS tuple's system fields and values by column name (as
# text, as Spark's JSON reader gives a UMS tuple's values), its namespace, and the version's fields
# (JSON, on a partition's first tuple of each shape only: the first pass's heads) or a record's error
ROW_TUPLES = (
    "ns STRING, fields STRING, ums_id_ LONG, ums_ts_ STRING, ums_op_ STRING, ums_uid_ STRING, "
    "vals MAP<STRING, STRING>, error STRING"
)


def value_text(value: Any) -> str | None:
    """A UMS wire value as the text Spark's JSON reader gives for it as a STRING (``_MESSAGE``): a
    string as it is, a number or boolean as its JSON token, null as None."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    return str(value) if isinstance(value, int) else json.dumps(value)


def row_tuples(
    records: Iterable[tuple[bytes | None, bytes | None, Sequence[tuple[str, bytes]] | None, str]],
    fmt: str,
    schema: str,
    table: str,
    key: Sequence[str],
    schemas: dict[int, str] | None = None,
) -> Iterable[tuple[Any, ...]]:
    """The UMS tuples of the per-row records of ``schema.table`` (``(key, value, headers, where)``, in
    the format ``fmt``; ``key``: the reconcile's key columns), as ``ROW_TUPLES`` rows: a create or a
    pulled row is an insert (``i``), an update whose before image has another key a before image
    (``b``) under the old key and the update (``u``) under the new one, a delete a delete (``d``) with
    its before image; a tombstone gives nothing. A record that does not decode gives one row with its
    ``error`` (naming ``where``)."""
    from ums.formats import UMS_ID_HEADER, decode
    from ums.timefmt import ums_ts_ms

    # per table shape (a decoder gives the same object for a version: by identity, not by its deep hash):
    # its namespace text and field names
    shapes: dict[int, tuple[Any, str, list[str]]] = {}
    last_ts: tuple[int, str] | None = None
    lookup = None if schemas is None else schemas.__getitem__
    for record_key, value, headers, where in records:
        named = dict(headers or ())
        if value is None or UMS_ID_HEADER not in named:  # a tombstone; a UMS message (the UMS passes')
            continue
        try:
            change = decode(fmt, record_key, value, tuple(headers or ()), lookup)
        except (ValueError, ArithmeticError, TypeError, LookupError, AttributeError, EOFError) as e:
            if _looks(value, named) not in (fmt, None):
                continue  # another table's format, on a topic per schema: not a record of this table
            yield None, None, None, None, None, None, None, f"{where}: not a {fmt} record: {e}"
            continue
        if change is None:
            continue
        shape = change.table
        if shape.schema != schema or shape.table != table:
            continue
        fields = None
        known = shapes.get(id(shape))
        if known is None or known[0] is not shape:
            ns = str(Namespace("mysql", shape.ds, shape.schema, shape.table, shape.version))
            if all(other[1] != ns or other[0] != shape for other in shapes.values()):
                fields = json.dumps(
                    [{"name": f.name, "type": f.type.value, "encoded": f.encoded} for f in shape.fields]
                )
            if len(shapes) >= 1024:  # a decoder that made a new shape per record: no more than this kept
                shapes.clear()
            known = shapes[id(shape)] = (shape, ns, [f.name for f in shape.fields])
        _, ns, names = known
        if last_ts is None or last_ts[0] != change.at.ts_ms:
            try:
                last_ts = (change.at.ts_ms, ums_ts_ms(change.at.ts_ms))
            except (ValueError, OverflowError) as e:
                yield None, None, None, None, None, None, None, f"{where}: ts_ms {change.at.ts_ms!r}: {e}"
                continue
        ts = last_ts[1]
        images: list[tuple[str, tuple[Any, ...] | None]] = []
        if change.op == "u" and change.before is not None and change.after is not None:
            key_at = [names.index(k) for k in key if k in names]
            if [change.before[i] for i in key_at] != [change.after[i] for i in key_at]:
                images.append((Op.BEFORE.value, change.before))
        images.append((_OPS[change.op], change.before if change.op == "d" else change.after))
        for op, image in images:
            vals = {n: value_text(v) for n, v in zip(names, image or (), strict=False)}
            yield ns, fields, change.at.ums_id, ts, op, change.ums_uid, vals, None
            fields = None


def _looks(value: bytes, headers: dict[str, bytes]) -> str | None:
    """The format ``value`` looks like (``ums.formats.sniff``), None when it looks like none."""
    from ums.formats import sniff

    try:
        return sniff(value, headers)
    except ValueError:
        return None


def _records_of(
    rows: Iterable[Any],
) -> Iterable[tuple[bytes | None, bytes | None, list[tuple[str, bytes]], str]]:
    for r in rows:
        headers = [(h["key"], bytes(h["value"])) for h in r["headers"] or () if h["value"] is not None]
        value = None if r["value"] is None else bytes(r["value"])
        key = None if r["key"] is None else bytes(r["key"])
        yield key, value, headers, f"{r['topic']}/{r['partition']}@{r['offset']}"


def read_row_tuples(
    spark: SparkSession,
    cfg: DbusConfig,
    topic: str,
    ending: str,
    fmt: str,
    schema: str,
    table: str,
    key: Sequence[str],
) -> DataFrame:
    """The per-row records of ``schema.table`` in ``topic`` (earliest to ``ending``) as ``ROW_TUPLES``
    rows, decoded by ``ums.formats.decode`` on the executors. For ``avro`` the writers' schemas are
    fetched here, on the driver, from ``endpoints.registry`` (each schema id in the records, once), and
    shipped with the task: the executors call no registry."""
    from dbuslib.spark import kafka_source

    records = (
        kafka_source(spark.read, cfg.endpoints.kafka)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("endingOffsets", ending)
        .option("includeHeaders", "true")
        .load()
        .select("key", "value", "headers", "topic", "partition", "offset")
    )
    schemas = writer_schemas(cfg, records) if fmt == "avro" else None

    def decode_partition(rows: Iterable[Any]) -> Iterable[tuple[Any, ...]]:
        return row_tuples(_records_of(rows), fmt, schema, table, key, schemas)

    return spark.createDataFrame(records.rdd.mapPartitions(decode_partition), ROW_TUPLES)


def row_heads(rows: DataFrame, shown: int = 20) -> list[tuple[str, list[dict[str, Any]], int]]:
    """``read_heads`` of ``read_row_tuples``' rows: (namespace, fields, tuples of the namespace), the
    count given with the namespace's first field list. The records that did not decode are counted and
    the first ``shown`` named on stderr, as ``join_chunks`` names a chunk it skips."""
    from pyspark.sql import functions as F

    errors = rows.where(F.col("error").isNotNull())
    bad = errors.count()
    if bad:
        for r in errors.select("error").limit(shown).collect():
            print(f"reconcile: skipped: {r['error']}", file=sys.stderr)
        print(f"reconcile: {bad} record(s) did not decode and were skipped", file=sys.stderr)
    counts = {
        r["ns"]: r["count"] for r in rows.where(F.col("error").isNull()).groupBy("ns").count().collect()
    }
    heads = []
    for r in rows.where(F.col("fields").isNotNull()).select("ns", "fields").distinct().collect():
        heads.append((r["ns"], json.loads(r["fields"]), counts.pop(r["ns"], 0)))
    return heads


def row_columns(rows: DataFrame, columns: Sequence[OutColumn]) -> DataFrame:
    """``tuples_of``'s columns from ``read_row_tuples``' rows: the system fields, then each snapshot
    column from the tuple's values by name (absent in an older version: null), typed as there."""
    from pyspark.sql import functions as F

    good = rows.where(F.col("error").isNull())
    return good.select(
        F.col("ums_id_"),
        F.col("ums_ts_"),
        F.col("ums_op_"),
        F.col("ums_uid_"),
        F.col("ums_uid_").cast("decimal(38,0)").alias(_UID_ORDER),
        *(_typed(F.col("vals")[c.name], c) for c in columns),
    )


def marker_topic(cfg: DbusConfig, ds: str, schema: str, topic: str, ending: str) -> tuple[str, str]:
    """Where the full pulls of a per-row table put their markers (its schema's ``topics.events``) and
    that topic's end offsets now; ``(topic, ending)`` when it does not exist (no pull wrote there)."""
    from dbuslib import topics

    events = topics.events_topic(ds, cfg.source(ds), schema)
    try:
        return events, end_offsets_json(cfg, events)[0]
    except NoDataError:
        return topic, ending


def writer_schemas(cfg: DbusConfig, records: DataFrame) -> dict[int, str]:
    """The registry's schema of every id that the Confluent-framed keys and values of the per-row records
    (header ``ums_id_``) of ``records`` name (a UMS Avro message may start with a zero byte too)."""
    from pyspark.sql import functions as F

    if cfg.endpoints.registry is None:
        msg = "an avro result topic, and no endpoints.registry to read its schemas from"
        raise ConfigError(msg)
    from dbuslib.registry import Registry
    from ums.formats import UMS_ID_HEADER

    per_row = F.coalesce(F.exists(F.col("headers"), lambda h: h["key"] == UMS_ID_HEADER), F.lit(False))
    records = records.where(per_row)
    ids: set[int] = set()
    for name in ("key", "value"):
        col = F.col(name)
        framed = records.where((F.length(col) >= 5) & (F.substring(col, 1, 1) == F.unhex(F.lit("00"))))
        found = framed.select(F.conv(F.hex(F.substring(col, 2, 4)), 16, 10).cast("long").alias("id"))
        ids |= {r["id"] for r in found.distinct().collect()}
    registry = Registry.of(cfg)
    return {i: registry.schema(i) for i in sorted(ids)}


# ---------------------------------------------------------------- edges: MySQL, Kafka, Spark


def primary_key_of(cfg: DbusConfig, ds: str, schema: str, table: str) -> tuple[str, ...]:
    """The primary key columns of ``schema.table`` on the source, in key order (``catalog.primary_keys``)."""
    from fullpuller import catalog

    key = catalog.primary_keys(cfg.source(ds).mysql, [(schema, table)])[(schema, table)]
    if not key:
        msg = (
            f"{ds}: {schema}.{table} has no primary key on the source (or does not exist): "
            "pass --primary-key col[,col...]"
        )
        raise NoPrimaryKeyError(msg)
    return key


def source_column_types(cfg: DbusConfig, ds: str, schema: str, table: str, version: int) -> dict[str, str]:
    """Column name -> MySQL COLUMN_TYPE of ``schema.table`` at ``version``: the version's columns in the
    meta store (what the appender and the full puller recorded), else the table's columns on the source
    now (a topic written without a DBus stage, a meta store of another deployment), else nothing (the
    table is gone: every UMS long is then decimal(20,0))."""
    from dbuslib import mysql
    from dbuslib.metastore import MetaStore
    from fullpuller import catalog

    store = MetaStore(cfg.endpoints.meta_store.url.get_secret_value())
    try:
        store.create_schema()  # idempotent: a stack where no appender ran yet has no version table
        found = [v for v in store.history(ds, schema, table) if v.version == version]
    finally:
        store.dispose()
    if found:
        return {c.name: c.column_type for c in found[0].columns}
    db = mysql.connect(cfg.source(ds).mysql)
    try:
        info = catalog.table_info(db, schema, table)
    finally:
        db.close()
    return {} if info is None else {c.name: c.column_type for c in info.columns}


def end_offsets_json(cfg: DbusConfig, topic: str) -> tuple[str, int]:
    """Spark's ``endingOffsets`` for ``topic`` as it is now, and the number of records before it."""
    from dbuslib import kafka

    ends = kafka.end_offsets(cfg.endpoints.kafka, [topic])
    if not ends:
        msg = f"topic {topic!r} does not exist on {cfg.endpoints.kafka.bootstrap_servers}"
        raise NoDataError(msg)
    return json.dumps({topic: {str(tp.partition): off for tp, off in ends.items()}}), sum(ends.values())


# Spark's JSON reader (Jackson) refuses a string value above 20,000,000 characters by default, and
# from_json then gives null for the whole message: a 15 MB BLOB (20 MB of Base64) vanished from the
# snapshot without a word. UMS values are bounded by the message size, which chunks lift (ums.chunks).
JSON_OPTIONS = {"maxStringLen": str(2**31 - 1)}
# Heap of the reconcile's own Spark (unless spark.conf sets spark.driver.memory): messages of up to
# endpoints.kafka.max_message_bytes, and chunked tuples joined beyond it, are parsed whole, several at a
# time; Spark's default 1g ran out on 30 MB BLOBs. The JVM takes only what it uses.
DRIVER_MEMORY = "4g"


def read_topic(spark: SparkSession, kafka: KafkaEndpoint | str, topic: str, ending: str) -> DataFrame:
    """The record values of the topic from the earliest offsets to ``ending`` (fixed, so both passes read
    the same), chunked records joined (``join_chunks``): one ``value`` column."""
    from dbuslib.spark import kafka_source

    records = (
        kafka_source(spark.read, kafka)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("endingOffsets", ending)
        .option("includeHeaders", "true")
        .load()
    )
    return join_chunks(spark, records)


def join_chunks(spark: SparkSession, records: DataFrame) -> DataFrame:
    """``value`` of every whole record, and of every chunked record (ums.chunks) whose chunks are all in,
    joined on the driver in offset order per partition. A sequence cut at the end offsets (its producer
    was still writing) is left out, as is one that does not join (logged): the other records go on."""
    from pyspark.sql import functions as F

    from ums.chunks import CHUNK, BadChunkError, Reassembler

    # a record without headers has null ``headers``, and exists() of null is null
    is_chunk = F.coalesce(F.exists(F.col("headers"), lambda h: h["key"] == CHUNK), F.lit(False))
    whole = records.where(~is_chunk).select("value")
    parts = (
        records.where(is_chunk)
        .select("partition", "offset", "value", "headers")
        .orderBy("partition", "offset")
    )
    joined: list[tuple[bytes]] = []
    assemblers: dict[int, Reassembler] = {}
    for r in parts.toLocalIterator():
        assembler = assemblers.setdefault(r["partition"], Reassembler())
        headers = [(h["key"], h["value"]) for h in r["headers"]]
        try:
            value = assembler.push(r["value"], headers, f"partition {r['partition']}@{r['offset']}")
        except BadChunkError as e:
            print(f"reconcile: skipped: {e}", file=sys.stderr)
            continue
        if value is not None:
            joined.append((value,))
    if not joined:
        return whole
    return whole.unionByName(spark.createDataFrame(joined, "value binary"))


def read_heads(records: DataFrame) -> list[tuple[str, list[dict[str, Any]], int]]:
    """Distinct (namespace, fields) of the data messages, with their message counts (first pass)."""
    from pyspark.sql import functions as F

    heads = (
        records.select(F.from_json(F.col("value").cast("string"), _HEADER, JSON_OPTIONS).alias("m"))
        .where(F.col("m.protocol.type").isin(*DATA_TYPES))
        .groupBy(F.col("m.schema.namespace").alias("ns"), F.col("m.schema.fields").alias("fields"))
        .count()
        .collect()
    )
    return [(r["ns"], [f.asDict() for f in r["fields"] or []], r["count"]) for r in heads]


def tuples_of(records: DataFrame, namespaces: list[str], columns: Sequence[OutColumn]) -> DataFrame:
    """One row per tuple of the table's data messages: system fields, then the snapshot's columns,
    each looked up by name in its own message's fields (absent in an older version: null)."""
    from pyspark.sql import functions as F

    names = list(SYSTEM_COLUMNS) + [c.name for c in columns]
    field_names = F.col("m.schema.fields.name")
    wanted = F.col("m.protocol.type").isin(*DATA_TYPES) & F.col("m.schema.namespace").isin(*namespaces)
    positions = [F.array_position(field_names, n).cast("int").alias(f"_p{i}") for i, n in enumerate(names)]
    message = F.from_json(F.col("value").cast("string"), _MESSAGE, JSON_OPTIONS)
    per_message = (
        records.select(message.alias("m"))
        .where(wanted)
        .select(*positions, F.explode("m.payload.tuple").alias("t"))
    )
    value = [F.get(F.col("t"), F.col(f"_p{i}") - 1) for i in range(len(names))]
    system = [
        value[0].cast("long").alias("ums_id_"),
        value[1].alias("ums_ts_"),
        value[2].alias("ums_op_"),
        value[3].alias("ums_uid_"),
        value[3].cast("decimal(38,0)").alias(_UID_ORDER),
    ]
    user = [_typed(value[4 + i], c) for i, c in enumerate(columns)]
    return per_message.select(*system, *user)


def _typed(value: Column, column: OutColumn) -> Column:
    metadata = {"ums_type": column.ums_type, "encoded": column.encoded}
    if column.spark_type == "string":
        return value.alias(column.name, metadata=metadata)
    return value.try_cast(column.spark_type).alias(column.name, metadata=metadata)


def winners(rows: DataFrame, key: Sequence[str]) -> DataFrame:
    """Per key: the tuple with the greatest (ums_id_, ums_uid_) as struct ``w``, and ``_SEEN`` tuples seen.

    The greatest position is found from the key and position columns alone, then the winning tuple is
    joined back: the aggregation never copies a tuple's values, which may be as large as a message
    (a 30 MB BLOB ran the driver out of heap when the whole tuple was the max() of its key). A tuple
    written twice (at least once delivery) wins twice and is kept once. Keys compare null-safe."""
    from pyspark.sql import functions as F

    keys = [f"__dbus_k{i}" for i in range(len(key))]
    best = rows.groupBy(*(rows[k].alias(a) for k, a in zip(key, keys, strict=True))).agg(
        F.max(F.struct(rows["ums_id_"], rows[_UID_ORDER])).alias("__dbus_best"),
        F.count(F.lit(1)).alias(_SEEN),
    )
    same_key = [rows[k].eqNullSafe(best[a]) for k, a in zip(key, keys, strict=True)]
    won = rows.join(
        best,
        [
            *same_key,
            rows["ums_id_"] == best["__dbus_best.ums_id_"],
            rows[_UID_ORDER] == best[f"__dbus_best.{_UID_ORDER}"],
        ],
    )
    rest = [won[c] for c in rows.columns if c not in ("ums_id_", _UID_ORDER)]
    return won.select(
        *(won[a].alias(k) for k, a in zip(key, keys, strict=True)),
        F.struct(won["ums_id_"], won[_UID_ORDER], *rest).alias("w"),
        won[_SEEN],
    ).dropDuplicates(list(key))


def write(snapshot: DataFrame, cfg: DbusConfig, ds: str, out: str, fmt: str, jdbc_table: str | None) -> None:
    """Parquet at ``out`` (replaced), or the table ``jdbc_table`` (``db.table``) on the source server."""
    if fmt == "parquet":
        snapshot.write.mode("overwrite").parquet(out)
        return
    if fmt != "jdbc" or not jdbc_table or jdbc_table.count(".") != 1:
        msg = f"format {fmt!r}: use parquet, or jdbc with --jdbc-table db.table"
        raise ValueError(msg)
    from dbuslib import mysql

    conn = cfg.source(ds).mysql
    account = conn.writer or conn
    database, table = jdbc_table.split(".")
    (
        snapshot.write.mode("overwrite")
        .format("jdbc")
        .option("url", mysql.jdbc_url(conn, database))
        .option("driver", "org.mariadb.jdbc.Driver")
        .option("dbtable", f"`{table}`")
        .option("user", account.user)
        .option("password", account.password.get_secret_value())
        .save()
    )


def run(
    spark: SparkSession,
    cfg: DbusConfig,
    ds: str,
    schema: str,
    table: str,
    out_path: str,
    *,
    primary_key: tuple[str, ...] | None = None,
    fmt: str = "parquet",
    jdbc_table: str | None = None,
    topic: str | None = None,
) -> ReconcileResult:
    """Reconcile ``schema.table`` of source ``ds`` into ``out_path`` (or ``jdbc_table``)."""
    from pyspark.sql import functions as F

    from dbuslib import topics
    from fullpuller.resets import table_reset
    from ums.formats import PER_ROW

    src = cfg.source(ds)
    topic = topic or topics.result_topic(ds, src, schema, table)
    row_format = src.output.format_for(schema, table)
    key = tuple(primary_key) if primary_key else primary_key_of(cfg, ds, schema, table)
    ending, _ = end_offsets_json(cfg, topic)
    records = read_topic(spark, cfg.endpoints.kafka, topic, ending)
    heads = read_heads(records)  # UMS messages (of a table written in UMS before its format changed, too)
    per_row = None
    if row_format in PER_ROW:
        per_row = read_row_tuples(spark, cfg, topic, ending, row_format, schema, table, key).persist()
        heads += row_heads(per_row)
    versions = table_versions(((ns, f) for ns, f, _ in heads), schema, table)
    if not versions:
        seen = sorted({h[0] for h in heads})[:5]
        msg = f"{topic}: no data message of {schema}.{table} (namespaces seen: {seen})"
        raise NoDataError(msg)
    top, field_lists = newest(versions, ((ns, f) for ns, f, _ in heads))
    columns = output_columns(field_lists)
    if any(c.ums_type == "long" for c in columns):  # signed or not: the source's column types say
        columns = with_column_types(columns, source_column_types(cfg, ds, schema, table, top))
    missing = [k for k in key if k not in {c.name for c in columns}]
    if missing:
        msg = f"{schema}.{table} version {top}: key column(s) {missing} are not fields of the messages"
        raise NoDataError(msg)
    spark.sparkContext.setJobDescription(f"reconcile {ds} {schema}.{table}")
    rows = tuples_of(records, sorted(versions), columns)
    if per_row is not None:
        rows = rows.unionByName(row_columns(per_row, columns))
    best = winners(rows, key).persist()
    try:
        markers = (topic, ending) if per_row is None else marker_topic(cfg, ds, schema, topic, ending)
        reset = table_reset(spark, cfg, ds, schema, table, *markers)
        gone = F.col("w.ums_op_").isin(*GONE_OPS)
        if reset is not None:  # rows that left without a rows event (TRUNCATE, row loss + re-pull)
            gone = gone | (F.col("w.ums_id_") < F.lit(reset))
        stats = best.agg(
            F.count(F.when(gone, 1)).alias("gone"),
            F.count(F.lit(1)).alias("keys"),
            F.sum(_SEEN).alias("tuples"),
            F.max("w.ums_id_").alias("max_id"),
        ).first()
        out_cols = [F.col(f"w.{c}").alias(c) for c in SYSTEM_COLUMNS] + [
            F.col(f"w.`{c.name}`").alias(c.name, metadata={"ums_type": c.ums_type, "encoded": c.encoded})
            for c in columns
        ]
        write(best.where(~gone).select(*out_cols), cfg, ds, out_path, fmt, jdbc_table)
    finally:
        best.unpersist()
        if per_row is not None:
            per_row.unpersist()
    if stats is None:  # an aggregate without grouping gives one row, even over no rows
        msg = f"{schema}.{table}: the snapshot's counts gave no row"
        raise RuntimeError(msg)
    return ReconcileResult(
        table=f"{schema}.{table}",
        rows=stats["keys"] - stats["gone"],
        deletes_applied=stats["gone"],
        messages_read=sum(n for ns, _, n in heads if ns in versions),
        tuples_read=int(stats["tuples"] or 0),
        max_ums_id=stats["max_id"],
        versions=tuple(sorted({ns.version for ns, _ in versions.values()})),
        topic=topic,
        out=jdbc_table if fmt == "jdbc" and jdbc_table else out_path,  # write() refused jdbc without one
        reset_ums_id=reset,
    )


# ---------------------------------------------------------------- command line


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of ``dbus reconcile`` (and of this file under spark-submit, with ``--config``)."""
    p.add_argument("--source", required=True, help="source name under 'sources'")
    p.add_argument("--table", required=True, help="schema.table to reconcile")
    p.add_argument("--out", default="", help="snapshot folder (Parquet; replaced if it exists)")
    p.add_argument("--format", default="parquet", choices=["parquet", "jdbc"], help="snapshot format")
    p.add_argument("--jdbc-table", help="db.table on the source server for --format jdbc (writer account)")
    p.add_argument("--primary-key", help="key columns, comma-separated (default: the source's primary key)")
    p.add_argument("--topic", help="result topic to read (default: the source's topics.result template)")


def add_master(p: argparse.ArgumentParser) -> None:
    """``--master`` of ``dbus reconcile`` (whose Spark runs in the command; under spark-submit, its own)."""
    p.add_argument(
        "--master",
        help="Spark master of the job (default: spark.master of the configuration); on a cluster, --out "
        "must be a shared filesystem URI (hdfs://, s3a://, file:///shared)",
    )


def cli(args: argparse.Namespace, spark: SparkSession | None = None) -> int:
    """Run from parsed arguments; DbusError propagates (the caller maps it to an exit code)."""
    from dbuslib.config import load_config

    cfg = load_config(args.config)
    try:
        schema, table = parse_table(args.table)
    except ValueError as e:
        print(f"reconcile: {e}", file=sys.stderr)
        return 2
    if args.format == "parquet" and not args.out:
        print("reconcile: --out is required for --format parquet", file=sys.stderr)
        return 2
    if args.format == "jdbc" and not args.jdbc_table:
        print("reconcile: --jdbc-table is required for --format jdbc", file=sys.stderr)
        return 2
    if spark is None:
        from dbuslib import spark as dspark

        master = getattr(args, "master", None) or cfg.spark.master
        check_out(args.out, master, args.format)  # before Spark starts
        conf = {} if "spark.driver.memory" in cfg.spark.conf else {"spark__driver__memory": DRIVER_MEMORY}
        conf = {**conf, **cfg.spark.stages.get("reconcile", {}), "spark.master": master}
        # realtime_tasks named: a batch job, and mypy would take **conf for it otherwise
        spark = dspark.session(cfg, f"dbus-reconcile-{args.source}", realtime_tasks=0, **conf)
    else:
        check_out(args.out, spark.sparkContext.master or "local", args.format)
    key = tuple(k.strip() for k in args.primary_key.split(",")) if args.primary_key else None
    result = run(
        spark,
        cfg,
        args.source,
        schema,
        table,
        args.out,
        primary_key=key,
        fmt=args.format,
        jdbc_table=args.jdbc_table,
        topic=args.topic,
    )
    print(json.dumps(asdict(result)))
    return 0


def main(argv: list[str] | None = None) -> int:
    from dbuslib.errors import ConfigError, EndpointError

    p = argparse.ArgumentParser(prog="reconcile", description=__doc__.splitlines()[0])
    p.add_argument("--config", required=True, help="configuration file")
    add_arguments(p)
    args = p.parse_args(argv)
    from pyspark.sql import SparkSession

    try:
        return cli(args, SparkSession.builder.appName(f"dbus-reconcile-{args.source}").getOrCreate())
    except DbusError as e:
        print(f"reconcile: {e.code}: {e}", file=sys.stderr)
        if e.exit_code is not None:
            return e.exit_code
        codes = {ConfigError: 2, EndpointError: 3}
        return next((c for t, c in codes.items() if isinstance(e, t)), 1)


if __name__ == "__main__":
    sys.exit(main())
