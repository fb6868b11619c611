"""Where the dispatcher sends one first-level record (pure: bytes in, routes out; never raises).

A record of ``<ds>`` goes to the schema topic of the schema in its header (``topics.schema``, by default
``<ds>.<schema>``, the schema escaped to legal topic characters by ``dbuslib.topics.escape``), unchanged.
Two exceptions:

- A heartbeat: an insert into ``<heartbeat.schema>.<heartbeat.table>`` (``dbus.db_heartbeat_monitor``).
  Its rows are decoded and the record goes to the topic of each distinct ``SCHEMA_NAME`` among them, in
  the order first seen, so a heartbeat travels the path of the schema it monitors (spec §2.7). Updates,
  deletes (the heartbeat's purge) and DDL of that table are ordinary records of the heartbeat schema.
- A dead letter: a record whose envelope does not parse (a null value included), a heartbeat that does
  not decode, a chunked heartbeat, a schema whose topic Kafka refuses even escaped (too long), or any
  unexpected error (``DISPATCH_UNEXPECTED``). It goes to ``topics.dead_letter`` with a ``code`` (one of
  ``CODES``), the error text, and ``withheld`` when its value must not be carried (below).

Withholding (the appender's rule, texts in dbuslib.deadletter): in a source that masks some column
(``sources.<ds>.masking``), a dead letter carries no value when the record's table has masking rules,
when the record cannot be attributed to a table, or when it did not decode (a damaged header or key may
claim an unmasked table). The table is the header's ``schema``/``table`` when the envelope parses, else
what a header that still parses as JSON or the key ``<schema>.<table>`` name (every split at a dot).

Chunks carry the header of their event, so every chunk of one event gets the same route and, keeping
the key, lands in the same partition in order. Heartbeat inserts are one small row each and are never
chunked; a chunked one cannot be decoded chunk by chunk, so all its chunks are dead-lettered together.

By example (ds ``demo``)::

    route(<rows shop.orders>)                      -> (Route("demo.shop"),)
    route(<rows shöp.orders>)                      -> (Route("demo.sh_x00f6p"),)
    route(<insert dbus.db_heartbeat_monitor, rows SCHEMA_NAME shop, crm, shop>)
                                                   -> (Route("demo.shop"), Route("demo.crm"))
    route(b"garbage")                              -> (Route("demo.dlq", "RAW_BAD_RECORD", "bad magic ..."),)

The Spark job (``dispatcher.job``) computes the ordinary case in the JVM with the same rules
(``Router.schema_topic_parts`` and ``TOPIC_NAME``: legal names need no escaping) and calls ``route`` only
for the records it cannot route there: heartbeat-table records, schemas that need escaping, malformed ones.
"""

from __future__ import annotations

import fnmatch
import json
from dataclasses import dataclass
from typing import Any

from binlog.heartbeat import HeartbeatTable
from binlog.rawevent import RawEvent, RawEventError, decode
from dbuslib.config import Source
from dbuslib.deadletter import withheld_reason
from dbuslib.topics import TOPIC_NAME, render, topic_problem

__all__ = ["TOPIC_NAME", "Route", "Router", "route", "unexpected"]

SCHEMA_COLUMN = "SCHEMA_NAME"
_SENTINEL = "\x00"
_PREFIX_LEN = 8  # b"DBR", version, u32 header length (binlog.rawevent)

# Dead-letter codes: stable error codes (docs/errors.md), the first two shared with dbuslib.
BAD_RECORD = RawEventError.code  # RAW_BAD_RECORD: the envelope (magic, version, header JSON, keys) is bad
UNDECODABLE_HEARTBEAT = "RAW_UNDECODABLE"  # = RowDecodeError.code: a heartbeat's rows do not decode
BAD_TOPIC = "DISPATCH_BAD_TOPIC"  # a topic name Kafka refuses even escaped (empty schema, too long)
CHUNKED_HEARTBEAT = "DISPATCH_CHUNKED_HEARTBEAT"  # a heartbeat insert cut into chunks (a chunk cannot decode)
HEARTBEAT_WITHOUT_SCHEMA = "DISPATCH_HEARTBEAT_NO_SCHEMA"  # a heartbeat row without a usable SCHEMA_NAME
UNEXPECTED = "DISPATCH_UNEXPECTED"  # any other error while routing one record (a bug): the record is kept
CODES = (
    BAD_RECORD,
    BAD_TOPIC,
    UNDECODABLE_HEARTBEAT,
    CHUNKED_HEARTBEAT,
    HEARTBEAT_WITHOUT_SCHEMA,
    UNEXPECTED,
)

