"""Dead letters counted: the heartbeat monitor reads the source's dead-letter topic (``<ds>.dlq``) and
writes one ``dbus_dead_letter`` point per (stage, code, schema, table) and check, opens one incident per
(stage, code) and clears it after a quiet period.

The pure core: ``parse`` turns any DLQ record (bytes, null, anything) into a ``Letter`` and never raises;
``fold`` counts letters by (stage, code, schema, table) keeping the newest; ``points`` makes the time-series
points; ``evaluate`` decides the incidents. ``DlqReader`` is the Kafka edge.

A DLQ record is the JSON of ``dbuslib.deadletter.DeadLetter`` (``code``, ``stage``, ``topic``,
``partition``, ``offset``, ``key``, ...). The dispatcher's older shape says ``reason`` instead of ``code``
and has no ``stage``: it counts as stage ``dispatcher``. A record that is not a JSON object with a string
``code`` (or ``reason``) counts as stage ``unknown`` (or its own ``stage``), code ``DLQ_UNREADABLE``, at the
DLQ record's own coordinates. Stage and code are kept to ``[A-Za-z0-9_-]`` (64 characters; others become
``_``): they name ZooKeeper nodes and tags. The table comes from the letter's ``key`` (or the record's Kafka
key) when it reads ``<schema>.<table>``, except for the log processor's letters, whose key is the shipper
record's (a file path): they have no table.

One point, by example (line protocol)::

    dbus_dead_letter,ds=demo,stage=appender,code=RAW_UNDECODABLE,schema=shop,table=orders count=3i,
        topic="demo.shop",partition=0i,offset=42i,dlq_partition=0i,dlq_offset=17i,newest_ms=1714557598766i

``topic``/``partition``/``offset``: the newest letter's original record ("" / -1 when the letter does not
say); ``dlq_partition``/``dlq_offset``: where that letter is in ``<ds>.dlq``; ``newest_ms``: its Kafka
timestamp (when the stage wrote it). The point is timed at the check that read the letters.
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from influxdb_client import Point

from heartbeat.incidents import Alert, Notification, alert_key

log = logging.getLogger(__name__)
MEASUREMENT = "dbus_dead_letter"
KIND = "dead_letter"
UNREADABLE = "DLQ_UNREADABLE"
UNKNOWN_STAGE = "unknown"
MAX_PER_CHECK = 50_000  # letters read in one check at most; the rest at the next one
_NAME = re.compile(r"[^A-Za-z0-9_-]")
_TABLE_KEY = re.compile(r"([^\x00-\x20.]{1,64})\.([^\x00-\x20]{1,64})")
_INT64 = 2**63
# stages whose letters' key is the original record's (the log processor's: a shipper's key, a file path
# such as /srv/app/a.log), never a table: no schema or table is read from it
KEYED_BY_RECORD = frozenset({"logprocessor"})


@dataclass(frozen=True)
class Letter:
    """One DLQ record as counted. ``topic``/``partition``/``offset``: the original record ("" / -1 when
    unknown); ``dlq_partition``/``dlq_offset``/``at_ms``: the DLQ record itself."""

    stage: str
    code: str
    schema: str | None
    table: str | None
    topic: str
    partition: int
    offset: int
    dlq_partition: int
    dlq_offset: int
    at_ms: int

    @property
    def origin(self) -> str:
        return f"{self.schema}.{self.table}" if self.schema is not None else ""

    def coordinates(self, dlq_topic: str) -> str:
        """``demo.shop partition 0 offset 42 (shop.orders), in demo.dlq partition 0 offset 17``."""
        where = (
            f"{self.topic} partition {self.partition} offset {self.offset}"
            if self.topic
            else "original record unknown"
        )
        table = f" ({self.origin})" if self.origin else ""
        return f"{where}{table}, in {dlq_topic} partition {self.dlq_partition} offset {self.dlq_offset}"


def _name(v: Any, default: str) -> str:
    if not isinstance(v, str) or not v:
        return default
    return _NAME.sub("_", v)[:64]


def _int(v: Any) -> int:
    return v if isinstance(v, int) and not isinstance(v, bool) and -_INT64 <= v < _INT64 else -1


def _table(key: Any) -> tuple[str | None, str | None]:
    if isinstance(key, bytes):
        key = key.decode("utf-8", "replace")
    m = _TABLE_KEY.fullmatch(key) if isinstance(key, str) else None
    return (m.group(1), m.group(2)) if m else (None, None)


def _doc(value: bytes | None) -> dict[str, Any] | None:
    if value is None:
        return None
    try:
        doc = json.loads(value)
    except (ValueError, RecursionError):  # not UTF-8 or JSON, a number over 4300 digits, deep nesting
        return None
    return doc if isinstance(doc, dict) else None


def parse(
    value: bytes | None,
    key: bytes | None = None,
    *,
    dlq_partition: int = -1,
    dlq_offset: int = -1,
    at_ms: int = 0,
) -> Letter:
    """The letter a DLQ record holds (see the module docstring); never raises."""
    doc = _doc(value)
    code = doc.get("code", doc.get("reason")) if doc is not None else None
    if doc is None or not isinstance(code, str) or not code:
        stage = _name(doc.get("stage"), UNKNOWN_STAGE) if doc is not None else UNKNOWN_STAGE
        schema, table = _table(key)
        return Letter(stage, UNREADABLE, schema, table, "", -1, -1, dlq_partition, dlq_offset, at_ms)
    default_stage = "dispatcher" if "reason" in doc and "code" not in doc else UNKNOWN_STAGE
    stage = _name(doc.get("stage"), default_stage)
    schema, table = _table(doc.get("key"))
    if schema is None:
        schema, table = _table(key)
    if stage in KEYED_BY_RECORD:
        schema, table = None, None
    topic = doc.get("topic")
    return Letter(
        stage,
        _name(code, UNREADABLE),
        schema,
        table,
        topic if isinstance(topic, str) else "",
        _int(doc.get("partition")),
        _int(doc.get("offset")),
        dlq_partition,
        dlq_offset,
        at_ms,
    )


@dataclass(frozen=True)
class Tally:
    """The letters of one (stage, code, schema, table) read in one check: how many, and the newest."""

    count: int
    newest: Letter


def _newer(a: Letter, b: Letter) -> bool:
    return (a.at_ms, a.dlq_offset, a.dlq_partition) > (b.at_ms, b.dlq_offset, b.dlq_partition)


def fold(letters: Iterable[Letter]) -> dict[tuple[str, str, str | None, str | None], Tally]:
    """Letters -> ``{(stage, code, schema, table): Tally}``."""
    out: dict[tuple[str, str, str | None, str | None], Tally] = {}
    for letter in letters:
        k = (letter.stage, letter.code, letter.schema, letter.table)
        t = out.get(k)
        if t is None:
            out[k] = Tally(1, letter)
        else:
            out[k] = Tally(t.count + 1, letter if _newer(letter, t.newest) else t.newest)
    return out


def by_stage_code(tallies: Mapping[tuple, Tally]) -> dict[tuple[str, str], Tally]:
    """The tallies summed over tables: ``{(stage, code): Tally}``."""
    out: dict[tuple[str, str], Tally] = {}
    for (stage, code, _, _), t in tallies.items():
        prev = out.get((stage, code))
        if prev is None:
            out[(stage, code)] = t
        else:
            newest = t.newest if _newer(t.newest, prev.newest) else prev.newest
            out[(stage, code)] = Tally(prev.count + t.count, newest)
    return out


def points(ds: str, tallies: Mapping[tuple, Tally], at_ms: int) -> list[Point]:
    """One ``dbus_dead_letter`` point per tally, timed ``at_ms`` (see the module docstring)."""
    out = []
    for (stage, code, schema, table), t in sorted(tallies.items(), key=lambda kv: repr(kv[0])):
        n = t.newest
        p = Point(MEASUREMENT).tag("ds", ds).tag("stage", stage).tag("code", code)
        if schema is not None:
            p = p.tag("schema", schema).tag("table", table)
        out.append(
            p.field("count", t.count)
            .field("topic", n.topic)
            .field("partition", n.partition)
            .field("offset", n.offset)
            .field("dlq_partition", n.dlq_partition)
            .field("dlq_offset", n.dlq_offset)
            .field("newest_ms", n.at_ms)
            .time(at_ms * 1_000_000)
        )
    return out


# ----------------------------------------------------------------------------------------- incidents


@dataclass(frozen=True)
class Rules:
    """``threshold``: an incident opens when more letters than this of one (stage, code) are read in one
    check; ``quiet_s``: it clears when none came for this long; ``interval_s``: the check interval."""

    threshold: int
    quiet_s: float
    interval_s: float


def _coords(alert: Alert, n: Letter) -> Alert:
    return replace(alert, topic=n.topic, partition=n.partition, offset=n.offset, origin=n.origin or None)


def _opened(ds: str, stage: str, code: str, t: Tally, now_ms: int, rules: Rules, dlq_topic: str) -> Alert:
    msg = (
        f"{ds}: {t.count} dead letter(s) {code} from the {stage} in the last {rules.interval_s:g} s "
        f"(threshold {rules.threshold}); newest: {t.newest.coordinates(dlq_topic)}"
    )
    a = Alert(
        ds=ds,
        schema=stage,
        table=code,
        kind=KIND,
        since_ms=now_ms,
        notified_ms=None,
        age_s=None,
        latency_s=None,
        message=msg,
        count=t.count,
        last_ms=now_ms,
    )
    return _coords(a, t.newest)


def evaluate(
    ds: str,
    alerts: Mapping[str, Alert],
    tallies: Mapping[tuple, Tally],
    now_ms: int,
    rules: Rules,
    dlq_topic: str,
) -> tuple[list[Alert], list[Notification]]:
    """Open dead-letter incidents (``alerts``, other kinds are ignored) and this check's tallies -> the open
    incidents that got more letters (updated: count, ``last_ms``, newest coordinates) and the notices: an
    "alert" per (stage, code) whose letters in this check exceed the threshold, a "recovery" per incident
    with no letter for ``quiet_s``."""
    updated, notes = [], []
    sums = by_stage_code(tallies)
    for (stage, code), t in sorted(sums.items()):
        key = alert_key(stage, code, KIND)
        open_ = alerts.get(key)
        if open_ is not None and open_.kind == KIND:
            more = replace(open_, count=(open_.count or 0) + t.count, last_ms=now_ms)
            updated.append(_coords(more, t.newest))
        elif t.count > rules.threshold:
            notes.append(Notification("alert", _opened(ds, stage, code, t, now_ms, rules, dlq_topic), now_ms))
    for _, a in sorted(alerts.items()):
        if a.kind != KIND or (a.schema, a.table) in sums:
            continue
        last = a.last_ms if a.last_ms is not None else a.since_ms
        if now_ms - last >= rules.quiet_s * 1000:
            msg = (
                f"{ds}: no {a.table} dead letter from the {a.schema} for {(now_ms - last) / 1000:.0f} s "
                f"({a.count or 0} since the incident opened)"
            )
            notes.append(Notification("recovery", replace(a, message=msg), now_ms))
    return updated, notes


# ------------------------------------------------------------------------------------------ Kafka edge


def settings_of(cfg: Any, ds: str) -> Any:
    """The monitor's settings (``dbuslib.config.MonitorSettings``) of a database source or a log source;
    ConfigError for a name that is neither."""
    if ds in cfg.log_sources:
        return cfg.log_sources[ds].heartbeat
    return cfg.source(ds).heartbeat


def dead_letter_topic(cfg: Any, ds: str) -> str:
    """The dead-letter topic of a database source or a log source (``topics.dead_letter``, ``<ds>.dlq``)."""
    src = cfg.log_sources[ds] if ds in cfg.log_sources else cfg.source(ds)
    return str(src.topics.name("dead_letter", ds))


def group_id(ds: str) -> str:
    """The monitor's consumer group on ``<ds>.dlq``: its committed offsets are what was counted."""
    return f"dbus-heartbeat-dlq.{ds}"


