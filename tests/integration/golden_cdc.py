"""The readable golden CDC files, tests/golden/cdc/<case>.sql (format: tests/golden/cdc/README.md).

``read_case(path)`` gives the statements in file order, each with the UMS tuples it must produce
(``->`` lines, parsed); ``differences(path, statements, got)`` compares what a test computed, naming the
file and line of each statement that disagrees. ``write_expected(path, statements, got)`` rewrites the
``->`` lines from a real run (DBUS_GOLDEN_WRITE=1): the result must then be read against docs/ums.md
before it is committed.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from binlog.rows import DecodedRows
from ums.values import encode_column

CDC = Path(__file__).resolve().parents[1] / "golden" / "cdc"
# the fields that depend on where and when the run happened: not in the files
RUN_FIELDS = ("ums_id_", "ums_ts_", "ums_uid_")
WRITE = os.environ.get("DBUS_GOLDEN_WRITE") == "1"


@dataclass
class Statement:
    sql: str
    line: int  # where it starts in the file, 1-based
    expected: list[dict[str, Any]] = field(default_factory=list)


def cases() -> list[Path]:
    return sorted(CDC.glob("*.sql"))


def read_case(path: Path) -> list[Statement]:
    """Statements end with ``;`` at the end of a line; ``--`` lines are comments; each ``->`` line is one
    tuple of the statement before it."""
    statements: list[Statement] = []
    pending: list[str] = []
    start = 0
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        text = line.strip()
        if not pending and (not text or text.startswith("--")):
            continue
        if text.startswith("->"):
            assert not pending and statements, f"{path.name}:{n}: a '->' line before any statement"
            try:
                statements[-1].expected.append(json.loads(text[2:]))
            except json.JSONDecodeError as e:
                raise AssertionError(f"{path.name}:{n}: not JSON after '->': {e}") from e
            continue
        if not pending:
            start = n
        pending.append(line)
        if text.endswith(";"):
            statements.append(Statement("\n".join(pending).strip().rstrip(";"), start))
            pending = []
    assert not pending, f"{path.name}:{start}: statement without a closing ';'"
    return statements


def tables(statements: list[Statement]) -> set[str]:
    """The tables a case creates: its tuples are those of these tables."""
    return {m[1] for s in statements if (m := re.match(r"CREATE TABLE `?(\w+)", s.sql, re.IGNORECASE))}


def decoded_tuples(decoded: DecodedRows) -> list[dict[str, Any]]:
    """The tuples the appender makes of one decoded rows event (before images off), in the golden form:
    ``ums_op_`` and each column's UMS JSON value (``ums.values.encode_column``)."""
    out = []
    for image in decoded.rows:
        row = image.before if decoded.op == "d" else image.after
        assert row is not None, f"{decoded.table}: a {decoded.op} row without its image"
        out.append({"ums_op_": decoded.op} | {c.name: encode_column(c, row[c.name]) for c in decoded.columns})
    return out


def tuple_dict(fields: list[dict[str, Any]], values: list[Any]) -> dict[str, Any]:
    """One UMS tuple as the golden files write it: ``{field name: JSON value}``, run fields left out."""
    return {f["name"]: v for f, v in zip(fields, values, strict=True) if f["name"] not in RUN_FIELDS}


def split(statements: list[Statement], got: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """The tuples ``got`` (all of the case, in order) cut per statement by the expected counts."""
    out, at = [], 0
    for s in statements:
        out.append(got[at : at + len(s.expected)])
        at += len(s.expected)
    out[-1] = out[-1] + got[at:]  # surplus shows at the last statement
    return out


def differences(path: Path, statements: list[Statement], got: list[dict[str, Any]]) -> list[str]:
    problems = []
    for s, tuples in zip(statements, split(statements, got), strict=True):
        if len(tuples) != len(s.expected):
            problems.append(f"{path.name}:{s.line}: {len(s.expected)} tuple(s) expected, got {len(tuples)}")
        for k, (want, have) in enumerate(zip(s.expected, tuples, strict=False)):
            bad = {n: (want.get(n), have.get(n)) for n in {*want, *have} if want.get(n) != have.get(n)}
            bad |= {
                n: (want[n], have[n])
                for n in want.keys() & have.keys()
                if want[n] == have[n] and type(want[n]) is not type(have[n])
            }
            if bad:
                problems.append(f"{path.name}:{s.line} tuple {k}: (expected, got) {str(bad)[:600]}")
    return problems


def write_expected(path: Path, statements: list[Statement], got: list[dict[str, Any]]) -> None:
    """Rewrite the ``->`` lines of ``path`` from ``got``, keeping how many each statement has (write
    placeholder ``-> {}`` lines for a new statement first)."""
    per = split(statements, got)
    ends = {s.line + s.sql.count("\n"): tuples for s, tuples in zip(statements, per, strict=True)}
    out: list[str] = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if line.strip().startswith("->"):
            continue
        out.append(line)
        out += ["-> " + json.dumps(t, ensure_ascii=False) for t in ends.get(n, [])]
    path.write_text("\n".join(out) + "\n", encoding="utf-8")
