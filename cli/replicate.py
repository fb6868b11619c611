"""``dbus replicate``: keep replica tables of a source's tables in MariaDB or PostgreSQL.

Usage::

    dbus replicate --source demo --tables shop.orders,shop.customers \\
        --to postgresql+psycopg://dbus:dbus@127.0.0.1:15432/replica

A consumer client (dbusclient.consumer) reads the tables' result topics; its callbacks keep one replica
table per source table in the database of ``--to`` (dbusclient.replicate, dbusclient.sink_sql), with the
checkpoint in the same database, written in the same transaction as the rows. With no checkpoint (a new
replica), or one whose offsets retention deleted, it requests a full pull of the tables and merges it
with the increments (bootstrap). The key of each table is the source's primary key (``--key`` to name
another). docs/client.md, "Replicate", has the guarantees and the options.

Runs until SIGTERM/SIGINT (the window under way is finished and committed first), or with
``--until-idle S`` until it is online and has read nothing for S seconds. Exit codes as every dbus
command (docs/errors.md): 0 stopped, 1 failed (e.g. ``CLIENT_CALLBACK_FAILED`` after an incompatible
version change), 2 bad arguments or configuration, 3 an endpoint unreachable past its retries.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import time
from typing import TYPE_CHECKING, Any

from dbuslib.errors import ConfigError, EndpointError

if TYPE_CHECKING:
    from dbusclient.checkpoint import Checkpoint
    from dbusclient.replica_keys import SourceColumn
    from dbusclient.replicate import Counts
    from dbuslib.config import DbusConfig

log = logging.getLogger("dbus.replicate")
TO_ENV = "DBUS_REPLICATE_TO"  # the target URL when --to is not given (keeps a password off the command line)
PROGRESS_EVERY_S = 10.0


def add_parsers(sub: Any) -> None:
    rp = sub.add_parser(
        "replicate",
        help="keep replica tables of a source's tables in MariaDB or PostgreSQL (consumer client)",
        description="Keep replica tables of a source's tables in MariaDB or PostgreSQL, bootstrapped by "
        "a full pull, the checkpoint in the target (docs/client.md, Replicate).",
    )
    rp.add_argument("--config", default=argparse.SUPPRESS, help="configuration file")
    rp.add_argument("--source", required=True, help="source name under 'sources'")
    rp.add_argument("--tables", required=True, help="schema.table[,schema.table...] to replicate")
    rp.add_argument(
        "--to",
        default=os.environ.get(TO_ENV),
        help="the target, a SQLAlchemy URL: mysql+pymysql://... or postgresql+psycopg://... "
        f"(default: ${TO_ENV})",
    )
    rp.add_argument(
        "--key",
        action="append",
        default=[],
        metavar="SCHEMA.TABLE=COL[,COL...]",
        help="key columns of a table (default: the source's primary key); repeat per table",
    )
    rp.add_argument(
        "--name",
        help="the checkpoint's name in the target (default: the group, else the source): one per process",
    )
    rp.add_argument(
        "--group", help="Kafka consumer group: processes of one group share the tables' partitions"
    )
    rp.add_argument(
        "--key-filter",
        metavar="mod:N:K[,K...]|range:LOW:HIGH",
        help="keep only a slice of the keys: hash mod N in K (mod:4:1), or a one-column integer key in "
        "[LOW, HIGH) (Databus' server-side filters; docs/client.md)",
    )
    rp.add_argument("--drop-columns", action="store_true", help="drop a replica column a version drops")
    rp.add_argument("--no-bootstrap", action="store_true", help="never request full pulls")
    rp.add_argument(
        "--on-incompatible",
        choices=["stop", "rebootstrap"],
        default="stop",
        help="a version change the replica cannot follow: stop with CLIENT_CALLBACK_FAILED (default), or "
        "drop the replica table and bootstrap it again",
    )
    rp.add_argument("--max-records", type=int, default=5000, help="records per window (default: %(default)s)")
    rp.add_argument(
        "--dead-letter-file",
        help="JSON lines file for records that do not decode (set aside alone) and windows that keep "
        "failing; replication goes on (default: stop)",
    )
    rp.add_argument(
        "--until-idle",
        type=float,
        metavar="S",
        help="exit 0 once online and nothing was read for S seconds (default: run until stopped)",
    )
    rp.set_defaults(handler=cli)


def parse_keys(items: list[str]) -> dict[str, tuple[str, ...]]:
    """``["shop.orders=id", "shop.lines=order_id,line"]`` -> ``{"shop.orders": ("id",), ...}``."""
    keys: dict[str, tuple[str, ...]] = {}
    for item in items:
        table, sep, cols = item.partition("=")
        columns = tuple(c.strip() for c in cols.split(",") if c.strip())
        if not sep or not columns or table.count(".") != 1:
            msg = f"replicate: --key {item!r}: expected schema.table=col[,col...]"
            raise ConfigError(msg)
        keys[table.strip()] = columns
    return keys


def ensure_database(url: str) -> None:
    """Create the target database of ``url`` when it does not exist (MariaDB/MySQL, PostgreSQL)."""
    import sqlalchemy as sa

    from dbusclient.sink_refusal import SinkAuthFailed, refusal

    target = sa.engine.make_url(url)
    name = target.database
    if not name:
        msg = f"replicate: --to {target.render_as_string(hide_password=True)}: the URL names no database"
        raise ConfigError(msg)
    postgres = target.get_backend_name() == "postgresql"
    server = sa.create_engine(
        target._replace(database="postgres" if postgres else None), isolation_level="AUTOCOMMIT"
    )
    try:
        with server.connect() as conn:
            if not postgres:
                conn.execute(sa.text(f"CREATE DATABASE IF NOT EXISTS `{name.replace('`', '``')}`"))
            elif (
                conn.execute(sa.text("SELECT 1 FROM pg_database WHERE datname = :n"), {"n": name}).scalar()
                is None
            ):
                conn.execute(sa.text('CREATE DATABASE "{}"'.format(name.replace('"', '""'))))
                log.info("created the database %s", name)
    except sa.exc.SQLAlchemyError as e:
        where = f"replicate: --to {target.render_as_string(hide_password=True)}"
        refused = refusal(e)
        if refused is not None:
            msg = f"{where}: the database refused the login: {refused}"
            raise SinkAuthFailed(msg) from None
        msg = f"{where}: {e}"
        raise EndpointError(msg) from e
    finally:
        server.dispose()


def source_keys(
    cfg: DbusConfig, ds: str, tables: list[str], given: dict[str, tuple[str, ...]]
) -> tuple[dict[str, tuple[str, ...]], dict[str, tuple[SourceColumn, ...]]]:
    """The key of each table (``given``, else its primary key on the source) and its columns as the
    source declares them (type, character set, collation: the replica's key columns are made from them,
    ``dbusclient.replica_keys``), read over one connection."""
    from dbusclient.replica_keys import SourceColumn
    from dbuslib import mysql
    from fullpuller import catalog
    from ums.names import split_table

    db = mysql.connect(cfg.source(ds).mysql)
    try:
        infos = {name: catalog.table_info(db, *split_table(name)) for name in tables}
    finally:
        db.close()
    keys, declared = {}, {}
    for name in tables:
        info = infos[name]
        key = given.get(name) or (info.primary_key if info is not None else None)
        if not key:
            what = "does not exist" if info is None else "has no primary key"
            msg = f"replicate: {ds}: {name} {what} on the source: give its key with --key {name}=col[,col]"
            raise ConfigError(msg)
        keys[name] = key
        if info is not None:
            charsets = {c: (cs, coll) for c, cs, coll in info.collations}
            declared[name] = tuple(
                SourceColumn(c.name, c.column_type, *charsets.get(c.name, (None, None)))
                for c in info.columns
                if c.name in key
            )
    return keys, declared


def cli(args: argparse.Namespace) -> int:
    from dbusclient.consumer import Consumer, ConsumerConfig, parse_key_filter
    from dbusclient.metrics import ClientMetrics
    from dbusclient.replicate import BoundedStates, Replicator
    from dbusclient.sink_sql import SqlSink
    from dbuslib.config import load_config
    from dbuslib.lifecycle import Lifecycle
    from dbuslib.retry import RetryPolicy

    if not args.to:
        msg = f"replicate: no target: give --to URL (or set ${TO_ENV})"
        raise ConfigError(msg)
    tables = [t.strip() for t in args.tables.split(",") if t.strip()]
    if not tables or any(t.count(".") != 1 for t in tables):
        msg = f"replicate: --tables {args.tables!r}: expected schema.table[,schema.table...]"
        raise ConfigError(msg)
    cfg = load_config(args.config)
    cfg.source(args.source)  # an unknown source: ConfigError naming it
    given = parse_keys(args.key)
    unknown = sorted(set(given) - set(tables))
    if unknown:
        msg = f"replicate: --key for {unknown}, which are not in --tables"
        raise ConfigError(msg)
    keys, declared = source_keys(cfg, args.source, tables, given)
    name = args.name or args.group or args.source
    try:
        key_filter = parse_key_filter(args.key_filter) if args.key_filter else None
    except ValueError as e:
        msg = f"replicate: --key-filter: {e}"
        raise ConfigError(msg) from None
    config = ConsumerConfig(
        source=args.source,
        tables=keys,
        group_id=args.group,
        max_records=args.max_records,
        dead_letter_file=args.dead_letter_file,
        bootstrap=not args.no_bootstrap,
        key_filter=key_filter,
    )
    ensure_database(args.to)
    sink = SqlSink(args.to, keys, drop_columns=args.drop_columns, checkpoint_name=name, declared=declared)
    progress = _Progress(name)
    replicator = Replicator(
        sink, RetryPolicy.of(cfg), on_saved=progress.saved, on_incompatible=args.on_incompatible
    )
    metrics = ClientMetrics.connect(cfg.endpoints.influxdb, args.source, name)
    consumer = Consumer.connect(
        cfg,
        config,
        replicator,
        replicator,
        states=BoundedStates(),
        avro_schemas=_avro_schemas(cfg),
        metrics=metrics,
    )
    replicator.request_bootstrap = consumer.request_bootstrap
    target = sink.engine.url.render_as_string(hide_password=True)
    log.info("replicating %s of %s into %s as %r", ",".join(tables), args.source, target, name)
    with Lifecycle("replicate", args.source, cfg.path, watch_jvm=False) as life:
        idle = _Idle(consumer, args.until_idle)
        consumer.start()
        try:
            while not life.stopping.is_set() and not idle.done():
                idle.read(consumer.poll_once())
                progress.maybe_log(consumer.checkpoint.mode.value)
        finally:
            consumer.close()
            sink.engine.dispose()
    summary = {
        "name": name,
        "mode": consumer.checkpoint.mode.value,
        "windows": replicator.counts.windows,
        "upserts": replicator.counts.upserts,
        "deletes": replicator.counts.deletes,
        "swept": replicator.counts.swept,
    }
    print(json.dumps(summary))
    return life.code if life.stopping.is_set() else 0


cli.without_server = True  # type: ignore[attr-defined]  # the consumer client's command: its base install


class _Idle:
    """``--until-idle``: online, and no record read for ``seconds``."""

    def __init__(self, consumer: Any, seconds: float | None) -> None:
        self.consumer, self.seconds = consumer, seconds
        self.last = time.monotonic()

    def read(self, records: int) -> None:
        if records:
            self.last = time.monotonic()

    def done(self) -> bool:
        if self.seconds is None or self.consumer.checkpoint.bootstrap is not None:
            return False
        return time.monotonic() - self.last >= self.seconds


class _Progress:
    """A log line every ``PROGRESS_EVERY_S``: rows applied and their rate."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.rows = self.logged_rows = 0
        self.logged_at = time.monotonic()

    def saved(self, checkpoint: Checkpoint, counts: Counts) -> None:
        self.rows = counts.upserts + counts.deletes

    def maybe_log(self, mode: str) -> None:
        now = time.monotonic()
        if now - self.logged_at < PROGRESS_EVERY_S:
            return
        rate = (self.rows - self.logged_rows) / (now - self.logged_at)
        log.info("%s: %s, %d rows applied (%.0f rows/s)", self.name, mode, self.rows, rate)
        self.logged_rows, self.logged_at = self.rows, now


def _avro_schemas(cfg: DbusConfig) -> Any:
    """Avro schemas by fingerprint from the meta store (read only when an Avro record arrives)."""
    stores: list[Any] = []

    def lookup(fingerprint: str) -> dict[str, Any] | None:
        from dbuslib.metastore import MetaStore

        if not stores:
            stores.append(MetaStore(cfg.endpoints.meta_store.url.get_secret_value()))
        row = stores[0].avro_schema(fingerprint)
        if row is None:
            return None  # that record is a bad row (CLIENT_BAD_ROW, or a dead letter), replication goes on
        parsed: dict[str, Any] = json.loads(row.schema_json)
        return parsed

    return lookup
