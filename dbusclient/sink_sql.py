"""The replica sink: a window's merge effects applied to tables of another database (MariaDB, PostgreSQL).

``SqlSink(url, keys)`` keeps, per source table, a replica table named as the source table (or as
``names`` says) in the database of a SQLAlchemy URL (``mysql+pymysql://...``,
``postgresql+psycopg://...``)::

    sink = SqlSink("postgresql+psycopg://dbus:dbus@127.0.0.1:15432/replica", {"shop.orders": ("id",)})
    sink.ensure_schema(msg.schema)  # each message's schema: create the table, or follow a new version
    sink.apply(merger.merge(window).effects, checkpoint)  # one transaction: rows, tombstones, checkpoint

What it keeps in the target, per table ``T`` (docs/client.md, "The SQL sink"):

- ``T``: the user columns (types from ``sql_type``), the key columns as primary key, and ``ums_id_``
  and ``ums_uid_``: the position of the change that wrote the row;
- ``T__tombstones``: the key columns, ``ums_id_``, ``ums_uid_`` of each key whose last change was a
  delete (or a before image): what keeps an older snapshot row from resurrecting the key after a
  restart;
- ``dbus_client_columns``: per replica table and column the UMS type it was made from and the newest
  version seen (version changes are checked against it);
- ``dbus_client_checkpoint``: the consumer's checkpoint JSON per name (``SqlCheckpointStore``), written in
  the same transaction as the rows it covers: a crash leaves both as they were, or both new.

**Never backwards.** Every write is guarded in SQL by the key's stored position: an upsert changes a row
only when its ``(ums_id_, ums_uid_)`` is greater than the row's (``ON DUPLICATE KEY UPDATE col =
IF(newer, new, old)`` on MariaDB, ``ON CONFLICT DO UPDATE ... WHERE`` on PostgreSQL), a row written
behind its key's tombstone is removed again in the same transaction, and a delete removes a row only when
it is newer (the tombstone is written, then every row older than its key's tombstone goes). So a sink that is
handed a window again (a restart before the checkpoint), or effects of a merger that lost its states,
leaves every key where it was or moves it forward.

**Batched.** A window is a few set statements per table, whatever its size. On MariaDB they are sent as
multi-row SQL text (``_MariaText``: the statements as SQLAlchemy compiles them, once per table, with the
rows written as the literals pymysql would send; each statement sent before the next one is written, its
answer read after), and the two clean-up deletes run only for the keys of the window that have a
tombstone; on PostgreSQL through SQLAlchemy's executemany.

**Exact keys.** The key columns hold every source key exactly: their types come from the source's
declarations (``declared``) through ``dbusclient.replica_keys``, with a NO PAD binary collation on MariaDB
(``'k1'`` and ``'k1 '`` stay two keys); a key the target cannot hold is refused when the sink is made.

Errors: ``CLIENT_SINK_SCHEMA`` (a column retyped incompatibly, a key column missing: names the table and
the column), ``CLIENT_SINK_KEY`` (``KeyRefused``: a key the target cannot hold exactly, names the table and
the column), ``CLIENT_BAD_ROW`` (``RowRefused``: a value that does not decode, names the replica, key and
column, and carries the change, so the consumer can set its record aside), ``CLIENT_SINK_FAILED`` (the
database refused a statement or is unreachable: names the table).
"""

from __future__ import annotations

import contextlib
import itertools
import math
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any, cast

import pymysql
import sqlalchemy as sa
from pymysql.constants import COMMAND, SERVER_STATUS
from pymysql.converters import escape_float
from sqlalchemy.dialects import mysql as mysql_dialect
from sqlalchemy.dialects import postgresql as pg_dialect
from sqlalchemy.engine import Connection, Engine

from dbusclient.checkpoint import Checkpoint, from_json, to_json
from dbusclient.decode import RowChange, RowRefused, TableRef
from dbusclient.merge import Delete, Effect, KeyState, Upsert
from dbusclient.replica_keys import KeyRefused, SourceColumn, key_lengths, key_types
from dbuslib.errors import DbusError
from dbuslib.retry import transient
from ums.decode import decode_value
from ums.errors import UmsError
from ums.message import SYSTEM_NAMES, UmsField, UmsSchema
from ums.scalars import DATE_TEXT, DATETIME_TEXT, DECIMAL_TEXT, INT_MAX, INT_MIN, JsonValue
from ums.types import UmsType, ums_type_for

COLUMNS_TABLE = "dbus_client_columns"
CHECKPOINT_TABLE = "dbus_client_checkpoint"
TOMBSTONE_SUFFIX = "__tombstones"
_KEYS_PER_STATEMENT = 1000  # keys in one IN list of the clean-up deletes
_KEYS_PER_READ = 10_000  # keys in one IN list of the tombstones read on MariaDB

# Retypes a replica follows by widening its column; any other change of a column's UMS type stops.
WIDENINGS = frozenset({(UmsType.INT, UmsType.LONG), (UmsType.FLOAT, UmsType.DOUBLE)})


class SinkSchemaError(DbusError):
    """A version change the replica cannot follow (a column retyped incompatibly), or a key column the
    table's fields do not have; names the replica table and the column."""

    code = "CLIENT_SINK_SCHEMA"


class SinkError(DbusError):
    """The target database refused a statement or could not be reached; names the table. ``retriable``
    when the connection failed (``dbuslib.retry.transient``), not when a statement was refused."""

    code = "CLIENT_SINK_FAILED"
    retriable = True


