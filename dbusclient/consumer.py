"""The Consumer: result topics -> merged row changes -> the application's callbacks, with checkpoints.

The Kafka loop of the client (docs/client.md, "The consumer"). One ``poll`` is one **window**:

1. its records are decoded (``dbusclient.decode``; Avro records through ``avro_schemas``), records of
   tables not subscribed are skipped, the key filter (``ModFilter``/``RangeFilter``) drops other keys;
2. the window is merged (``dbusclient.merge.Merger``): per key greatest ``(ums_id_, ums_uid_)`` wins,
   duplicates and stale changes are dropped;
3. the callbacks (``ConsumerCallbacks``, named after LinkedIn Databus') run in ``ums_id_`` order:
   ``on_start_data_event_sequence``, ``on_schema_change`` when a table's version changes, one
   ``on_data_event`` per applied change, ``on_end_data_event_sequence``, then ``on_checkpoint``;
4. only when every callback returned ``Result.SUCCESS`` the checkpoint (per partition the next offset
   and the last ``ums_id_``; the bootstrap's progress) is saved through the ``CheckpointStore`` and the
   offsets are committed to the consumer group.

A callback that returns anything else or raises fails the window: the key states it touched are put
back, ``on_rollback`` is called, and the window is dispatched again after a backoff (``retries``
times). Then the consumer stops with ``CLIENT_CALLBACK_FAILED``, or, with a dead letter configured,
writes the window's records there and goes on.

**Bootstrap.** With no checkpoint (and no offset committed by the group), or when a partition's
checkpointed offset is below the partition's earliest offset (retention), the consumer seeks the
partition to its end offset, sends a ``FULL_DATA_INDEPENDENT_PULL_REQ`` per table of its topic on the
source's control topic (``ums.control.full_pull_request``, as ``dbus fullpull`` does) and saves a
``BOOTSTRAP_SNAPSHOT`` checkpoint with the requests' ``SEQNO``s. The pull's rows merge by the same rule;
its start and end markers (headers ``dbus_fullpull``, fullpuller/job.py) give its snapshot position and
its end. When every pull's end marker was read, the consumer is ``ONLINE`` again. A consumer restarted
mid-bootstrap resumes the pending pulls from its checkpoint; it does not request new ones.
"""

from __future__ import annotations

import base64
import bisect
import json
import logging
import time
import zlib
from collections.abc import Callable, Iterable, Mapping, MutableMapping, Sequence
from dataclasses import dataclass, field, replace
from enum import Enum
from pathlib import Path
from typing import Any, Protocol

from kafka import ConsumerRebalanceListener, TopicPartition
from kafka.structs import OffsetAndMetadata
from tenacity import Retrying, retry_if_not_exception_type, stop_after_attempt, wait_exponential

from dbusclient.checkpoint import Bootstrap, Checkpoint, CheckpointStore, Mode, TablePull
from dbusclient.decode import BadRowError, Decoder, RowChange, RowRefused, TableRef
from dbusclient.merge import Key, KeyState, Merger, MergeResult
from dbusclient.metrics import ClientMetrics
from dbusclient.rowformats import RowReader
from dbuslib import topics as topic_names
from dbuslib.config import DbusConfig
from dbuslib.errors import DbusError
from ums import headers as ums_headers
from ums.avro import decode_avro
from ums.control import full_pull_request
from ums.control import to_json as control_json
from ums.errors import UmsError
from ums.formats import UMS_ID_HEADER, SchemaLookup
from ums.message import UmsMessage, UmsSchema
from ums.names import split_table

log = logging.getLogger("dbus.client")

# Kafka headers written by the appender and the full puller (their one home: ums/headers.py)
AVRO_SCHEMA_HEADER = ums_headers.AVRO_SCHEMA
FULLPULL_HEADER = ums_headers.FULLPULL
FULLPULL_ID_HEADER = ums_headers.FULLPULL_ID
FULLPULL_UMS_ID_HEADER = ums_headers.FULLPULL_UMS_ID
FULLPULL_ERROR_HEADER = ums_headers.FULLPULL_ERROR
ERROR_HEADER = "dbus_client_error"  # added to a dead-lettered record


class Result(Enum):
    """What a callback returns (Databus' ``ConsumerCallbackResult``). Anything but ``SUCCESS`` (``ERROR``,
    ``None``, an exception) fails the window; from ``on_checkpoint`` it only skips saving the checkpoint."""

    SUCCESS = "SUCCESS"
    ERROR = "ERROR"


class CallbackFailed(DbusError):
    """A window's callbacks kept failing: every retry from the last checkpoint failed too and no dead
    letter is configured. The message names the partitions and offsets of the window and the last cause."""

    code = "CLIENT_CALLBACK_FAILED"


class BootstrapFailed(DbusError):
    """The full puller aborted a table's pull ``bootstrap_attempts`` times in a row (its ``abort`` marker in
    the result topic); names the table, the pull and the puller's error."""

    code = "CLIENT_BOOTSTRAP_FAILED"


class OffsetsGone(DbusError):
    """A checkpointed offset is below its partition's earliest offset (retention deleted the records) and
    ``bootstrap`` is off; the message names the partition and both offsets."""

    code = "CLIENT_OFFSETS_GONE"


