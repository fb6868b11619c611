"""Wires the extractor: lead, resume, read, publish, commit at transaction boundaries, report.

Order of events for one source:
1. connect to ZooKeeper and wait to lead (a standby blocks here); leading bumps the epoch;
2. resume from the committed position (ZooKeeper or the local mirror, whichever is newer), or from
   ``extractor.start`` the first time;
3. read the binlog, publish each raw event (acks=all, bounded in flight), mark each transaction end;
4. about every ``commit_interval_s``, commit the newest boundary whose records are all acknowledged;
5. on stop: flush, commit, release the leadership. After kill -9, step 2 re-reads from the last commit:
   duplicates after it are possible, loss is not.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import replace
from pathlib import Path

from binlog.rawevent import RawEvent
from dbuslib import kafka, mysql, pygc, zk, zkpaths
from dbuslib.config import DbusConfig, Source
from dbuslib.zk import identity
from extractor.errors import DeposedError
from extractor.leader import Leadership
from extractor.metrics import ExtractorMetrics
from extractor.position import Position
from extractor.publisher import Publisher
from extractor.reader import BinlogReader, Boundary, check_server, initial_position
from extractor.store import PositionStore

log = logging.getLogger(__name__)


def position_file(cfg: DbusConfig, src: Source, ds: str) -> Path:
    return cfg.resolve(src.extractor.state_dir) / f"{ds}.position.json"


def position_store(cfg: DbusConfig, ds: str, client) -> PositionStore:
    path = zkpaths.extractor_position(cfg.endpoints.zookeeper.root, ds)
    return PositionStore(client, path, position_file(cfg, cfg.source(ds), ds))


class Extractor:
    """One run of the extractor for source ``ds``; ``stop`` ends it cleanly from another thread."""

    def __init__(self, cfg: DbusConfig, ds: str) -> None:
        self.cfg, self.ds, self.src = cfg, ds, cfg.source(ds)
        self.stop = threading.Event()
        self.metrics = ExtractorMetrics(ds)
        self.topic = self.src.topics.name("raw", ds)
        self._next_report = 0.0

    def run(self) -> None:
        client = zk.client(self.cfg.endpoints.zookeeper)
        leadership = Leadership(client, self.cfg.endpoints.zookeeper.root, self.ds, identity())
        try:
            log.info("%s: waiting to lead (standby until the current leader goes)", self.ds)
            epoch = leadership.acquire()
            log.info("%s: leading with epoch %d", self.ds, epoch)
            # connected and leading: the long-lived objects are made; default thresholds, as chunks of
            # a big transaction can sit in garbage cycles (dbuslib/pygc.py)
            pygc.settle(thresholds=None)
            self._lead(leadership, position_store(self.cfg, self.ds, client), epoch)
        finally:
            leadership.release()
            client.stop()
            client.close()

    def _lead(self, leadership: Leadership, store: PositionStore, epoch: int) -> None:
        start, flavor = self._check_source(store)
        log.info("%s: reading from %s:%s (gtid %s)", self.ds, start.file or "-", start.pos, start.gtid or "-")
        kafka.ensure_source_topics(self.cfg, self.ds, [self.topic])  # retried, bounded waits
        publisher = Publisher(self.cfg.endpoints.kafka, self.topic, self.src.extractor)
        reader = BinlogReader(
            self.ds, self.src, start, heartbeat_s=self.src.extractor.commit_interval_s, flavor=flavor
        )
        flush_when_quiet = self.src.extractor.flush_when_quiet
        committer = _Committer(store, publisher, self.metrics, epoch, self.src.extractor.commit_interval_s)
        clean = False
        try:
            for item in reader:
                if leadership.deposed.is_set():
                    msg = f"{self.ds}: ZooKeeper session expired: another extractor may lead now"
                    raise DeposedError(msg)
                if isinstance(item, RawEvent):
                    publisher.publish(item)
                    self.metrics.events += 1
                    # the reader's events all have ts; 0 (no time, no lag) is the metric's default
                    self.metrics.last_event_ts = item.header.ts or 0
                    self.metrics.caught_up = False
                elif isinstance(item, Boundary):
                    publisher.boundary(item.position)
                    self.metrics.caught_up = reader.quiet()  # lag 0: nothing more to read now
                    if flush_when_quiet and self.metrics.caught_up:  # latency: no linger for a quiet source
                        publisher.flush()
                committer.maybe_commit()
                self._maybe_report(publisher)
                if self.stop.is_set():
                    break
            clean = True
        finally:
            reader.close()
            if clean or not leadership.deposed.is_set():
                committer.final(publisher)
            publisher.close()

    def _check_source(self, store: PositionStore) -> tuple[Position, str]:
        """The server's settings are right (else ServerSettingsError); where to start; its flavor."""
        db = mysql.connect(self.src.mysql)
        try:
            flavor = check_server(db)
            return store.load() or initial_position(self.src, db), flavor
        finally:
            db.close()

    def _maybe_report(self, publisher: Publisher) -> None:
        now = time.monotonic()
        if now >= self._next_report:
            if self._next_report:
                self.metrics.report(publisher.records, publisher.bytes, self.cfg.endpoints.influxdb)
            self._next_report = now + self.src.extractor.metrics_interval_s


class _Committer:
    """Commits the newest acknowledged boundary at most every ``interval`` seconds."""

    def __init__(
        self,
        store: PositionStore,
        publisher: Publisher,
        metrics: ExtractorMetrics,
        epoch: int,
        interval: float,
    ) -> None:
        self._store, self._publisher, self._metrics = store, publisher, metrics
        self._epoch, self._interval = epoch, interval
        self._next = time.monotonic() + interval
        self._last: Position | None = None

    def maybe_commit(self) -> None:
        now = time.monotonic()
        if now >= self._next:
            self._next = now + self._interval
            self._commit(self._publisher.advance())

    def final(self, publisher: Publisher) -> None:
        try:
            self._commit(publisher.flush())
        except Exception as e:  # the last commit is best effort: a restart re-reads from the previous one
            log.warning("final commit failed: %s", e)

    def _commit(self, position: Position | None) -> None:
        if position is None or (position == self._last and not self._store.zk_behind):
            return  # nothing new, and ZooKeeper has it (after an outage the same position is re-sent)
        stamped = replace(position, epoch=self._epoch)
        self._store.commit(stamped)
        self._last = position
        self._metrics.committed = stamped