Table = tuple[str, str]


@dataclass(frozen=True)
class Route:
    """One destination of a record: a topic, plus ``code``/``error``/``withheld`` when it is the
    dead-letter topic (``withheld`` non-empty: the dead letter must not carry the record's value)."""

    topic: str
    code: str | None = None
    error: str | None = None
    withheld: str = ""

    @property
    def dead(self) -> bool:
        return self.code is not None


@dataclass(frozen=True)
class Router:
    """The routing rules of one source, compiled from its config (frozen and picklable for executors).

    ``mask_tables``: the ``schema.table`` globs of ``masking`` that mask at least one column;
    ``masks_any``: whether the source has any masking entry (the appender's ``MaskPlan.has_rules``)."""

    ds: str
    schema_template: str
    dead_letter: str
    heartbeat_schema: str
    heartbeat_table: str
    mask_tables: tuple[str, ...] = ()
    masks_any: bool = False

    @classmethod
    def for_source(cls, ds: str, src: Source) -> Router:
        return cls(
            ds=ds,
            schema_template=src.topics.schema_,
            dead_letter=src.topics.name("dead_letter", ds),
            heartbeat_schema=src.heartbeat.schema_,
            heartbeat_table=src.heartbeat.table,
            mask_tables=tuple(sorted(p for p, columns in src.masking.items() if columns)),
            masks_any=bool(src.masking),
        )

    def schema_topic_parts(self) -> list[str]:
        """The schema template split around ``{schema}``: ``"{ds}.{schema}"`` -> ``["demo.", ""]``."""
        return self.schema_template.format(ds=self.ds, schema=_SENTINEL).split(_SENTINEL)

    def schema_topic(self, schema: str) -> str:
        return render(self.schema_template, self.ds, schema)

    @property
    def heartbeat(self) -> HeartbeatTable:
        """The source's heartbeat table (binlog.heartbeat: what a heartbeat insert is)."""
        return HeartbeatTable(self.heartbeat_schema, self.heartbeat_table, self.schema_topic)

    def table_masked(self, schema: str, table: str) -> bool:
        """Whether a masking glob matches ``schema.table`` (ums.masking's rule: fnmatch per part, case
        kept)."""
        for pattern in self.mask_tables:
            s, t = pattern.split(".", 1)
            if fnmatch.fnmatchcase(schema, s) and fnmatch.fnmatchcase(table, t):
                return True
        return False

    def withheld(self, tables: list[Table] | None, decoded: bool = True) -> str:
        """Why a dead letter of a record of one of ``tables`` (None or empty: not attributable) carries no
        value; a record that did not decode (``decoded`` False) may be of any table, so in a source that
        masks columns its value is withheld whatever its key or header claims (the appender's rule)."""
        masked = any(self.table_masked(*t) for t in tables) if tables and self.masks_any else None
        return withheld_reason(self.masks_any, masked, decoded)

    def dead(self, code: str, error: str, tables: list[Table] | None, decoded: bool = True) -> Route:
        return Route(self.dead_letter, code, error, self.withheld(tables, decoded))

    def to_schema(self, schema: Any, tables: list[Table] | None) -> Route:
        """The route to ``schema``'s topic, or a dead letter when Kafka refuses that name even escaped."""
        topic = self.schema_topic(schema) if isinstance(schema, str) and schema else ""
        problem = "empty schema" if not topic else topic_problem(topic)
        if problem:
            msg = f"schema {schema!r:.300} gives topic {topic!r:.300}, which Kafka refuses: {problem}"
            return self.dead(BAD_TOPIC, msg, tables)
        return Route(topic)


