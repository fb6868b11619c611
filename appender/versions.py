"""Schema versions of a table (pure): when does a change of columns make a new UMS namespace version?

The binlog carries each table's columns with every rows event (the table map, with
``binlog_row_metadata=FULL``), so versions are decided from the binlog itself, never from the source's
current catalog: a replay sees exactly the schema that was valid at that position.

- The first rows event of a table creates version 0.
- A rows event whose columns are *incompatible* with the current version's opens the next version at
  that event's position. Incompatible, as in the original (spec section 5): a column added or dropped,
  or a column whose UMS type changed (INT -> BIGINT is int -> long: incompatible; VARCHAR(10) ->
  VARCHAR(20) is string -> string: compatible, the version stays).
- TRUNCATE opens the next version at the DDL's position (downstream can partition by version).
- When a version ends, a ``data_increment_termination`` message is sent under the old namespace,
  right before the first message of the new one.
"""

from __future__ import annotations

from dataclasses import dataclass

from dbuslib.metastore import Reason, Version, compatible, signature, version_at
from ums import ColumnSpec

__all__ = ["Change", "Reason", "Version", "compare", "compatible", "on_rows", "on_truncate", "signature",
           "version_at"]


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


def on_truncate(current: Version | None, at: int) -> Change | None:
    """TRUNCATE at ``at``: the next version (same columns); nothing before the table's first rows."""
    if current is None or at <= current.since:
        return None
    return Change(Version(current.version + 1, at, current.columns, Reason.TRUNCATE), current)


def compare(old: tuple[ColumnSpec, ...], new: tuple[ColumnSpec, ...]) -> dict[str, object]:
    """The ``compare-result`` of a G_META_SYNC_WARNING: columns added, dropped, and changed (type, or
    position), and whether the change is compatible (the version stays)."""
    before = {c.name: (i, c) for i, c in enumerate(old)}
    after = {c.name: (i, c) for i, c in enumerate(new)}
    changed = [{"name": n, "before": before[n][1].column_type, "after": after[n][1].column_type}
               for n in before if n in after and (before[n][1].column_type != after[n][1].column_type
                                                  or before[n][1].nullable != after[n][1].nullable)]
    return {"compatible": compatible(old, new),
            "added": [n for n in after if n not in before],
            "dropped": [n for n in before if n not in after],
            "changed": changed}
