"""The meta store's log tables: each log source's tables, their draft rule groups and published versions.

In the meta store's database (``endpoints.meta_store.url``, beside dbuslib/metastore.py's tables), text in and
text out: rules are the original's JSON (spec §4.1, §8.2), which only logprocessor/rules.py reads as a model.
Four tables, by example.

``dbus_log_table``, one row per log table (the original's ``t_data_tables`` row under a log source); ``id``
is the creation order, the order tables try a line in; ``version`` 0 = never published; ``columns`` are the
output columns of the current version (name and UMS type, in saveAs order)::

    {"id": 3, "ds": "applog", "schema_name": "applog_schema", "table_name": "order_events", "status": "ok",
     "version": 2, "columns": "[{\\"name\\": \\"log_time\\", \\"type\\": \\"datetime\\"}, ...]",
     "created_ms": 1709604930123, "updated_ms": 1709604990456}

``dbus_log_rule_group``, the draft (the original's ``t_plain_log_rule_group`` with its ``t_plain_log_rules``
folded in): one row per group, ``id`` the group order, ``rules`` the group's rules in order::

    {"id": 7, "table_id": 3, "group_name": "orders", "status": "active",
     "rules": "[{\\"ruleTypeName\\": \\"keyFilter\\", \\"ruleGrammar\\": \\"[{...}]\\"}, ...]",
     "updated_ms": 1709604930123}

``dbus_log_rule_version``, the published versions (``t_plain_log_rule_group_version``, ``..._rules_version``
and ``t_meta_version`` in one): one row per (table, version), written once, never updated. ``groups`` is the
export format of the groups that were active when it was published, in group order; ``columns_changed`` says
whether the output columns differ from the version before (either way the processor ends the old version's
namespaces, ``dbus_log_table_host``)::

    {"table_id": 3, "version": 2, "groups": "[{\\"groupName\\": \\"orders\\", \\"rules\\": [...]}]",
     "columns": "[...]", "columns_changed": true, "published_ms": 1709604990456}

``dbus_log_table_host``: the hosts a table's version has written rows or heartbeats of (its namespaces, the
host being a segment of them), noted by the log processor; ``ended_ms`` is set once a
``data_increment_termination`` ended that namespace after the table moved to a newer version
(logprocessor/termination.py)::

    {"table_id": 3, "version": 1, "host": "app-01_prod", "first_ms": 1709604930123, "ended_ms": null}
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable
from dataclasses import dataclass

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    ForeignKey,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
    delete,
    select,
    update,
)
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError

from dbuslib.errors import DbusError
from dbuslib.sqlstore import SqlStore

STATUSES = ("ok", "abort")  # ok: processed; abort: heartbeats only (spec §4.1)
_TABLE_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_\-]{0,63}")
MAX_GROUP_NAME = 255


class NotFoundError(DbusError):
    """A log table or rule group named on the command line does not exist; the message names it."""

    code = "LOG_RULES_NOT_FOUND"


class BadNameError(DbusError):
    """A table or group name that cannot be used (it becomes part of namespaces and topics)."""

    code = "LOG_RULES_BAD_NAME"


class ConflictError(DbusError):
    """A draft group of that name exists already, or another publish of the table came first."""

    code = "LOG_RULES_CONFLICT"


metadata = MetaData()
log_table = Table(
    "dbus_log_table",
    metadata,
    Column("id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True),
    Column("ds", String(64), nullable=False),
    Column("schema_name", String(64), nullable=False),
    Column("table_name", String(64), nullable=False),
    Column("status", String(8), nullable=False),
    Column("version", Integer, nullable=False),
    Column("columns", Text, nullable=False),
    Column("created_ms", BigInteger, nullable=False),
    Column("updated_ms", BigInteger, nullable=False),
    UniqueConstraint("ds", "schema_name", "table_name", name="uk_log_table"),
)
log_rule_group = Table(
    "dbus_log_rule_group",
    metadata,
    Column("id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True),
    Column("table_id", BigInteger, ForeignKey("dbus_log_table.id"), nullable=False),
    Column("group_name", String(MAX_GROUP_NAME), nullable=False),
    Column("status", String(8), nullable=False),
    Column("rules", Text(16_777_215), nullable=False),  # MEDIUMTEXT on MySQL, as the original's rule_grammar
    Column("updated_ms", BigInteger, nullable=False),
    UniqueConstraint("table_id", "group_name", name="uk_log_group"),
)
log_rule_version = Table(
    "dbus_log_rule_version",
    metadata,
    Column("id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True),
    Column("table_id", BigInteger, ForeignKey("dbus_log_table.id"), nullable=False),
    Column("version", Integer, nullable=False),
    Column("groups", Text(16_777_215), nullable=False),
    Column("columns", Text, nullable=False),
    Column("columns_changed", Boolean, nullable=False),
    Column("published_ms", BigInteger, nullable=False),
    UniqueConstraint("table_id", "version", name="uk_log_rule_version"),
)
log_table_host = Table(
    "dbus_log_table_host",
    metadata,
    Column("id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True),
    Column("table_id", BigInteger, ForeignKey("dbus_log_table.id"), nullable=False),
    Column("version", Integer, nullable=False),
    Column("host", String(255), nullable=False),
    Column("first_ms", BigInteger, nullable=False),
    Column("ended_ms", BigInteger, nullable=True),
    UniqueConstraint("table_id", "version", "host", name="uk_log_table_host"),
)


@dataclass(frozen=True)
class LogTable:
    """One log table: ``version`` 0 until its first publish; ``columns`` is JSON text (see the module)."""

    id: int
    ds: str
    schema: str
    table: str
    status: str
    version: int
    columns: str

    @property
    def where(self) -> str:
        """``applog.applog_schema.order_events``: how messages name the table."""
        return f"{self.ds}.{self.schema}.{self.table}"


@dataclass(frozen=True)
class DraftGroup:
    """One draft group: ``rules`` is the JSON text of its rules in order (the original's export format)."""

    id: int
    name: str
    active: bool
    rules: str


@dataclass(frozen=True)
class Published:
    """One published version of a table: ``groups`` in the export format, ``columns`` as in LogTable."""

    version: int
    groups: str
    columns: str
    columns_changed: bool
    published_ms: int


def table_name_problem(name: str) -> str | None:
    """Why ``name`` cannot name a log table (it becomes part of namespaces and topic names), or None."""
    if not _TABLE_NAME.fullmatch(name):
        return "must be 1 to 64 letters, digits, '_' or '-', not starting with '-'"
    return None


def group_name_problem(name: str) -> str | None:
    """Why ``name`` cannot name a rule group, or None."""
    if not name or not name.strip():
        return "is empty"
    if len(name) > MAX_GROUP_NAME:
        return f"has {len(name)} characters (at most {MAX_GROUP_NAME})"
    if any(ord(c) < 32 for c in name):
        return "contains a control character"
    return None


# The calls the log processor retries on a transient failure (reads only; the CLI never retries).
RETRIED = ("create_schema", "tables", "published", "note_hosts", "unended_hosts", "end_hosts")


def _now_ms() -> int:
    return int(time.time() * 1000)


class LogStore(SqlStore):
    """The log tables of the meta store. With a ``retry`` policy (a running stage's) the calls in
    ``RETRIED`` ride a restart of the database (dbuslib/sqlstore.py); without one the first failure
    raises."""

    METADATA = metadata
    RETRIED = RETRIED

    # ------------------------------------------------------------ tables

    def add_table(self, ds: str, schema: str, table: str) -> tuple[LogTable, bool]:
        """Create the table (status ok, version 0): ``(table, True)``; an existing one: ``(table, False)``."""
        problem = table_name_problem(table)
        if problem:
            msg = f"log table name {table!r} {problem}"
            raise BadNameError(msg)
        found = self.table(ds, schema, table)
        if found is not None:
            return found, False
        now = _now_ms()
        row = {"ds": ds, "schema_name": schema, "table_name": table, "status": "ok", "version": 0}
        try:
            with self.engine.begin() as conn:
                conn.execute(log_table.insert().values(columns="[]", created_ms=now, updated_ms=now, **row))
        except IntegrityError:  # a concurrent add-table of the same name
            pass
        return self.need_table(ds, schema, table), True

    def tables(self, ds: str, schema: str) -> list[LogTable]:
        """Every log table of a source, in creation order (the order they try a line in)."""
        q = (
            select(log_table)
            .where(log_table.c.ds == ds, log_table.c.schema_name == schema)
            .order_by(log_table.c.id)
        )
        with self.engine.connect() as conn:
            return [_table(r) for r in conn.execute(q).mappings().all()]

    def table(self, ds: str, schema: str, table: str) -> LogTable | None:
        """The table, or None."""
        q = select(log_table).where(
            log_table.c.ds == ds, log_table.c.schema_name == schema, log_table.c.table_name == table
        )
        with self.engine.connect() as conn:
            r = conn.execute(q).mappings().first()
        return None if r is None else _table(r)

    def need_table(self, ds: str, schema: str, table: str) -> LogTable:
        """The table; NotFoundError naming it and the command that creates it otherwise."""
        found = self.table(ds, schema, table)
        if found is None:
            known = ", ".join(t.table for t in self.tables(ds, schema)) or "none"
            msg = (
                f"{ds}.{schema}.{table}: no such log table (known: {known}); "
                f"dbus logrules add-table --source {ds} --table {table} creates it"
            )
            raise NotFoundError(msg)
        return found

    def set_status(self, table: LogTable, status: str) -> None:
        """``ok`` (processed) or ``abort`` (heartbeats only), as the original's APPENDER_TOPIC_RESUME sets."""
        if status not in STATUSES:
            msg = f"{table.where}: status {status!r} is none of {', '.join(STATUSES)}"
            raise ValueError(msg)
        with self.engine.begin() as conn:
            conn.execute(
                update(log_table)
                .where(log_table.c.id == table.id)
                .values(status=status, updated_ms=_now_ms())
            )

    # ------------------------------------------------------------ the draft

    def draft(self, table: LogTable) -> list[DraftGroup]:
        """The table's draft groups in group order (creation order)."""
        q = select(log_rule_group).where(log_rule_group.c.table_id == table.id).order_by(log_rule_group.c.id)
        with self.engine.connect() as conn:
            return [
                DraftGroup(r["id"], r["group_name"], r["status"] == "active", r["rules"])
                for r in conn.execute(q).mappings().all()
            ]

    def add_groups(self, table: LogTable, groups: list[tuple[str, bool, str]], *, replace: bool) -> None:
        """Append ``(name, active, rules JSON)`` groups to the draft, after its groups; with ``replace`` they
        become the whole draft. All or nothing; a name the draft has already (without ``replace``), or one
        given twice, is a ConflictError naming it."""
        names = [g[0] for g in groups]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            msg = f"{table.where}: group name(s) {twice} given more than once"
            raise ConflictError(msg)
        for name in names:
            problem = group_name_problem(name)
            if problem:
                msg = f"{table.where}: group name {name!r} {problem}"
                raise BadNameError(msg)
        now = _now_ms()
        try:
            with self.engine.begin() as conn:
                if replace:
                    conn.execute(delete(log_rule_group).where(log_rule_group.c.table_id == table.id))
                else:
                    _refuse_existing(conn, table, names)
                for name, active, rules in groups:  # one by one: ids follow the file's order
                    conn.execute(
                        log_rule_group.insert().values(
                            table_id=table.id,
                            group_name=name,
                            status="active" if active else "inactive",
                            rules=rules,
                            updated_ms=now,
                        )
                    )
        except IntegrityError:  # a concurrent import of the same names
            msg = f"{table.where}: another import added group(s) named {names} at the same time"
            raise ConflictError(msg) from None

    def set_active(self, table: LogTable, group: str, active: bool) -> None:
        """Make a draft group active or inactive; NotFoundError naming the table's groups when it has none
        of that name."""
        with self.engine.begin() as conn:
            done = conn.execute(
                update(log_rule_group)
                .where(log_rule_group.c.table_id == table.id, log_rule_group.c.group_name == group)
                .values(status="active" if active else "inactive", updated_ms=_now_ms())
            )
        if done.rowcount == 0:
            known = ", ".join(repr(g.name) for g in self.draft(table)) or "none"
            msg = f"{table.where}: no draft group {group!r} (groups: {known})"
            raise NotFoundError(msg)

    # ------------------------------------------------------------ published versions

    def published(self, table: LogTable, version: int | None = None) -> Published | None:
        """The published version ``version`` of the table (default: its current one), or None."""
        want = table.version if version is None else version
        q = select(log_rule_version).where(
            log_rule_version.c.table_id == table.id, log_rule_version.c.version == want
        )
        with self.engine.connect() as conn:
            r = conn.execute(q).mappings().first()
        return None if r is None else _published(r)

    def versions(self, table: LogTable) -> list[Published]:
        """Every published version of the table, oldest first."""
        q = (
            select(log_rule_version)
            .where(log_rule_version.c.table_id == table.id)
            .order_by(log_rule_version.c.version)
        )
        with self.engine.connect() as conn:
            return [_published(r) for r in conn.execute(q).mappings().all()]

    def publish(self, table: LogTable, groups: str, columns: str, columns_changed: bool) -> Published:
        """Store version ``table.version + 1`` and make it the table's current one, in one transaction.
        ``table`` is what the caller validated: if another publish moved the table on since it was read,
        nothing is written and ConflictError says so."""
        new = Published(table.version + 1, groups, columns, columns_changed, _now_ms())
        try:
            with self.engine.begin() as conn:
                moved = conn.execute(
                    update(log_table)
                    .where(log_table.c.id == table.id, log_table.c.version == table.version)
                    .values(version=new.version, columns=columns, updated_ms=new.published_ms)
                )
                if moved.rowcount != 1:
                    raise _raced(table)
                conn.execute(
                    log_rule_version.insert().values(
                        table_id=table.id,
                        version=new.version,
                        groups=groups,
                        columns=columns,
                        columns_changed=columns_changed,
                        published_ms=new.published_ms,
                    )
                )
        except IntegrityError:
            raise _raced(table) from None
        return new

    def rule_set(self, ds: str, schema: str) -> list[tuple[LogTable, Published | None]]:
        """What the processor loads: every table of the source in creation order, with its current
        published version (None before the first publish)."""
        q = (
            select(log_table, log_rule_version)
            .select_from(
                log_table.outerjoin(
                    log_rule_version,
                    (log_rule_version.c.table_id == log_table.c.id)
                    & (log_rule_version.c.version == log_table.c.version),
                )
            )
            .where(log_table.c.ds == ds, log_table.c.schema_name == schema)
            .order_by(log_table.c.id)
        )
        with self.engine.connect() as conn:
            rows = conn.execute(q).all()
        out = []
        n = len(log_table.c)
        for row in rows:
            t = _table(dict(zip(log_table.c.keys(), row[:n], strict=True)))
            v = dict(zip(log_rule_version.c.keys(), row[n:], strict=True))
            out.append((t, None if v["version"] is None else _published(v)))
        return out

    # ------------------------------------------------------------ hosts of table versions

    def note_hosts(self, ds: str, schema: str, seen: Iterable[tuple[str, int, str]]) -> int:
        """Notes (table, version, host) triples the processor wrote; returns how many were new. Tables
        that are not (or no longer) in the store are left out; a triple noted by another process first is
        fine."""
        wanted = set(seen)
        if not wanted:
            return 0
        ids = {t.table: t.id for t in self.tables(ds, schema)}
        rows = {(ids[t], v, h) for t, v, h in wanted if t in ids}
        if not rows:
            return 0
        q = select(log_table_host.c.table_id, log_table_host.c.version, log_table_host.c.host).where(
            log_table_host.c.table_id.in_({r[0] for r in rows})
        )
        added = 0
        with self.engine.begin() as conn:
            known = {tuple(r) for r in conn.execute(q)}
            for table_id, version, host in sorted(rows - known):
                try:
                    with conn.begin_nested():
                        conn.execute(
                            log_table_host.insert().values(
                                table_id=table_id, version=version, host=host, first_ms=_now_ms()
                            )
                        )
                    added += 1
                except IntegrityError:
                    continue  # noted by another processor of the source meanwhile
        return added

    def unended_hosts(self, ds: str, schema: str) -> list[tuple[str, int, str]]:
        """(table, version, host) of the versions older than their table's current one whose namespace has
        not been ended yet, in table, version and host order."""
        q = (
            select(log_table.c.table_name, log_table_host.c.version, log_table_host.c.host)
            .join(log_table, log_table.c.id == log_table_host.c.table_id)
            .where(
                log_table.c.ds == ds,
                log_table.c.schema_name == schema,
                log_table_host.c.version < log_table.c.version,
                log_table_host.c.ended_ms.is_(None),
            )
            .order_by(log_table.c.id, log_table_host.c.version, log_table_host.c.host)
        )
        with self.engine.connect() as conn:
            return [(r[0], int(r[1]), r[2]) for r in conn.execute(q)]

    def end_hosts(self, ds: str, schema: str, ended: Iterable[tuple[str, int, str]]) -> None:
        """Marks (table, version, host) namespaces as ended (their termination was written)."""
        ids = {t.table: t.id for t in self.tables(ds, schema)}
        now = _now_ms()
        with self.engine.begin() as conn:
            for table, version, host in ended:
                if table not in ids:
                    continue
                conn.execute(
                    update(log_table_host)
                    .where(
                        log_table_host.c.table_id == ids[table],
                        log_table_host.c.version == version,
                        log_table_host.c.host == host,
                    )
                    .values(ended_ms=now)
                )

    def drop_source(self, ds: str) -> int:
        """Removes every table of log source ``ds`` with its draft groups and published versions (a source
        taken out of service, a test's own); returns the tables removed."""
        with self.engine.begin() as conn:
            ids = [r.id for r in conn.execute(select(log_table.c.id).where(log_table.c.ds == ds))]
            conn.execute(log_table_host.delete().where(log_table_host.c.table_id.in_(ids)))
            conn.execute(log_rule_version.delete().where(log_rule_version.c.table_id.in_(ids)))
            conn.execute(log_rule_group.delete().where(log_rule_group.c.table_id.in_(ids)))
            conn.execute(log_table.delete().where(log_table.c.ds == ds))
        return len(ids)


def _refuse_existing(conn: Connection, table: LogTable, names: list[str]) -> None:
    q = select(log_rule_group.c.group_name).where(
        log_rule_group.c.table_id == table.id, log_rule_group.c.group_name.in_(names)
    )
    clash = sorted(conn.execute(q).scalars().all())
    if clash:
        msg = (
            f"{table.where}: the draft has group(s) named {clash} already; rename them in the file, "
            "or import with --replace to make the file the whole draft"
        )
        raise ConflictError(msg)


def _raced(table: LogTable) -> ConflictError:
    msg = f"{table.where}: another publish made a version after version {table.version}; try again"
    return ConflictError(msg)


def _table(r) -> LogTable:
    return LogTable(
        r["id"], r["ds"], r["schema_name"], r["table_name"], r["status"], r["version"], r["columns"]
    )


def _published(r) -> Published:
    return Published(r["version"], r["groups"], r["columns"], bool(r["columns_changed"]), r["published_ms"])