def sql_type(ums_type: UmsType, dialect: str, key: bool = False) -> sa.types.TypeEngine[Any]:
    """The replica column type of a UMS type on ``dialect`` (``mysql``/``mariadb`` or ``postgresql``).

    UMS carries no length, precision or sign: ``long`` (which also holds BIGINT UNSIGNED) becomes
    ``DECIMAL(20,0)``, ``decimal`` MariaDB's widest ``DECIMAL(65,30)`` or PostgreSQL's unconstrained
    ``NUMERIC``; strings ``LONGTEXT``/``TEXT``. A string or binary key column takes its length and
    collation from the source (``dbusclient.replica_keys``); without them, here, the longest exact form:
    MariaDB ``VARCHAR(768)`` with the NO PAD binary collation (keys that differ in case or by trailing
    spaces stay apart) and ``VARBINARY(3072)``, PostgreSQL ``TEXT COLLATE "C"``.
    """
    maria = dialect in ("mysql", "mariadb")
    if not maria and dialect != "postgresql":
        msg = f"dialect {dialect!r}: the SQL sink knows mysql/mariadb and postgresql"
        raise SinkSchemaError(msg)
    if ums_type in (UmsType.STRING, UmsType.RAW, UmsType.JSONOBJECT):
        if maria:
            if key:
                return mysql_dialect.VARCHAR(768, charset="utf8mb4", collation="utf8mb4_nopad_bin")
            return mysql_dialect.LONGTEXT()
        return pg_dialect.TEXT(collation="C") if key else sa.Text()
    if ums_type is UmsType.BINARY:
        if maria:
            return mysql_dialect.VARBINARY(3072) if key else mysql_dialect.LONGBLOB()
        return pg_dialect.BYTEA()
    simple: dict[UmsType, sa.types.TypeEngine[Any]] = {
        UmsType.INT: sa.Integer(),
        UmsType.LONG: sa.Numeric(20, 0),
        UmsType.FLOAT: sa.REAL() if not maria else mysql_dialect.FLOAT(),
        UmsType.DOUBLE: sa.Double() if not maria else mysql_dialect.DOUBLE(),
        UmsType.BOOLEAN: sa.Boolean(),
        UmsType.DATE: sa.Date(),
        UmsType.DATETIME: mysql_dialect.DATETIME(fsp=6) if maria else pg_dialect.TIMESTAMP(precision=6),
        UmsType.DECIMAL: mysql_dialect.DECIMAL(65, 30) if maria else sa.Numeric(),
    }
    return simple[ums_type]


@dataclass(frozen=True)
class ApplyResult:
    """What ``apply`` sent: upserts and deletes, each applied only where it is newer than the key's row
    or tombstone."""

    upserts: int
    deletes: int


@dataclass
class _Replica:
    """What the sink knows of one replica table: its SQLAlchemy tables, key, and column types."""

    name: str
    key: tuple[str, ...]
    version: int
    types: dict[str, UmsType]  # every user column of the replica (dropped ones too, unless dropped)
    table: sa.Table
    tombstones: sa.Table
    by_version: dict[int, dict[str, UmsType]]
    source: TableRef  # the source table (its declared key columns)
    limits: tuple[tuple[int, int], ...] = ()  # (key index, longest value) of the string and binary keys


class SqlCheckpointStore:
    """A consumer checkpoint in the target database (table ``dbus_client_checkpoint``, one row per
    ``name``). ``save`` commits on its own; ``SqlSink.apply(effects, checkpoint)`` writes it in the data's
    transaction instead (``save_in``)."""

    def __init__(self, engine: Engine, name: str = "default") -> None:
        self.engine, self.name = engine, name
        self.table = _checkpoint_table(sa.MetaData())
        with _errors(CHECKPOINT_TABLE):
            self.table.create(engine, checkfirst=True)

    def load(self) -> Checkpoint | None:
        with _errors(CHECKPOINT_TABLE), self.engine.connect() as conn:
            text = conn.execute(
                sa.select(self.table.c.checkpoint).where(self.table.c.name == self.name)
            ).scalar_one_or_none()
        return None if text is None else from_json(text, f"{CHECKPOINT_TABLE} row {self.name!r}")

    def save(self, checkpoint: Checkpoint) -> None:
        with _errors(CHECKPOINT_TABLE), self.engine.begin() as conn:
            self.save_in(conn, checkpoint)

    def save_in(self, conn: Connection, checkpoint: Checkpoint) -> None:
        """Write the checkpoint within the caller's transaction on ``conn``."""
        row = {"name": self.name, "checkpoint": to_json(checkpoint)}
        conn.execute(_upsert(conn.dialect.name, self.table, ("name",), ("checkpoint",), guarded=False), [row])


