"""The raw change event: what the extractor writes to the first-level topic ``<ds>``, version 1.

The extractor does as little as the contract allows: it does not decode rows. A record carries the
undecoded binlog rows event together with the table-map event that describes its columns (with
``binlog_row_metadata=FULL`` the table map holds column names, signedness, charsets, ENUM/SET values
and the primary key), so any later stage can decode it without asking the source. Decoding lives in
``binlog.rows`` and runs where it scales (the Spark appender).

Kafka record: key ``<schema>.<table>`` (UTF-8), value::

    b"DBR" + version byte (1) | u32 big-endian header length H | header (H bytes, UTF-8 JSON) | body

Header, by example (``kind`` = ``rows``)::

    {"kind": "rows", "source": "demo", "server_id": 1, "file": "mariadb-bin.000006", "pos": 860,
     "next_pos": 938, "gtid": "0-1-42", "ts": 1795355830, "schema": "shop", "table": "orders",
     "event_type": 30, "crc": true, "tm_len": 67}

- ``pos`` is the start offset of the rows event in ``file`` (it makes ``ums_id_``); ``next_pos`` the
  offset after it; ``ts`` the event's server timestamp in epoch seconds; ``gtid`` the transaction's
  GTID (``domain-server-seq`` on MariaDB, ``uuid:n`` on MySQL) or ``""``.
- ``event_type`` is the binlog type code of the rows event (write/update/delete, v1 or v2).
- ``crc``: whether each event in the body ends with a 4-byte CRC32 checksum.
- body of ``rows``: the table-map event (``tm_len`` bytes) followed by the rows event; each is a whole
  binlog event as read from the server (19-byte header, body, checksum when ``crc``).

``kind`` = ``ddl``: a statement that changes a schema (ALTER/CREATE/DROP/TRUNCATE/RENAME); the header
adds ``sql`` and ``ddl`` (the statement's verb), the key is ``<schema>.<table>`` or ``<schema>.*`` when
no table is named, and the body is empty.

Chunks: a record larger than the producer's limit is cut into ``n`` records with the same key and a
header ``"chunk": [i, n]`` (``i`` from 0); their bodies concatenated in order give the original body.
All chunks of one event are written one after the other; a consumer that sees chunk 0 again (a replay
after a restart) starts the event over.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any

from dbuslib.errors import DbusError

MAGIC = b"DBR"
VERSION = 1
_PREFIX = struct.Struct(">3sBI")


class RawEventError(DbusError, ValueError):
    """A first-level record that does not follow this contract; the message says what is wrong."""

    code = "RAW_BAD_RECORD"


@dataclass(frozen=True)
class RawHeader:
    """The header of a raw event, one attribute per member (None: absent); see the module docstring.

    ``decode`` checks the members a stage relies on (``_REQUIRED``, ``_TYPES``, ``chunk``); the others
    (``source``, ``server_id``, ``flavor``, ``types``, ``removes_rows``, ``row_changes``) are carried as
    written and checked by the reader that uses them. Members this build does not know (a newer writer's)
    are kept in ``extra``. ``to_dict`` gives the members in the order they were read, then the ones set
    since in the order of the fields below (the extractor's order), so ``encode(decode(v))`` is ``v``.
    """

    kind: str
    source: Any = None
    server_id: Any = None
    file: str | None = None
    pos: int | None = None
    next_pos: int | None = None
    gtid: str | None = None
    ts: int | None = None
    schema: str | None = None
    table: str | None = None
    flavor: Any = None  # "mariadb" | "mysql"
    event_type: int | None = None
    crc: bool | None = None
    tm_len: int | None = None
    types: Any = None  # {"addr": "inet6"}: dbuslib.coltypes, checked by binlog.rows.header_types
    ddl: str | None = None
    sql: str | None = None
    removes_rows: Any = None  # True on DDL that removes rows without rows events
    row_changes: Any = None  # ["TRUNCATE PARTITION"], with removes_rows
    chunk: tuple[int, int] | None = None  # (i, n): this record is chunk i of n
    extra: Mapping[str, Any] = field(default_factory=dict)  # members this build does not know
    read_order: tuple[str, ...] = field(default=(), repr=False, compare=False)

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any]) -> RawHeader:
        """The header of a JSON object, unchecked (``decode`` checks it first)."""
        members = dict(_ABSENT_MEMBERS)
        extra = {}
        for name, value in doc.items():
            if name in _FIELD_SET:
                members[name] = value
            else:
                extra[name] = value
        if isinstance(members["chunk"], list):
            members["chunk"] = tuple(members["chunk"])
        header = object.__new__(cls)  # per record on the hot path: the dataclass __init__ costs twice this
        header.__dict__.update(members, extra=extra, read_order=tuple(doc))
        return header

    def to_dict(self) -> dict[str, Any]:
        """The JSON object of the wire, in the order described above."""
        members, extra = self.__dict__, self.extra
        out = {name: members[name] if name in _FIELD_SET else extra[name] for name in self.read_order}
        for name in _FIELDS:
            if name not in out and members[name] is not None:
                out[name] = members[name]
        for name, value in extra.items():
            out.setdefault(name, value)
        if isinstance(out.get("chunk"), tuple):
            out["chunk"] = list(out["chunk"])
        return out

    def without_chunk(self) -> RawHeader:
        """This header as of the whole event its chunks came from."""
        return replace(self, chunk=None, read_order=tuple(k for k in self.read_order if k != "chunk"))

    # Read access by wire name (``header["pos"]``, ``header.get("types")``, ``{**header}``) for code not yet
    # moved to the attributes; an absent member is a KeyError / the default, as in the JSON object.
    def __getitem__(self, name: str) -> Any:
        if name in _FIELD_SET:
            value = getattr(self, name)
            if value is None and name not in self.read_order:
                raise KeyError(name)
            return list(value) if name == "chunk" else value
        return self.extra[name]

    def get(self, name: str, default: Any = None) -> Any:
        try:
            return self[name]
        except KeyError:
            return default

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self.get(name, _ABSENT) is not _ABSENT

    def keys(self) -> list[str]:
        return list(self.to_dict())

    def items(self) -> list[tuple[str, Any]]:
        return list(self.to_dict().items())

    @property
    def where(self) -> str:
        """``mariadb-bin.000006:860``: where the event starts in the binlog."""
        return f"{self.file}:{self.pos}"

    @property
    def position(self) -> tuple[str, int]:
        """``(file, pos)``: ``decode`` requires both of every rows and ddl header (else RawEventError)."""
        if self.file is None or self.pos is None:
            msg = f"{self.kind} header lacks file or pos"
            raise RawEventError(msg)
        return self.file, self.pos

    @property
    def ts_ms(self) -> int:
        """``ts`` in epoch milliseconds: ``decode`` requires it of every rows and ddl header (likewise)."""
        if self.ts is None:
            msg = f"{self.kind} header at {self.where} lacks ts"
            raise RawEventError(msg)
        return self.ts * 1000


_ABSENT = object()
_FIELDS = tuple(f.name for f in fields(RawHeader) if f.name not in ("extra", "read_order"))
_FIELD_SET = frozenset(_FIELDS)
_ABSENT_MEMBERS = dict.fromkeys(_FIELDS)


@dataclass(frozen=True)
class RawEvent:
    """One first-level record, decoded as far as the envelope (rows stay undecoded in ``body``).

    A ``header`` given as a dict (tests build them so) is taken as ``RawHeader.from_dict`` of it."""

    header: RawHeader
    body: bytes = b""
    key: str = field(default="")

    def __post_init__(self) -> None:
        if type(self.header) is not RawHeader and isinstance(self.header, Mapping):
            object.__setattr__(self, "header", RawHeader.from_dict(self.header))

    @property
    def kind(self) -> str:
        return self.header.kind

    @property
    def chunk(self) -> tuple[int, int] | None:
        c = self.header.chunk
        return (int(c[0]), int(c[1])) if c else None

    def table_map_bytes(self) -> bytes:
        return self.body[: self.header.tm_len]

    def rows_event_bytes(self) -> bytes:
        return self.body[self.header.tm_len :]


def encode(event: RawEvent) -> bytes:
    """The record value of ``event``."""
    header = json.dumps(event.header.to_dict(), separators=(",", ":"), ensure_ascii=False).encode()
    return _PREFIX.pack(MAGIC, VERSION, len(header)) + header + event.body


def decode(value: bytes, key: bytes | str | None = None) -> RawEvent:
    """Parse a record value; RawEventError names what is wrong (never returns a half-parsed event).

    Any input gives an event or RawEventError: a null value (a Kafka tombstone), a key that is not
    UTF-8 and a header that is JSON but not of this contract are bad records like the others."""
    if value is None:
        msg = "record has a null value (a tombstone): not a DBus raw event"
        raise RawEventError(msg)
    if not isinstance(value, (bytes, bytearray, memoryview)):
        msg = f"record value is a {type(value).__name__}, not bytes"
        raise RawEventError(msg)
    if len(value) < _PREFIX.size:
        msg = f"record of {len(value)} bytes is shorter than the {_PREFIX.size}-byte prefix"
        raise RawEventError(msg)
    magic, version, hlen = _PREFIX.unpack_from(value)
    if magic != MAGIC:
        msg = f"bad magic {magic!r}: not a DBus raw event"
        raise RawEventError(msg)
    if version != VERSION:
        msg = f"raw event version {version} is not supported (this build reads version {VERSION})"
        raise RawEventError(msg)
    end = _PREFIX.size + hlen
    if len(value) < end:
        msg = f"header says {hlen} bytes but only {len(value) - _PREFIX.size} follow: truncated record"
        raise RawEventError(msg)
    try:
        header = json.loads(value[_PREFIX.size : end])
    except (ValueError, RecursionError) as e:  # not UTF-8, not JSON, a number past the digit limit, too deep
        msg = f"header is not JSON: {e}"
        raise RawEventError(msg) from None
    _check_header(header, len(value) - end)
    if isinstance(key, (bytes, bytearray, memoryview)):
        try:
            k = bytes(key).decode()
        except UnicodeDecodeError:
            msg = f"record key {bytes(key)[:80]!r} is not UTF-8"
            raise RawEventError(msg) from None
    else:
        k = key or ""
    return RawEvent(header=RawHeader.from_dict(header), body=bytes(value[end:]), key=k)


_REQUIRED = {
    "rows": ("file", "pos", "next_pos", "ts", "schema", "table", "event_type", "crc", "tm_len"),
    "ddl": ("file", "pos", "next_pos", "ts", "schema", "sql"),
}


# Types of the header members a stage reads (bool is no int here, though Python says it is).
_TYPES: dict[str, tuple[type, ...]] = {
    "file": (str,),
    "pos": (int,),
    "next_pos": (int,),
    "ts": (int,),
    "schema": (str,),
    "event_type": (int,),
    "crc": (bool,),
    "tm_len": (int,),
    "sql": (str,),
    "table": (str, type(None)),
    "ddl": (str, type(None)),
    "gtid": (str, type(None)),
}


def _is(value: Any, kinds: tuple[type, ...]) -> bool:
    return isinstance(value, kinds) and (bool in kinds or not isinstance(value, bool))


def _check_header(header: Any, body_len: int) -> None:
    if not isinstance(header, dict) or header.get("kind") not in _REQUIRED:
        msg = f"header kind must be one of {sorted(_REQUIRED)}, got {header!r:.200}"
        raise RawEventError(msg)
    missing = [k for k in _REQUIRED[header["kind"]] if k not in header]
    if missing:
        msg = f"{header['kind']} header lacks {', '.join(missing)}"
        raise RawEventError(msg)
    for name, kinds in _TYPES.items():
        if name in header and not _is(header[name], kinds):
            msg = f"{header['kind']} header: {name} {header[name]!r:.80} is not {kinds[0].__name__}"
            raise RawEventError(msg)
    chunk = header.get("chunk")
    if chunk is not None and not (
        isinstance(chunk, list)
        and len(chunk) == 2
        and all(_is(c, (int,)) for c in chunk)
        and 0 <= chunk[0] < chunk[1]
    ):
        msg = f"{header['kind']} header: chunk {chunk!r:.80} is not [i, n] with 0 <= i < n"
        raise RawEventError(msg)
    if header["kind"] == "rows" and "chunk" not in header and not 0 < header["tm_len"] < body_len:
        msg = (
            f"rows body of {body_len} bytes cannot hold a {header['tm_len']}-byte table map and a rows event"
        )
        raise RawEventError(msg)


def split(event: RawEvent, max_bytes: int) -> list[RawEvent]:
    """``event`` itself when its value fits ``max_bytes``, else ordered chunks that each fit."""
    overhead = len(encode(replace(event, body=b""))) + 32  # room for the "chunk" member
    if overhead + len(event.body) <= max_bytes:
        return [event]
    step = max_bytes - overhead
    if step <= 0:
        msg = f"max_bytes {max_bytes} leaves no room for a body after a {overhead}-byte header"
        raise RawEventError(msg)
    parts = [event.body[i : i + step] for i in range(0, len(event.body), step)]
    return [
        replace(event, header=replace(event.header, chunk=(i, len(parts))), body=p)
        for i, p in enumerate(parts)
    ]


class Reassembler:
    """Turns a stream of records of one partition back into whole events (chunks joined).

    ``push`` returns the whole event when one is complete, else None. A chunk 0 restarts assembly (a
    replay); a chunk out of sequence raises RawEventError naming the position.
    """

    def __init__(self) -> None:
        self._parts: dict[str, list[RawEvent]] = {}

    def pending(self, key: str) -> int:
        """How many chunks of an unfinished event of ``key`` are held."""
        return len(self._parts.get(key, ()))

    def push(self, event: RawEvent) -> RawEvent | None:
        if event.chunk is None:
            return event
        index, count = event.chunk
        pending = self._parts.setdefault(event.key, [])
        if index == 0:
            pending.clear()
        elif len(pending) != index:
            arrived = f"chunk {index} of {count} arrived after {len(pending)} chunk(s)"
            msg = f"{event.key} at {event.header.where}: {arrived}"
            pending.clear()
            raise RawEventError(msg)
        pending.append(event)
        if index + 1 < count:
            return None
        body = b"".join(p.body for p in pending)
        pending.clear()
        return RawEvent(header=event.header.without_chunk(), body=body, key=event.key)
