"""Shipper record adapters (pure): one Kafka record of a log source's raw topic -> its lines, host, event time
and heartbeat, or a record error (docs/logs.md, Shipper records; spec §1.2, §1.3, §6.1, §6.2).

This is the reference: the log processor runs the same adapters in the JVM (``dbus.jvm.LogAdapter``), and
tests/unit/test_record_jvm.py checks that both agree record for record (through tests/unit/log_oracle.py). A
record never raises: what cannot be read is a ``RecordError`` with a stable code naming the record's partition
and offset, for the dead-letter topic (the original replayed such a record forever, §1.4).

    >>> settings = AdapterSettings("log_rsyslog")
    >>> value = (b'{"host":"app-01.prod","path":"/var/log/a.log",'
    ...          b'"timestamp":"2024-03-05T02:15:30.123Z","message":"hi"}')
    >>> adapted = adapt(KafkaRecord(value, b"/var/log/a.log", 0, 4711, 1709604931000), settings)
    >>> adapted.lines == (value.decode(),), adapted.host, adapted.event_ms, adapted.heartbeat
    (True, 'app-01_prod', 1709604930123, False)

Per type (``log_type``), what a record gives (lines; host; event time; heartbeat when):

- ``log_rsyslog``: lines: the record; host: ``host``; event time: ``timestamp``; a heartbeat when
  ``message`` is a JSON object whose ``type`` is the heartbeat type and ``path`` is the source's heartbeat
  file (``heartbeat_files``): the same line in any other file is an ordinary line.
- ``log_logstash``, ``log_logstash_json``: the record; ``host``; ``@timestamp``; ``type`` equals the
  heartbeat type.
- ``log_filebeat``: the record flattened one level; ``beat.hostname`` (else ``host.name``); ``@timestamp``;
  ``type`` contains it (time: ``@timestamp`` of the JSON in ``message``).
- ``log_flume``: the record with ``"timestamp":<key>`` first; ``host``; the key, epoch ms; ``type``
  contains it.
- ``log_json``: the record; the source's ``host``; the Kafka timestamp; ``type`` contains it.
- ``log_ums``: one per tuple, ``{field: value, ..., "namespace": ns}``; ``ds_schema_table_partition`` of
  the namespace; the first tuple's ``ums_ts_``; the key holds ``data_increment_heartbeat``.

Times: RFC 3339 (``2024-03-05T02:15:30.123Z``, ``...+08:00``), or without a zone (``2024-03-05 10:15:30.123``)
in the source's ``ums.timezone``; 1 to 9 fraction digits, milliseconds kept. A missing or unreadable time is
the record's Kafka timestamp (``kafka_time`` says so), never -1 (the original's). A heartbeat's own time is
its ``@timestamp`` (for rsyslog and filebeat that of the heartbeat JSON in ``message``), else the event time.
A heartbeat record has no lines.
"""

from __future__ import annotations

import json
import os
import re
import socket
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import lru_cache
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from dbuslib.config import LogSource
from dbuslib.errors import ConfigError
from logprocessor.sparkjson import (
    JSON_WHITESPACE,
    JsonObject,
    JsonValue,
    exact_text,
    quote,
    read_object,
    render_exact,
    text_of,
)
from ums.timefmt import epoch_ms

LOG_TYPES = (
    "log_rsyslog",
    "log_logstash",
    "log_logstash_json",
    "log_filebeat",
    "log_flume",
    "log_json",
    "log_ums",
)
DEFAULT_HEARTBEAT_TYPE = "dbus-heartbeat"
DEFAULT_MAX_RECORD_BYTES = 1_000_000
UMS_HEARTBEAT_MARK = "data_increment_heartbeat"

TOO_LARGE = "LOG_RECORD_TOO_LARGE"
NOT_UTF8 = "LOG_RECORD_NOT_UTF8"
NOT_JSON = "LOG_RECORD_NOT_JSON"
NO_MESSAGE = "LOG_RECORD_NO_MESSAGE"
NO_HOST = "LOG_RECORD_NO_HOST"
BAD_UMS = "LOG_RECORD_BAD_UMS"
BAD_HEARTBEAT = "LOG_RECORD_BAD_HEARTBEAT"