class SqlSink:
    """Replica tables of the source tables in ``keys`` (``"schema.table"`` -> key columns, as for
    ``Decoder``) in the database of ``url`` (or an ``Engine``). ``names`` maps ``"schema.table"`` to a
    replica table name (default: the source table's name). ``drop_columns``: drop a replica column when
    a version drops it (default: keep it, nullable, its values as they were). ``declared``:
    ``"schema.table"`` -> the key columns as the source declares them (``SourceColumn``): the replica's
    key columns hold every source key exactly (``dbusclient.replica_keys``); a table whose key the
    target cannot hold is refused here, ``CLIENT_SINK_KEY``, before anything is written."""

    def __init__(
        self,
        url: str | Engine,
        keys: Mapping[str, Sequence[str]],
        names: Mapping[str, str] | None = None,
        drop_columns: bool = False,
        checkpoint_name: str = "default",
        declared: Mapping[str, Sequence[SourceColumn]] | None = None,
    ) -> None:
        self.engine = url if isinstance(url, Engine) else sa.create_engine(url, pool_pre_ping=True)
        self.dialect = self.engine.dialect.name
        self.keys = {name: tuple(cols) for name, cols in keys.items()}
        self.names = dict(names or {})
        self.declared = {name: {c.name: c for c in cols} for name, cols in (declared or {}).items()}
        self.drop_columns = drop_columns
        self._meta = sa.MetaData()
        self._columns = sa.Table(
            COLUMNS_TABLE,
            self._meta,
            sa.Column("replica", sa.String(128), primary_key=True),
            sa.Column("column_name", sa.String(128), primary_key=True),
            sa.Column("ums_type", sa.String(16), nullable=False),
            sa.Column("version", sa.Integer, nullable=False),
            sa.Column("dropped", sa.Boolean, nullable=False),
        )
        with _errors(COLUMNS_TABLE), self.engine.connect():  # connected: the server's flavour is known
            pass
        # MariaDB's NO PAD binary collations (MySQL 8 has utf8mb4_0900_bin only): the key columns' forms
        mariadb = self.dialect != "mysql" or getattr(self.engine.dialect, "is_mariadb", True)
        self.flavour = "mariadb" if self.dialect in ("mysql", "mariadb") and mariadb else self.dialect
        for name, key in self.keys.items():  # refused before anything is written: every declared key
            columns = self.declared.get(name, {})
            if all(c in columns for c in key):
                types = {c: ums_type_for(columns[c].column_type) for c in key}
                key_types(self.names.get(name, name.split(".", 1)[-1]), key, types, self.flavour, columns)
        if self.flavour == "mariadb":
            with _errors(COLUMNS_TABLE), self.engine.connect() as conn:
                for name, key in self.keys.items():
                    self._check_exact(conn, self.names.get(name, name.split(".", 1)[-1]), key)
        with _errors(COLUMNS_TABLE):
            self._columns.create(self.engine, checkfirst=True)
        self.checkpoints = SqlCheckpointStore(self.engine, checkpoint_name)
        self._replicas: dict[TableRef, _Replica] = {}
        self._compiled: dict[
            tuple[Any, ...], tuple[str, str]
        ] = {}  # statements of the MariaDB path (_MariaText)

    def replica_name(self, table: TableRef) -> str:
        return self.names.get(f"{table.schema}.{table.table}", table.table)

    def _key_of(self, table: TableRef) -> tuple[str, ...]:
        key = self.keys.get(f"{table.schema}.{table.table}")
        if not key:
            msg = f"{table}: no key columns given for {table.schema}.{table.table}"
            raise SinkSchemaError(msg)
        return key

    # ------------------------------------------------------------ schema

    def ensure_schema(self, schema: UmsSchema) -> None:
        """``ensure_table`` for the table and version of a message's schema."""
        ns = schema.namespace
        self.ensure_table(TableRef.of(ns), ns.version, schema.fields)

    def ensure_table(self, table: TableRef, version: int, fields: Sequence[UmsField]) -> None:
        """Create the replica of ``table`` from the fields of ``version``, or follow a newer version:
        added columns are added (nullable), dropped ones kept (or dropped with ``drop_columns``), a
        widened type (``WIDENINGS``) widens the column, any other retype is ``CLIENT_SINK_SCHEMA``. An
        older version changes nothing (its rows are decoded with its own types)."""
        user = {f.name: f.type for f in fields if f.name not in SYSTEM_NAMES}
        rep = self._replicas.get(table)
        if rep is not None and version in rep.by_version:
            return
        name = self.replica_name(table)
        key = self._key_of(table)
        missing = [c for c in key if c not in user]
        if missing:
            msg = f"replica {name} ({table} version {version}): key column(s) {missing} are not fields"
            raise SinkSchemaError(msg)
        with _errors(name), self.engine.begin() as conn:
            known = self._known_columns(conn, name)
            if rep is None or max((v for _, v, _ in known.values()), default=0) > rep.version:
                # first use, or another process of the same target followed a newer version meanwhile
                old_versions = rep.by_version if rep is not None else {}
                rep = self._load(conn, table, name, key, version, user, known)
                rep.by_version.update(old_versions)
            if version > rep.version:
                self._follow(conn, rep, version, user)
        rep.by_version[version] = user
        self._replicas[table] = rep

    def _known_columns(self, conn: Connection, name: str) -> dict[str, tuple[UmsType, int, bool]]:
        c = self._columns.c
        rows = conn.execute(
            sa.select(c.column_name, c.ums_type, c.version, c.dropped).where(c.replica == name)
        ).all()
        return {r[0]: (UmsType(r[1]), int(r[2]), bool(r[3])) for r in rows}

    def _load(
        self,
        conn: Connection,
        table: TableRef,
        name: str,
        key: tuple[str, ...],
        version: int,
        user: dict[str, UmsType],
        known: dict[str, tuple[UmsType, int, bool]],
    ) -> _Replica:
        """The replica as the database has it, made from ``user`` when it is not there yet."""
        if not known:
            types, at = dict(user), version
            self._record(conn, name, {c: (t, version, False) for c, t in types.items()})
        else:
            types = {c: t for c, (t, _, dropped) in known.items() if not dropped}
            at = max(v for _, v, _ in known.values())
        sa_table, tombs = self._tables(table, name, key, types)
        sa_table.create(conn, checkfirst=True)
        tombs.create(conn, checkfirst=True)
        return _Replica(
            name, key, at, types, sa_table, tombs, {}, table, self._limits(table, name, key, types)
        )

    def _check_exact(self, conn: Connection, name: str, key: tuple[str, ...]) -> None:
        """A replica table made by an earlier version of the sink (its string keys ``VARCHAR(255)`` with the
        PAD SPACE ``utf8mb4_bin``) would merge keys that differ by trailing spaces: refused, naming it
        (checked when the sink is made, before anything is written)."""
        rows = conn.execute(
            sa.text(
                "SELECT COLUMN_NAME, COLUMN_TYPE, COLLATION_NAME FROM information_schema.COLUMNS "
                "WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME IN (:t, :tombs)"
            ),
            {"t": name, "tombs": name + TOMBSTONE_SUFFIX},
        ).all()
        for column, column_type, collation in rows:
            if column in key and collation and not str(collation).endswith(("_nopad_bin", "_0900_bin")):
                msg = (
                    f"replica {name}: key column {column!r} is {column_type} COLLATE {collation}, which "
                    "holds keys that differ by trailing spaces (or case) as one: made by an earlier dbus "
                    f"replicate. Drop {name} and {name}{TOMBSTONE_SUFFIX} (and its rows of "
                    f"{COLUMNS_TABLE}) to bootstrap it anew with exact keys"
                )
                raise KeyRefused(msg)

    def _limits(
        self, table: TableRef, name: str, key: tuple[str, ...], types: dict[str, UmsType]
    ) -> tuple[tuple[int, int], ...]:
        declared = self.declared.get(f"{table.schema}.{table.table}")
        lengths = key_lengths(name, key, types, self.flavour, declared)
        return tuple((i, n) for i, n in enumerate(lengths) if n is not None)

    def _tables(
        self, table: TableRef, name: str, key: tuple[str, ...], types: dict[str, UmsType]
    ) -> tuple[sa.Table, sa.Table]:
        meta = sa.MetaData()
        declared = self.declared.get(f"{table.schema}.{table.table}")
        keyed = key_types(name, key, types, self.flavour, declared)
        cols = [
            sa.Column(c, keyed[c], primary_key=True, nullable=False)
            if c in keyed
            else sa.Column(c, sql_type(t, self.dialect), nullable=True)
            for c, t in types.items()
        ]
        table_ = sa.Table(name, meta, *cols, *_position_columns())
        tombs = sa.Table(
            name + TOMBSTONE_SUFFIX,
            meta,
            *[sa.Column(c, keyed[c], primary_key=True) for c in key],
            *_position_columns(),
        )
        return table_, tombs

    def _record(self, conn: Connection, name: str, cols: dict[str, tuple[UmsType, int, bool]]) -> None:
        rows = [
            {"replica": name, "column_name": c, "ums_type": t.value, "version": v, "dropped": d}
            for c, (t, v, d) in cols.items()
        ]
        if rows:
            stmt = _upsert(
                self.dialect,
                self._columns,
                ("replica", "column_name"),
                ("ums_type", "version", "dropped"),
                False,
            )
            conn.execute(stmt, rows)

    def _follow(self, conn: Connection, rep: _Replica, version: int, user: dict[str, UmsType]) -> None:
        """Bring the replica from ``rep.version`` to ``version`` (checked whole before any DDL)."""
        for col, new in user.items():
            old = rep.types.get(col)
            if old is not None and old is not new and (old, new) not in WIDENINGS:
                msg = (
                    f"replica {rep.name}: column {col!r} changed from {old.value} to {new.value} in version "
                    f"{version}; the replica cannot follow (drop the replica table to bootstrap it anew)"
                )
                raise SinkSchemaError(msg)
        quote = self.engine.dialect.identifier_preparer.quote
        table, changes = quote(rep.name), {}
        # MariaDB commits each DDL statement by itself: a crash between an ALTER and the record of it
        # leaves a column the records do not know; the table's own columns decide what is still to do
        present = {c["name"] for c in sa.inspect(conn).get_columns(rep.name)}
        for col, new in user.items():
            old = rep.types.get(col)
            column_sql = sql_type(new, self.dialect, col in rep.key).compile(dialect=self.engine.dialect)
            if old is None:
                if col not in present:
                    conn.execute(sa.text(f"ALTER TABLE {table} ADD COLUMN {quote(col)} {column_sql} NULL"))
            elif old is not new:
                tables = [table, quote(rep.name + TOMBSTONE_SUFFIX)] if col in rep.key else [table]
                for t in tables:
                    if self.dialect == "postgresql":
                        conn.execute(sa.text(f"ALTER TABLE {t} ALTER COLUMN {quote(col)} TYPE {column_sql}"))
                    else:
                        null = "NOT NULL" if col in rep.key else "NULL"
                        conn.execute(
                            sa.text(f"ALTER TABLE {t} MODIFY COLUMN {quote(col)} {column_sql} {null}")
                        )
            else:
                continue
            changes[col] = (new, version, False)
        for col, old in list(rep.types.items()):
            if col not in user and col not in rep.key:
                if self.drop_columns:
                    if col in present:
                        conn.execute(sa.text(f"ALTER TABLE {table} DROP COLUMN {quote(col)}"))
                    changes[col] = (old, version, True)
        self._record(conn, rep.name, changes)
        types = {c: t for c, t in rep.types.items() if not (self.drop_columns and c not in user)}
        types.update(user)
        rep.types, rep.version = types, version
        rep.table, rep.tombstones = self._tables(rep.source, rep.name, rep.key, types)
        rep.limits = self._limits(rep.source, rep.name, rep.key, types)

    # ------------------------------------------------------------ data

    def apply(self, effects: Iterable[Effect], checkpoint: Checkpoint | None = None) -> ApplyResult:
        """Apply a window's effects (``MergeResult.effects``) and save ``checkpoint`` (when given) in one
        transaction. Every table must have been ``ensure_schema``'d with the version of its effects."""
        by_table: dict[TableRef, list[Effect]] = {}
        for e in effects:
            by_table.setdefault(e.change.table, []).append(e)
        ups = dels = 0
        where = ", ".join(self.replica_name(t) for t in by_table) or CHECKPOINT_TABLE
        with _errors(where), self.engine.begin() as conn:
            for table, table_effects in by_table.items():
                rep = self._replicas.get(table)
                if rep is None:
                    msg = f"{table}: ensure_schema was not called for it before apply"
                    raise SinkSchemaError(msg)
                u, d = self._apply_table(conn, rep, table_effects)
                ups, dels = ups + u, dels + d
            if checkpoint is not None:
                self.checkpoints.save_in(conn, checkpoint)
        return ApplyResult(ups, dels)

    def _apply_table(self, conn: Connection, rep: _Replica, effects: list[Effect]) -> tuple[int, int]:
        """Four set statements, whatever the window's size: the rows (guarded upsert), the tombstones of
        the deletes (guarded upsert), then per key of the window the one of row and tombstone that is
        older goes (a delete removes the row; a row written behind its key's tombstone is removed again;
        a row newer than its tombstone ends the tombstone)."""
        if rep.limits:
            _check_lengths(rep, effects)
        upserts = [e for e in effects if isinstance(e, Upsert)]
        deletes = [e for e in effects if isinstance(e, Delete)]
        if self.dialect in ("mysql", "mariadb"):
            _MariaText(conn, self._compiled).apply(rep, upserts, deletes, effects)
            return len(upserts), len(deletes)
        groups: dict[tuple[str, ...], list[dict[str, Any]]] = {}
        for e in upserts:
            row = self._row(rep, e)
            groups.setdefault(tuple(row), []).append(row)
        for columns, rows in groups.items():
            data = tuple(c for c in columns if c not in rep.key and c not in _POSITION)
            conn.execute(_upsert(self.dialect, rep.table, rep.key, data, guarded=True), rows)
        if deletes:
            rows = [{**dict(zip(rep.key, e.change.key, strict=True)), **_position_of(e)} for e in deletes]
            conn.execute(_upsert(self.dialect, rep.tombstones, rep.key, (), guarded=True), rows)
        keys = [e.change.key for e in effects]
        for i in range(0, len(keys), _KEYS_PER_STATEMENT):
            chunk = keys[i : i + _KEYS_PER_STATEMENT]
            conn.execute(_older_gone(rep.table, rep.tombstones, rep.key, chunk))
            if upserts:
                conn.execute(_older_gone(rep.tombstones, rep.table, rep.key, chunk))
        return len(upserts), len(deletes)

    def _row(self, rep: _Replica, e: Effect) -> dict[str, Any]:
        c = e.change
        types = _version_types(rep, c)
        row: dict[str, Any] = {}
        for col, value in c.values.items():
            t = types.get(col)
            if t is None or col not in rep.types:
                continue  # a column this version does not declare, or one the replica dropped
            row[col] = _sql_value(rep, c, col, t, value)
        row["ums_id_"], row["ums_uid_"] = c.ums_id, c.ums_uid
        return row

    def has_replica(self, table: TableRef) -> bool:
        """Whether this sink has made (or loaded) the replica of ``table``."""
        return table in self._replicas

    def sweep(self, below: Mapping[TableRef, int], checkpoint: Checkpoint | None = None) -> int:
        """In one transaction: per table, the replica rows older than its position ``below[table]`` (a
        full pull's snapshot position) become tombstones at (position, 0); then ``checkpoint``. Every row
        that existed at that position came with the pull or a newer change, so an older row is one the
        source no longer had. Returns the rows removed."""
        removed = 0
        where = ", ".join(self.replica_name(t) for t in below) or CHECKPOINT_TABLE
        with _errors(where), self.engine.begin() as conn:
            for table, position in below.items():
                rep = self._replicas[table]
                t, tombs = rep.table, rep.tombstones
                older = t.c.ums_id_ < position
                columns = [*rep.key, "ums_id_", "ums_uid_"]
                stale = sa.select(
                    *[t.c[k] for k in rep.key],
                    sa.literal(position, sa.BigInteger),
                    sa.literal(0, sa.Numeric(40, 0)),
                ).where(older)
                # a key has a row or a tombstone, never both after a window: the conflict clause guards
                if self.dialect == "postgresql":
                    conn.execute(
                        pg_dialect.insert(tombs).from_select(columns, stale).on_conflict_do_nothing()
                    )
                else:
                    conn.execute(sa.insert(tombs).from_select(columns, stale).prefix_with("IGNORE"))
                removed += conn.execute(sa.delete(t).where(older)).rowcount
            if checkpoint is not None:
                self.checkpoints.save_in(conn, checkpoint)
        return removed

    def drop_table(self, table: TableRef) -> None:
        """Drop the replica of ``table``: its rows, its tombstones and the record of its columns (a replica
        that cannot follow a version change, to be made anew from the new version and a full pull)."""
        name = self.replica_name(table)
        with _errors(name), self.engine.begin() as conn:
            for t in (name + TOMBSTONE_SUFFIX, name):
                sa.Table(t, sa.MetaData()).drop(conn, checkfirst=True)
            conn.execute(sa.delete(self._columns).where(self._columns.c.replica == name))
        self._replicas.pop(table, None)

    def key_states(self, table: TableRef) -> dict[tuple[TableRef, tuple[Any, ...]], KeyState]:
        """Every key's state as the replica holds it (rows and tombstones; the greater position wins), to
        seed a ``Merger`` after a restart. Reads the whole table: for tables that fit in memory."""
        rep = self._replicas.get(table)
        if rep is None:
            msg = f"{table}: ensure_schema was not called for it"
            raise SinkSchemaError(msg)
        out: dict[tuple[TableRef, tuple[Any, ...]], KeyState] = {}
        with _errors(rep.name), self.engine.connect() as conn:
            for src, live in ((rep.tombstones, False), (rep.table, True)):
                cols = [src.c[k] for k in rep.key]
                for r in conn.execute(sa.select(*cols, src.c.ums_id_, src.c.ums_uid_)):
                    k = (table, _norm(tuple(r[: len(cols)])))
                    state = KeyState(int(r[-2]), int(r[-1]), live)
                    old = out.get(k)
                    if old is None or old.position < state.position:
                        out[k] = state
        return out


