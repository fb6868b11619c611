"""The meta store: table schema versions and full-pull history, in a SQL database via SQLAlchemy.

By default a database ``dbus`` on the source's MariaDB (``endpoints.meta_store.url``). Table
``dbus_meta_version``, one row per version of a table, by example::

    {"ds": "demo", "schema_name": "shop", "table_name": "orders", "version": 1,
     "since_id": 1030000012345678, "reason": "columns",
     "columns": "[{\"name\": \"id\", \"column_type\": \"bigint\", \"nullable\": false}, ...]"}

``since_id`` is the binlog id (file number * 10^13 + offset, as ``ums_id_``) from which the version is
valid, so a replay finds the version that was valid at its position. Writes are idempotent: versions are
derived from the binlog, so writing the same version twice (a replay, a restarted job) changes nothing.

Table ``dbus_meta_avro_schema`` holds the Avro schemas of ``ums.format: avro`` output, one row per
distinct schema (normally one per namespace, i.e. per table version), found by its fingerprint, which
every Avro record carries in its ``ums_avro_schema`` header (see appender/output.py)::

    {"namespace": "mysql.demo.shop.orders.3.0.0", "fingerprint": "9f86d0...(sha256 hex)",
     "schema_json": "{\"fields\": [...], \"name\": \"ums_mysql_demo_shop_orders_3_0_0\", ...}",
     "created_ms": 1704164645000}

Table ``dbus_fullpull_history`` holds one row per full-pull request (the original's ``t_fullpull_history``),
keyed by its id (the request's ``SEQNO``); ``batch_id`` counts the pulls of a table (UMS ``batchId``)::

    {"id": 1704164645123, "ds": "demo", "schema_name": "shop", "table_name": "orders", "batch_id": 2,
     "version": 0, "ums_id": 1030000012345678, "status": "ending", "split_col": "id", "shards": 10,
     "total_rows": 1000000, "finished_rows": 1000000, "error": null, "created_ms": ..., "updated_ms": ...}
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass
from enum import Enum

from sqlalchemy import (
    BigInteger,
    Column,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
    func,
    select,
)
from sqlalchemy.exc import IntegrityError

from dbuslib.sqlstore import SqlStore
from ums import ColumnSpec


class Reason(Enum):
    FIRST = "first"
    COLUMNS = "columns"
    TRUNCATE = "truncate"
    ROW_LOSS = "row_loss"  # DDL that removes rows without row events (TRUNCATE/DROP/EXCHANGE PARTITION ...)


@dataclass(frozen=True)
class Version:
    """One version of a table: valid from binlog id ``since`` (file number * 10^13 + offset) on."""

    version: int
    since: int
    columns: tuple[ColumnSpec, ...]
    reason: Reason


def signature(columns: tuple[ColumnSpec, ...]) -> tuple[tuple[str, str], ...]:
    """What version compatibility compares: each column's name and UMS type, in order."""
    return tuple((c.name, c.ums_type.value) for c in columns)


def compatible(old: tuple[ColumnSpec, ...], new: tuple[ColumnSpec, ...]) -> bool:
    """Whether rows with ``new`` columns stay in the version of ``old`` (appender/versions.py says when)."""
    return old == new or signature(old) == signature(new)  # equal columns: the usual case, checked first


def version_at(history: list[Version], at: int) -> Version | None:
    """The version valid at binlog id ``at``: the newest whose ``since`` is not after it."""
    valid = [v for v in history if v.since <= at]
    return max(valid, key=lambda v: v.since) if valid else None


metadata = MetaData()
meta_version = Table(
    "dbus_meta_version",
    metadata,
    Column("id", BigInteger, primary_key=True, autoincrement=True),
    Column("ds", String(64), nullable=False),
    Column("schema_name", String(64), nullable=False),
    Column("table_name", String(64), nullable=False),
    Column("version", Integer, nullable=False),
    Column("since_id", BigInteger, nullable=False),
    Column("reason", String(16), nullable=False),
    Column("columns", Text, nullable=False),
    UniqueConstraint("ds", "schema_name", "table_name", "version", name="uk_table_version"),
)
meta_avro_schema = Table(
    "dbus_meta_avro_schema",
    metadata,
    Column("id", BigInteger, primary_key=True, autoincrement=True),
    Column("namespace", String(255), nullable=False, index=True),
    Column("fingerprint", String(64), nullable=False),
    Column("schema_json", Text(16_777_215), nullable=False),  # MEDIUMTEXT on MySQL: wide tables fit
    Column("created_ms", BigInteger, nullable=False),
    UniqueConstraint("fingerprint", name="uk_avro_fingerprint"),
)
fullpull_history = Table(
    "dbus_fullpull_history",
    metadata,
    Column("id", BigInteger, primary_key=True, autoincrement=False),
    Column("ds", String(64), nullable=False),
    Column("schema_name", String(64), nullable=False),
    Column("table_name", String(64), nullable=False),
    Column("batch_id", Integer, nullable=False),
    Column("version", Integer, nullable=False),
    Column("ums_id", BigInteger, nullable=False),
    Column("status", String(16), nullable=False),
    Column("split_col", String(255), nullable=False),
    Column("shards", Integer, nullable=False),
    Column("total_rows", BigInteger, nullable=False),
    Column("finished_rows", BigInteger, nullable=False),
    Column("error", Text, nullable=True),
    Column("created_ms", BigInteger, nullable=False),
    Column("updated_ms", BigInteger, nullable=False),
)


@dataclass(frozen=True)
class AvroSchemaRow:
    """One stored Avro schema: its UMS namespace, fingerprint (sha256 hex of ``schema_json``) and text."""

    namespace: str
    fingerprint: str
    schema_json: str
    created_ms: int