class ConsumerCallbacks:
    """The application's callbacks, after Databus' ``DatabusCombinedConsumer``; every one returns
    ``Result.SUCCESS`` here, so an application overrides only those it needs. Called in this order:

    - ``on_start_consumption()`` once, by ``Consumer.start``;
    - ``on_start_bootstrap(pulls)`` when full pulls are requested (or resumed from a checkpoint);
    - per window with applied changes: ``on_start_data_event_sequence(ums_id)`` (the first change's),
      ``on_schema_change(table, old, new, schema)`` before the first change of a table in a new UMS
      version (``old`` None for the first seen; ``schema`` the ``UmsSchema`` of version ``new``: its
      fields and types), ``on_data_event(change)`` per change (per key in ``ums_id_``
      order), ``on_end_data_event_sequence(ums_id)`` (the last change's);
    - ``on_end_bootstrap(pulls)`` in the window that read the last pull's end marker;
    - ``on_checkpoint(checkpoint)`` before the window's checkpoint is saved (not ``SUCCESS``: not saved);
    - ``on_rollback(checkpoint)`` before a failed window is dispatched again;
    - ``on_error(error)`` when the consumer gives up on a window (then it stops or dead-letters);
    - ``on_stop_consumption()`` once, by ``Consumer.close``.
    """

    def on_start_consumption(self) -> Result:
        return Result.SUCCESS

    def on_stop_consumption(self) -> Result:
        return Result.SUCCESS

    def on_start_data_event_sequence(self, ums_id: int) -> Result:
        return Result.SUCCESS

    def on_schema_change(self, table: TableRef, old: int | None, new: int, schema: UmsSchema) -> Result:
        return Result.SUCCESS

    def on_data_event(self, change: RowChange) -> Result:
        return Result.SUCCESS

    def on_end_data_event_sequence(self, ums_id: int) -> Result:
        return Result.SUCCESS

    def on_checkpoint(self, checkpoint: Checkpoint) -> Result:
        return Result.SUCCESS

    def on_rollback(self, checkpoint: Checkpoint) -> Result:
        return Result.SUCCESS

    def on_start_bootstrap(self, pulls: tuple[TablePull, ...]) -> Result:
        return Result.SUCCESS

    def on_end_bootstrap(self, pulls: tuple[TablePull, ...]) -> Result:
        return Result.SUCCESS

    def on_error(self, error: Exception) -> Result:
        return Result.SUCCESS


# ---------------------------------------------------------------- key filters (Databus' server-side filters)


@dataclass(frozen=True)
class ModFilter:
    """Keep a key when ``hash(key) mod buckets`` is in ``keep`` (Databus' MOD filter; ``ModFilter(4, {1})``
    is one consumer of four). The hash of a one-column integer key is its absolute value, of any other key
    the CRC-32 of its JSON text: the same on every machine and in every process."""

    buckets: int
    keep: frozenset[int]

    def __post_init__(self) -> None:
        if self.buckets < 1 or not self.keep or any(not 0 <= k < self.buckets for k in self.keep):
            msg = f"key filter: mod {self.buckets} keeps {sorted(self.keep)}: each must be in [0, buckets)"
            raise ValueError(msg)

    def allows(self, key: tuple[Any, ...]) -> bool:
        return key_hash(key) % self.buckets in self.keep


@dataclass(frozen=True)
class RangeFilter:
    """Keep a key whose one integer column is in ``[low, high)`` (Databus' RANGE filter)."""

    low: int
    high: int

    def allows(self, key: tuple[Any, ...]) -> bool:
        if len(key) != 1 or isinstance(key[0], bool) or not isinstance(key[0], int):
            msg = f"key filter: range [{self.low}, {self.high}) needs a one-column integer key, got {key!r}"
            raise BadRowError(msg)
        return self.low <= key[0] < self.high


def parse_key_filter(text: str) -> ModFilter | RangeFilter:
    """A key filter from its text: ``mod:BUCKETS:K[,K...]`` (``mod:4:1`` keeps bucket 1 of 4) or
    ``range:LOW:HIGH`` (``range:0:1000000``); ValueError naming the text otherwise."""
    kind, _, rest = text.strip().partition(":")
    parts = rest.split(":")
    try:
        if kind == "mod" and len(parts) == 2:
            return ModFilter(int(parts[0]), frozenset(int(k) for k in parts[1].split(",")))
        if kind == "range" and len(parts) == 2:
            low, high = int(parts[0]), int(parts[1])
            if low < high:
                return RangeFilter(low, high)
    except ValueError as e:
        if str(e).startswith("key filter:"):
            raise
    msg = f"key filter {text!r}: expected mod:BUCKETS:K[,K...] or range:LOW:HIGH (integers, LOW < HIGH)"
    raise ValueError(msg)


def key_hash(key: tuple[Any, ...]) -> int:
    """The hash a ``ModFilter`` takes (its docstring)."""
    if len(key) == 1 and isinstance(key[0], int) and not isinstance(key[0], bool):
        return abs(key[0])
    return zlib.crc32(json.dumps(list(key), default=str, separators=(",", ":")).encode())


# ---------------------------------------------------------------- configuration and the Kafka edge


@dataclass(frozen=True)
class ConsumerConfig:
    """A consumer's settings (docs/client.md, "Consumer configuration").

    - ``source``: the source (``sources.<name>`` of the DBus config); its topic templates name the topics;
    - ``tables``: ``"schema.table"`` -> key columns, e.g. ``{"shop.orders": ("id",)}``;
    - ``group_id``: the Kafka consumer group (None: no group, every partition, nothing committed);
    - ``poll_timeout_ms``, ``max_records``: one window is one poll of at most ``max_records`` records;
    - ``retries``: attempts after the first for a failed window; ``backoff_s`` doubles up to
      ``max_backoff_s`` between them (seconds);
    - ``dead_letter_file`` (JSON lines) / ``dead_letter_topic``: where a window goes once retries are
      spent; neither: the consumer stops with ``CLIENT_CALLBACK_FAILED``;
    - ``key_filter``: keep only a slice of the keys (``ModFilter``, ``RangeFilter``);
    - ``bootstrap``: request full pulls when there is no position or it is gone (False: start at the
      earliest offset when there is none, stop with ``CLIENT_OFFSETS_GONE`` when it is gone);
    - ``bootstrap_attempts``: a pull the full puller aborts is requested again, up to this many pulls of
      one table in a row; then the consumer stops with ``CLIENT_BOOTSTRAP_FAILED``.
    """

    source: str
    tables: Mapping[str, Sequence[str]]
    group_id: str | None = None
    poll_timeout_ms: int = 1000
    max_records: int = 5000
    retries: int = 3
    backoff_s: float = 0.5
    max_backoff_s: float = 30.0
    dead_letter_file: str | None = None
    dead_letter_topic: str | None = None
    key_filter: ModFilter | RangeFilter | None = None
    bootstrap: bool = True
    bootstrap_attempts: int = 3

    def __post_init__(self) -> None:
        if not self.tables:
            msg = "consumer: tables: none given"
            raise ValueError(msg)
        if self.retries < 0 or self.backoff_s < 0 or self.max_records < 1 or self.bootstrap_attempts < 1:
            msg = (
                "consumer: retries and backoff_s must not be negative, max_records and bootstrap_attempts "
                "at least 1"
            )
            raise ValueError(msg)