def _version_types(rep: _Replica, c: RowChange) -> dict[str, UmsType]:
    """The user columns' types of the version of ``c``, which ``ensure_table`` must have seen."""
    types = rep.by_version.get(c.version)
    if types is None:
        msg = f"replica {rep.name}: version {c.version} of {c.table} was not ensure_schema'd before apply"
        raise SinkSchemaError(msg)
    return types


def _check_lengths(rep: _Replica, effects: Iterable[Effect]) -> None:
    """A key longer than its replica column takes (no source could write it: a crafted or broken record)
    is ``RowRefused``, naming the replica, the column and the lengths, never the value."""
    for e in effects:
        key = e.change.key
        for i, longest in rep.limits:
            value = key[i]
            if isinstance(value, (str, bytes)) and len(value) > longest:
                msg = (
                    f"replica {rep.name}: ums_uid_ {e.change.ums_uid}: key column {rep.key[i]!r} is "
                    f"{len(value)} long, longer than the {longest} the source declares"
                )
                raise RowRefused(msg, e.change)


def _sql_value(rep: _Replica, c: RowChange, col: str, t: UmsType, value: JsonValue) -> object:
    """The Python value a replica column gets for a UMS JSON value (a zero date: NULL); a value that
    does not decode is ``RowRefused`` (``CLIENT_BAD_ROW``) naming the replica, key and column, and
    carrying the change (the consumer sets its record aside and applies the rest of the window)."""
    try:
        v = decode_value(t, value, col)
    except UmsError as err:
        msg = f"replica {rep.name}: key {list(c.key)} (ums_uid_ {c.ums_uid}): {err}"
        raise RowRefused(msg, c) from None
    return None if isinstance(v, str) and t in (UmsType.DATE, UmsType.DATETIME) else v


