"""The shards of a pull as a Spark Python data source (``dbus_fullpull``): one partition per shard.

A partition's reader runs the shard's SELECT on the source through a streaming (unbuffered) cursor;
MariaDB renders each row to its UMS tuple text (fullpuller/render.py), so the reader only puts the
system fields in front (``ums_id_``, ``ums_ts_``, ``ums_op_`` "i", ``ums_uid_``) and writes messages of
up to ``ums.tuples_per_message`` tuples around them (ums.text). It yields one Spark row per message,
``key``/``value`` binary, for Spark's Kafka sink; a message above ``endpoints.kafka.max_message_bytes``
(one huge row) yields its ordered chunks instead (ums.chunks, docs/ums.md#large-tuples). Masked tables take
a slower path: each tuple is parsed, masked with the appender's rules and written again, so no clear value
of a masked column leaves the reader. A table written in a per-row format (``output.format``: debezium-json,
canal-json, avro) gets one record per row instead, keyed by its primary key, one Arrow batch per fetch
(fullpuller/perrow.py).

While it reads, the reader reports the shard's rows to ZooKeeper every ``progress_interval_s``
(fullpuller/progress.py); the driver marks the shard done once Spark's Kafka sink has committed it.

``ums_uid_`` of a pulled row is the pull's ``ums_id_`` digits, the shard index in 6 digits and the row's
index in the shard in 9 digits: unique, and never equal to an increment's (those have 22 digits).
"""

from __future__ import annotations

import contextlib
import json
import time
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Iterator

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

NAME = "dbus_fullpull"
WARM_UP = "-- warm-up"  # a job with this SQL reads nothing: the service runs one at start
SCHEMA = "key binary, value binary, headers array<struct<key: string, value: binary>>"


@dataclass(frozen=True)
class ShardJob:
    """What a shard's reader needs, passed as the ``job`` option (JSON). ``config`` is the configuration
    document (dbuslib/ship.py), secrets included: Spark redacts an option whose value names a password
    (``spark.redaction.regex``) in its plans and UI."""

    config: str
    ds: str
    schema: str
    table: str
    namespace: str
    columns: list[dict[str, Any]]
    batch_id: int
    ums_id: str
    ums_ts: str
    shard: int
    sql: str
    zk_shard_path: str
    fetch_rows: int
    tuples_per_message: int
    max_message_bytes: int
    progress_interval_s: float
    # per-row formats (fullpuller/perrow.py): the pull's output.format ("ums": UMS messages), the topic the
    # records go to (avro subjects are named after it), the primary key, the snapshot's binlog file and
    # the acceptance time in epoch ms (source.ts_ms)
    format: str = "ums"
    topic: str = ""
    primary_key: list[str] = field(default_factory=list)
    binlog_file: str = ""
    ts_ms: int = 0
    # the shard read in groups of rows (fullpuller/render.py, Grouped reads): their SELECT and the column
    # they are ranges of; "" reads ``sql`` row by row
    grouped_sql: str = ""
    group_column: str = ""

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def warm_up(cls, config: str, ds: str, workers: int = 1) -> ShardJob:
        """A job that starts ``workers`` Python workers at once (its ``shard``: how many partitions it has),
        each loading the configuration, and reads nothing: the shards a pull runs side by side
        (``fullpull.parallelism``) each find a worker ready (a worker's first start took 1.2 s)."""
        return cls(
            config, ds, "-", "-", "mysql.-.-.-.0.0.0", [], 0, "0", "", workers, WARM_UP, "", 1, 1, 1, 1.0
        )

    @classmethod
    def from_json(cls, text: str) -> ShardJob:
        return cls(**json.loads(text))


class ShardSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return NAME

    def schema(self) -> str:
        return SCHEMA

    def reader(self, schema: Any) -> DataSourceReader:
        return ShardReader(ShardJob.from_json(self.options["job"]))


class ShardReader(DataSourceReader):
    def __init__(self, job: ShardJob) -> None:
        self.job = job

    def partitions(self) -> list[InputPartition]:
        if self.job.sql == WARM_UP:
            return [InputPartition(i) for i in range(max(1, self.job.shard))]
        return [InputPartition(self.job.shard)]

    def read(self, partition: InputPartition) -> Iterator[tuple[bytes, bytes, list[tuple[str, bytes]]]]:
        from dbuslib import pygc

        pygc.settle()  # a worker's first shards: freeze what it made so far (dbuslib/pygc.py)
        if self.job.sql == WARM_UP:
            _config(self.job.config)  # the worker imports and loads what a shard needs; no source access
            return
        yield from read_shard(self.job)


