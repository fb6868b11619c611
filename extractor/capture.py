"""Turns python-mysql-replication events into raw change events (binlog.rawevent), without decoding rows.

This is the one place that touches the library's event objects; nothing downstream sees them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from binlog.rawevent import RawEvent, RawHeader

# DDL verbs that change what a table looks like, and where the table name stands in each.
_DDL = re.compile(
    r"^\s*(ALTER|CREATE|DROP|TRUNCATE|RENAME)\s+(?:ONLINE\s+|IGNORE\s+|OR\s+REPLACE\s+|"
    r"TEMPORARY\s+)*(TABLE|INDEX|UNIQUE\s+INDEX|FULLTEXT\s+INDEX|SPATIAL\s+INDEX|DATABASE|SCHEMA|VIEW)?",
    re.IGNORECASE | re.DOTALL,
)
_QUOTED = r"`(?:[^`]|``)+`"
_NAME = rf"((?:{_QUOTED}|\w+)(?:\s*\.\s*(?:{_QUOTED}|\w+))?)"  # table or schema.table, maybe `quoted`
_IF = r"(?:IF\s+(?:NOT\s+)?EXISTS\s+)?"
_TABLE_AFTER = re.compile(r"\bTABLE\s+" + _IF + _NAME, re.IGNORECASE)
_ON_TABLE = re.compile(r"\bON\s+" + _NAME, re.IGNORECASE)
_AFTER_VERB = {  # statements that name their object right after the verb (and noun)
    "TRUNCATE": re.compile(r"\bTRUNCATE\s+(?:TABLE\s+)?" + _NAME, re.IGNORECASE),
    "DATABASE": re.compile(r"\b(?:DATABASE|SCHEMA)\s+" + _IF + _NAME, re.IGNORECASE),
}
_PART = re.compile(r"`((?:[^`]|``)*)`|([^\s.`]+)")

# ALTER TABLE clauses that remove (or replace) rows without writing a rows event: the first two words
# of a clause -> the name the raw ``ddl`` header gives it. REORGANIZE, COALESCE, ADD, REBUILD, ANALYZE,
# CHECK, OPTIMIZE, REPAIR PARTITION, PARTITION BY and REMOVE PARTITIONING keep every row.
_ROW_CLAUSES = {
    ("TRUNCATE", "PARTITION"): "TRUNCATE PARTITION",
    ("DROP", "PARTITION"): "DROP PARTITION",
    ("EXCHANGE", "PARTITION"): "EXCHANGE PARTITION",  # the partition's rows leave, the other table's come
    ("CONVERT", "PARTITION"): "CONVERT PARTITION",  # the partition's rows move to a new table
    ("CONVERT", "TABLE"): "CONVERT TABLE",  # another table's rows become a partition
    ("DISCARD", "PARTITION"): "DISCARD PARTITION",
    ("DISCARD", "TABLESPACE"): "DISCARD TABLESPACE",
    ("IMPORT", "PARTITION"): "IMPORT PARTITION",
    ("IMPORT", "TABLESPACE"): "IMPORT TABLESPACE",
}
_WORD = re.compile(r"[\w$]+")
_EXECUTABLE = re.compile(r"M?!\d*")  # /*!50100 ... */ and /*M!100100 ... */: MariaDB runs their text


@dataclass(frozen=True)
class Token:
    """One SQL token: ``word`` (bare keyword or name, as written), ``name`` (a backquoted identifier,
    unquoted), ``string`` (a quoted literal, unquoted) or ``punct`` (one character)."""

    kind: str
    text: str

    def is_word(self, *words: str) -> bool:
        return self.kind == "word" and self.text.upper() in words


def event_bytes(event: Any) -> bytes:
    """The whole binlog event as the server sent it: 19-byte header, body, checksum (no OK byte)."""
    return bytes(event.packet.packet._data[1:])


def start_pos(event: Any) -> int:
    """Offset of the event's first byte in its binlog file (the header holds the next offset)."""
    return event.packet.log_pos - event.packet.event_size


def _base(source: str, server_id: int, file: str, event: Any, gtid: str) -> dict[str, Any]:
    return {
        "source": source,
        "server_id": server_id,
        "file": file,
        "pos": start_pos(event),
        "next_pos": event.packet.log_pos,
        "gtid": gtid,
        "ts": event.timestamp,
    }


def raw_rows(
    source: str,
    file: str,
    table_map: Any,
    rows: Any,
    gtid: str,
    crc: bool,
    flavor: str = "mariadb",
    types: dict[str, str] | None = None,
) -> RawEvent:
    """A ``rows`` record: the rows event with the table map that describes it; ``types`` names the
    columns whose type the binlog cannot tell (INET4/INET6/UUID, see dbuslib.coltypes)."""
    tm = event_bytes(table_map)
    header = RawHeader(
        kind="rows",
        **_base(source, rows.packet.server_id, file, rows, gtid),
        schema=table_map.schema,
        table=table_map.table,
        flavor=flavor,
        event_type=rows.packet.event_type,
        crc=crc,
        tm_len=len(tm),
        types=dict(types) if types else None,
    )
    return RawEvent(header=header, body=tm + event_bytes(rows), key=f"{table_map.schema}.{table_map.table}")