class KafkaPort(Protocol):
    """The part of kafka-python's ``KafkaConsumer`` the consumer uses (tests give a fake)."""

    def subscribe(self, topics: Sequence[str], listener: ConsumerRebalanceListener) -> None: ...
    def poll(self, timeout_ms: int, max_records: int) -> Mapping[Any, Sequence[Any]]: ...
    def seek(self, partition: Any, offset: int) -> None: ...
    def beginning_offsets(self, partitions: Sequence[Any]) -> Mapping[Any, int]: ...
    def end_offsets(self, partitions: Sequence[Any]) -> Mapping[Any, int]: ...
    def committed(self, partition: Any) -> int | None: ...
    def commit(self, offsets: Mapping[Any, Any]) -> None: ...
    def assignment(self) -> set[Any]: ...
    def assign(self, partitions: Sequence[Any]) -> None: ...
    def partitions_for_topic(self, topic: str) -> set[int] | None: ...
    def close(self) -> None: ...


class ProducerPort(Protocol):
    """The part of kafka-python's ``KafkaProducer`` the consumer uses: pull requests and dead letters."""

    def send(
        self, topic: str, key: bytes | None = None, value: bytes | None = None, headers: Any = None
    ) -> Any: ...
    def flush(self, timeout: float | None = None) -> None: ...


@dataclass(frozen=True)
class Topics:
    """The topics of one consumer: each table's result topic and the source's control topic; ``formats``
    each table's output format (``ums`` or a per-row format, docs/formats.md), when known: a record that
    contradicts it is a bad row (``dbusclient.rowformats``); without it the records' own look decides.
    ``events``: a per-row table's events topic (``topics.events``), where its full pulls' start and end
    markers go (its result topic holds row changes only): read beside the result topics."""

    result: Mapping[TableRef, str]
    ctrl: str
    formats: Mapping[TableRef, str] = field(default_factory=dict)
    events: Mapping[TableRef, str] = field(default_factory=dict)

    @property
    def all(self) -> list[str]:
        """Every topic the consumer reads: the result topics and the events topics, sorted."""
        return sorted({*self.result.values(), *self.events.values()})

    @classmethod
    def of(cls, cfg: DbusConfig, consumer: ConsumerConfig) -> Topics:
        """From the source's ``topics`` templates (``topics.result``, or ``topics.table`` when
        ``output.topic`` is ``table``; ``topics.ctrl``) and its ``output`` formats."""
        src = cfg.source(consumer.source)
        result, formats, events = {}, {}, {}
        for name in consumer.tables:
            schema, table = split_table(name)
            ref = TableRef(consumer.source, schema, table)
            result[ref] = topic_names.result_topic(consumer.source, src, schema, table)
            formats[ref] = src.output.format_for(schema, table)
            if formats[ref] != "ums":
                events[ref] = topic_names.events_topic(consumer.source, src, schema)
        return cls(result, src.topics.name("ctrl", consumer.source), formats, events)


# ---------------------------------------------------------------- the consumer


@dataclass
class _Window:
    """One poll's records, decoded: what a dispatch attempt needs."""

    records: list[tuple[Any, Any]] = field(default_factory=list)  # (TopicPartition, ConsumerRecord)
    changes: list[tuple[Any, RowChange]] = field(default_factory=list)
    markers: list[tuple[str, int, int | None]] = field(default_factory=list)  # (kind, seqno, ums_id)
    aborts: list[tuple[int, str]] = field(default_factory=list)  # (seqno, the puller's error)
    first: dict[Any, int] = field(default_factory=dict)  # partition -> first offset read
    ends: dict[Any, int] = field(default_factory=dict)  # partition -> next offset
    count: int = 0  # records read (``records`` leaves out those dead-lettered when decoded)
    # per data record (index in ``records``): where its changes start in ``changes``, in order
    starts: list[tuple[int, int]] = field(default_factory=list)

    def where(self) -> str:
        return ", ".join(
            f"{tp.topic}/{tp.partition}@{self.first[tp]}..{self.ends[tp] - 1}" for tp in self.first
        )

    def record_of(self, change: RowChange) -> int | None:
        """The index in ``records`` of the record that carried ``change`` (None: not of this window)."""
        at = next((i for i, (_, c) in enumerate(self.changes) if c is change), None)
        if at is None:
            return None
        n = bisect.bisect_right([start for start, _ in self.starts], at) - 1
        return self.starts[n][1]

    def without(self, index: int) -> _Window:
        """The window with the record at ``index`` and its changes left out (its offset still read:
        the checkpoint moves past it)."""
        spans = [*self.starts, (len(self.changes), len(self.records))]
        start, end = next((s, spans[i + 1][0]) for i, (s, r) in enumerate(spans) if r == index)
        starts = [
            (s if s <= start else s - (end - start), r if r < index else r - 1)
            for s, r in self.starts
            if r != index
        ]
        return replace(
            self,
            records=self.records[:index] + self.records[index + 1 :],
            changes=self.changes[:start] + self.changes[end:],
            starts=starts,
        )


class _Failed(CallbackFailed):
    """A callback did not return SUCCESS: ends one attempt of a window, or stops ``start``."""