def read_shard(job: ShardJob) -> Iterator[Any]:
    """The shard's records: (key, value, headers) tuples of UMS messages, or for a per-row format one Arrow
    record batch per fetch (fullpuller/perrow.py); reports rows to ZooKeeper as it goes and at the end."""
    cfg = _config(job.config)
    src = cfg.source(job.ds)
    writer: Any
    if job.format == "ums":
        writer = MessageWriter.for_job(job, src.masking, cfg.endpoints.kafka.max_message_bytes)
    else:
        writer = row_writer(job, cfg)
    reporter = _Reporter(cfg, job)
    with _reading(src) as cur:  # the ZooKeeper client stays open for the worker's next shard (_zk)
        fetches = _grouped(job, cur, src) if job.grouped_sql else _rows(job, cur)
        for texts in fetches:
            if job.format == "ums":
                yield from writer.messages(texts)
            else:
                yield from writer.batches(texts)
            reporter.rows(writer.rows)
    reporter.rows(writer.rows, final=True)


@contextlib.contextmanager
def _reading(src: Any) -> Iterator[Any]:
    """A streaming (unbuffered, bytes) cursor on the source in the rendering's session (render.SESSION_SQL),
    its connection closed when the block ends."""
    from pymysql.cursors import SSCursor

    from dbuslib import mysql
    from fullpuller import render

    db = mysql.connect(src.mysql, cursorclass=SSCursor, use_unicode=False)
    try:
        with db.cursor() as cur:
            for stmt in render.SESSION_SQL:
                cur.execute(stmt)
            yield cur
    finally:
        db.close()