def ddl_target(sql: str, default_schema: str) -> tuple[str, str, str] | None:
    """``(verb, schema, table)`` of a schema-changing statement, table ``*`` when none is named; else None.

    Comments are skipped (the text of MariaDB's executable comments ``/*! ... */`` counts as SQL).
    """
    sql = without_comments(sql)
    m = _DDL.match(sql)
    if not m:
        return None
    verb, noun = m.group(1).upper(), (m.group(2) or "").upper()
    if noun in ("DATABASE", "SCHEMA"):
        found = _AFTER_VERB["DATABASE"].search(sql)
        return (verb, _parts(found.group(1))[-1], "*") if found else None
    if noun == "VIEW" or (not noun and verb not in ("RENAME", "TRUNCATE")):
        return None
    pattern = (
        _ON_TABLE if "INDEX" in noun else _AFTER_VERB["TRUNCATE"] if verb == "TRUNCATE" else _TABLE_AFTER
    )
    found = pattern.search(sql)
    if not found:
        return verb, default_schema, "*"
    parts = _parts(found.group(1))
    schema, table = (parts[0], parts[1]) if len(parts) == 2 else (default_schema, parts[0])
    return verb, schema, table


def _parts(name: str) -> list[str]:
    """``schema.table`` or ``table``, backquotes removed (a dot inside backquotes is part of the name)."""
    return [q.replace("``", "`") if q or not bare else bare for q, bare in _PART.findall(name)]


def tokens(sql: str) -> list[Token]:
    """The tokens of ``sql``, comments left out: ``/* */``, ``-- `` and ``#`` to the end of the line.
    The text of an executable comment (``/*!50100 ... */``, ``/*M!100100 ... */``) is tokenized as SQL."""
    out: list[Token] = []
    i, n = 0, len(sql)
    while i < n:
        c = sql[i]
        if c.isspace():
            i += 1
        elif sql.startswith("/*", i):
            end = sql.find("*/", i + 2)
            end = n if end < 0 else end
            body = sql[i + 2 : end]
            executable = _EXECUTABLE.match(body)
            if executable:
                out.extend(tokens(body[executable.end() :]))
            i = end + 2
        elif c == "#" or (sql.startswith("--", i) and (i + 2 == n or sql[i + 2].isspace())):
            end = sql.find("\n", i)
            i = n if end < 0 else end + 1
        elif c in "`'\"":
            text, i = _quoted(sql, i)
            out.append(Token("name" if c == "`" else "string", text))
        else:
            word = _WORD.match(sql, i)
            out.append(Token("word", word.group()) if word else Token("punct", c))
            i = word.end() if word else i + 1
    return out


def _quoted(sql: str, start: int) -> tuple[str, int]:
    """The text of the quoted token at ``start`` (a doubled quote is one; ``\\`` escapes in strings)
    and the index after it; an unterminated one runs to the end."""
    q, i, n, buf = sql[start], start + 1, len(sql), []
    while i < n:
        c = sql[i]
        if c == "\\" and q != "`" and i + 1 < n:
            buf.append(sql[i : i + 2])
            i += 2
        elif c == q and sql.startswith(q + q, i):
            buf.append(q)
            i += 2
        elif c == q:
            return "".join(buf), i + 1
        else:
            buf.append(c)
            i += 1
    return "".join(buf), n


def without_comments(sql: str) -> str:
    """``sql`` with its comments replaced by a space (executable comments keep their text)."""
    out, i, n = [], 0, len(sql)
    while i < n:
        c = sql[i]
        if sql.startswith("/*", i):
            end = sql.find("*/", i + 2)
            end = n if end < 0 else end
            executable = _EXECUTABLE.match(sql, i + 2, end)
            out.append(" " + (without_comments(sql[executable.end() : end]) + " " if executable else ""))
            i = end + 2
        elif c == "#" or (sql.startswith("--", i) and (i + 2 == n or sql[i + 2].isspace())):
            end = sql.find("\n", i)
            out.append(" ")
            i = n if end < 0 else end + 1
        elif c in "`'\"":
            _, after = _quoted(sql, i)
            out.append(sql[i:after])
            i = after
        else:
            out.append(c)
            i += 1
    return "".join(out)