class Consumer:
    """Consume ``topics`` for ``config``, calling ``callbacks``, checkpointing in ``store``.

    ``kafka`` is a kafka-python ``KafkaConsumer`` made without topics (``connect`` makes one), ``producer``
    sends pull requests and dead letters. ``states`` holds the merger's key states (a dict when None: lost
    on restart; docs/client.md says when that matters). ``avro_schemas`` gives an Avro schema by
    fingerprint (e.g. ``MetaStore.avro_schema``), needed for Avro result topics; None for an unknown one
    makes that record a bad row. ``row_schemas`` gives the writer's Avro schema by registry id
    (``dbuslib.registry``), needed for result topics in the per-row ``avro`` format (``connect`` makes it
    from ``endpoints.registry``); per-row records are read by ``dbusclient.rowformats``. ``sleep`` waits
    between retries; ``now_ms`` stamps pull requests."""

    def __init__(
        self,
        config: ConsumerConfig,
        callbacks: ConsumerCallbacks,
        store: CheckpointStore,
        kafka: KafkaPort,
        topics: Topics,
        producer: ProducerPort | None = None,
        *,
        states: MutableMapping[Key, KeyState] | None = None,
        avro_schemas: Callable[[str], dict[str, Any] | None] | None = None,
        row_schemas: SchemaLookup | None = None,
        metrics: ClientMetrics | None = None,
        sleep: Callable[[float], None] = time.sleep,
        now_ms: Callable[[], int] = lambda: int(time.time() * 1000),
    ) -> None:
        self.config = config
        self.callbacks = callbacks
        self.store = store
        self.kafka = kafka
        self.topics = topics
        self.producer = producer
        self.merger = Merger(states)
        self.decoder = Decoder(config.tables)
        self.avro_schemas = avro_schemas
        self.rows = RowReader(self.decoder.keys, topics.formats, row_schemas)
        self.metrics = metrics
        self._merged: MergeResult | None = None  # the last dispatched window's merge (for metrics)
        self._avro: dict[str, dict[str, Any]] = {}
        self._sleep = sleep
        self._now_ms = now_ms
        self._last_seqno = 0
        self.checkpoint = Checkpoint()
        self.versions: dict[TableRef, int] = {}
        self.schemas: dict[tuple[TableRef, int], UmsSchema] = {}  # each table version's first schema seen
        self._names = {(t.schema, t.table): t for t in topics.result}
        # per topic: the one per-row format the configuration gives its tables, if any (rowformats)
        self._expected = {
            topic: self.rows.expected([t for t, tt in topics.result.items() if tt == topic])
            for topic in set(topics.result.values())
        }
        self._started = False
        self._owns_producer = False  # closed by ``close`` (``connect`` made it)
        self._assigned_now: list[Any] = []  # assigned by the group during the last poll: to seek
        self._requested: list[TablePull] = []  # pulls requested by request_bootstrap, until checkpointed
        self._rebalanced = False  # the group assigned partitions (maybe none) during the last poll
        self._aborted: set[int] = set()  # pulls the full puller aborted: replaced by new requests
        self._aborts: dict[TableRef, int] = {}  # aborted pulls of a table in a row

    @classmethod
    def connect(
        cls,
        cfg: DbusConfig,
        config: ConsumerConfig,
        callbacks: ConsumerCallbacks,
        store: CheckpointStore,
        **kwargs: Any,
    ) -> Consumer:
        """A consumer on the Kafka of ``cfg`` (``dbuslib.kafka``), its topics from the source's templates."""
        from dbuslib import kafka

        client = kafka.consumer(
            cfg.endpoints.kafka,
            group_id=config.group_id,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
        )
        producer = kafka.producer(cfg.endpoints.kafka)
        topics = Topics.of(cfg, config)
        if "avro" in topics.formats.values() and kwargs.get("row_schemas") is None:
            kwargs["row_schemas"] = registry_lookup(cfg)
        consumer = cls(config, callbacks, store, client, topics, producer, **kwargs)
        consumer._owns_producer = True
        return consumer

    # ------------------------------------------------------------ life cycle

    def start(self) -> None:
        """Load the checkpoint and subscribe; partitions are sought when the group assigns them."""
        self.checkpoint = self.store.load() or Checkpoint()
        self._expect(self.callbacks.on_start_consumption(), "on_start_consumption")
        if self.checkpoint.bootstrap is not None:
            log.info("resuming the bootstrap of %s", _pull_names(self.checkpoint.bootstrap.pulls))
            self._expect(
                self.callbacks.on_start_bootstrap(self.checkpoint.bootstrap.pulls), "on_start_bootstrap"
            )
        topics = self.topics.all
        self._started = True
        if self.config.group_id is not None:
            self.kafka.subscribe(topics, listener=_Listener(self))
            return
        # no group: every partition, assigned here (kafka-python assigns subscriptions only in a group)
        parts = [
            TopicPartition(t, p) for t in topics for p in sorted(self.kafka.partitions_for_topic(t) or ())
        ]
        missing = [t for t in topics if not self.kafka.partitions_for_topic(t)]
        events = set(self.topics.events.values()) - set(self.topics.result.values())
        if not self.config.bootstrap and missing and set(missing) <= events:
            # the markers of pulls this consumer never requests: nothing to read there yet
            log.info("events topic(s) %s do not exist (yet): not read", missing)
            missing = []
        if missing:
            msg = f"consumer of {self.config.source}: topic(s) {missing} do not exist"
            raise DbusError(msg)
        self.kafka.assign(parts)
        self.assigned(parts)

    def run(self, stop: Callable[[], bool] = lambda: False) -> None:
        """``start``, then windows until ``stop()`` is true (checked between windows), then ``close``."""
        self.start()
        try:
            while not stop():
                self.poll_once()
        finally:
            self.close()

    def close(self) -> None:
        """``on_stop_consumption``, then close the Kafka consumer (and the producer ``connect`` made)."""
        try:
            if self._started:
                self.callbacks.on_stop_consumption()
        finally:
            if self.metrics is not None:
                self.metrics.close()
            self.kafka.close()
            if self._owns_producer and self.producer is not None:
                getattr(self.producer, "close", lambda: None)()

    def poll_once(self) -> int:
        """One window: poll, decode, merge, callbacks, checkpoint. Returns the number of records read."""
        started = time.monotonic()
        batch = self.kafka.poll(timeout_ms=self.config.poll_timeout_ms, max_records=self.config.max_records)
        if self._rebalanced:
            self._rebalanced = False
            # kafka-python's listener may not block (no offset requests in it): the partitions assigned
            # during this poll are sought here, and what the poll read of them, from the group's default
            # position, is dropped (read again from the right offset by the next poll)
            new, self._assigned_now = self._assigned_now, []
            batch = {tp: records for tp, records in batch.items() if tp not in set(new)}
            self.assigned(new)
        window = self._decode(batch)
        if window.aborts:
            self._request_again(window.aborts)
        self._merged = None
        if window.count:
            self._process(window)
        if self.metrics is not None:
            self._measure(window.count, time.monotonic() - started)
        return window.count

    def _measure(self, records: int, seconds: float) -> None:
        """Feed the window's figures to ``metrics``; when a flush is due, the lag too (one request)."""
        assert self.metrics is not None
        r = self._merged
        if r is None:
            self.metrics.window(records, 0, 0, 0, seconds)
        else:
            self.metrics.window(records, len(r.applied), r.duplicates, r.stale, seconds)
        self.metrics.checkpoint(self.checkpoint)
        if self.metrics.due():
            owned = list(self.kafka.assignment())
            ends = self.kafka.end_offsets(owned) if owned else {}
            self.metrics.lag(ends, self.checkpoint.offsets())
            self.metrics.flush()

    # ------------------------------------------------------------ rebalances and positions

    def assigned(self, partitions: Sequence[Any]) -> None:
        """Seek each newly assigned partition to its checkpointed offset (or the group's committed offset
        when greater); a partition with neither, or whose offset retention deleted, is bootstrapped."""
        self._forget_others()
        if not partitions:
            return
        offsets = self.checkpoint.offsets()
        earliest = self.kafka.beginning_offsets(list(partitions))
        missing, gone, moved_on = [], [], set()
        for tp in sorted(partitions):
            mine, committed = offsets.get((tp.topic, tp.partition)), self._committed(tp)
            known = [o for o in (mine, committed) if o is not None]
            if not known:
                missing.append(tp)
                continue
            offset = max(known)
            if committed is not None and (mine is None or committed > mine):
                moved_on.add(tp.topic)
            if offset < earliest[tp]:
                log.warning(
                    "%s/%d: offset %d is gone (earliest %d)", tp.topic, tp.partition, offset, earliest[tp]
                )
                gone.append((tp, offset))
            else:
                self.kafka.seek(tp, offset)
        if moved_on:
            self._drop_pulls(moved_on)
        if not self.config.bootstrap:
            if gone:
                tp, offset = gone[0]
                msg = (
                    f"{tp.topic}/{tp.partition}: the checkpointed offset {offset} is below the earliest "
                    f"offset {earliest[tp]} (deleted by retention) and bootstrap is off"
                )
                raise OffsetsGone(msg)
            for tp in missing:
                self.kafka.seek(tp, earliest[tp])
            return
        if missing or gone:
            self._bootstrap(missing + [tp for tp, _ in gone])

    def revoked(self, partitions: Sequence[Any]) -> None:
        """Nothing to finish: the listener runs inside ``poll``, after the last window's checkpoint was
        saved and committed, so no window is ever cut by a rebalance. What the partitions leave behind is
        dropped by ``assigned`` (``_forget_others``), right after the poll: kafka-python's eager protocol
        revokes every partition and assigns them again, and a partition kept must keep its position."""
        if partitions:
            log.info("revoked: %s", ", ".join(f"{tp.topic}/{tp.partition}" for tp in partitions))

    def _forget_others(self) -> None:
        """Drop from the checkpoint the partitions this member no longer owns (their next owner reads them
        from the group's committed offsets; this member never saves or commits them again), and the
        pending pulls of tables whose topic it no longer reads (their rows and end marker go to the owner)."""
        owned = {(tp.topic, tp.partition) for tp in self.kafka.assignment()}
        topics = {topic for topic, _ in owned}
        cp = self.checkpoint
        kept = tuple(p for p in cp.partitions if (p.topic, p.partition) in owned)
        boot = cp.bootstrap
        if boot is not None:
            pulls = tuple(p for p in boot.pulls if self._topic_of(p) in topics)
            if not pulls:
                log.info("no partition of a pending pull is read here any more: online")
                self.checkpoint = Checkpoint(Mode.ONLINE, kept)
                return
            boot = replace(boot, pulls=pulls)
        self.checkpoint = replace(cp, partitions=kept, bootstrap=boot)

    def _drop_pulls(self, topics: set[str]) -> None:
        """Another member of the group read these topics past this member's checkpoint: the pending pulls
        of their tables are no longer this member's to follow (the other member merged what it read of
        them, end marker included maybe; what is still to come merges by the same rule)."""
        boot = self.checkpoint.bootstrap
        if boot is None:
            return
        pulls = tuple(p for p in boot.pulls if self._topic_of(p) not in topics)
        if len(pulls) == len(boot.pulls):
            return
        log.info(
            "the group read past the pending pull(s) of %s: not followed here", ", ".join(sorted(topics))
        )
        if pulls:
            self.checkpoint = replace(self.checkpoint, bootstrap=replace(boot, pulls=pulls))
        else:
            self.checkpoint = Checkpoint(Mode.ONLINE, self.checkpoint.partitions)

    def _committed(self, tp: Any) -> int | None:
        if self.config.group_id is None:
            return None
        committed = self.kafka.committed(tp)
        return None if committed is None else int(committed)

    # ------------------------------------------------------------ bootstrap

    def _bootstrap(self, partitions: list[Any]) -> None:
        """Seek ``partitions`` to their end offsets and request a full pull of each table on their topics
        (but a table whose pull is pending); the checkpoint is saved once the requests are sent."""
        ends = self.kafka.end_offsets(partitions)
        cp = self.checkpoint
        for tp in partitions:
            self.kafka.seek(tp, ends[tp])
            cp = cp.advanced(tp.topic, tp.partition, ends[tp])
        topics = {tp.topic for tp in partitions}
        pending = () if cp.bootstrap is None else cp.bootstrap.pulls
        waiting = {(p.schema, p.table) for p in pending if not p.ended}
        new = []
        for table, topic in sorted(self.topics.result.items()):
            if topic in topics and (table.schema, table.table) not in waiting:
                new.append(TablePull(table.ds, table.schema, table.table, self._seqno()))
        if new:
            self._request(new)
        pulls = tuple(p for p in pending if not p.ended) + tuple(new)
        if pulls:
            cp = Checkpoint(Mode.BOOTSTRAP_SNAPSHOT, cp.partitions, Bootstrap(pulls))
        self._save(cp)  # committed too: after a rebalance the partitions go on from the end offsets
        if new:
            self._expect(self.callbacks.on_start_bootstrap(tuple(new)), "on_start_bootstrap")

    def request_bootstrap(self, table: TableRef) -> TablePull:
        """Request a full pull of ``table`` now, as a bootstrap does (e.g. from a callback of a sink that had
        to drop its replica of the table). The request is sent at once; the pull joins the bootstrap of the
        current window's checkpoint (``BOOTSTRAP_SNAPSHOT``), its rows merge by the same rule, and its end
        marker ends it."""
        if table not in self.topics.result:
            msg = f"bootstrap of {table}: not a table of this consumer"
            raise DbusError(msg)
        pull = TablePull(table.ds, table.schema, table.table, self._seqno())
        self._request([pull])
        self._requested.append(pull)
        self._expect(self.callbacks.on_start_bootstrap((pull,)), "on_start_bootstrap")
        return pull

    def _request_again(self, aborts: Sequence[tuple[int, str]]) -> None:
        """Replace each pending pull the full puller aborted by a new request of its table (the aborted
        one leaves the bootstrap with the next checkpoint, unswept: its rows are valid, but not all of
        the table); stop with ``CLIENT_BOOTSTRAP_FAILED`` after ``bootstrap_attempts`` pulls of one table."""
        boot = self.checkpoint.bootstrap
        pending = {p.seqno: p for p in [*(boot.pulls if boot is not None else ()), *self._requested]}
        for seqno, error in aborts:
            pull = pending.get(seqno)
            if pull is None or pull.ended or seqno in self._aborted:
                continue  # another consumer's pull, or one replaced already
            table = TableRef(pull.ds, pull.schema, pull.table)
            failed = self._aborts[table] = self._aborts.get(table, 0) + 1
            if self.metrics is not None:
                self.metrics.error(BootstrapFailed.code)
            if failed >= self.config.bootstrap_attempts:
                msg = (
                    f"the full puller aborted pull {seqno} of {table}: {error}; {failed} pull(s) of the "
                    f"table in a row failed (bootstrap_attempts {self.config.bootstrap_attempts}). Fix the "
                    "cause and restart: the consumer reads the abort again and requests the table anew"
                )
                raise BootstrapFailed(msg)
            log.warning(
                "the full puller aborted pull %d of %s (%s): requesting it again", seqno, table, error
            )
            self._aborted.add(seqno)
            self.request_bootstrap(table)

    def _seqno(self) -> int:
        self._last_seqno = max(self._now_ms(), self._last_seqno + 1)
        return self._last_seqno

    def _request(self, pulls: list[TablePull]) -> None:
        if self.producer is None:
            msg = f"bootstrap of {_pull_names(pulls)}: no producer to send the pull requests with"
            raise DbusError(msg)
        for p in pulls:
            message = full_pull_request(
                p.ds, p.schema, p.table, seqno=p.seqno, result_topic=self._topic_of(p), from_="dbus-client"
            )
            self.producer.send(
                self.topics.ctrl, key=message.type.value.encode(), value=control_json(message).encode()
            )
            log.info("full pull %d of %s.%s requested on %s", p.seqno, p.schema, p.table, self.topics.ctrl)
        self.producer.flush(30)

    def _topic_of(self, pull: TablePull) -> str:
        return self.topics.result[TableRef(pull.ds, pull.schema, pull.table)]

    # ------------------------------------------------------------ one window

    def _decode(self, batch: Mapping[Any, Sequence[Any]]) -> _Window:
        window = _Window()
        flt = self.config.key_filter
        for tp, records in batch.items():
            if not records:
                continue
            window.count += len(records)
            window.first[tp] = records[0].offset
            for r in records:
                headers = {k: v for k, v in (r.headers or ())}
                where = f"{tp.topic}/{tp.partition}@{r.offset}"
                kind = headers.get(FULLPULL_HEADER)
                if kind is not None:
                    window.records.append((tp, r))
                    window.markers.append(_marker(kind, headers, where))
                    if window.markers[-1][0] == ums_headers.FULLPULL_ABORT:
                        error = headers.get(FULLPULL_ERROR_HEADER, b"no error given")
                        window.aborts.append((window.markers[-1][1], error.decode("utf-8", "replace")))
                    continue
                try:
                    if UMS_ID_HEADER in headers or (r.value is None and self._expected.get(tp.topic)):
                        # a per-row record (a tombstone: no change)
                        changes, schema = self.rows.read(
                            r.key, r.value, r.headers or (), where, self._expected.get(tp.topic)
                        )
                        if not changes:
                            continue
                        assert schema is not None
                        self.schemas.setdefault((changes[0].table, changes[0].version), schema)
                    else:
                        msg = self._message(r.value, headers, where)
                        ns = msg.schema.namespace
                        table = self._names.get((ns.schema, ns.table))
                        if table is None:
                            continue
                        changes = self.decoder.changes(msg)
                        if changes:
                            self.rows.check_ums(table, where)
                            self.schemas.setdefault((changes[0].table, ns.version), msg.schema)
                    if flt is not None:
                        changes = [c for c in changes if flt.allows(c.key)]
                except BadRowError as e:
                    if not self._dead_letters_on():
                        raise
                    self._dead_letter([(tp, r)], e)
                    continue
                window.starts.append((len(window.changes), len(window.records)))
                window.records.append((tp, r))
                window.changes.extend((tp, c) for c in changes)
            window.ends[tp] = records[-1].offset + 1
        return window

    def _message(self, value: bytes | None, headers: Mapping[str, bytes], where: str) -> UmsMessage:
        if value is None:
            msg = f"{where}: a record without a value"
            raise BadRowError(msg)
        fingerprint = headers.get(AVRO_SCHEMA_HEADER)
        try:
            if fingerprint is None:
                return self.decoder.read_json(value, where)  # the fast path (dbusclient.decode)
            return decode_avro(value, self._avro_schema(fingerprint.decode("ascii", "replace"), where))
        except UmsError as e:
            msg = f"{where}: {e}"
            raise BadRowError(msg) from None

    def _avro_schema(self, fingerprint: str, where: str) -> dict[str, Any]:
        if fingerprint not in self._avro:
            if self.avro_schemas is None:
                msg = f"{where}: an Avro record (schema {fingerprint}), and the Consumer has no avro_schemas"
                raise BadRowError(msg)
            schema = self.avro_schemas(fingerprint)
            if schema is None:  # not known: this record is bad (a store that cannot answer raises instead)
                msg = f"{where}: an Avro record of schema {fingerprint}, which the schema store does not have"
                raise BadRowError(msg)
            self._avro[fingerprint] = schema
        return self._avro[fingerprint]

    def _process(self, window: _Window) -> None:
        """Dispatch and save ``window``; a change a callback or the store refuses (``RowRefused``: its
        values do not decode) sets its record aside as a dead letter, and the rest of the window is
        dispatched again (without dead letters configured, the consumer stops with the refusal)."""
        while True:
            try:
                self._process_once(window)
                return
            except RowRefused as e:
                index = window.record_of(e.change)
                if not self._dead_letters_on() or index is None:
                    raise
                if self.metrics is not None:
                    self.metrics.error(e.code)
                self._dead_letter([window.records[index]], e)
                window = window.without(index)

    def _process_once(self, window: _Window) -> None:
        touched: set[Key] = {(c.table, c.key) for _, c in window.changes}
        saved = {k: self.merger.states.get(k) for k in touched}
        attempts = Retrying(
            stop=stop_after_attempt(self.config.retries + 1),
            wait=wait_exponential(multiplier=self.config.backoff_s, max=self.config.max_backoff_s),
            retry=retry_if_not_exception_type(RowRefused),
            sleep=self._sleep,
            reraise=True,
        )
        try:
            for attempt in attempts:
                with attempt:
                    try:
                        checkpoint, versions, ended = self._dispatch(window)
                    except Exception as e:
                        self._restore(saved)
                        log.warning("window %s failed: %s", window.where(), e)
                        self.callbacks.on_rollback(self.checkpoint)
                        raise
        except RowRefused:
            raise
        except Exception as e:
            if self.metrics is not None:
                self.metrics.error(getattr(e, "code", type(e).__name__))
            self.callbacks.on_error(e)
            if not self._dead_letters_on():
                msg = (
                    f"window {window.where()}: the callbacks failed {self.config.retries + 1} time(s), "
                    f"the last with: {e}"
                )
                raise CallbackFailed(msg) from e
            self._dead_letter(window.records, e)
            self._save(self._advance(window, applied=()))
            return
        before, self.versions = self.versions, versions
        try:
            result: object = self.callbacks.on_checkpoint(checkpoint)
        except Exception as e:  # as in Databus: an exception is an ERROR, and ERROR here skips the save
            result = e
        if result is Result.SUCCESS:
            try:
                self._save(checkpoint)
            except RowRefused:  # the store applies the changes (a replica): nothing of the window saved
                self._restore(saved)
                self.versions = before
                self.callbacks.on_rollback(self.checkpoint)
                raise
        else:
            log.info("on_checkpoint gave %r: the checkpoint of %s is not saved", result, window.where())
            self.checkpoint = checkpoint
        if ended:
            log.info("bootstrap done: every pull's end marker was read")

    def _dispatch(self, window: _Window) -> tuple[Checkpoint, dict[TableRef, int], bool]:
        """One attempt: merge, callbacks; returns the new checkpoint (not saved), versions, bootstrap end."""
        result = self.merger.merge(c for _, c in window.changes)
        self._merged = result
        versions = dict(self.versions)
        cb = self.callbacks
        if result.applied:
            self._expect(
                cb.on_start_data_event_sequence(result.applied[0].ums_id), "on_start_data_event_sequence"
            )
            for change in result.applied:
                old = versions.get(change.table)
                if old != change.version:
                    schema = self.schemas[(change.table, change.version)]
                    self._expect(
                        cb.on_schema_change(change.table, old, change.version, schema), "on_schema_change"
                    )
                    versions[change.table] = change.version
                self._expect(cb.on_data_event(change), "on_data_event")
            self._expect(
                cb.on_end_data_event_sequence(result.applied[-1].ums_id), "on_end_data_event_sequence"
            )
        checkpoint = self._advance(window, result.applied)
        ended = self.checkpoint.bootstrap is not None and checkpoint.bootstrap is None
        if ended:
            assert self.checkpoint.bootstrap is not None
            pulls = _with_markers(self.checkpoint.bootstrap.pulls, window)
            self._expect(cb.on_end_bootstrap(pulls), "on_end_bootstrap")
        return checkpoint, versions, ended

    def _advance(self, window: _Window, applied: Iterable[RowChange]) -> Checkpoint:
        """The checkpoint after ``window``: offsets, last ``ums_id_`` per partition, bootstrap progress."""
        partition_of = {id(c): tp for tp, c in window.changes}
        last: dict[Any, int] = {}
        for c in applied:
            tp = partition_of[id(c)]
            last[tp] = max(last.get(tp, c.ums_id), c.ums_id)
        cp = self.checkpoint
        for tp, end in window.ends.items():
            cp = cp.advanced(tp.topic, tp.partition, end, last.get(tp))
        pending = cp.bootstrap.pulls if cp.bootstrap is not None else ()
        if self._requested or any(p.seqno in self._aborted for p in pending):
            # an aborted pull leaves the bootstrap as the pull requested in its place joins it
            pending = tuple(p for p in pending if p.seqno not in self._aborted)
            known = {p.seqno for p in pending}
            new = tuple(p for p in self._requested if p.seqno not in known)
            cp = Checkpoint(Mode.BOOTSTRAP_SNAPSHOT, cp.partitions, Bootstrap(pending + new))
        if cp.bootstrap is None:
            return cp
        pulls = _with_markers(cp.bootstrap.pulls, window)
        if all(p.ended for p in pulls):
            return Checkpoint(Mode.ONLINE, cp.partitions)
        return replace(cp, bootstrap=replace(cp.bootstrap, pulls=pulls))

    def _save(self, checkpoint: Checkpoint) -> None:
        """Save, then commit the offsets of partitions this consumer owns to its group."""
        self.store.save(checkpoint)
        self.checkpoint = checkpoint
        if self._requested and checkpoint.bootstrap is not None:
            saved = {p.seqno for p in checkpoint.bootstrap.pulls}
            self._requested = [p for p in self._requested if p.seqno not in saved]
        if self.config.group_id is None:
            return
        owned = {(tp.topic, tp.partition): tp for tp in self.kafka.assignment()}
        offsets = {
            owned[(p.topic, p.partition)]: OffsetAndMetadata(p.offset, "", -1)
            for p in checkpoint.partitions
            if (p.topic, p.partition) in owned
        }
        if offsets:
            self.kafka.commit(offsets)

    def _restore(self, saved: Mapping[Key, KeyState | None]) -> None:
        states = self.merger.states
        for key, state in saved.items():
            if state is None:
                states.pop(key, None)
            else:
                states[key] = state

    # ------------------------------------------------------------ results and dead letters

    def _expect(self, result: object, name: str) -> None:
        if result is not Result.SUCCESS:
            msg = f"{name} returned {result!r}, not Result.SUCCESS"
            raise _Failed(msg)

    def _dead_letters_on(self) -> bool:
        return self.config.dead_letter_file is not None or self.config.dead_letter_topic is not None

    def _dead_letter(self, records: Sequence[tuple[Any, Any]], error: Exception) -> None:
        """Write ``records`` to the dead-letter file (JSON lines) and/or topic, with the error."""
        why, code = str(error), getattr(error, "code", type(error).__name__)
        log.error("dead-lettering %d record(s): %s", len(records), why)
        if self.config.dead_letter_file is not None:
            with Path(self.config.dead_letter_file).open("a", encoding="utf-8") as f:
                for tp, r in records:
                    f.write(json.dumps(_dead_letter_line(tp, r, why, code)) + "\n")
        if self.config.dead_letter_topic is not None and self.producer is not None:
            for _tp, r in records:
                headers = [*(r.headers or ()), (ERROR_HEADER, why.encode())]
                self.producer.send(self.config.dead_letter_topic, key=r.key, value=r.value, headers=headers)
            self.producer.flush(30)