def _rows(job: ShardJob, cur: Any) -> Iterator[list[bytes]]:
    """The tuple texts of ``job.sql``'s rows, a fetch (``fetch_rows``, whole messages) at a time."""
    from fullpuller import render

    cur.execute(job.sql)
    size = max(job.tuples_per_message, job.fetch_rows // job.tuples_per_message * job.tuples_per_message)
    # long binary values come raw in trailing columns b0, b1, ... (render.splice_binaries)
    names = [d[0].decode() if isinstance(d[0], bytes) else d[0] for d in cur.description]
    k = sum(1 for n in names if n[:1] == "b" and n[1:].isdigit())
    while True:
        rows = cur.fetchmany(size)
        if not rows:
            return
        raws = [r[len(r) - k :] for r in rows] if k else None
        rows = [r[: len(r) - k] for r in rows] if k else rows
        if len(rows[0]) == 1:
            texts = [r[0] for r in rows]
        else:  # FLOAT columns come raw: Python writes their shortest float32 repr (render.py)
            texts = [
                render.tuple_text([v.decode() if isinstance(v, bytes) else v for v in r]).encode()
                for r in rows
            ]
        if raws is not None:
            texts = [render.splice_binaries(t, b) for t, b in zip(texts, raws, strict=True)]
        yield texts


def _grouped(job: ShardJob, cur: Any, src: Any) -> Iterator[list[bytes]]:
    """The tuple texts of ``job.grouped_sql``'s groups, about ``fetch_rows`` rows at a time; a group MariaDB
    cut short (longer than ``group_concat_max_len``) is read again row by row on a second connection."""
    from fullpuller import render

    cur.execute(render.GROUP_SESSION_SQL)
    cur.execute("SELECT @@group_concat_max_len")
    limit = int(cur.fetchone()[0])
    cur.execute(job.grouped_sql)
    size = max(1, job.fetch_rows // render.GROUP_ROWS)
    while True:
        groups = cur.fetchmany(size)
        if not groups:
            return
        texts: list[bytes] = []
        for g, k, n in groups:
            part = render.split_group(g, int(n), limit)
            if part is None:  # rare: read on its own connection, the streaming one is busy
                with _reading(src) as again:
                    sql = render.group_rows_sql(job.sql, job.group_column, int(k))
                    part = [t for fetch in _rows(replace(job, sql=sql), again) for t in fetch]
            texts += part
        yield texts


def row_writer(job: ShardJob, cfg: Any) -> Any:
    """The ``perrow.RowWriter`` of a shard: the source's ``output`` options and masking, for ``avro`` the
    worker's registry client (``_schema_ids``)."""
    from fullpuller.perrow import RowWriter

    src = cfg.source(job.ds)
    ids = _schema_ids(cfg, src.output.compatibility) if job.format == "avro" else None
    return RowWriter.for_job(job, src.output.options(), src.masking, ids)


class MessageWriter:
    """Tuple texts -> (key, value) messages of one shard (pure, given the job)."""

    def __init__(
        self, job: ShardJob, prefix: bytes, mask: Any = None, max_record_bytes: int = 16_777_216
    ) -> None:
        from ums.namespace import Namespace

        self.job = job
        self.max_record_bytes = max_record_bytes  # a larger message is written as chunks (ums.chunks)
        self.prefix = prefix
        self.mask = mask
        self.key = f"{job.schema}.{job.table}".encode()
        self.head = f'{{"tuple":["{job.ums_id}","{job.ums_ts}","i","{job.ums_id}{job.shard:06d}'.encode()
        self.rows = 0
        self.namespace = Namespace.parse(job.namespace)

    @classmethod
    def for_job(cls, job: ShardJob, masking: Any, max_record_bytes: int = 16_777_216) -> MessageWriter:
        from dataclasses import replace

        from ums.build import data_schema
        from ums.encoding import to_json
        from ums.masking import compile_rules
        from ums.message import ProtocolType, UmsMessage
        from ums.namespace import Namespace
        from ums.types import ColumnSpec

        protocol = ProtocolType.DATA_INITIAL_DATA
        columns = tuple(ColumnSpec(**c) for c in job.columns)
        schema = data_schema(Namespace.parse(job.namespace), columns, job.batch_id, protocol)
        mask = compile_rules(masking).for_table(job.schema, job.table, schema.fields) if masking else None
        if mask is not None:
            schema = replace(schema, fields=mask.fields)
        empty = to_json(UmsMessage.prevalidated(protocol, schema, ()))
        return cls(job, empty[:-2].encode(), mask, max_record_bytes)

    def tuples(self, texts: list[bytes]) -> list[bytes]:
        start = self.rows
        self.rows += len(texts)
        if self.mask is not None:
            return self._masked(texts, start)
        head = self.head
        return [b'%s%09d",%s]}' % (head, start + i, t) for i, t in enumerate(texts)]

    def messages(self, texts: list[bytes]) -> Iterator[tuple[bytes, bytes, list[tuple[str, bytes]]]]:
        """Messages of ``texts``: record key ``<schema>.<table>`` (the appender's: one table, one partition),
        and the original's key (spec 1.12) in the ``ums_key`` header, as the appender writes it."""
        from ums import chunks
        from ums.keys import initial_data_key
        from ums.text import messages

        headers = [("ums_key", initial_data_key(self.namespace, int(time.time() * 1000)).encode())]
        fits = chunks.limit(self.max_record_bytes)
        for value in messages(
            self.prefix, self.tuples(texts), self.job.tuples_per_message, self.job.max_message_bytes
        ):
            if len(value) <= fits:
                yield self.key, value, headers
                continue
            for part, extra in chunks.split(value, self.max_record_bytes):
                yield self.key, part, headers + list(extra)

    def _masked(self, texts: list[bytes], start: int) -> list[bytes]:
        from ums.encoding import dumps_compact

        out = []
        for i, t in enumerate(texts):
            uid = f"{self.job.ums_id}{self.job.shard:06d}{start + i:09d}"
            values = (self.job.ums_id, self.job.ums_ts, "i", uid, *json.loads(b"[" + t + b"]"))
            out.append(b'{"tuple":' + dumps_compact(list(self.mask.apply_row(values))).encode() + b"}")
        return out


class _Reporter:
    """Rows read so far -> the shard's ZooKeeper node, at most every ``progress_interval_s``."""

    def __init__(self, cfg: Any, job: ShardJob) -> None:
        self.cfg = cfg
        self.job = job
        self.last = 0.0

    def rows(self, n: int, final: bool = False) -> None:
        now = time.monotonic()
        if not final and now - self.last < self.job.progress_interval_s:
            return
        self.last = now
        client = _zk(self.cfg)
        data = json.dumps({"rows": n, "state": "pulling"}).encode()
        if client.exists(self.job.zk_shard_path):
            client.set(self.job.zk_shard_path, data)
        else:
            client.create(self.job.zk_shard_path, data, makepath=True)


# A Python worker serves many shards (Spark reuses workers): the configuration (per document: the driver
# ships the file as it is at each shard, fullpuller.job.Puller._shipped_config) and the ZooKeeper client are
# made once per worker process.
_ZK: dict[str, Any] = {}
_REGISTRY: dict[tuple[str, str], Any] = {}


def _config(document: str) -> Any:
    from dbuslib.ship import load_document

    return load_document(document)


def _zk(cfg: Any) -> Any:
    hosts = cfg.endpoints.zookeeper.hosts
    client = _ZK.get(hosts)
    if client is None or not client.connected:
        from dbuslib import zk

        client = _ZK[hosts] = zk.client(cfg.endpoints.zookeeper)
    return client


def _schema_ids(cfg: Any, level: str) -> Any:
    """The worker's ``SchemaIds`` for avro (dbuslib/registry.py, which caches ids per subject and schema
    and sets a subject's level before its first schema): made once per registry and compatibility level,
    so each schema is asked for once per worker, not once per shard."""
    from dbuslib.registry import Registry

    endpoint = cfg.endpoints.registry
    key = (endpoint.url, level)
    ids = _REGISTRY.get(key)
    if ids is None:
        ids = _REGISTRY[key] = Registry.from_config(endpoint, cfg.endpoints.retry).schema_ids(level)
    return ids