def _columns_json(columns: tuple[ColumnSpec, ...]) -> str:
    return json.dumps(
        [{"name": c.name, "column_type": c.column_type, "nullable": c.nullable} for c in columns]
    )


def _columns(text: str) -> tuple[ColumnSpec, ...]:
    return tuple(ColumnSpec(c["name"], c["column_type"], c["nullable"]) for c in json.loads(text))


# The calls a long-running stage retries on a transient failure (dbuslib/retry.py). Each is safe to
# repeat: reads, idempotent inserts (``add``, ``add_avro_schema``) and the upsert ``record_pull``.
RETRIED = (
    "create_schema",
    "history",
    "add",
    "add_avro_schema",
    "avro_schema",
    "avro_schemas",
    "next_batch_id",
    "record_pull",
    "pulls",
)


class MetaStore(SqlStore):
    """The meta store's schema versions, Avro schemas, batch ids and pulls. With a ``retry`` policy (the
    stages pass ``RetryPolicy.of(cfg)``) every call in ``RETRIED`` rides a restart of the database within
    the policy's budget, then raises RetriesExhausted; without one (the CLI) the first failure is raised
    (dbuslib/sqlstore.py)."""

    METADATA = metadata
    RETRIED = RETRIED

    def history(self, ds: str, schema: str, table: str) -> list[Version]:
        """Every version of the table, oldest first."""
        q = (
            select(meta_version)
            .where(
                meta_version.c.ds == ds,
                meta_version.c.schema_name == schema,
                meta_version.c.table_name == table,
            )
            .order_by(meta_version.c.version)
        )
        with self.engine.connect() as conn:
            rows = conn.execute(q).mappings().all()
        return [
            Version(r["version"], r["since_id"], _columns(r["columns"]), Reason(r["reason"])) for r in rows
        ]

    def add(self, ds: str, schema: str, table: str, v: Version) -> Version:
        """Store ``v``; if that version number is already stored (a replay), the stored one is returned."""
        row = {
            "ds": ds,
            "schema_name": schema,
            "table_name": table,
            "version": v.version,
            "since_id": v.since,
            "reason": v.reason.value,
            "columns": _columns_json(v.columns),
        }
        try:
            with self.engine.begin() as conn:
                conn.execute(meta_version.insert().values(**row))
            return v
        except IntegrityError:
            return next(h for h in self.history(ds, schema, table) if h.version == v.version)

    def add_avro_schema(self, namespace: str, fingerprint: str, schema_json: str) -> AvroSchemaRow:
        """Store an Avro schema once; a concurrent or repeated insert of the same fingerprint returns the
        stored row (race-safe, as ``add``). A fingerprint already stored with another text is an error."""
        row = AvroSchemaRow(namespace, fingerprint, schema_json, int(time.time() * 1000))
        try:
            with self.engine.begin() as conn:
                conn.execute(meta_avro_schema.insert().values(**asdict(row)))
            return row
        except IntegrityError:
            stored = self.avro_schema(fingerprint)
            if stored is None:
                raise
            if stored.schema_json != schema_json:
                msg = f"Avro schema fingerprint {fingerprint} is stored with another schema text"
                raise ValueError(msg) from None
            return stored

    def avro_schema(self, fingerprint: str) -> AvroSchemaRow | None:
        """The stored Avro schema with this fingerprint (the ``ums_avro_schema`` header), or None."""
        q = select(meta_avro_schema).where(meta_avro_schema.c.fingerprint == fingerprint)
        with self.engine.connect() as conn:
            r = conn.execute(q).mappings().first()
        return None if r is None else _avro_row(r)

    def avro_schemas(self, namespace: str) -> list[AvroSchemaRow]:
        """Every Avro schema stored for a UMS namespace, oldest first."""
        q = (
            select(meta_avro_schema)
            .where(meta_avro_schema.c.namespace == namespace)
            .order_by(meta_avro_schema.c.id)
        )
        with self.engine.connect() as conn:
            rows = conn.execute(q).mappings().all()
        return [_avro_row(r) for r in rows]

    def next_batch_id(self, ds: str, schema: str, table: str) -> int:
        """The ``batchId`` of the next full pull of a table: 1 + the pulls recorded so far."""
        q = select(func.coalesce(func.max(fullpull_history.c.batch_id), 0)).where(
            fullpull_history.c.ds == ds,
            fullpull_history.c.schema_name == schema,
            fullpull_history.c.table_name == table,
        )
        with self.engine.connect() as conn:
            return int(conn.execute(q).scalar_one()) + 1

    def record_pull(self, row: dict[str, object]) -> None:
        """Insert or update one full-pull history row (``id`` = the request's SEQNO)."""
        row = {**row, "updated_ms": int(time.time() * 1000)}
        with self.engine.begin() as conn:
            done = conn.execute(
                fullpull_history.update()
                .where(fullpull_history.c.id == row["id"])
                .values(**{k: v for k, v in row.items() if k != "id"})
            )
            if done.rowcount == 0:
                conn.execute(fullpull_history.insert().values(created_ms=row["updated_ms"], **row))

    def pulls(self, ds: str, limit: int = 20) -> list[dict[str, object]]:
        """The newest full pulls of a source, newest first."""
        q = (
            select(fullpull_history)
            .where(fullpull_history.c.ds == ds)
            .order_by(fullpull_history.c.id.desc())
            .limit(limit)
        )
        with self.engine.connect() as conn:
            return [dict(r) for r in conn.execute(q).mappings().all()]


def _avro_row(r) -> AvroSchemaRow:
    return AvroSchemaRow(r["namespace"], r["fingerprint"], r["schema_json"], r["created_ms"])
