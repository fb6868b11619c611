"""Verify: does a reconciled snapshot equal the live source table?

Usage: dbus verify --source demo --table shop.orders --snapshot /data/orders.parquet [--limit 20]
       dbus verify --source demo --table shop.orders --replica URL [--replica-table NAME]

The source is read in key-range shards (``fullpuller.split``), each row rendered to UMS values by the
reference encoder ``ums.values`` (not by the full puller's SQL rendering: an independent check), masked
with the source's rules like the appender masks, and reduced to a canonical hash per key
(``fullpuller.canon``). The snapshot (Parquet, as ``reconcile`` writes it) is hashed the same way, and the
two are compared by key. Output, differing keys first (up to ``--limit`` of each kind)::

    missing in snapshot: id=17
    extra in snapshot: id=99
    different: id=42
    shop.orders: 1000 source rows, 1000 snapshot rows: 1 missing in snapshot, 1 extra in snapshot, 1 different

``--replica URL`` compares a replica that ``dbus replicate`` keeps (MariaDB or PostgreSQL, a SQLAlchemy
URL) instead of a snapshot: its table (``--replica-table``, default the source table's name) is read and
rendered to UMS values from the types the replica's columns were made from; the replicate's own columns
(``ums_id_``, ``ums_uid_``) are not compared::

    dbus verify --source demo --table shop.orders --replica postgresql+psycopg://dbus:dbus@127.0.0.1:15432/replica

Exit codes: 0 equal, 1 different (or the column sets differ), 2 bad configuration or arguments,
3 an endpoint could not be reached.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from dbuslib.errors import DbusError
from fullpuller.canon import NULL, canonicalizer, digest
from ums.build import field_for, user_columns
from ums.message import SYSTEM_NAMES
from ums.types import ColumnSpec, UmsType, parse_column_type
from ums.values import ValueFormat, encode_value

if TYPE_CHECKING:
    from dbuslib.config import DbusConfig

Key = tuple[str, ...]
Pair = tuple[Key, bytes]  # (canonical key values, digest of the canonical row)


class VerifyError(DbusError):
    """The table or the snapshot cannot be verified (no such table, no primary key, no snapshot)."""

    code = "VERIFY_FAILED"
    exit_code = 2  # 1 means "compared, and different"


# ---------------------------------------------------------------- pure core


@dataclass(frozen=True)
class Comparison:
    """The differences between snapshot and source, by key; the key lists hold at most ``limit`` each."""

    source_rows: int
    snapshot_rows: int
    missing: tuple[Key, ...]  # in the source, not in the snapshot
    extra: tuple[Key, ...]  # in the snapshot, not in the source
    different: tuple[Key, ...]  # in both, with different values
    missing_count: int
    extra_count: int
    different_count: int
    only_in_source: tuple[str, ...] = ()  # columns
    only_in_snapshot: tuple[str, ...] = ()
    key_names: tuple[str, ...] = ()
    kept: tuple[str, ...] = ()  # replica columns kept by design (dropped on the source): not differences

    @property
    def equal(self) -> bool:
        return not (
            self.missing_count
            or self.extra_count
            or self.different_count
            or self.only_in_source
            or self.only_in_snapshot
        )


def compare(
    snapshot: Iterable[Pair],
    source: Iterable[Pair],
    limit: int = 20,
    only_in_source: Sequence[str] = (),
    only_in_snapshot: Sequence[str] = (),
    key_names: Sequence[str] = (),
    kept: Sequence[str] = (),
) -> Comparison:
    """Compare ``(key, digest)`` pairs: the snapshot's are held in memory (16 bytes and the key per row),
    the source's are streamed against them."""
    held: dict[Key, bytes] = {}
    for key, value in snapshot:
        held[key] = value
    snapshot_rows = len(held)
    found: dict[str, list[Key]] = {"missing": [], "different": []}
    counts = {"missing": 0, "different": 0}
    source_rows = 0
    for key, value in source:
        source_rows += 1
        theirs = held.pop(key, None)
        kind = "missing" if theirs is None else "different" if theirs != value else None
        if kind:
            counts[kind] += 1
            if len(found[kind]) < limit:
                found[kind].append(key)
    extra = list(held)
    return Comparison(
        source_rows,
        snapshot_rows,
        tuple(found["missing"]),
        tuple(extra[:limit]),
        tuple(found["different"]),
        counts["missing"],
        len(extra),
        counts["different"],
        tuple(only_in_source),
        tuple(only_in_snapshot),
        tuple(key_names),
        tuple(kept),
    )