MAX_OFFSET_MINUTES = 18 * 60  # a zone offset beyond +-18:00 is no offset (java.time's ZoneOffset)
MAX_EVENT_MS = 253_370_764_799_999  # 9998-12-31T23:59:59.999Z: every zone can still write it as a date
TIME_PATTERN = (
    r"([0-9]{4})-([0-9]{2})-([0-9]{2})[T ]([01][0-9]|2[0-3]):([0-5][0-9]):([0-5][0-9])"
    r"(?:[.,]([0-9]{1,9}))?(Z|z|[+-](?:[01][0-9]|2[0-3]):?[0-5][0-9])?"
)
_TIME = re.compile(TIME_PATTERN)
KEY_MS_PATTERN = r"[0-9]{1,15}"
_KEY_MS = re.compile(KEY_MS_PATTERN)


@dataclass(frozen=True)
class AdapterSettings:
    """What the adapters need of a log source (``of(source)``): its type, the heartbeat type, the record size
    limit (``processor.max_line_bytes``), the host of log_json records, and the zone of times without one."""

    log_type: str
    heartbeat_type: str = DEFAULT_HEARTBEAT_TYPE
    max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES
    json_host: str | None = None
    timezone: str = "UTC"
    # log_rsyslog: the ``path`` a heartbeat record must come from (``heartbeat_files``); None: any path
    heartbeat_files: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        if self.log_type not in LOG_TYPES:
            msg = f"log type {self.log_type!r} is none of {', '.join(LOG_TYPES)}"
            raise ValueError(msg)
        _zone(self.timezone)  # an unknown zone fails here, not per record

    @classmethod
    def of(cls, source: LogSource, base: Path | None = None) -> AdapterSettings:
        """The settings of ``source``; ``base``, the configuration file's folder, places a relative
        ``heartbeat.file`` (``heartbeat_files``)."""
        return cls(
            source.type,
            source.processor.heartbeat_type,
            source.processor.max_line_bytes,
            source.host,
            source.ums.timezone,
            heartbeat_files(source, base),
        )


def heartbeat_files(source: LogSource, base: Path | None) -> tuple[str, ...] | None:
    """The paths a log_rsyslog record must name to be a heartbeat: the source's ``heartbeat.file`` as the
    shipper names it (absolute against ``base``, ``..`` folded, as ``logprocessor.shipper.globs`` makes the
    watched files; and with links resolved), so a heartbeat-shaped line of any other file is an ordinary
    line. () when the source has no heartbeat file: no record is a heartbeat. None (any path) only when the
    file is relative and ``base`` unknown."""
    file = source.heartbeat.file
    if file is None:
        return ()
    if not file.is_absolute():
        if base is None:
            return None
        file = base / file
    named = os.path.normpath(file)
    return tuple(dict.fromkeys((named, str(Path(named).resolve()))))


@dataclass(frozen=True)
class KafkaRecord:
    """One record of the raw topic: ``timestamp_ms`` is its Kafka timestamp (epoch ms)."""

    value: bytes | None
    key: bytes | None
    partition: int
    offset: int
    timestamp_ms: int


@dataclass(frozen=True)
class Adapted:
    """A record's initial lines (each the row ``[line]``), its host as a namespace segment (dots -> ``_``),
    its
    event time (epoch ms; ``kafka_time``: the record's Kafka timestamp), and whether it is a heartbeat
    (then no lines, and ``heartbeat_ms`` its time)."""

    lines: tuple[str, ...]
    host: str
    event_ms: int
    kafka_time: bool
    heartbeat: bool = False
    heartbeat_ms: int | None = None


@dataclass(frozen=True)
class RecordError:
    """A record the adapter cannot read: ``code`` (docs/logs.md), ``message`` naming partition and offset."""

    code: str
    message: str
    partition: int
    offset: int