class _MariaText:
    """A window of one replica table on MariaDB as multi-row SQL text: SQLAlchemy's executemany of the
    same statements (``_upsert``, ``_older_gone``) spent most of a row's time compiling and escaping
    each parameter. The statements are SQLAlchemy's, compiled once per table and column set; only the
    rows are written here, each value as the literal pymysql would send for its decoded value. The
    usual wire forms are written as they are (``_quick_literal``: a long or decimal as its digits, a
    string escaped as pymysql escapes it); any other goes through ``decode_value`` and pymysql's escaping,
    so a value that does not decode is refused as on the other path."""

    def __init__(self, conn: Connection, compiled: dict[tuple[Any, ...], tuple[str, str]]) -> None:
        self.conn, self._compiled = conn, compiled  # the sink's: (kind, tables, columns) -> SQL text
        self._plans: dict[tuple[Any, ...], _Plan] = {}
        raw: Any = conn.connection.dbapi_connection
        plain = not (raw.server_status & SERVER_STATUS.SERVER_STATUS_NO_BACKSLASH_ESCAPES)
        self.raw = raw
        self.quote: Callable[[str], str] = _quote_escaped if plain else raw.escape

    def apply(
        self, rep: _Replica, upserts: Sequence[Upsert], deletes: Sequence[Delete], effects: Sequence[Effect]
    ) -> None:
        # First the tombstones the window's keys have (read with a lock, as the clean-up deletes' joins
        # read: none can be added for them until the commit), then the rows: each statement is sent before
        # the next one's text is written, and its answer read after (``_pipelined``)
        keys = [self._key_tuple(e.change.key) for e in effects]
        reads = [
            self._tombstoned(rep).replace(_KEYS_MARK, ",".join(chunk))
            for chunk in _chunks(keys, _KEYS_PER_READ)
        ]
        answers = self._pipelined(itertools.chain(reads, self._writes(rep, upserts, deletes)))
        found = [self._key_tuple(tuple(r)) for rows in answers[: len(reads)] for r in rows]
        # both clean-up deletes join a key's row with its tombstone: only the keys of the window that have
        # one (found above, or written by the window's deletes) can change, usually few of them
        tombstoned = list(dict.fromkeys([*found, *(self._key_tuple(e.change.key) for e in deletes)]))
        cleanups = []
        for chunk in _chunks(tombstoned, _KEYS_PER_STATEMENT):
            among = ",".join(chunk)
            cleanups.append(self._older_gone(rep.table, rep.tombstones, rep.key).replace(_KEYS_MARK, among))
            if upserts:
                cleanups.append(
                    self._older_gone(rep.tombstones, rep.table, rep.key).replace(_KEYS_MARK, among)
                )
        self._pipelined(cleanups)

    def _pipelined(self, statements: Iterable[str]) -> list[tuple[Any, ...]]:
        """Run ``statements`` in order on the transaction's connection, each sent before the next one's
        text is taken from ``statements`` (written, for a generator) and its answer read after: the
        database runs one while the next is written, in this thread. (They ran in a thread of their own
        before, which also waited for the GIL while the rows were written: the tombstones' reads of a
        bench run took 0.65 s there, 0.25 s alone.) The rows each answered (none for an INSERT or
        DELETE). pymysql's ``query`` is its ``_execute_command`` then ``_read_query_result``, here with
        the writing between them; one statement at most is unanswered, and it is read before anything
        else is sent, also when the writing failed."""
        raw, answers, pending = self.raw, [], False
        try:
            for sql in statements:
                if pending:
                    pending = False
                    raw._read_query_result()
                    answers.append(raw._result.rows or ())
                raw._execute_command(COMMAND.COM_QUERY, sql)
                pending = True
            if pending:
                pending = False
                raw._read_query_result()
                answers.append(raw._result.rows or ())
        finally:
            if pending:  # the next statement's writing failed: the connection is left answered
                with contextlib.suppress(pymysql.err.MySQLError):
                    raw._read_query_result()
        return answers

    def _writes(self, rep: _Replica, upserts: Sequence[Upsert], deletes: Sequence[Delete]) -> Iterator[str]:
        """The guarded upserts of the rows (of ``_ROWS_PER_STATEMENT`` rows each, per column set), then of
        the deletes' tombstones."""
        groups: dict[tuple[str, ...], list[str]] = {}
        for e in upserts:
            columns, row = self._row(rep, e)
            rows = groups.setdefault(columns, [])
            rows.append(row)
            if len(rows) == _ROWS_PER_STATEMENT:
                yield self._upsert_text(rep.table, rep.key, columns, rows)
                rows.clear()
        for columns, rows in groups.items():
            if rows:
                yield self._upsert_text(rep.table, rep.key, columns, rows)
        columns = (*rep.key, *_POSITION)
        for i in range(0, len(deletes), _ROWS_PER_STATEMENT):
            rows = [
                "(" + ",".join([*map(self._key_literal, c.key), str(c.ums_id), str(c.ums_uid)]) + ")"
                for c in (e.change for e in deletes[i : i + _ROWS_PER_STATEMENT])
            ]
            yield self._upsert_text(rep.tombstones, rep.key, columns, rows)

    def _upsert_text(
        self, table: sa.Table, key: Sequence[str], columns: tuple[str, ...], rows: list[str]
    ) -> str:
        data = tuple(c for c in columns if c not in key and c not in _POSITION)
        head, tail = self._insert(table, key, columns, data)
        return head + ",".join(rows) + tail

    def _row(self, rep: _Replica, e: Effect) -> tuple[tuple[str, ...], str]:
        """The columns of a row (in the table's order, as the compiled INSERT lists them) and its
        ``(literal, ...)``: the columns of the change's version the replica has."""
        c = e.change
        plan_key = (rep.table, c.version)
        plan = self._plans.get(plan_key)
        if plan is None:
            types = _version_types(rep, c)
            plan = _Plan(
                [
                    (col.name, types[col.name], _literal_writer(types[col.name], self.quote))
                    for col in rep.table.columns
                    if col.name in types
                ]
            )
            self._plans[plan_key] = plan
        values = c.values
        try:  # the usual row: every column of its version there, each in its usual form
            written = [write(values[col]) for col, write in plan.writers]
        except KeyError:
            written = []
        if len(written) == len(plan.writers) and all(written):  # a literal is never "", None is not usual
            return plan.columns, "(" + ",".join(cast(list[str], written)) + f",{c.ums_id},{c.ums_uid})"
        columns: list[str] = []
        literals: list[str] = []
        for col, t, write in plan.columns_types:
            value = values.get(col, _MISSING)
            if value is _MISSING:
                continue
            literal = write(value)  # type: ignore[arg-type]
            if literal is None:
                literal = self.raw.escape(_sql_value(rep, c, col, t, value))  # type: ignore[arg-type]
            columns.append(col)
            literals.append(literal)
        columns += _POSITION
        literals += (str(c.ums_id), str(c.ums_uid))
        return tuple(columns), "(" + ",".join(literals) + ")"

    def _key_literal(self, value: object) -> str:
        return str(value) if type(value) is int else str(self.raw.escape(value))

    def _key_tuple(self, key: tuple[Any, ...]) -> str:
        if len(key) == 1:
            return self._key_literal(key[0])
        return "(" + ",".join(map(self._key_literal, key)) + ")"

    def _insert(
        self, table: sa.Table, key: Sequence[str], columns: tuple[str, ...], data: tuple[str, ...]
    ) -> tuple[str, str]:
        """``INSERT INTO t (columns) VALUES`` and what follows the rows (the guarded update) of
        ``_upsert(table, key, data, guarded=True)``, as this connection's dialect compiles it."""
        cache_key = ("insert", table, columns, data, self.conn.dialect.server_version_info)
        if cache_key not in self._compiled:
            stmt: Any = _upsert(self.conn.dialect.name, table, key, data, guarded=True)
            text = str(stmt.compile(dialect=self.conn.dialect, column_keys=list(columns)))
            if [c.name for c in table.columns if c.name in columns] != list(columns):
                msg = f"replica {table.name}: columns {columns} are not in the table's order"
                raise SinkSchemaError(msg)
            values, update = text.index(" VALUES "), text.index(" ON DUPLICATE KEY UPDATE ")
            params = text[values + len(" VALUES ") : update]
            alias = params[params.rindex(")") + 1 :]  # MySQL 8's "AS new" (none on MariaDB)
            self._compiled[cache_key] = (text[: values + len(" VALUES ")], alias + text[update:])
        return self._compiled[cache_key]

    def _older_gone(self, table: sa.Table, other: sa.Table, key: Sequence[str]) -> str:
        """``_older_gone(table, other, key, keys)`` with ``_KEYS_MARK`` where the keys' list goes."""
        cache_key = ("older", table, other, self.conn.dialect.server_version_info)
        if cache_key not in self._compiled:
            among = other.c[key[0]] if len(key) == 1 else sa.tuple_(*[other.c[k] for k in key])
            column = str(among.compile(dialect=self.conn.dialect))
            stmt = sa.delete(table).where(*_older(table, other, key), sa.text(f"{column} IN ({_KEYS_MARK})"))
            self._compiled[cache_key] = (str(stmt.compile(dialect=self.conn.dialect)), "")
        return self._compiled[cache_key][0]

    def _tombstoned(self, rep: _Replica) -> str:
        """``SELECT key FROM tombstones WHERE key IN (_KEYS_MARK) FOR UPDATE``."""
        cache_key = ("tombstoned", rep.tombstones, self.conn.dialect.server_version_info)
        if cache_key not in self._compiled:
            cols = [rep.tombstones.c[k] for k in rep.key]
            among = cols[0] if len(cols) == 1 else sa.tuple_(*cols)
            column = str(among.compile(dialect=self.conn.dialect))
            stmt = sa.select(*cols).where(sa.text(f"{column} IN ({_KEYS_MARK})")).with_for_update()
            self._compiled[cache_key] = (str(stmt.compile(dialect=self.conn.dialect)), "")
        return self._compiled[cache_key][0]


