"""Where the dispatcher sends one first-level record (pure: bytes in, routes out).

A record of ``<ds>`` goes to the schema topic of the schema in its header (``topics.schema``, by default
``<ds>.<schema>``), unchanged. Two exceptions:

- A heartbeat: an insert into ``<heartbeat.schema>.<heartbeat.table>`` (``dbus.db_heartbeat_monitor``).
  Its rows are decoded and the record goes to the topic of each distinct ``SCHEMA_NAME`` among them, in
  the order first seen, so a heartbeat travels the path of the schema it monitors (spec §2.7). Updates,
  deletes (the heartbeat's purge) and DDL of that table are ordinary records of the heartbeat schema.
- A dead letter: a record whose envelope does not parse, a heartbeat that does not decode, a chunked
  heartbeat, or a schema whose topic name Kafka would refuse. It goes to ``topics.dead_letter`` with a
  reason (one of ``REASONS``) and the error text.

Chunks carry the header of their event, so every chunk of one event gets the same route and, keeping
the key, lands in the same partition in order. Heartbeat inserts are one small row each and are never
chunked; a chunked one cannot be decoded chunk by chunk, so all its chunks are dead-lettered together.

By example (ds ``demo``)::

    route(<rows shop.orders>)                      -> (Route("demo.shop"),)
    route(<insert dbus.db_heartbeat_monitor, rows SCHEMA_NAME shop, crm, shop>)
                                                   -> (Route("demo.shop"), Route("demo.crm"))
    route(b"garbage")                              -> (Route("demo.dlq", "RAW_BAD_RECORD", "bad magic ..."),)

The Spark job (``dispatcher.job``) computes the ordinary case in the JVM with the same rules
(``Router.schema_topic_parts`` and ``TOPIC_NAME``) and calls ``route`` only for the records it cannot
route there: heartbeat-table records and malformed ones.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from dbuslib.config import Source
from dbuslib.rawevent import RawEvent, RawEventError, decode

# Kafka's rule for topic names (kafka.common.internals.Topic): these characters, at most 249 of them.
TOPIC_NAME = re.compile(r"^[A-Za-z0-9._-]{1,249}$")
# Binlog type codes of inserts: WRITE_ROWS_EVENT_V1 (MariaDB) and WRITE_ROWS_EVENT_V2 (MySQL).
WRITE_ROWS_EVENTS = frozenset({23, 30})
SCHEMA_COLUMN = "SCHEMA_NAME"
_SENTINEL = "\x00"

# Dead-letter reasons: stable error codes (docs/errors.md), the first two shared with dbuslib.
BAD_RECORD = RawEventError.code  # RAW_BAD_RECORD: the envelope (magic, version, header JSON, keys) is bad
UNDECODABLE_HEARTBEAT = "RAW_UNDECODABLE"  # = RowDecodeError.code: a heartbeat's rows do not decode
BAD_TOPIC = "DISPATCH_BAD_TOPIC"  # the schema gives a topic name Kafka refuses (empty, long, odd characters)
CHUNKED_HEARTBEAT = "DISPATCH_CHUNKED_HEARTBEAT"  # a heartbeat insert cut into chunks (a chunk cannot decode)
HEARTBEAT_WITHOUT_SCHEMA = "DISPATCH_HEARTBEAT_NO_SCHEMA"  # a heartbeat row without a usable SCHEMA_NAME
REASONS = (BAD_RECORD, BAD_TOPIC, UNDECODABLE_HEARTBEAT, CHUNKED_HEARTBEAT, HEARTBEAT_WITHOUT_SCHEMA)


@dataclass(frozen=True)
class Route:
    """One destination of a record: a topic, plus ``reason``/``error`` when it is the dead-letter topic."""

    topic: str
    reason: str | None = None
    error: str | None = None

    @property
    def dead(self) -> bool:
        return self.reason is not None


@dataclass(frozen=True)
class Router:
    """The routing rules of one source, compiled from its config (frozen and picklable for executors)."""

    ds: str
    schema_template: str
    dead_letter: str
    heartbeat_schema: str
    heartbeat_table: str

    @classmethod
    def for_source(cls, ds: str, src: Source) -> Router:
        return cls(ds=ds, schema_template=src.topics.schema_, dead_letter=src.topics.name("dead_letter", ds),
                   heartbeat_schema=src.heartbeat.schema_, heartbeat_table=src.heartbeat.table)

    def schema_topic_parts(self) -> list[str]:
        """The schema template split around ``{schema}``: ``"{ds}.{schema}"`` -> ``["demo.", ""]``."""
        return self.schema_template.format(ds=self.ds, schema=_SENTINEL).split(_SENTINEL)

    def schema_topic(self, schema: str) -> str:
        return self.schema_template.format(ds=self.ds, schema=schema)

    def is_heartbeat_table(self, header: dict[str, Any]) -> bool:
        return header.get("schema") == self.heartbeat_schema and header.get("table") == self.heartbeat_table

    def dead(self, reason: str, error: str) -> Route:
        return Route(self.dead_letter, reason, error)

    def to_schema(self, schema: Any) -> Route:
        """The route to ``schema``'s topic, or a dead letter when that is no valid topic name."""
        topic = self.schema_topic(schema) if isinstance(schema, str) and schema else ""
        if not TOPIC_NAME.match(topic):
            msg = f"schema {schema!r} gives topic {topic!r}, not a valid Kafka topic name"
            return self.dead(BAD_TOPIC, msg)
        return Route(topic)


def route(router: Router, value: bytes, key: bytes | str | None = None) -> tuple[Route, ...]:
    """Every destination of one first-level record, in order; never raises on bad input."""
    try:
        event = decode(bytes(value), key)
    except RawEventError as e:
        return (router.dead(BAD_RECORD, str(e)),)
    if not is_heartbeat(router, event):
        return (router.to_schema(event.header["schema"]),)
    return route_heartbeat(router, event)


def is_heartbeat(router: Router, event: RawEvent) -> bool:
    """An insert into the heartbeat table (updates, deletes and DDL of it are ordinary records)."""
    return (event.kind == "rows" and router.is_heartbeat_table(event.header)
            and event.header.get("event_type") in WRITE_ROWS_EVENTS)


def route_heartbeat(router: Router, event: RawEvent) -> tuple[Route, ...]:
    """The topics of the distinct schemas a heartbeat insert monitors, in the order of its rows."""
    if event.chunk is not None:
        where = f"{event.header.get('file')}:{event.header.get('pos')}"
        return (router.dead(CHUNKED_HEARTBEAT, f"heartbeat at {where} is chunk {list(event.chunk)}"),)
    from dbuslib.rowdecode import RowDecodeError, decode_rows  # heavy (pymysqlreplication): executors only

    try:
        rows = decode_rows(event).rows
    except RowDecodeError as e:
        return (router.dead(UNDECODABLE_HEARTBEAT, str(e)),)
    schemas = list(dict.fromkeys((r.after or {}).get(SCHEMA_COLUMN) for r in rows))
    if not schemas or any(not isinstance(s, str) or not s for s in schemas):
        where = f"{event.header.get('file')}:{event.header.get('pos')}"
        msg = f"heartbeat at {where} has {SCHEMA_COLUMN} {schemas!r}"
        return (router.dead(HEARTBEAT_WITHOUT_SCHEMA, msg),)
    return tuple(router.to_schema(s) for s in schemas)