class _Listener(ConsumerRebalanceListener):
    """Runs inside kafka-python's ``poll``, on its I/O thread: it may not block, so it only notes."""

    def __init__(self, consumer: Consumer) -> None:
        self.consumer = consumer

    def on_partitions_revoked(self, revoked: Any) -> None:
        self.consumer.revoked(list(revoked))

    def on_partitions_assigned(self, assigned: Any) -> None:
        self.consumer._assigned_now.extend(assigned)
        self.consumer._rebalanced = True


def registry_lookup(cfg: DbusConfig) -> SchemaLookup | None:
    """The writer's Avro schema by registry id, from ``endpoints.registry`` (``dbuslib.registry``, cached);
    None when no registry is configured (an ``avro`` record is then a bad row naming it)."""
    if cfg.endpoints.registry is None:
        return None
    from dbuslib.registry import Registry

    return Registry.of(cfg).schema


def _marker(kind: bytes, headers: Mapping[str, bytes], where: str) -> tuple[str, int, int | None]:
    try:
        seqno = int(headers[FULLPULL_ID_HEADER])
        raw = headers.get(FULLPULL_UMS_ID_HEADER)
        return kind.decode("ascii", "replace"), seqno, None if raw is None else int(raw)
    except (KeyError, ValueError) as e:
        msg = f"{where}: a {FULLPULL_HEADER} marker without a valid {e}"
        raise BadRowError(msg) from None