_KEYS_MARK = "__dbus_keys__"


def _chunks(items: list[str], size: int) -> Iterator[list[str]]:
    for i in range(0, len(items), size):
        yield items[i : i + size]


_MISSING = object()


class _Plan:
    """How the rows of one table version are written: per column of the table (in its order) that the
    version has, its name, UMS type and literal writer."""

    def __init__(self, columns_types: list[tuple[str, UmsType, _Writer]]) -> None:
        self.columns_types = columns_types
        self.writers = [(col, write) for col, _, write in columns_types]
        self.columns = (*(col for col, _, _ in columns_types), *_POSITION)  # of a row with all of them


_ROWS_PER_STATEMENT = 2500  # rows of one multi-row INSERT on MariaDB (about 200 bytes each; measured, the
# sink alone: 2,500 gave 71.5-73.9k rows/s where 1,000 gave 59.8-59.9k, 4,000-5,000 no more)


_ESCAPED = re.compile("[\\x00\\n\\r\\x1a\"'\\\\]")  # the characters pymysql's escape_string escapes


def _quote_escaped(text: str) -> str:
    """``"'" + escape_string(text) + "'"``, the same text: ``str.translate`` (escape_string's) is slow
    with two-character replacements, so a text without any of them is taken as it is, and one with them
    goes through ``str.replace``, the backslash first (measured on the bench's rows: 0.23 and 0.55 µs a
    value where escape_string took 0.43 and 1.42)."""
    if _ESCAPED.search(text) is None:
        return "'" + text + "'"
    escaped = text.replace("\\", "\\\\").replace("'", "\\'").replace('"', '\\"').replace("\n", "\\n")
    return "'" + escaped.replace("\r", "\\r").replace("\x00", "\\0").replace("\x1a", "\\Z") + "'"