def show_key(names: Sequence[str], key: Key) -> str:
    """``id=42`` or ``a=1,b=x``; NULL as ``NULL``."""
    return ",".join(f"{n}={'NULL' if v == NULL else v}" for n, v in zip(names, key, strict=True))


def report(c: Comparison, table: str) -> list[str]:
    """The lines ``dbus verify`` prints: columns, then keys of each kind, then the counts."""
    lines = []
    if c.kept:
        lines.append(f"columns the replica keeps, dropped on the source (not compared): {list(c.kept)}")
    if c.only_in_source or c.only_in_snapshot:
        lines.append(
            f"columns only in source: {list(c.only_in_source)}, only in snapshot: {list(c.only_in_snapshot)}"
        )
    for label, keys, count in (
        ("missing in snapshot", c.missing, c.missing_count),
        ("extra in snapshot", c.extra, c.extra_count),
        ("different", c.different, c.different_count),
    ):
        lines += [f"{label}: {show_key(c.key_names, k)}" for k in keys]
        if count > len(keys):
            lines.append(f"{label}: ... and {count - len(keys)} more")
    counts = (
        f"{c.missing_count} missing in snapshot, {c.extra_count} extra in snapshot, "
        f"{c.different_count} different"
    )
    lines.append(
        f"{table}: {c.source_rows} source rows, {c.snapshot_rows} snapshot rows: "
        + ("equal, 0 differences" if c.equal else counts)
    )
    return lines


@dataclass(frozen=True)
class Layout:
    """The compared columns of one table: names, UMS types (after masking) and the key's positions.

    ``columns`` are the source columns UMS carries; ``types`` are what the snapshot holds for them
    (a masked column's output type).
    """

    columns: tuple[ColumnSpec, ...]
    types: tuple[UmsType, ...]
    key: tuple[int, ...]
    masked: bool = False
    names: tuple[str, ...] = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "names", tuple(c.name for c in self.columns))

    def pairs(self, rows: Iterable[Sequence[object]]) -> Iterator[Pair]:
        """Rows already in UMS wire form (or snapshot values) -> (key, digest)."""
        canon = canonicalizer(self.types)
        for row in rows:
            values = canon(row)
            yield tuple(values[i] for i in self.key), digest(values)


def layout(
    columns: Sequence[ColumnSpec], primary_key: Sequence[str], schema: str, table: str, mask_plan: Any = None
) -> tuple[Layout, Any]:
    """The compared layout of a table and its ``TableMask`` (None when nothing is masked)."""
    carried = tuple(columns[i] for i in user_columns(columns))
    fields = tuple(field_for(c) for c in carried)
    mask = mask_plan.for_table(schema, table, fields) if mask_plan is not None else None
    out_fields = mask.fields if mask is not None else fields
    names = [c.name for c in carried]
    missing = [k for k in primary_key if k not in names]
    if not primary_key or missing:
        msg = f"{schema}.{table}: primary key {list(primary_key)} is not among the columns {names}"
        raise VerifyError(msg)
    return Layout(
        carried,
        tuple(f.type for f in out_fields),
        tuple(names.index(k) for k in primary_key),
        mask is not None,
    ), mask


def _bit(value: object) -> object:
    return int.from_bytes(value, "big") if isinstance(value, bytes) else value


def _json_text(value: object) -> object:
    import json

    return json.loads(value) if isinstance(value, str) else value


def source_renderer(columns: Sequence[ColumnSpec], mask: Any = None) -> Callable[[Sequence[object]], tuple]:
    """A pymysql row -> its UMS wire values (``ums.values.encode_column``), masked when ``mask`` is given.

    pymysql's shapes are brought to what a binlog decoder gives first: BIT as bytes -> int, JSON text
    (MySQL) -> parsed JSON. TIME already comes as a timedelta, SET and ENUM as text.
    """
    specs = []  # what encode_column would work out per value, once per column
    for c in columns:
        base = parse_column_type(c.column_type).base
        prep = _bit if base == "bit" else _json_text if c.ums_type is UmsType.JSONOBJECT else None
        specs.append((c.ums_type, ValueFormat(c.fsp, c.members), c.name, prep))

    def one(spec: tuple, value: object) -> object:
        ums_type, fmt, name, prep = spec
        if value is None:
            return None
        return encode_value(ums_type, prep(value) if prep else value, fmt, name)

    def render(row: Sequence[object]) -> tuple:
        if len(row) != len(specs):
            msg = f"{len(row)} values for {len(specs)} columns"
            raise ValueError(msg)
        wire = tuple(map(one, specs, row))
        return mask.apply_row(wire) if mask is not None else wire

    return render


# ---------------------------------------------------------------- edges: MySQL, Parquet


