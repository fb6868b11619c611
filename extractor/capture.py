"""Turns python-mysql-replication events into raw change events (dbuslib.rawevent), without decoding rows.

This is the one place that touches the library's event objects; nothing downstream sees them.
"""

from __future__ import annotations

import re
from typing import Any

from dbuslib.rawevent import RawEvent

# DDL verbs that change what a table looks like, and where the table name stands in each.
_DDL = re.compile(
    r"^\s*(?:/\*.*?\*/\s*)*(ALTER|CREATE|DROP|TRUNCATE|RENAME)\s+(?:ONLINE\s+|IGNORE\s+|OR\s+REPLACE\s+|"
    r"TEMPORARY\s+)*(TABLE|INDEX|UNIQUE\s+INDEX|FULLTEXT\s+INDEX|SPATIAL\s+INDEX|DATABASE|SCHEMA|VIEW)?",
    re.IGNORECASE | re.DOTALL,
)
_NAME = r"((?:`[^`]+`|\w+)(?:\s*\.\s*(?:`[^`]+`|\w+))?)"  # table or schema.table, maybe `quoted`
_IF = r"(?:IF\s+(?:NOT\s+)?EXISTS\s+)?"
_TABLE_AFTER = re.compile(r"\bTABLE\s+" + _IF + _NAME, re.IGNORECASE)
_ON_TABLE = re.compile(r"\bON\s+" + _NAME, re.IGNORECASE)
_AFTER_VERB = {  # statements that name their object right after the verb (and noun)
    "TRUNCATE": re.compile(r"\bTRUNCATE\s+(?:TABLE\s+)?" + _NAME, re.IGNORECASE),
    "DATABASE": re.compile(r"\b(?:DATABASE|SCHEMA)\s+" + _IF + _NAME, re.IGNORECASE),
}


def event_bytes(event: Any) -> bytes:
    """The whole binlog event as the server sent it: 19-byte header, body, checksum (no OK byte)."""
    return bytes(event.packet.packet._data[1:])


def start_pos(event: Any) -> int:
    """Offset of the event's first byte in its binlog file (the header holds the next offset)."""
    return event.packet.log_pos - event.packet.event_size


def _base(source: str, server_id: int, file: str, event: Any, gtid: str) -> dict[str, Any]:
    return {"source": source, "server_id": server_id, "file": file, "pos": start_pos(event),
            "next_pos": event.packet.log_pos, "gtid": gtid, "ts": event.timestamp}


def raw_rows(source: str, file: str, table_map: Any, rows: Any, gtid: str, crc: bool,
             flavor: str = "mariadb") -> RawEvent:
    """A ``rows`` record: the rows event with the table map that describes it."""
    tm = event_bytes(table_map)
    header = {"kind": "rows", **_base(source, rows.packet.server_id, file, rows, gtid),
              "schema": table_map.schema, "table": table_map.table, "flavor": flavor,
              "event_type": rows.packet.event_type, "crc": crc, "tm_len": len(tm)}
    return RawEvent(header=header, body=tm + event_bytes(rows), key=f"{table_map.schema}.{table_map.table}")


def ddl_target(sql: str, default_schema: str) -> tuple[str, str, str] | None:
    """``(verb, schema, table)`` of a schema-changing statement, table ``*`` when none is named; else None."""
    m = _DDL.match(sql)
    if not m:
        return None
    verb, noun = m.group(1).upper(), (m.group(2) or "").upper()
    if noun in ("DATABASE", "SCHEMA"):
        found = _AFTER_VERB["DATABASE"].search(sql)
        return (verb, _parts(found.group(1))[-1], "*") if found else None
    if noun == "VIEW" or (not noun and verb not in ("RENAME", "TRUNCATE")):
        return None
    pattern = _ON_TABLE if "INDEX" in noun else _AFTER_VERB["TRUNCATE"] if verb == "TRUNCATE" else _TABLE_AFTER
    found = pattern.search(sql)
    if not found:
        return verb, default_schema, "*"
    parts = _parts(found.group(1))
    schema, table = (parts[0], parts[1]) if len(parts) == 2 else (default_schema, parts[0])
    return verb, schema, table


def _parts(name: str) -> list[str]:
    """``schema.table`` or ``table``, backquotes removed."""
    return [p.strip().strip("`") for p in name.split(".")]


def raw_ddl(source: str, file: str, query: Any, gtid: str) -> RawEvent | None:
    """A ``ddl`` record for a schema-changing QueryEvent, or None for any other statement."""
    schema = query.schema.decode() if isinstance(query.schema, bytes) else (query.schema or "")
    sql = query.query if isinstance(query.query, str) else query.query.decode("utf-8", "replace")
    target = ddl_target(sql, schema)
    if target is None:
        return None
    verb, ddl_schema, table = target
    header = {"kind": "ddl", **_base(source, query.packet.server_id, file, query, gtid),
              "schema": ddl_schema, "table": table, "ddl": verb, "sql": sql}
    return RawEvent(header=header, key=f"{ddl_schema}.{table}")