def _quick_literal(t: UmsType, value: JsonValue, quote: Callable[[str], str]) -> str | None:
    """The SQL literal of a UMS JSON value in its usual form (the literal pymysql writes for its decoded
    value, or one MariaDB reads as the same), or None: ``decode_value`` and pymysql then take it."""
    return _literal_writer(t, quote)(value)


_Writer = Callable[[JsonValue], "str | None"]


def _literal_writer(t: UmsType, quote: Callable[[str], str]) -> _Writer:
    """``_quick_literal`` for one type: a column's writer, chosen once per table version."""

    def text(value: JsonValue) -> str | None:
        return quote(value) if type(value) is str else None if value is not None else "NULL"

    def long(value: JsonValue) -> str | None:  # LONG_TEXT without a sign, under 2^63
        if type(value) is str and value.isdigit() and value.isascii():
            return value if len(value) < 19 and (value[0] != "0" or len(value) == 1) else None
        return None if value is not None else "NULL"

    def decimal(value: JsonValue) -> str | None:
        if type(value) is str:
            return value if value.isascii() and DECIMAL_TEXT.match(value) else None
        return None if value is not None else "NULL"

    def temporal(value: JsonValue) -> str | None:  # a zero date (NULL) or a wrong one: decode_value
        if type(value) is not str:
            return None if value is not None else "NULL"
        if not (value.isascii() and pattern.match(value)):
            return None
        try:
            kind.fromisoformat(value)
        except ValueError:
            return None
        return "'" + value + "'"

    def integer(value: JsonValue) -> str | None:
        if type(value) is int:
            return str(value) if INT_MIN <= value <= INT_MAX else None
        return None if value is not None else "NULL"

    def floating(value: JsonValue) -> str | None:
        if type(value) is float:
            return escape_float(value) if math.isfinite(value) else None
        return None if value is not None else "NULL"

    def boolean(value: JsonValue) -> str | None:
        if type(value) is bool:
            return "1" if value else "0"
        return None if value is not None else "NULL"

    def other(value: JsonValue) -> str | None:
        return None if value is not None else "NULL"

    pattern, kind = (DATETIME_TEXT, datetime) if t is UmsType.DATETIME else (DATE_TEXT, date)
    writers: dict[UmsType, _Writer] = {
        UmsType.STRING: text,
        UmsType.RAW: text,
        UmsType.LONG: long,
        UmsType.DECIMAL: decimal,
        UmsType.DATETIME: temporal,
        UmsType.DATE: temporal,
        UmsType.INT: integer,
        UmsType.FLOAT: floating,
        UmsType.DOUBLE: floating,
        UmsType.BOOLEAN: boolean,
    }
    return writers.get(t, other)