def route(router: Router, value: Any, key: bytes | str | None = None) -> tuple[Route, ...]:
    """Every destination of one first-level record, in order; any input gives routes, never an error."""
    try:
        return _route(router, value, key)
    except Exception as e:
        return (router.dead(UNEXPECTED, unexpected(router, e), key_tables(key), decoded=False),)


def unexpected(router: Router, e: Exception) -> str:
    """The error text of a ``DISPATCH_UNEXPECTED`` dead letter: the exception's type, and its message
    unless the source masks columns (an unforeseen message might quote a value)."""
    if router.masks_any:
        return f"{type(e).__name__} while routing (message withheld: this source masks columns)"
    return f"{type(e).__name__} while routing: {e!s:.500}"


def _route(router: Router, value: Any, key: bytes | str | None) -> tuple[Route, ...]:
    try:
        event = decode(value, key)
    except RawEventError as e:
        return (router.dead(BAD_RECORD, str(e), damaged_tables(value) + key_tables(key), decoded=False),)
    tables = event_tables(event, key)
    if not is_heartbeat(router, event):
        return (router.to_schema(event.header.schema, tables),)
    return route_heartbeat(router, event, tables)


def key_tables(key: bytes | str | None) -> list[Table]:
    """The tables a record key ``<schema>.<table>`` may name (each split at a dot; none for a key that is
    null, not UTF-8 or without a dot): ``b"shop.t.dot"`` -> ``[("shop", "t.dot"), ("shop.t", "dot")]``."""
    if isinstance(key, (bytes, bytearray, memoryview)):
        try:
            key = bytes(key).decode()
        except UnicodeDecodeError:
            return []
    if not isinstance(key, str):
        return []
    return [(key[:i], key[i + 1 :]) for i, c in enumerate(key) if c == "."]


def damaged_tables(value: Any) -> list[Table]:
    """The table a record that does not decode still names in a header that parses as JSON (best effort:
    ``[]`` when it does not), so a forged or wrong key cannot let a masked table's bytes through."""
    if not isinstance(value, (bytes, bytearray, memoryview)) or len(value) < _PREFIX_LEN:
        return []
    try:
        header = json.loads(bytes(value[_PREFIX_LEN : _PREFIX_LEN + int.from_bytes(value[4:8], "big")]))
    except (ValueError, RecursionError):
        return []
    if not isinstance(header, dict):
        return []
    schema, table = header.get("schema"), header.get("table")
    return [(schema, table)] if isinstance(schema, str) and isinstance(table, str) and table else []


def event_tables(event: RawEvent, key: bytes | str | None) -> list[Table]:
    """The table of a parsed record: its header's, else (a DDL naming no table) what its key may name."""
    schema, table = event.header.schema, event.header.table
    if isinstance(schema, str) and isinstance(table, str) and table:
        return [(schema, table)]
    return key_tables(key)


def is_heartbeat(router: Router, event: RawEvent) -> bool:
    """An insert into the heartbeat table (updates, deletes and DDL of it are ordinary records)."""
    return router.heartbeat.inserted(event.header)


def route_heartbeat(router: Router, event: RawEvent, tables: list[Table]) -> tuple[Route, ...]:
    """The topics of the distinct schemas a heartbeat insert monitors, in the order of its rows."""
    where = event.header.where
    if event.chunk is not None:
        return (router.dead(CHUNKED_HEARTBEAT, f"heartbeat at {where} is chunk {list(event.chunk)}", tables),)
    from binlog.rows import RowDecodeError, decode_rows  # heavy (pymysqlreplication): executors only

    try:
        rows = decode_rows(event).rows
    except RowDecodeError as e:
        return (router.dead(UNDECODABLE_HEARTBEAT, str(e), tables),)
    schemas = list(dict.fromkeys((r.after or {}).get(SCHEMA_COLUMN) for r in rows))
    if not schemas or any(not isinstance(s, str) or not s for s in schemas):
        msg = f"heartbeat at {where} has {SCHEMA_COLUMN} {schemas!r:.300}"
        return (router.dead(HEARTBEAT_WITHOUT_SCHEMA, msg, tables),)
    return tuple(router.to_schema(s, tables) for s in schemas)