def _quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


@dataclass(frozen=True)
class ShardTask:
    """One source shard to hash, picklable for a worker process."""

    cfg: Any  # DbusConfig
    ds: str
    schema: str
    table: str
    columns: tuple[ColumnSpec, ...]
    primary_key: tuple[str, ...]
    where: str
    zero_dates_null: bool = False  # the other side holds a zero date as NULL (``zero_dates_null``)


def _selected(column: ColumnSpec) -> str:
    """A column as the source is read: a FLOAT as DOUBLE, since MariaDB's text protocol prints a FLOAT to
    6 digits (-3.14159 for the stored float32 -3.1415927), and a snapshot or replica holding the exact
    value would differ."""
    name = _quote(column.name)
    return f"CAST({name} AS DOUBLE)" if column.ums_type is UmsType.FLOAT else name


def without_zero_dates(
    render: Callable[[Sequence[object]], tuple], types: Sequence[UmsType]
) -> Callable[[Sequence[object]], tuple]:
    """``render`` with MySQL's zero dates (``0000-00-00``, a zero month or day: no date) as None, as a
    replica holds them (docs/client.md, The SQL sink) and Debezium's formats write them (docs/formats.md)."""
    dates = [i for i, t in enumerate(types) if t in (UmsType.DATE, UmsType.DATETIME)]

    def zero(value: object) -> bool:
        return isinstance(value, str) and (value[:4] == "0000" or "00" in (value[5:7], value[8:10]))

    def rendered(row: Sequence[object]) -> tuple:
        wire = render(row)
        if not any(zero(wire[i]) for i in dates):
            return wire
        out = list(wire)
        for i in dates:
            if zero(out[i]):
                out[i] = None
        return tuple(out)

    return rendered


def zero_dates_null(cfg: DbusConfig, ds: str, schema: str, table: str, replica: bool) -> bool:
    """Whether the compared side holds MySQL's zero dates as NULL: a replica (neither MariaDB nor
    PostgreSQL has a value for them), or a snapshot of a table written in debezium-json or avro (Debezium
    writes them as null)."""
    return replica or cfg.source(ds).output.format_for(schema, table) in ("debezium-json", "avro")


def hash_shard(task: ShardTask) -> list[Pair]:
    """Read one shard of the source (session time zone UTC, like the full puller) and hash its rows."""
    from dbuslib import mysql
    from ums.masking import compile_rules

    src = task.cfg.source(task.ds)
    lay, mask = layout(task.columns, task.primary_key, task.schema, task.table, compile_rules(src.masking))
    render = source_renderer(lay.columns, mask)
    if task.zero_dates_null:
        render = without_zero_dates(render, lay.types)
    cols = ", ".join(map(_selected, lay.columns))
    sql = f"SELECT {cols} FROM {_quote(task.schema)}.{_quote(task.table)} WHERE {task.where}"
    db = mysql.connect(src.mysql)
    try:
        with db.cursor() as cur:
            cur.execute("SET time_zone = '+00:00'")
            cur.execute(sql)
            rows = cur.fetchall()
    finally:
        db.close()
    return list(lay.pairs(render(r) for r in rows))


def success_marker(path: str) -> bool:
    """The snapshot folder ``path`` (a path or a filesystem URI) holds Spark's ``_SUCCESS`` marker."""
    import pyarrow as pa
    import pyarrow.fs as pafs

    try:
        if "://" in path or path.startswith("file:"):
            filesystem, base = pafs.FileSystem.from_uri(path)
        else:
            filesystem, base = pafs.LocalFileSystem(), os.path.abspath(path)
        return filesystem.get_file_info(f"{base.rstrip('/')}/_SUCCESS").type == pafs.FileType.File
    except (OSError, ValueError, pa.ArrowException):
        return False


