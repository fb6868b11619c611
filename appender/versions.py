"""Schema versions of a table (pure): when does a change of columns make a new UMS namespace version?

The binlog carries each table's columns with every rows event (the table map, with
``binlog_row_metadata=FULL``), so versions are decided from the binlog itself, never from the source's
current catalog: a replay sees exactly the schema that was valid at that position.

- The first rows event of a table creates version 0.
- A rows event whose columns are *incompatible* with the current version's opens the next version at
  that event's position. Incompatible, as in the original (spec section 5): a column added or dropped,
  or a column whose UMS type changed (INT -> BIGINT is int -> long: incompatible; VARCHAR(10) ->
  VARCHAR(20) is string -> string: compatible, the version stays).
- TRUNCATE opens the next version at the DDL's position (downstream can partition by version), and so
  does any other DDL that removes rows without rows events (TRUNCATE/DROP/EXCHANGE PARTITION ..., marked
  ``removes_rows`` by the extractor: docs/raw-events.md), with reason ``row_loss``.
- When a version ends, a ``data_increment_termination`` message is sent under the old namespace,
  right before the first message of the new one.
"""

from __future__ import annotations

from dataclasses import dataclass

from binlog.rawevent import RawEventError, RawHeader
from dbuslib.metastore import Reason, Version, compatible, signature, version_at
from ums import ColumnSpec
from ums.control import control_key
from ums.control import to_json as control_json
from ums.ids import ums_id
from ums.pullrequest import repull

__all__ = [
    "Change",
    "Reason",
    "Version",
    "compare",
    "compatible",
    "loss_reason",
    "on_rows",
    "on_truncate",
    "repull_record",
    "row_loss",
    "signature",
    "version_at",
]


@dataclass(frozen=True)
class Change:
    """What a new event does to a table's versions: ``new`` opens, ``ends`` (if any) is terminated."""

    new: Version
    ends: Version | None


def on_rows(current: Version | None, columns: tuple[ColumnSpec, ...], at: int) -> Change | None:
    """A rows event at binlog id ``at`` with ``columns``: the change it makes, None when it fits."""
    if current is None:
        return Change(Version(0, at, columns, Reason.FIRST), None)
    if at < current.since or compatible(current.columns, columns):
        return None  # a replay of an older position is served by version_at(); or nothing changed
    return Change(Version(current.version + 1, at, columns, Reason.COLUMNS), current)


def on_truncate(current: Version | None, at: int, reason: Reason = Reason.TRUNCATE) -> Change | None:
    """TRUNCATE (or other DDL that removed rows, ``reason`` ROW_LOSS) at ``at``: the next version (same
    columns); nothing before the table's first rows, nothing for a replay of an older position."""
    if current is None or at <= current.since:
        return None
    return Change(Version(current.version + 1, at, current.columns, reason), current)


# What leaves the table empty: like TRUNCATE (reason ``truncate``, a reset point by itself, no re-pull).
EMPTIED = frozenset({"TRUNCATE TABLE", "DROP TABLE", "CREATE OR REPLACE TABLE", "ENGINE BLACKHOLE"})


def loss_reason(header: RawHeader) -> Reason | None:
    """The version reason of a ``row_loss`` DDL (see ``row_loss``): ``truncate`` when every change it
    makes leaves the table empty (``DROP TABLE``, ``CREATE OR REPLACE TABLE``, ``ENGINE=BLACKHOLE``),
    else ``row_loss`` (some rows went or came: a full pull tells which); None when not such a DDL."""
    if row_loss(header) is None:
        return None
    changes = header.row_changes
    emptied = isinstance(changes, list) and changes and all(c in EMPTIED for c in changes)
    return Reason.TRUNCATE if emptied else Reason.ROW_LOSS


def row_loss(header: RawHeader) -> str | None:
    """What removed rows, for a raw ``ddl`` header the extractor marked ``removes_rows`` and that names
    a table (``"TRUNCATE PARTITION, DROP PARTITION"``); None for any other record. TRUNCATE TABLE has
    its own branch (reason ``truncate``, no re-pull: the table is empty)."""
    if header.kind != "ddl" or header.removes_rows is not True or header.table == "*":
        return None
    if header.ddl == "TRUNCATE":
        return None
    changes = header.row_changes
    return ", ".join(map(str, changes)) if isinstance(changes, list) and changes else "row changes"


def repull_record(ds: str, header: RawHeader) -> tuple[bytes, bytes]:
    """Kafka key and value of the full-pull request of a ``row_loss`` DDL's table (ums.pullrequest.repull):
    the same bytes for the same DDL, so a replayed micro-batch asks for the pull already served."""
    at = int(ums_id(*header.position))
    if header.schema is None or header.table is None or header.ts is None:
        msg = f"ddl header at {header.where} lacks schema, table or ts: no table to pull"
        raise RawEventError(msg)
    message = repull(ds, header.schema, header.table, at, int(header.ts), row_loss(header) or "")
    return control_key(message).encode(), control_json(message).encode()


def compare(old: tuple[ColumnSpec, ...], new: tuple[ColumnSpec, ...]) -> dict[str, object]:
    """The ``compare-result`` of a G_META_SYNC_WARNING: columns added, dropped, and changed (type, or
    position), and whether the change is compatible (the version stays)."""
    before = {c.name: (i, c) for i, c in enumerate(old)}
    after = {c.name: (i, c) for i, c in enumerate(new)}
    changed = [
        {"name": n, "before": before[n][1].column_type, "after": after[n][1].column_type}
        for n in before
        if n in after
        and (
            before[n][1].column_type != after[n][1].column_type
            or before[n][1].nullable != after[n][1].nullable
        )
    ]
    return {
        "compatible": compatible(old, new),
        "added": [n for n in after if n not in before],
        "dropped": [n for n in before if n not in after],
        "changed": changed,
    }