def adapt(record: KafkaRecord, settings: AdapterSettings) -> Adapted | RecordError:
    """The adapter of ``settings.log_type`` applied to ``record``; never raises on a record's content."""
    fail = _failer(record)
    value = record.value
    size = 0 if value is None else len(value)
    if size > settings.max_record_bytes:
        return fail(TOO_LARGE, f"{size} bytes, over processor.max_line_bytes ({settings.max_record_bytes})")
    kafka_ms = clamp_ms(record.timestamp_ms)
    if settings.log_type == "log_ums":
        key = utf8(record.key)
        if key is not None and UMS_HEARTBEAT_MARK in key:
            return _ums_heartbeat(key, fail)
    if not value:
        return fail(NOT_JSON, "no value (null or empty)")
    text = utf8(value)
    if text is None:
        return fail(NOT_UTF8, "not UTF-8")
    obj = read_object(text)
    if obj is None:
        return fail(NOT_JSON, "not a JSON object")
    return _BY_TYPE[settings.log_type](obj, text, record, settings, kafka_ms, fail)


def parse_time(text: str | None, timezone: str) -> int | None:
    """Epoch ms of an RFC 3339 time, or of one without a zone in ``timezone``; None when unreadable or
    outside 1970-01-01 .. 9998-12-31 (UTC)."""
    match = _TIME.fullmatch(text) if text is not None else None
    if match is None:
        return None
    year, month, day, hour, minute, second = (int(g) for g in match.groups()[:6])
    fraction, zone = match.group(7), match.group(8)
    try:
        moment = datetime(year, month, day, hour, minute, second, tzinfo=UTC if zone else _zone(timezone))
    except ValueError:
        return None
    offset = offset_minutes(zone)
    if abs(offset) > MAX_OFFSET_MINUTES:  # java.time's bound, which Spark's parser keeps
        return None
    ms = epoch_ms(moment) + int((fraction or "")[:3].ljust(3, "0")) - 60_000 * offset
    return ms if 0 <= ms <= MAX_EVENT_MS else None


def offset_minutes(zone: str | None) -> int:
    """``+08:00`` -> 480, ``-0130`` -> -90, ``Z`` or none -> 0."""
    if not zone or zone in "Zz":
        return 0
    digits = zone[1:].replace(":", "")
    minutes = int(digits[:2]) * 60 + int(digits[2:])
    return -minutes if zone[0] == "-" else minutes


def clamp_ms(ms: int) -> int:
    """A Kafka timestamp kept within 0 .. MAX_EVENT_MS (a record without one has -1)."""
    return min(max(ms, 0), MAX_EVENT_MS)


def utf8(data: bytes | None) -> str | None:
    try:
        return None if data is None else data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def host_segment(host: str) -> str:
    """A host as the namespace's host segment: ``app-01.prod`` -> ``app-01_prod``."""
    return host.replace(".", "_")


def flatten_once(obj: JsonObject) -> list[tuple[str, JsonValue]]:
    """log_filebeat: each top-level object's pairs become ``parent.key`` pairs, in input order; deeper
    objects stay objects; an empty object leaves nothing."""
    entries: list[tuple[str, JsonValue]] = []
    for key, value in obj.pairs:
        if isinstance(value, JsonObject):
            entries.extend((f"{key}.{inner}", item) for inner, item in value.pairs)
        else:
            entries.append((key, value))
    return entries


# ---------------------------------------------------------------- the types

Fail = Callable[[str, str], RecordError]


def _failer(record: KafkaRecord) -> Fail:
    def fail(code: str, what: str) -> RecordError:
        where = f"record at partition {record.partition}, offset {record.offset}"
        return RecordError(code, f"{where}: {what}", record.partition, record.offset)

    return fail


def _contains(text: str | None, part: str) -> bool:
    return text is not None and part in text


def _time(text: str | None, settings: AdapterSettings, kafka_ms: int) -> tuple[int, bool]:
    ms = parse_time(text, settings.timezone)
    return (kafka_ms, True) if ms is None else (ms, False)


def _rsyslog(obj: JsonObject, text: str, rec: KafkaRecord, s: AdapterSettings, kafka_ms: int, fail: Fail):
    message = text_of(obj.get("message"))
    if message is None:
        return fail(NO_MESSAGE, 'no "message"')
    host = text_of(obj.get("host"))
    if not host:
        return fail(NO_HOST, 'no "host"')
    event, kafka = _time(text_of(obj.get("timestamp")), s, kafka_ms)
    beat = read_object(message) if s.heartbeat_type in message else None
    from_file = s.heartbeat_files is None or text_of(obj.get("path")) in s.heartbeat_files
    if beat is not None and text_of(beat.get("type")) == s.heartbeat_type and from_file:
        own = parse_time(text_of(beat.get("@timestamp")), s.timezone)
        return Adapted((), host_segment(host), event, kafka, True, event if own is None else own)
    return Adapted((text,), host_segment(host), event, kafka)