def row_changes(sql: str) -> tuple[str, ...]:
    """What in ``sql`` removes or replaces a table's rows without rows events, in clause order:
    ``TRUNCATE TABLE``, ``DROP TABLE``, ``CREATE OR REPLACE TABLE``, the ALTER TABLE clauses of
    ``_ROW_CLAUSES`` and ``ENGINE=BLACKHOLE``; () for anything else.
    ``ALTER TABLE t DROP COLUMN c, TRUNCATE PARTITION p0, p1`` -> ``("TRUNCATE PARTITION",)``.
    """
    toks = tokens(sql)
    if toks and toks[0].is_word("TRUNCATE"):
        return ("TRUNCATE TABLE",)
    if toks and toks[0].is_word("DROP", "CREATE"):
        return _dropped_table(toks)
    start = _alter_clauses_start(toks)
    if start is None:
        return ()
    found: list[str] = []
    for clause in _clauses(toks[start:]):
        kind = _row_clause(clause)
        if kind is not None and kind not in found:
            found.append(kind)
    return tuple(found)


def _dropped_table(toks: list[Token]) -> tuple[str, ...]:
    """``DROP TABLE`` and ``CREATE OR REPLACE TABLE`` end the rows of a table (not TEMPORARY ones: they
    are not in the binlog's rows, and not captured)."""
    words = [t.text.upper() for t in toks[:5] if t.kind == "word"]
    if words[:2] == ["DROP", "TABLE"]:
        return ("DROP TABLE",)
    if words[:4] == ["CREATE", "OR", "REPLACE", "TABLE"]:
        return ("CREATE OR REPLACE TABLE",)
    return ()


def _alter_clauses_start(toks: list[Token]) -> int | None:
    """Index of the first clause of ``ALTER [ONLINE] [IGNORE] TABLE [IF EXISTS] name [WAIT n|NOWAIT]``."""
    i = 1
    if not toks or not toks[0].is_word("ALTER"):
        return None
    while i < len(toks) and toks[i].is_word("ONLINE", "IGNORE"):
        i += 1
    if i >= len(toks) or not toks[i].is_word("TABLE"):
        return None
    i += 1
    if i + 1 < len(toks) and toks[i].is_word("IF") and toks[i + 1].is_word("EXISTS"):
        i += 2
    i += 1  # the name, then maybe .name
    if i + 1 < len(toks) and toks[i] == Token("punct", "."):
        i += 2
    if i < len(toks) and toks[i].is_word("NOWAIT"):
        i += 1
    elif i < len(toks) and toks[i].is_word("WAIT"):
        i += 2
    return i


def _clauses(toks: list[Token]) -> list[list[Token]]:
    """``toks`` cut at the commas outside parentheses."""
    out: list[list[Token]] = [[]]
    depth = 0
    for t in toks:
        if t.kind == "punct" and t.text in "()":
            depth += 1 if t.text == "(" else -1
        if t == Token("punct", ",") and depth == 0:
            out.append([])
        else:
            out[-1].append(t)
    return out


def _row_clause(clause: list[Token]) -> str | None:
    if len(clause) >= 2 and clause[0].kind == clause[1].kind == "word":
        kind = _ROW_CLAUSES.get((clause[0].text.upper(), clause[1].text.upper()))
        if kind is not None:
            return kind
    depth = 0
    for i, t in enumerate(clause):  # a table option, anywhere among the others: ENGINE [=] BLACKHOLE
        depth += (t == Token("punct", "(")) - (t == Token("punct", ")"))
        if depth == 0 and t.is_word("ENGINE"):
            rest = clause[i + 1 : i + 3]
            rest = rest[1:] if rest and rest[0] == Token("punct", "=") else rest
            if rest and rest[0].kind in ("word", "string") and rest[0].text.upper() == "BLACKHOLE":
                return "ENGINE BLACKHOLE"
    return None


def raw_ddl(source: str, file: str, query: Any, gtid: str) -> RawEvent | None:
    """A ``ddl`` record for a schema-changing QueryEvent, or None for any other statement. DDL that
    removes rows without rows events (``row_changes``) is marked ``"removes_rows": true`` and lists what
    does in ``row_changes`` (docs/raw-events.md)."""
    schema = query.schema.decode() if isinstance(query.schema, bytes) else (query.schema or "")
    sql = query.query if isinstance(query.query, str) else query.query.decode("utf-8", "replace")
    target = ddl_target(sql, schema)
    if target is None:
        return None
    verb, ddl_schema, table = target
    changes = row_changes(sql) if table != "*" else ()
    header = RawHeader(
        kind="ddl",
        **_base(source, query.packet.server_id, file, query, gtid),
        schema=ddl_schema,
        table=table,
        ddl=verb,
        sql=sql,
        removes_rows=True if changes else None,
        row_changes=list(changes) if changes else None,
    )
    return RawEvent(header=header, key=f"{ddl_schema}.{table}")
