"""The one control-topic listener: records of ``<ds>_ctrl`` dispatched by type to the stage's handlers.

A stage gives a table ``{ControlType: handler}`` (as pymysqlreplication's ``__event_map`` maps event codes
to classes) and what to do with a record that does not parse; ``Dispatcher.dispatch`` does the rest::

    dispatcher = Dispatcher(
        "appender demo",
        {ControlType.APPENDER_RELOAD_CONFIG: reload},   # handler(message, record) -> reply
        bad=reject_if_mine,                             # bad(record, BadControlError) -> reply or None
    )
    for rec in poll(consumer, timeout_ms=500):          # ControlRecord: topic, partition, offset, key, value
        dispatcher.dispatch(rec)

- ``accepts(record)`` (default: every record) skips another stage's records before anything reads them
  (the full puller reads only keys starting ``FULL_DATA_``);
- a record ``ums.control.from_json`` refuses goes to ``bad``, which answers on the stage's own channel
  (the appender's reload reply in ZooKeeper, the full puller's ``abort`` on ``<ds>_callback``) or ignores it;
- a valid message whose type has no handler goes to ``other`` when given, else it is logged and skipped.

Each stage keeps its own consumer discipline: the appender reads from the end with no group (a reload is
for the running driver only), the full puller resumes from its group's committed offset and commits a
request once it is served (``assign``).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from dbuslib.errors import ConfigError, DbusError, EndpointError
from ums.control import ControlMessage, ControlType, from_json
from ums.errors import BadControlError

log = logging.getLogger(__name__)
R = TypeVar("R")


@dataclass(frozen=True)
class ControlRecord:
    """One record of a control topic and where it was read."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    at: str = ""  # where it came from when not from a partition and offset (a unit test, a replay)

    @classmethod
    def of(cls, record: Any) -> ControlRecord:
        """From a kafka-python ``ConsumerRecord``."""
        return cls(record.topic, record.partition, record.offset, record.key, record.value)

    @property
    def where(self) -> str:
        """``demo_ctrl[0]@17``: the coordinates a log line or a reply names."""
        return self.at or f"{self.topic}[{self.partition}]@{self.offset}"


Handler = Callable[[ControlMessage, ControlRecord], R]


class Dispatcher(Generic[R]):
    """``{ControlType: handler}`` over control records (see the module docstring). ``name`` prefixes the
    log lines (``appender demo``)."""

    def __init__(
        self,
        name: str,
        handlers: Mapping[ControlType, Handler[R]],
        *,
        bad: Callable[[ControlRecord, BadControlError], R | None],
        accepts: Callable[[ControlRecord], bool] | None = None,
        other: Handler[R | None] | None = None,
    ) -> None:
        self.name, self._handlers, self._bad = name, dict(handlers), bad
        self._accepts, self._other = accepts, other

    def dispatch(self, rec: ControlRecord) -> R | None:
        """The handler's result for ``rec``; None for a record skipped. Handlers' exceptions pass through."""
        if self._accepts is not None and not self._accepts(rec):
            return None
        try:
            message = from_json(rec.value)
        except BadControlError as e:
            return self._bad(rec, e)
        handler = self._handlers.get(message.type)
        if handler is not None:
            return handler(message, rec)
        if self._other is not None:
            return self._other(message, rec)
        log.info(
            "%s: %s: %s %s is not handled here; skipped", self.name, rec.where, message.type.value, message.id
        )
        return None


def assign(consumer: Any, topic: str, ds: str, *, resume: bool, wait_s: float = 30.0) -> dict[int, int]:
    """Assign every partition of ``topic`` to ``consumer`` and return ``{partition: next offset}``.

    ``resume``: from the consumer group's committed offsets; a partition with none (the very first start)
    starts at the end, and that offset is committed so the next start knows. Otherwise from the end (no
    group). ConfigError when the topic does not show up within ``wait_s`` seconds."""
    from kafka import TopicPartition
    from kafka.structs import OffsetAndMetadata

    deadline = time.monotonic() + wait_s
    parts = consumer.partitions_for_topic(topic)
    while not parts:
        if time.monotonic() > deadline:
            msg = f"control topic {topic} does not exist (dbus topics create --source {ds})"
            raise ConfigError(msg)
        time.sleep(0.5)
        parts = consumer.partitions_for_topic(topic)
    tps = [TopicPartition(topic, p) for p in sorted(parts)]
    consumer.assign(tps)
    for tp in tps:
        committed = consumer.committed(tp) if resume else None
        if committed is None:
            consumer.seek_to_end(tp)
            if resume:
                consumer.commit({tp: OffsetAndMetadata(consumer.position(tp), "", -1)})
        else:
            consumer.seek(tp, committed)
    return {tp.partition: consumer.position(tp) for tp in tps}  # fixes the start now: later records are seen