# ---------------------------------------------------------------- statements

_POSITION = ("ums_id_", "ums_uid_")


def _position_columns() -> list[sa.Column[Any]]:
    return [
        sa.Column("ums_id_", sa.BigInteger, nullable=False),
        sa.Column("ums_uid_", sa.Numeric(40, 0), nullable=False),
    ]


def _checkpoint_table(meta: sa.MetaData) -> sa.Table:
    return sa.Table(
        CHECKPOINT_TABLE,
        meta,
        sa.Column("name", sa.String(128), primary_key=True),
        sa.Column("checkpoint", sa.Text, nullable=False),
    )


def _upsert(
    dialect: str, table: sa.Table, key: Sequence[str], data: Sequence[str], guarded: bool
) -> sa.Executable:
    """INSERT of rows that replaces an existing row of the same key; with ``guarded`` only when the new
    row's (ums_id_, ums_uid_) is greater than the stored one (``data`` plus the position are updated)."""
    if dialect == "postgresql":
        pg = pg_dialect.insert(table)
        cols = [*data, *_POSITION] if guarded else list(data)
        if not cols:
            return pg.on_conflict_do_nothing(index_elements=list(key))
        where = (
            sa.tuple_(table.c.ums_id_, table.c.ums_uid_)
            < sa.tuple_(pg.excluded.ums_id_, pg.excluded.ums_uid_)
            if guarded
            else None
        )
        return pg.on_conflict_do_update(
            index_elements=list(key), set_={c: pg.excluded[c] for c in cols}, where=where
        )
    my = mysql_dialect.insert(table)
    if not guarded:
        return my.on_duplicate_key_update([(c, my.inserted[c]) for c in data] or [(key[0], table.c[key[0]])])
    newer = sa.tuple_(table.c.ums_id_, table.c.ums_uid_) < sa.tuple_(
        my.inserted.ums_id_, my.inserted.ums_uid_
    )
    # Assignments run left to right, each seeing the ones before: the data first, then ums_uid_, then
    # ums_id_ (with ums_uid_ already new, "newer" stays true exactly when ums_id_ grows).
    order = [*data, "ums_uid_", "ums_id_"]
    return my.on_duplicate_key_update(
        [(c, sa.case((newer, my.inserted[c]), else_=table.c[c])) for c in order]
    )


def _older_gone(
    table: sa.Table, other: sa.Table, key: Sequence[str], keys: list[tuple[Any, ...]]
) -> sa.Executable:
    """DELETE of the rows of ``table`` whose position is below the row of ``other`` with the same key,
    among ``keys`` (MariaDB ``DELETE FROM t USING t, o``, PostgreSQL ``DELETE FROM t USING o``)."""
    if len(key) == 1:
        among = other.c[key[0]].in_([k[0] for k in keys])
    else:
        among = sa.tuple_(*[other.c[k] for k in key]).in_(keys)
    return sa.delete(table).where(*_older(table, other, key), among)


def _older(table: sa.Table, other: sa.Table, key: Sequence[str]) -> list[sa.ColumnElement[bool]]:
    """The rows of ``table`` whose position is below the row of ``other`` with the same key."""
    same = [table.c[k] == other.c[k] for k in key]
    return [
        *same,
        sa.tuple_(table.c.ums_id_, table.c.ums_uid_) < sa.tuple_(other.c.ums_id_, other.c.ums_uid_),
    ]


def _position_of(e: Effect) -> dict[str, int]:
    return {"ums_id_": e.change.ums_id, "ums_uid_": e.change.ums_uid}


def _norm(key: tuple[Any, ...]) -> tuple[Any, ...]:
    """A key as read back compares equal to the decoded one (DECIMAL(20,0) gives Decimal('5'), equal and
    of the same hash as 5; bytes from a memoryview)."""
    return tuple(bytes(v) if isinstance(v, memoryview) else v for v in key)


class _errors:
    """Database errors -> ``SinkError`` naming ``where``; DbusErrors pass through."""

    def __init__(self, where: str) -> None:
        self.where = where

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, err: BaseException | None, tb: object) -> None:
        if isinstance(err, (sa.exc.SQLAlchemyError, pymysql.err.MySQLError)):  # the latter: _pipelined's
            detail = getattr(err, "orig", None) or err
            msg = f"replica {self.where}: {type(detail).__name__}: {detail}"
            error = SinkError(msg)
            error.retriable = transient(err)  # a lost connection is worth retrying, a refused statement not
            raise error from err
