"""The row changes of tests/golden/cdc/every_type.sql as ``ums.rowchange.RowChange`` (the per-row formats'
tests): its ``->`` tuples in order, with before images for updates and deletes (the row as the statements
before left it), at made-up binlog positions (statement n at offset 1000 + 100 n, tuple t its row t).

``changes()`` gives them all; ``pulled()`` the four inserted rows again as a full pull (op r, the last one
snapshot last); ``rows(n)`` n more inserted rows with every column set (the 100-row workloads).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from ums.build import field_for
from ums.ids import ums_id, ums_uid
from ums.rowchange import Position, RowChange, Snapshot, TableShape
from ums.scalars import JsonValue
from ums.types import ColumnSpec

CASE = Path(__file__).resolve().parents[1] / "golden" / "cdc" / "every_type.sql"
FILE = "mysql-bin.000001"
TS_MS = 1_700_000_000_000

# COLUMN_TYPE as MariaDB 10.11's information_schema gives it for every_type.sql's CREATE TABLE
COLUMN_TYPES = {
    "id": "int(11)",
    "ti": "tinyint(4)",
    "tiu": "tinyint(3) unsigned",
    "si": "smallint(6)",
    "siu": "smallint(5) unsigned",
    "mi": "mediumint(9)",
    "miu": "mediumint(8) unsigned",
    "i": "int(11)",
    "iu": "int(10) unsigned",
    "bi": "bigint(20)",
    "biu": "bigint(20) unsigned",
    "de": "decimal(65,30)",
    "d2": "decimal(10,2)",
    "fl": "float",
    "db": "double",
    "b1": "bit(1)",
    "b64": "bit(64)",
    "dt": "date",
    "dtm": "datetime",
    "dtm6": "datetime(6)",
    "ts": "timestamp",
    "ts3": "timestamp(3)",
    "tm": "time",
    "tm3": "time(3)",
    "yr": "year(4)",
    "ch": "char(10)",
    "vc": "varchar(20)",
    "tt": "tinytext",
    "tx": "text",
    "mt": "mediumtext",
    "lt": "longtext",
    "bn": "binary(4)",
    "vb": "varbinary(16)",
    "tb": "tinyblob",
    "bl": "blob",
    "mb": "mediumblob",
    "lb": "longblob",
    "en": "enum('small','medium','large')",
    "st": "set('red','green','blue')",
    "js": "longtext",
    "i4": "inet4",
    "i6": "inet6",
    "uu": "uuid",
    "nn": "varchar(5)",
}
NOT_NULL = {"id", "nn"}
COLUMNS = tuple(ColumnSpec(n, t, n not in NOT_NULL) for n, t in COLUMN_TYPES.items())
SHAPE = TableShape("demo", "golden", "cdc_types", 1, COLUMNS, tuple(field_for(c) for c in COLUMNS), ("id",))
_OPS = {"i": "c", "u": "u", "d": "d"}


def _statements() -> list[tuple[str, list[dict[str, JsonValue]]]]:
    out: list[tuple[str, list[dict[str, JsonValue]]]] = []
    pending: list[str] = []
    for line in CASE.read_text(encoding="utf-8").splitlines():
        text = line.strip()
        if text.startswith("->"):
            out[-1][1].append(json.loads(text[2:]))
        elif pending or (text and not text.startswith("--")):
            pending.append(line)
            if text.endswith(";"):
                out.append(("\n".join(pending), []))
                pending = []
    return out


def _at(statement: int, row: int, snapshot: Snapshot = "false") -> tuple[Position, str]:
    offset = 1000 + 100 * statement
    uid_base = ums_id(FILE, offset)
    position = Position(int(uid_base), TS_MS + statement, FILE, offset, row, 1, f"0-1-{statement}", snapshot)
    return position, ums_uid(uid_base, row)


def changes() -> list[RowChange]:
    """Every tuple of every_type.sql, in order, with before images."""
    state: dict[JsonValue, tuple[JsonValue, ...]] = {}
    out: list[RowChange] = []
    names = [f.name for f in SHAPE.fields]
    for n, (sql, tuples) in enumerate(_statements()):
        for t, expected in enumerate(tuples):
            op = _OPS[str(expected["ums_op_"])]
            values = tuple(expected[name] for name in names)
            key = values[0]
            before = None
            if op == "u":
                moved = re.search(r"SET id = \d+.*WHERE id = (\d+)", sql)
                old_key = int(moved[1]) if moved else key
                before = state.pop(old_key)
            elif op == "d":
                before = state.pop(key)
            if op != "d":
                state[key] = values
            at, uid = _at(n, t)
            out.append(RowChange(SHAPE, op, before, None if op == "d" else values, at, uid))  # type: ignore[arg-type]
    return out


def pulled() -> list[RowChange]:
    """The four rows the INSERTs made, as a full pull (op r; the last one snapshot last)."""
    inserted = [c for c in changes() if c.op == "c" and c.after is not None and c.after[0] in (1, 2, 3, 4)]
    out = []
    for t, change in enumerate(inserted):
        at, uid = _at(90, t, "last" if t == len(inserted) - 1 else "true")
        out.append(RowChange(SHAPE, "r", None, change.after, at, uid))
    return out


def rows(count: int, start: int = 1000) -> list[RowChange]:
    """``count`` inserts (ids ``start``...) cycling through the MAX, MIN and ODD rows' values."""
    models = [c.after for c in changes()[:3] if c.after is not None]
    out = []
    for k in range(count):
        values = (start + k, *models[k % len(models)][1:])
        at, uid = _at(100 + k // 10, k % 10)
        out.append(RowChange(SHAPE, "c", None, values, at, uid))
    return out