def _with_markers(pulls: tuple[TablePull, ...], window: _Window) -> tuple[TablePull, ...]:
    """``pulls`` after the window's markers (start: snapshot position; end: ended) and snapshot rows."""
    rows: dict[tuple[str, str], int] = {}
    for _, c in window.changes:
        if c.initial:
            rows[(c.table.schema, c.table.table)] = rows.get((c.table.schema, c.table.table), 0) + 1
    out = []
    for p in pulls:
        if not p.ended:  # a pull's rows come before its end marker (the same partition)
            p = replace(p, rows=p.rows + rows.get((p.schema, p.table), 0))
        for kind, seqno, ums_id in window.markers:
            if seqno == p.seqno:
                p = replace(p, ums_id=p.ums_id if ums_id is None else ums_id, ended=p.ended or kind == "end")
        out.append(p)
    return tuple(out)


def _dead_letter_line(tp: Any, r: Any, why: str, code: str) -> dict[str, Any]:
    def text(b: bytes | None) -> str | None:
        if b is None:
            return None
        try:
            return b.decode()
        except UnicodeDecodeError:
            return "base64:" + base64.b64encode(b).decode()

    return {
        "topic": tp.topic,
        "partition": tp.partition,
        "offset": r.offset,
        "key": text(r.key),
        "value": text(r.value),
        "headers": [[k, text(v)] for k, v in (r.headers or ())],
        "code": code,
        "error": why,
    }


def _pull_names(pulls: Iterable[TablePull]) -> str:
    return ", ".join(f"{p.schema}.{p.table} (SEQNO {p.seqno})" for p in pulls)


__all__ = [
    "CallbackFailed",
    "Consumer",
    "ConsumerCallbacks",
    "ConsumerConfig",
    "KafkaPort",
    "ModFilter",
    "OffsetsGone",
    "ProducerPort",
    "RangeFilter",
    "Result",
    "Topics",
    "TopicPartition",
    "key_hash",
]