def snapshot_pairs(path: str, lay: Layout) -> tuple[Iterator[Pair], tuple[str, ...], tuple[str, ...]]:
    """(key, digest) of every snapshot row, and the columns only in the source / only in the snapshot."""
    import pyarrow.dataset as pads

    try:
        data = pads.dataset(path, format="parquet")
    except FileNotFoundError as e:  # pyarrow's message is the bare path
        msg = f"snapshot {path}: no such file or folder (`dbus reconcile ... --out {path}` writes one)"
        raise VerifyError(msg) from e
    except OSError as e:
        msg = f"snapshot {path}: {e}"
        raise VerifyError(msg) from e
    if not data.files:  # Spark writes a part file even for an empty snapshot
        msg = f"snapshot {path}: no Parquet part files"
        if success_marker(path):
            msg += (
                " but a _SUCCESS marker: written on the executors' local disks? (reconcile on a cluster "
                "master writes the parts where its executors run) Use a shared filesystem for reconcile's "
                "--out: hdfs://..., s3a://... or file:///shared/... mounted on every worker"
            )
        raise VerifyError(msg)
    have = [n for n in data.schema.names if n not in SYSTEM_NAMES]
    only_source = tuple(n for n in lay.names if n not in have)
    only_snapshot = tuple(n for n in have if n not in lay.names)
    if any(lay.names[i] in only_source for i in lay.key):
        msg = f"snapshot {path}: key column(s) {[lay.names[i] for i in lay.key]} missing"
        raise VerifyError(msg)
    present = [n for n in lay.names if n in have]

    def rows() -> Iterator[tuple]:
        for batch in data.to_batches(columns=present, batch_size=65536):
            by_name = {n: batch.column(i).to_pylist() for i, n in enumerate(present)}
            nulls = [None] * batch.num_rows
            yield from zip(*(by_name.get(n, nulls) for n in lay.names), strict=True)

    return lay.pairs(rows()), only_source, only_snapshot