def _logstash(obj: JsonObject, text: str, rec: KafkaRecord, s: AdapterSettings, kafka_ms: int, fail: Fail):
    host = text_of(obj.get("host"))
    if not host:
        return fail(NO_HOST, 'no "host"')
    event, kafka = _time(text_of(obj.get("@timestamp")), s, kafka_ms)
    if text_of(obj.get("type")) == s.heartbeat_type:
        return Adapted((), host_segment(host), event, kafka, True, event)
    return Adapted((text,), host_segment(host), event, kafka)


def _filebeat(obj: JsonObject, text: str, rec: KafkaRecord, s: AdapterSettings, kafka_ms: int, fail: Fail):
    entries = flatten_once(obj)
    found = {key: exact_text(value) for key, value in entries}  # the last of a key wins, as a reader takes it
    host = found.get("beat.hostname") or found.get("host.name")
    if not host:
        return fail(NO_HOST, 'no "beat.hostname" (nor "host.name")')
    event, kafka = _time(found.get("@timestamp"), s, kafka_ms)
    if _contains(found.get("type"), s.heartbeat_type):
        message = found.get("message")
        beat = read_object(message) if message is not None else None
        own = parse_time(text_of(beat.get("@timestamp")), s.timezone) if beat is not None else None
        return Adapted((), host_segment(host), event, kafka, True, event if own is None else own)
    line = "{" + ",".join(f"{quote(key)}:{render_exact(value)}" for key, value in entries) + "}"
    return Adapted((line,), host_segment(host), event, kafka)


def _flume(obj: JsonObject, text: str, rec: KafkaRecord, s: AdapterSettings, kafka_ms: int, fail: Fail):
    host = text_of(obj.get("host"))
    if not host:
        return fail(NO_HOST, 'no "host"')
    key = utf8(rec.key)
    key_ms = int(key) if key is not None and _KEY_MS.fullmatch(key) else None
    event, kafka = (kafka_ms, True) if key_ms is None or key_ms > MAX_EVENT_MS else (key_ms, False)
    if _contains(text_of(obj.get("type")), s.heartbeat_type):
        own = parse_time(text_of(obj.get("@timestamp")), s.timezone)
        return Adapted((), host_segment(host), event, kafka, True, event if own is None else own)
    line = text
    if key is not None:
        rest = text.lstrip(JSON_WHITESPACE)[1:]
        line = '{"timestamp":' + quote(key) + "," + rest  # the record has a host: it is not empty
    return Adapted((line,), host_segment(host), event, kafka)


def _json(obj: JsonObject, text: str, rec: KafkaRecord, s: AdapterSettings, kafka_ms: int, fail: Fail):
    if not s.json_host:
        return fail(NO_HOST, "no host: a log_json source needs its host in the configuration")
    if _contains(text_of(obj.get("type")), s.heartbeat_type):
        own = parse_time(text_of(obj.get("@timestamp")), s.timezone)
        return Adapted((), host_segment(s.json_host), kafka_ms, True, True, kafka_ms if own is None else own)
    return Adapted((text,), host_segment(s.json_host), kafka_ms, True)


def _ums(obj: JsonObject, text: str, rec: KafkaRecord, s: AdapterSettings, kafka_ms: int, fail: Fail):
    schema = obj.get("schema")
    schema = schema if isinstance(schema, JsonObject) else JsonObject(())
    namespace = schema.get("namespace")
    if not isinstance(namespace, str) or len(namespace.split(".")) != 7:
        return fail(BAD_UMS, "not a UMS message: schema.namespace is not a 7-part string")
    names = _names(schema.get("fields"))
    if names is None:
        return fail(BAD_UMS, "not a UMS message: schema.fields is not a list of fields with a name")
    tuples = _tuples(obj.get("payload"))
    if tuples is None:
        return fail(BAD_UMS, "not a UMS message: payload is not a list of tuples")
    if any(len(values) != len(names) for values in tuples):
        return fail(BAD_UMS, "not a UMS message: a tuple's length differs from the fields'")
    namespace = exact_text(namespace) or ""  # an unpaired surrogate as "?", as Spark reads it
    parts = namespace.split(".")
    host = "_".join((parts[1], parts[2], parts[3], parts[5]))
    lines = tuple(_ums_line(names, values, namespace) for values in tuples)
    first_ts = tuples[0][names.index("ums_ts_")] if tuples and "ums_ts_" in names else None
    event, kafka = _time(first_ts if isinstance(first_ts, str) else None, s, kafka_ms)
    return Adapted(lines, host_segment(host), event, kafka)


