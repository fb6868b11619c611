"""One full pull, from request to the end marker: the driver side of the full-puller service.

1. **Accept**: the table must exist and the split column must be usable (else the request is rejected,
   with a ``FULL_DATA_FINISH_REQ`` reply of STATUS abort on ``<ds>_callback``). The binlog position of
   a consistent snapshot is read *before* anything of the table: it becomes the ``ums_id_`` of every
   pulled row. Every transaction before it is visible to every shard read (which all start later), and
   every change after it reaches the result topic as an increment with a greater ``ums_id_``, so a
   reconcile by greatest ``ums_id_`` yields the current state (docs/fullpull.md). The plain binlog end
   would not do: MariaDB writes the binlog before the engine commits, so a transaction just before the
   end may not be visible yet, and its row would be pulled stale with the greater ``ums_id_``. The table's UMS
   version is the one valid at that position (a new one when the columns changed since), and the
   ``batchId`` is one more than the table's previous pulls.
2. **Split** (fullpuller/split.py): the shard plan goes to ZooKeeper and to ``<ds>_data_shards``.
3. **Pull**: shards not yet done run as Spark jobs, ``fullpull.parallelism`` at a time, each reading its
   shard through the ``dbus_fullpull`` data source (fullpuller/source.py) and writing UMS
   ``data_initial_data`` to the table's result topic with Spark's Kafka sink. A shard is marked done in
   ZooKeeper only when its job has succeeded (every message acknowledged), so a pull that was killed
   re-pulls only the shards that were not done.
4. **End**: an end marker on the result topic, status ``ending``, the reply on ``<ds>_callback``.

Start and end markers are ``data_initial_data`` messages of the pull's namespace and ``batchId`` with an
empty payload and headers ``dbus_fullpull`` = ``start``/``end`` and ``dbus_fullpull_id`` = the request id.
"""

from __future__ import annotations

import logging
import re
import time
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo

from dbuslib import kafka, mysql, spark, topics, zk, zkpaths
from dbuslib.config import DbusConfig, load_config
from dbuslib.metastore import MetaStore, Reason, Version, compatible, version_at
from dbuslib.retry import RetryPolicy
from fullpuller import catalog, render, split
from fullpuller.progress import ABORT, DONE, ENDING, PULLING, SPLITTING, Progress, ProgressStore, ShardState
from fullpuller.request import PullRejected, PullRequest, reply, to_record
from fullpuller.source import NAME, ShardJob
from ums import headers as ums_headers
from ums.build import data_schema
from ums.control import to_json as control_json
from ums.encoding import dumps_compact, to_json
from ums.ids import ums_id
from ums.keys import initial_data_key
from ums.message import ProtocolType, UmsMessage
from ums.namespace import Namespace
from ums.timefmt import ums_ts
from ums.types import ColumnSpec

log = logging.getLogger("dbus.fullpuller")
PROTOCOL = ProtocolType.DATA_INITIAL_DATA
SCHEMA_REFUSED = "FULLPULL_SCHEMA_REFUSED"  # the registry refused an avro pull's schema (docs/errors.md)


def refusal(text: str) -> str | None:
    """The registry's refusal of a schema (``ums.formats.SchemaRefused``'s message: the subject and the
    registry's reason) in the text of an error, a shard's Spark failure whose Python traceback ends with
    it among them; None when there is none."""
    found = _REFUSED.findall(text)
    return found[-1].strip() if found else None


_REFUSED = re.compile(r"SchemaRefused: ([^\n]+)")