def kept_by_design(
    only_replica: Sequence[str], made: Iterable[str]
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Of the columns only in the replica, those ``dbus replicate`` made from a UMS version (``made``,
    its record ``dbus_client_columns``): a column a later version dropped, kept by default
    (``--drop-columns`` drops it), is not a difference; any other column is. Returns (kept, others)."""
    known = set(made)
    return tuple(c for c in only_replica if c in known), tuple(c for c in only_replica if c not in known)


def replica_pairs(
    url: str, name: str, lay: Layout
) -> tuple[Iterator[Pair], tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    """(key, digest) of every row of the replica table ``name`` in the database of ``url`` (dbus replicate's,
    dbusclient/sink_sql.py), the columns only in the source / only in the replica (``ums_*`` aside), and
    the replica's columns kept by design (``kept_by_design``; left out of the other three)."""
    import sqlalchemy as sa

    from dbusclient.sink_sql import COLUMNS_TABLE

    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            have_cols = [c["name"] for c in sa.inspect(conn).get_columns(name)]
            made = conn.execute(
                sa.text(f"SELECT column_name FROM {COLUMNS_TABLE} WHERE replica = :name"), {"name": name}
            ).scalars()
            made_cols = [str(c) for c in made]
    except sa.exc.NoSuchTableError:
        engine.dispose()
        msg = f"replica {engine.url.render_as_string(hide_password=True)}: no table {name}"
        raise VerifyError(msg) from None
    except sa.exc.SQLAlchemyError as e:
        engine.dispose()
        msg = f"replica {engine.url.render_as_string(hide_password=True)}: {e}"
        raise VerifyError(msg) from e
    have = [n for n in have_cols if n not in SYSTEM_NAMES]
    only_source = tuple(n for n in lay.names if n not in have)
    kept, only_replica = kept_by_design([n for n in have if n not in lay.names], made_cols)
    if any(lay.names[i] in only_source for i in lay.key):
        engine.dispose()
        msg = f"replica table {name}: key column(s) {[lay.names[i] for i in lay.key]} missing"
        raise VerifyError(msg)
    present = [i for i, n in enumerate(lay.names) if n in have]
    render = replica_renderer(lay)
    table = sa.table(name, *[sa.column(lay.names[i]) for i in present])

    def rows() -> Iterator[tuple]:
        try:
            with engine.connect() as conn:
                result = conn.execution_options(stream_results=True, yield_per=20_000).execute(
                    sa.select(table)
                )
                for r in result:
                    row: list[object] = [None] * len(lay.names)
                    for i, v in zip(present, r, strict=True):
                        row[i] = v
                    yield render(row)
        finally:
            engine.dispose()

    return lay.pairs(rows()), only_source, only_replica, kept


def replica_renderer(lay: Layout) -> Callable[[Sequence[object]], tuple]:
    """A replica row (SQLAlchemy values of dbusclient.sink_sql's column types) -> UMS wire values, so
    that it hashes as the source's rendering does: DATE/DATETIME with the source column's digits, BINARY
    in base64, BOOLEAN from MariaDB's 0/1, integers from DECIMAL(20,0); the rest as read."""
    specs = [(t, ValueFormat(c.fsp, c.members), c.name) for c, t in zip(lay.columns, lay.types, strict=True)]

    def one(spec: tuple[UmsType, ValueFormat, str], value: object) -> object:
        ums_type, fmt, name = spec
        if value is None:
            return None
        if ums_type in (UmsType.INT, UmsType.LONG):
            return int(value)  # type: ignore[call-overload]
        if ums_type is UmsType.BOOLEAN:
            return bool(value)
        if ums_type in (UmsType.DATE, UmsType.DATETIME, UmsType.BINARY):
            return encode_value(ums_type, bytes(value) if isinstance(value, memoryview) else value, fmt, name)
        return value

    def render(row: Sequence[object]) -> tuple:
        return tuple(map(one, specs, row))

    return render


def verify(
    cfg: DbusConfig,
    ds: str,
    schema: str,
    table: str,
    snapshot: str | None = None,
    *,
    replica: str | None = None,
    replica_table: str | None = None,
    limit: int = 20,
    shard_size: int = 100_000,
    workers: int = 2,
) -> Comparison:
    """Compare the snapshot at ``snapshot`` (or the replica table in the database of ``replica``) with the
    live ``schema.table`` of source ``ds``."""
    from dbuslib import mysql
    from fullpuller import catalog, split
    from ums.masking import compile_rules

    src = cfg.source(ds)
    db = mysql.connect(src.mysql)
    try:
        info = catalog.table_info(db, schema, table)
        if info is None:
            msg = f"{ds}: no table {schema}.{table} on the source"
            raise VerifyError(msg)
        shards = split.plan(db, info, shard_size=shard_size).shards
    finally:
        db.close()
    lay, _ = layout(info.columns, info.primary_key, schema, table, compile_rules(src.masking))
    kept: tuple[str, ...] = ()
    if replica is not None:
        snap, only_source, only_snapshot, kept = replica_pairs(replica, replica_table or table, lay)
    elif snapshot is not None:
        snap, only_source, only_snapshot = snapshot_pairs(snapshot, lay)
    else:
        msg = f"{schema}.{table}: nothing to verify: give a snapshot or a replica"
        raise VerifyError(msg)
    zero = zero_dates_null(cfg, ds, schema, table, replica is not None)
    tasks = [ShardTask(cfg, ds, schema, table, info.columns, info.primary_key, s.where, zero) for s in shards]
    extra = (only_source, only_snapshot, info.primary_key, kept)
    if workers <= 1 or len(tasks) <= 1:
        return compare(snap, (p for t in tasks for p in hash_shard(t)), limit, *extra)
    with ProcessPoolExecutor(min(workers, len(tasks))) as pool:
        futures = [pool.submit(hash_shard, t) for t in tasks]  # shards hash while the snapshot is read
        return compare(snap, (p for f in futures for p in f.result()), limit, *extra)


# ---------------------------------------------------------------- command line


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of ``dbus verify``."""
    p.add_argument("--source", required=True, help="source name under 'sources'")
    p.add_argument("--table", required=True, help="schema.table to verify")
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--snapshot", help="the snapshot folder reconcile wrote (Parquet)")
    what.add_argument(
        "--replica", metavar="URL", help="a replica dbus replicate keeps: its database's SQLAlchemy URL"
    )
    p.add_argument("--replica-table", help="the replica table's name (default: the source table's)")
    p.add_argument("--limit", type=int, default=20, help="keys printed per kind of difference (default: 20)")
    p.add_argument("--shard-size", type=int, default=100_000, help="source rows per key-range shard")
    p.add_argument("--workers", type=int, default=2, help="processes hashing source shards (default: 2)")


def cli(args: argparse.Namespace) -> int:
    """Print the differences; 0 when equal, 1 otherwise. DbusError propagates to the caller."""
    from dbuslib.config import load_config
    from ums.names import split_table

    try:
        parts = split_table(args.table)
    except ValueError as e:
        print(f"verify: --table {e}", file=sys.stderr)
        return 2
    cfg = load_config(args.config)
    result = verify(
        cfg,
        args.source,
        parts[0],
        parts[1],
        args.snapshot,
        replica=args.replica,
        replica_table=args.replica_table,
        limit=args.limit,
        shard_size=args.shard_size,
        workers=args.workers,
    )
    for line in report(result, args.table):
        print(line)
    return 0 if result.equal else 1


def main(argv: list[str] | None = None) -> int:
    from dbuslib.config import CONFIG_HELP
    from dbuslib.errors import ConfigError, EndpointError

    p = argparse.ArgumentParser(prog="verify", description=__doc__.splitlines()[0])
    p.add_argument("--config", help=CONFIG_HELP)
    add_arguments(p)
    args = p.parse_args(argv)
    try:
        return cli(args)
    except DbusError as e:
        print(f"verify: {e.code}: {e}", file=sys.stderr)
        return {ConfigError: 2, EndpointError: 3}.get(type(e), 1)


if __name__ == "__main__":
    sys.exit(main())