def _names(fields: JsonValue) -> list[str] | None:
    if not isinstance(fields, list):
        return None
    names = [f.get("name") if isinstance(f, JsonObject) else None for f in fields]
    return [n for n in names if isinstance(n, str)] if all(isinstance(n, str) for n in names) else None


def _tuples(payload: JsonValue) -> list[list[JsonValue]] | None:
    if not isinstance(payload, list):
        return None
    tuples = [p.get("tuple") if isinstance(p, JsonObject) else None for p in payload]
    return [t for t in tuples if isinstance(t, list)] if all(isinstance(t, list) for t in tuples) else None


def _ums_line(names: list[str], values: list[JsonValue], namespace: str) -> str:
    """``{field: value, ..., "namespace": ns}``; a field named ``namespace`` gives way to the namespace."""
    items = [f"{quote(n)}:{render_exact(v)}" for n, v in zip(names, values, strict=True) if n != "namespace"]
    return "{" + ",".join([*items, f'"namespace":{quote(namespace)}']) + "}"


def _ums_heartbeat(key: str, fail: Fail) -> Adapted | RecordError:
    """``data_increment_heartbeat.<7-part namespace>.<time>|<txTime>|...wh_placeholder``: host
    ``ds_schema_table_partition``, time txTime (spec §6.2)."""
    parts = key.split(".")
    times = parts[8].split("|") if len(parts) == 10 else []
    if len(times) < 2 or not _KEY_MS.fullmatch(times[1]) or int(times[1]) > MAX_EVENT_MS:
        shape = "data_increment_heartbeat.<namespace>.<time>|<txTime>|...wh_placeholder"
        return fail(BAD_HEARTBEAT, f"a heartbeat key not of the form {shape}")
    ms = int(times[1])
    host = "_".join((parts[2], parts[3], parts[4], parts[6]))
    return Adapted((), host_segment(host), ms, False, True, ms)


_BY_TYPE: dict[str, Callable[..., Adapted | RecordError]] = {
    "log_rsyslog": _rsyslog,
    "log_logstash": _logstash,
    "log_logstash_json": _logstash,
    "log_filebeat": _filebeat,
    "log_flume": _flume,
    "log_json": _json,
    "log_ums": _ums,
}


@lru_cache(maxsize=64)
def _zone(name: str) -> ZoneInfo:
    return ZoneInfo(name)


SAMPLE_HOST = "sample-host"  # the host of log_json records tested with --type log_json


def as_record(log_type: str, text: str, path: str) -> str:
    """A plain text line as a record of ``log_type`` whose message it is (the inverse of ``adapt``: ``dbus
    logrules test --raw``, the console's pasted lines), stamped now, from this
    machine: rsyslog's ``{host, path, timestamp, message}``, a logstash event, a filebeat event, the
    original's flume wrapping (``{"message":..,"type":"dbus_log","host":..}``), or ``{"message":..}``."""
    now = datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    host = socket.gethostname()
    records: dict[str, dict[str, Any]] = {
        "log_rsyslog": {"host": host, "path": path, "timestamp": now, "message": text},
        "log_logstash": {"@timestamp": now, "@version": "1", "host": host, "path": path, "message": text},
        "log_filebeat": {"@timestamp": now, "beat": {"hostname": host}, "source": path, "message": text},
        "log_flume": {"message": text, "type": "dbus_log", "host": host},
        "log_json": {"message": text},
    }
    records["log_logstash_json"] = records["log_logstash"]
    if log_type not in records:
        msg = f"--raw: a {log_type} record is a UMS message, not a text line; give whole records instead"
        raise ConfigError(msg)
    return json.dumps(records[log_type], ensure_ascii=False)