@dataclass
class Puller:
    """The full puller of one source; ``handle`` serves one ``<ds>_ctrl`` record."""

    session: Any
    cfg: DbusConfig
    ds: str
    _document: str = field(default="", init=False)  # the configuration shipped to shards (_shipped_config)
    _registry: Any = field(default=None, init=False)  # (endpoints.registry, its Registry) of avro pulls
    _stamp: int = field(default=-1, init=False)

    def __post_init__(self) -> None:
        self.src = self.cfg.source(self.ds)
        self.retry = RetryPolicy.of(self.cfg)  # a restart of ZooKeeper or MariaDB at start costs latency
        self.zk = zk.client(self.cfg.endpoints.zookeeper, retry=self.retry)
        self.store = ProgressStore(self.zk, zkpaths.fullpuller(self.cfg.endpoints.zookeeper.root, self.ds))
        self.meta = MetaStore(self.cfg.endpoints.meta_store.url.get_secret_value(), retry=self.retry)
        self.meta.create_schema()
        self.producer = kafka.producer(self.cfg.endpoints.kafka, acks="all")
        self.callback = self.src.topics.name("callback", self.ds)
        self.shards_topic = self.src.topics.name("data_shards", self.ds)

    def close(self) -> None:
        self.producer.close(timeout=10)  # never wait forever on a broker that is gone
        self.zk.stop()
        self.zk.close()
        self.meta.dispose()
        if self._registry is not None:
            self._registry[1].close()

    # ------------------------------------------------------------------ one request

    def handle(self, req: PullRequest) -> Progress | None:
        """Serve one request: accept (or resume) and pull; every outcome is replied on ``<ds>_callback``."""
        p = self.store.get(req.schema, req.table, req.seqno)
        if p is not None and p.finished:  # served, but the service stopped before it said so: say it again
            log.info("%s: request %s was already served (%s); replying again", self.ds, req.seqno, p.Status)
            self._reply(p)
            return p
        if p is not None and p.Status == SPLITTING:  # stopped before its shard plan was written: start over
            log.info("%s: request %s was stopped while splitting; accepting it again", self.ds, req.seqno)
            p = None
        try:
            if p is None:
                p = self._accept(req)
            else:
                p = replace(p, Resumes=p.Resumes + 1)
                self.store.put(p)
            p = self._pull(p)
        except PullRejected as e:
            p = p or self.store.get(req.schema, req.table, req.seqno)  # rejected after the node was made
            if p is not None:
                p = replace(p, ErrorCode=e.code, ErrorMsg=str(e))
                self._abort_marker(p)
                self._finish(replace(p, Status=ABORT))
            self.reject(e, req.name)
            return p
        except Exception as e:
            log.exception("%s: full pull %s of %s failed", self.ds, req.seqno, req.name)
            refused = refusal(str(e))  # by a shard, the registry's level changed since _register_schemas
            code, why = ("FULLPULL_FAILED", str(e)) if refused is None else (SCHEMA_REFUSED, refused)
            err = PullRejected(code, f"request {req.seqno} ({req.name}): {why}", req.seqno)
            p = p or self.store.get(req.schema, req.table, req.seqno)
            if p is not None:
                p = replace(p, ErrorCode=err.code, ErrorMsg=why[:2000])
                self._abort_marker(p)
                self._finish(replace(p, Status=ABORT))
            self.reject(err, req.name)
            return p
        return p

    def _abort_marker(self, p: Progress) -> None:
        """The ``abort`` marker of a pull that had started (its start marker was written): a consumer
        bootstrapping from it learns in its own stream that the pull will not end. Best effort: the
        reply on ``<ds>_callback`` says it too."""
        if p.Status == SPLITTING or not p.Topic:
            return  # no start marker yet: nobody reading the result topic waits for this pull
        try:
            self._marker(p, ums_headers.FULLPULL_ABORT, f"{p.ErrorCode}: {p.ErrorMsg}")
        except Exception as e:
            log.warning("%s: the abort marker of pull %s was not written: %s", self.ds, p.SeqNo, e)

    def reject(self, e: PullRejected, table: str = "") -> None:
        log.warning("%s: %s: %s", self.ds, e.code, e)
        self._send(self.callback, reply(e.seqno, ABORT, ds=self.ds, table=table, code=e.code, error=str(e)))

    # ------------------------------------------------------------------ accept and split

    def _accept(self, req: PullRequest) -> Progress:
        db = mysql.connect(self.src.mysql, retry=self.retry)
        try:
            info = catalog.table_info(db, req.schema, req.table)
            if info is None:
                msg = f"request {req.seqno}: table {req.name} does not exist in source {self.ds}"
                code = "FULLPULL_UNKNOWN_TABLE"
                raise PullRejected(code, msg, req.seqno)
            try:
                split.choose_split(info, req.split_col)
            except split.SplitError as e:
                raise PullRejected(e.code, f"request {req.seqno} ({req.name}): {e}", req.seqno) from None
            pos = mysql.snapshot_position(db)  # before anything of the table is read: see the module doc
            at = ums_id(pos.file, pos.pos)
            version = self._version(req, info.columns, int(at))
            ns = Namespace("mysql", self.ds, req.schema, req.table, version.version)
            fmt = self.src.output.format_for(req.schema, req.table)
            topic = req.result_topic or self._result_topic(req.schema, req.table)
            now = datetime.now(UTC)
            p = Progress(
                req.seqno,
                req.schema,
                req.table,
                StartSecs=time.time(),
                UmsId=at,
                UmsTs=ums_ts(now, ZoneInfo(self.src.ums.timezone)),
                Version=version.version,
                BatchNo=self.meta.next_batch_id(self.ds, req.schema, req.table),
                Topic=topic,
                Namespace=str(ns),
                Columns=[asdict(c) for c in version.columns],
                Format=fmt,
                PrimaryKey=list(info.primary_key),
                BinlogFile=pos.file,
            )
            self.store.create(p)
            self._history(p)
            size = req.shard_size if req.shard_size is not None else self.src.fullpull.shard_size
            try:
                plan = split.plan(db, info, split_col=req.split_col, shard_size=size, where=req.where)
            except split.SplitError as e:
                raise PullRejected(e.code, f"request {req.seqno} ({req.name}): {e}", req.seqno) from None
            except mysql.pymysql.MySQLError as e:
                msg = f"request {req.seqno} ({req.name}): INPUT_CONDITIONS {req.where!r}: {e.args[-1]}"
                code = "FULLPULL_BAD_REQUEST"
                raise PullRejected(code, msg, req.seqno) from None
        finally:
            db.close()
        if plan.warning:
            log.warning("%s: request %s (%s): %s", self.ds, req.seqno, req.name, plan.warning)
        grouped = render.group_column(info, plan.columns)  # read in groups of rows (render.grouped_sql)
        shards = [
            {
                "where": s.where,
                "lower": s.lower,
                "upper": s.upper,
                "sql": render.select_sql(info, s.where, req.where),
                **(
                    {
                        "group_column": grouped,
                        "grouped_sql": render.grouped_sql(info, grouped, s.where, req.where),
                    }
                    if grouped
                    else {}
                ),
            }
            for s in plan.shards
        ]
        p = replace(
            p,
            Status=PULLING,
            TotalCount=len(shards),
            TotalRows=plan.count,
            Shards=shards,
            SplitCol=",".join(plan.columns),
            SplitSource=plan.source,
            Warning=plan.warning or "",
        )
        for t in dict.fromkeys((topic, self._marker_topic(p))):
            kafka.ensure_topic_once(
                self.cfg.endpoints.kafka, t, self.src.topics.partitions, self.src.topics.replication_factor
            )
        request_json = control_json(req.message)
        for i, s in enumerate(plan.shards):
            split_json = {
                "splitCol": p.SplitCol,
                "index": i,
                "where": s.where,
                "lowerValue": s.lower,
                "upperValue": s.upper,
                "targetTableName": req.name,
            }
            value = {
                "dataChunkSplit": split_json,
                "dataChunkSplitIndex": i,
                "fullPull.request.param": request_json,
            }
            self.producer.send(
                self.shards_topic, key=req.message.type.value.encode(), value=dumps_compact(value).encode()
            )
        self._marker(p, "start")
        self.store.put(p)
        self._history(p)
        log.info(
            "%s: request %s (%s) accepted at ums_id %s: %d rows in %d shard(s) split by %s",
            self.ds,
            req.seqno,
            req.name,
            at,
            plan.count,
            len(shards),
            p.SplitCol or "nothing",
        )
        return p

    def _version(self, req: PullRequest, columns: tuple[ColumnSpec, ...], at: int) -> Version:
        """The table's version at ``at``; a new one when the table's columns changed since."""
        history = self.meta.history(self.ds, req.schema, req.table)
        current = version_at(history, at) or (max(history, key=lambda v: v.version) if history else None)
        if current is not None and compatible(current.columns, columns):
            return current
        if current is None:
            new = Version(0, at, columns, Reason.FIRST)
        else:
            new = Version(max(v.version for v in history) + 1, at, columns, Reason.COLUMNS)
        return self.meta.add(self.ds, req.schema, req.table, new)

    # ------------------------------------------------------------------ pull

    def _pull(self, p: Progress) -> Progress:
        self._register_schemas(p)
        states = self.store.shards(p)
        pending = [i for i in range(p.TotalCount) if states.get(i, ShardState()).state != DONE]
        log.info(
            "%s: request %s: pulling %d of %d shard(s)%s",
            self.ds,
            p.SeqNo,
            len(pending),
            p.TotalCount,
            f" (resume {p.Resumes}: {p.TotalCount - len(pending)} already done)" if p.Resumes else "",
        )
        interval = self.src.fullpull.progress_interval_s
        with ThreadPoolExecutor(self.src.fullpull.parallelism, thread_name_prefix="fullpull") as pool:
            futures = [pool.submit(self._pull_shard, p, i) for i in pending]
            while True:
                done, running = wait(futures, timeout=interval, return_when=FIRST_EXCEPTION)
                p = self.store.refreshed(p)
                self.store.put(p)
                self._history(p)
                self._metric(p)
                failed = [e for f in done if (e := f.exception()) is not None]
                if failed:
                    for f in running:
                        f.cancel()
                    self.session.sparkContext.cancelAllJobs()
                    raise failed[0]
                if not running:
                    break
        self._marker(p, "end")
        p = self._finish(replace(self.store.refreshed(p), Status=ENDING))
        self._reply(p)
        log.info(
            "%s: request %s (%s.%s) ending: %d rows, %d shard(s), %.1f s",
            self.ds,
            p.SeqNo,
            p.Schema,
            p.Table,
            p.FinishedRows,
            p.TotalCount,
            p.ConsumeSecs,
        )
        return p

    def _shipped_config(self) -> str:
        """The configuration document a shard's reader loads (dbuslib/ship.py): the file as it is now, so
        masking rules changed in it apply to the next shard; the last valid one while the file is not."""
        from dbuslib.errors import ConfigError
        from dbuslib.ship import config_document

        try:
            stamp = self.cfg.path.stat().st_mtime_ns
        except OSError:
            stamp = self._stamp
        if stamp != self._stamp or not self._document:
            try:
                self._document = config_document(load_config(self.cfg.path))
            except ConfigError as e:
                log.warning("%s: keeping the configuration loaded before: %s", self.ds, e)
                self._document = self._document or config_document(self.cfg)
            self._stamp = stamp
        return self._document

    def _register_schemas(self, p: Progress) -> None:
        """``avro``: the pull's key and value schemas registered on the driver before any shard runs
        (fullpuller.perrow.register_schemas), so a schema the registry refuses (its subject's level)
        aborts the pull at once as ``FULLPULL_SCHEMA_REFUSED`` naming the subject and the registry's
        reason, instead of failing each shard's Spark job. It uses the configuration the shards get
        (``_shipped_config``: the file as it is now), so its schemas, masking and level are theirs, and
        the shards' own registry clients then get the same ids."""
        if p.Format != "avro":
            return
        from dbuslib.registry import Registry
        from dbuslib.ship import load_document
        from fullpuller.perrow import RowWriter, register_schemas
        from ums.formats import SchemaRefused

        job = self._job(p, 0)
        cfg = load_document(job.config)
        src = cfg.source(self.ds)
        endpoint = cfg.endpoints.registry
        if self._registry is None or endpoint is None or self._registry[0] != endpoint:
            self._registry = (endpoint, Registry.of(cfg))  # ConfigError without endpoints.registry
        ids = self._registry[1].schema_ids(src.output.compatibility)
        try:
            register_schemas(RowWriter.for_job(job, src.output.options(), src.masking, ids))
        except SchemaRefused as e:
            msg = f"request {p.SeqNo} ({p.Schema}.{p.Table}): {e}"
            raise PullRejected(SCHEMA_REFUSED, msg, p.SeqNo) from e

    def _job(self, p: Progress, index: int) -> ShardJob:
        settings = self.src.fullpull
        return ShardJob(
            config=self._shipped_config(),
            ds=self.ds,
            schema=p.Schema,
            table=p.Table,
            namespace=p.Namespace,
            columns=p.Columns,
            batch_id=p.BatchNo,
            ums_id=p.UmsId,
            ums_ts=p.UmsTs,
            shard=index,
            sql=p.Shards[index]["sql"],
            grouped_sql=p.Shards[index].get("grouped_sql", ""),  # not in a pull planned before it existed
            group_column=p.Shards[index].get("group_column", ""),
            zk_shard_path=self.store.shard_path(p, index),
            fetch_rows=settings.fetch_rows,
            tuples_per_message=self.src.ums.tuples_per_message,
            max_message_bytes=self.src.ums.max_message_bytes,
            progress_interval_s=settings.progress_interval_s,
            format=p.Format,
            topic=p.Topic,
            primary_key=p.PrimaryKey,
            binlog_file=p.BinlogFile,
            ts_ms=int(p.StartSecs * 1000),
        )

    def _pull_shard(self, p: Progress, index: int) -> None:
        job = self._job(p, index)
        self.store.report_shard(p, index, ShardState(0, PULLING))
        sc = self.session.sparkContext
        sc.setJobDescription(f"full pull {p.SeqNo} {p.Schema}.{p.Table} shard {index + 1}/{p.TotalCount}")
        df = self.session.read.format(NAME).option("job", job.to_json()).load()
        spark.kafka_sink(df.write, self.cfg.endpoints.kafka).option("topic", p.Topic).save()
        rows = self.store.shards(p).get(index, ShardState()).rows
        self.store.report_shard(p, index, ShardState(rows, DONE))

    # ------------------------------------------------------------------ edges

    def _marker(self, p: Progress, which: str, error: str = "") -> None:
        schema = data_schema(
            Namespace.parse(p.Namespace), tuple(ColumnSpec(**c) for c in p.Columns), p.BatchNo, PROTOCOL
        )
        value = to_json(UmsMessage.prevalidated(PROTOCOL, schema, ()))
        key = initial_data_key(Namespace.parse(p.Namespace), int(time.time() * 1000))
        headers = [
            ("ums_key", key.encode()),
            (ums_headers.FULLPULL, which.encode()),
            (ums_headers.FULLPULL_ID, str(p.SeqNo).encode()),
            (ums_headers.FULLPULL_UMS_ID, p.UmsId.encode()),
        ]
        if which == ums_headers.FULLPULL_END:
            headers.append((ums_headers.FULLPULL_ROWS, str(p.FinishedRows).encode()))
        if error:
            headers.append((ums_headers.FULLPULL_ERROR, error.encode()[:4000]))
        self.producer.send(
            self._marker_topic(p), key=f"{p.Schema}.{p.Table}".encode(), value=value.encode(), headers=headers
        ).get(60)

    def _result_topic(self, schema: str, table: str) -> str:
        """The table's result topic: per schema (``topics.result``) or per table (``topics.table``), as
        ``output.topic`` says."""
        return topics.result_topic(self.ds, self.src, schema, table)

    def _marker_topic(self, p: Progress) -> str:
        """Where the pull's markers go: its topic for UMS; for a per-row format the schema's events topic
        (``topics.events``, with the table's heartbeats), since a per-row topic holds row changes only."""
        if p.Format == "ums":
            return p.Topic
        return topics.events_topic(self.ds, self.src, p.Schema)

    def _reply(self, p: Progress) -> None:
        """The FULL_DATA_FINISH_REQ of a finished pull on ``<ds>_callback``."""
        if p.Status == ENDING:
            self._send(
                self.callback,
                reply(
                    p.SeqNo,
                    ENDING,
                    ds=self.ds,
                    table=f"{p.Schema}.{p.Table}",
                    ROWS=p.FinishedRows,
                    SHARDS=p.TotalCount,
                    UMS_ID=p.UmsId,
                    BATCH_NO=p.BatchNo,
                    VERSION=p.Version,
                    SECONDS=p.ConsumeSecs,
                ),
            )
        else:
            self._send(
                self.callback,
                reply(
                    p.SeqNo,
                    ABORT,
                    ds=self.ds,
                    table=f"{p.Schema}.{p.Table}",
                    code=p.ErrorCode,
                    error=p.ErrorMsg,
                ),
            )

    def _finish(self, p: Progress) -> Progress:
        p = replace(p, EndSecs=time.time())
        p = self.store.refreshed(p)
        self.store.put(p)
        self._history(p)
        self._metric(p)
        return p

    def _metric(self, p: Progress) -> None:
        """A ``dbus_fullpull`` point (docs/monitoring.md); a failed write is logged, never fails the pull."""
        from influxdb_client import Point

        from dbuslib import influx
        from fullpuller.progress import rate_and_eta

        point = (
            Point("dbus_fullpull")
            .tag("ds", self.ds)
            .tag("schema", p.Schema)
            .tag("table", p.Table)
            .tag("id", str(p.SeqNo))
            .field("rows", p.FinishedRows)
            .field("total_rows", p.TotalRows)
            .field("shards_done", p.FinishedCount)
            .field("shards_total", p.TotalCount)
            .field("rows_per_s", float(rate_and_eta(p)[0]))
            .field("status", p.Status)
        )
        try:
            influx.write(self.cfg.endpoints.influxdb, [point])
        except Exception as e:
            where = self.cfg.endpoints.influxdb.where
            log.warning("%s: could not write full-pull metrics to %s: %s", self.ds, where, e)

    def _history(self, p: Progress) -> None:
        self.meta.record_pull(
            {
                "id": p.SeqNo,
                "ds": self.ds,
                "schema_name": p.Schema,
                "table_name": p.Table,
                "batch_id": p.BatchNo,
                "version": p.Version,
                "ums_id": int(p.UmsId),
                "status": p.Status,
                "split_col": p.SplitCol,
                "shards": p.TotalCount,
                "total_rows": p.TotalRows,
                "finished_rows": p.FinishedRows,
                "error": p.ErrorMsg or None,
            }
        )

    def _send(self, topic: str, message: Any) -> None:
        key, value = to_record(message)
        self.producer.send(topic, key=key, value=value).get(60)