def poll(consumer: Any, timeout_ms: int, max_records: int | None = None) -> list[ControlRecord]:
    """The records of one ``consumer.poll``, in order per partition (a failed poll raises here)."""
    more = {} if max_records is None else {"max_records": max_records}
    batches = consumer.poll(timeout_ms=timeout_ms, **more)
    return [ControlRecord.of(record) for batch in batches.values() for record in batch]


def commit_after(consumer: Any, rec: ControlRecord) -> None:
    """Commit ``rec`` as done: the group resumes after it."""
    from kafka import TopicPartition
    from kafka.structs import OffsetAndMetadata

    consumer.commit({TopicPartition(rec.topic, rec.partition): OffsetAndMetadata(rec.offset + 1, "", -1)})


def consumer_at_end(kafka_endpoint: Any, topic: str, ds: str) -> Any:
    """A consumer of ``topic`` with no group, sitting at its end: a driver's listener, for which only
    requests sent while it runs count (the appender's and the log processor's reloads)."""
    from dbuslib import kafka

    consumer = kafka.consumer(
        kafka_endpoint, group_id=None, enable_auto_commit=False, auto_offset_reset="latest"
    )
    assign(consumer, topic, ds, resume=False)
    return consumer


def listen(
    consumer: Any,
    name: str,
    stopping: threading.Event,
    handle: Callable[[ControlRecord], Any],
    poll_ms: int = 500,
) -> None:
    """``handle`` every record of ``consumer`` until ``stopping`` is set; a failed poll (Kafka gone) is
    logged under ``name`` and retried with a backoff doubling up to 30 s."""
    backoff = 0.0
    while not stopping.is_set():
        try:
            batch = poll(consumer, poll_ms)
        except Exception as e:
            backoff = min(30.0, backoff * 2 or 0.5)
            log.warning(
                "%s: reading the control topic failed (%s: %s); again in %.1f s",
                name,
                type(e).__name__,
                e,
                backoff,
            )
            stopping.wait(backoff)
            continue
        backoff = 0.0
        for rec in batch:
            handle(rec)


class DriverListener(threading.Thread):
    """A stage driver's listener on its control topic (the appender's and the log processor's reloads): a
    daemon thread that opens ZooKeeper and a consumer at the topic's end, runs ``prepare()`` (a stage's
    start-up work, e.g. publishing its rules), then hands every record to ``on_record`` until ``stop()``.

    ``start()`` returns once the consumer sits at the end of the topic and ``prepare`` is done, so a request
    sent after that is never missed; what failed before is raised there: a ``DbusError`` as it is, anything
    else (a server that did not answer) as ``EndpointError`` naming the topic. A failed poll is logged and
    retried (``listen``); ``on_record`` must not raise."""

    def __init__(self, cfg: Any, ds: str, topic: str, stage: str, poll_ms: int = 500) -> None:
        super().__init__(name=f"{stage}-reload-{ds}", daemon=True)
        self.cfg, self.ds, self.topic, self.stage, self.poll_ms = cfg, ds, topic, stage, poll_ms
        self.ready, self.stopping = threading.Event(), threading.Event()
        self.error: BaseException | None = None
        self._zk: Any = None
        self._consumer: Any = None

    def start(self, timeout: float = 60.0) -> DriverListener:  # type: ignore[override]  # returns itself
        super().start()
        self.ready.wait(timeout)
        if isinstance(self.error, DbusError):
            raise self.error
        if not self.ready.is_set() or self.error is not None:
            msg = f"{self.stage} reload listener on {self.topic} did not start: {self.error or 'timeout'}"
            raise EndpointError(msg)
        return self

    def stop(self, timeout: float = 10.0) -> None:
        self.stopping.set()
        self.join(timeout)

    def prepare(self) -> None:
        """The stage's start-up work, once ZooKeeper and the consumer are open (``self._zk``)."""

    def on_record(self, rec: ControlRecord) -> Any:
        raise NotImplementedError

    def run(self) -> None:
        try:
            self._open()
            self.prepare()
        except BaseException as e:
            self.error = e
            self.ready.set()
            self._close()
            return
        self.ready.set()
        try:
            self._listen()
        finally:
            self._close()

    def _listen(self) -> None:
        listen(self._consumer, f"{self.stage} {self.ds}", self.stopping, self.on_record, self.poll_ms)

    def _open(self) -> None:
        from dbuslib import zk

        self._zk = zk.client(self.cfg.endpoints.zookeeper)
        self._consumer = consumer_at_end(self.cfg.endpoints.kafka, self.topic, self.ds)

    def _close(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
        if self._zk is not None:
            try:
                self._zk.stop()
                self._zk.close()
            except Exception as e:
                log.debug("%s %s: closing ZooKeeper: %s", self.stage, self.ds, e)