class DlqReader:
    """Reads the dead-letter topic with the monitor's own consumer group, from the beginning of the topic
    when the group has no committed offsets (its very first start), from the committed offsets after.
    ``read()`` returns the letters up to the end offsets of the call (at most MAX_PER_CHECK), or None while
    the group has not assigned this monitor a partition yet (it joins over the next checks: a check never
    waits more than ``budget_s`` here); ``commit()`` after they were counted, ``rewind()`` when they could
    not be (they are read again)."""

    def __init__(
        self,
        cfg: Any,
        ds: str,
        *,
        budget_s: float | None = None,
        stopping: Callable[[], bool] = lambda: False,
    ) -> None:
        self.cfg, self.ds, self.stopping = cfg, ds, stopping
        self.topic = dead_letter_topic(cfg, ds)
        interval = settings_of(cfg, ds).check_interval_s
        self.budget_s = budget_s if budget_s is not None else min(max(interval, 1.0), 10.0)
        self._consumer: Any = None
        self._first: dict[Any, int] = {}

    def _client(self) -> Any:
        if self._consumer is None:
            from dbuslib import kafka

            interval_ms = int(settings_of(self.cfg, self.ds).check_interval_s * 1000)
            self._consumer = kafka.consumer(
                self.cfg.endpoints.kafka,
                self.topic,
                group_id=group_id(self.ds),
                enable_auto_commit=False,
                auto_offset_reset="earliest",
                client_id=f"dbus-heartbeat-dlq-{self.ds}",
                max_poll_interval_ms=max(300_000, 3 * interval_ms),
            )
        return self._consumer

    def read(self) -> list[Letter] | None:
        """KafkaError / EndpointError when the broker cannot be read."""
        c = self._client()
        self._first = {}
        if not c.partitions_for_topic(self.topic):
            return []  # no stage created the topic yet
        letters: list[Letter] = []
        deadline = time.monotonic() + self.budget_s
        while not c.assignment():
            self._take(c.poll(timeout_ms=200, max_records=MAX_PER_CHECK), letters)
            if (time.monotonic() > deadline or self.stopping()) and not c.assignment():
                log.info(
                    "%s: no partition of %s assigned yet (joining, or another monitor holds them)",
                    self.ds,
                    self.topic,
                )
                return None
        end = c.end_offsets(list(c.assignment()))
        while len(letters) < MAX_PER_CHECK and time.monotonic() < deadline + self.budget_s:
            behind = [tp for tp, e in end.items() if tp in c.assignment() and c.position(tp) < e]
            if not behind or self.stopping():
                break
            self._take(c.poll(timeout_ms=500, max_records=MAX_PER_CHECK - len(letters)), letters)
        return letters

    def _take(self, batch: Mapping[Any, list[Any]], letters: list[Letter]) -> None:
        for tp, records in batch.items():
            for r in records:
                self._first.setdefault(tp, r.offset)
                letters.append(
                    parse(
                        r.value, r.key, dlq_partition=r.partition, dlq_offset=r.offset, at_ms=int(r.timestamp)
                    )
                )

    def commit(self) -> None:
        if self._consumer is not None and self._consumer.assignment():
            self._consumer.commit()

    def rewind(self) -> None:
        for tp, offset in self._first.items():
            self._consumer.seek(tp, offset)
        self._first = {}

    def close(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None
