"""Throughput and lag of a Spark stage (dispatcher, appender) in InfluxDB, from its query's progress.

``watch(query, ...)`` starts a ``ProgressWatcher`` on the driver that reads the query's recent progress
every few seconds (see its docstring for why it is not a StreamingQueryListener). Each micro-batch's
progress becomes one point, by example::

    dbus_stage,ds=demo,stage=appender input_rows=20000i,rows_per_s=41234.5,batch_ms=485,lag_records=1200i
        <progress timestamp, ms>

Field types as docs/monitoring.md fixes them (InfluxDB 1.x refuses a field's other type within a shard):
``input_rows`` and ``lag_records`` integers, ``rows_per_s`` and ``batch_ms`` floats.

- ``input_rows``: ``numInputRows``, the records the micro-batch read;
- ``rows_per_s``: ``processedRowsPerSecond`` (0 when Spark leaves it out);
- ``batch_ms``: ``durationMs.triggerExecution``, the micro-batch's wall time; in real-time mode, where a
  batch lasts its checkpoint interval, the batch's time outside streaming records (``triggerExecution``
  less ``addBatch``: offsets, planning, the commit), the pause between two batches;
- ``checkpoint_ms``: a real-time query's checkpoint interval (``realtime_checkpoint_s``), 0 in micro-batch
  mode;
- ``lag_records``: the Kafka source's ``maxOffsetsBehindLatest`` summed over the query's sources (records
  in the input topics not yet read when the batch ended; 0 when absent).

A query with no micro-batch for ``IDLE_S`` gives a point of zeros, so a quiet stage is visible as such.
In real-time mode a batch's progress comes when it ends (every ``realtime_checkpoint_s``), its rates
averaged over the batch, and the idle wait is that much longer.
The log processor's watcher also turns each progress's ``observedMetrics`` (its per-batch counts, observed
on the query's output) into ``dbus_log`` and ``dbus_heartbeat`` points: the ``more_points`` of ``watch``,
``logprocessor.metrics.BatchCounts.points`` (docs/monitoring.md). A progress Spark already dropped from
``recentProgress`` (more than ``spark.sql.streaming.numRecentProgressUpdates``, 100, batches within a poll)
is not counted.
Points go to a background thread that writes with influxdb-client (``dbuslib.influx.write``). A full
queue or a failed write is logged and dropped: the query is never slowed down or failed by its metrics.
"""

from __future__ import annotations

import json
import logging
import math
import queue
import threading
import time
from collections.abc import Callable
from datetime import datetime
from typing import Any

from dbuslib.config import InfluxEndpoint

log = logging.getLogger("dbus.stagemetrics")
MEASUREMENT = "dbus_stage"
STAGES = ("dispatcher", "appender", "logprocessor")
QUEUE_SIZE = 2000  # points waiting for the writer at most; more are dropped
WRITE_BATCH = 50  # points per InfluxDB write at most
IDLE_S = 10.0  # no micro-batch for this long: an idle point (Spark's noDataProgressEventInterval)


def stage_point(
    progress: dict[str, Any], ds: str, stage: str, waiting: bool = False, checkpoint_ms: float = 0.0
) -> Any:
    """The ``dbus_stage`` point of one progress (the dict of ``StreamingQueryProgress.json``); ``waiting``:
    the query waits for the cluster's resources (``dbuslib.spark.short_of_slots``; ``dbus status``);
    ``checkpoint_ms``: the real-time batch length (0: micro-batch)."""
    from influxdb_client import Point, WritePrecision

    rate = progress.get("processedRowsPerSecond")
    rate = float(rate) if isinstance(rate, (int, float)) and math.isfinite(rate) else 0.0
    point = (
        Point(MEASUREMENT)
        .tag("ds", ds)
        .tag("stage", stage)
        .field("input_rows", int(progress.get("numInputRows") or 0))
        .field("rows_per_s", rate)
        .field("batch_ms", work_ms(progress.get("durationMs") or {}, checkpoint_ms > 0))
        .field("checkpoint_ms", float(checkpoint_ms))
        .field("lag_records", lag_records(progress))
        .field("waiting", 1 if waiting else 0)
    )
    at = _timestamp(progress.get("timestamp"))
    return point.time(at, WritePrecision.MS) if at is not None else point


def idle_point(
    timestamp: str | None, ds: str, stage: str, waiting: bool = False, checkpoint_ms: float = 0.0
) -> Any:
    """The point of an idle trigger: nothing read, nothing behind (``waiting``: for resources)."""
    return stage_point({"timestamp": timestamp, "numInputRows": 0}, ds, stage, waiting, checkpoint_ms)


def work_ms(durations: dict[str, Any], realtime: bool) -> float:
    """A batch's ``batch_ms``: its wall time (``triggerExecution``), or for a real-time batch, which streams
    records for its whole checkpoint interval inside ``addBatch``, the rest: the pause between batches."""
    total = float(durations.get("triggerExecution") or 0)
    return max(0.0, total - float(durations.get("addBatch") or 0)) if realtime else total


def lag_records(progress: dict[str, Any]) -> int:
    """``maxOffsetsBehindLatest`` summed over the sources (the Kafka source gives it as a string)."""
    total = 0
    for source in progress.get("sources") or ():
        value = (source.get("metrics") or {}).get("maxOffsetsBehindLatest")
        try:
            total += int(float(value)) if value is not None else 0
        except (TypeError, ValueError):
            continue
    return total


def _timestamp(text: Any) -> datetime | None:
    """Spark's ``2026-01-02T03:04:05.678Z`` as an aware datetime (None when missing or odd)."""
    if not isinstance(text, str):
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


class PointWriter:
    """Writes points from a bounded queue on a daemon thread; ``put`` never blocks."""

    def __init__(self, endpoint: InfluxEndpoint, name: str = "dbus-stage-metrics") -> None:
        self.endpoint = endpoint
        self.dropped = 0
        self.failed_writes = 0
        self._queue: queue.Queue = queue.Queue(QUEUE_SIZE)
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def put(self, point: Any) -> None:
        try:
            self._queue.put_nowait(point)
        except queue.Full:
            self.dropped += 1
            if self.dropped in (1, 10) or self.dropped % 1000 == 0:
                log.warning(
                    "stage metrics: %d point(s) dropped, the writer to %s is behind",
                    self.dropped,
                    self.endpoint.where,
                )

    def _run(self) -> None:
        from dbuslib import influx

        while True:
            points = [self._queue.get()]
            while len(points) < WRITE_BATCH:
                try:
                    points.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            try:
                influx.write(self.endpoint, points)
            except Exception as e:  # never the query's problem
                self.failed_writes += 1
                if self.failed_writes in (1, 10) or self.failed_writes % 100 == 0:
                    log.warning(
                        "stage metrics: %d point(s) not written to %s (%d failed writes): %s",
                        len(points),
                        self.endpoint.where,
                        self.failed_writes,
                        e,
                    )
            finally:
                for _ in points:
                    self._queue.task_done()

    def flush(self, timeout_s: float = 5.0) -> bool:
        """Wait (at most ``timeout_s``) for the queued points to be written or given up; tests use it."""
        done = threading.Event()

        def wait() -> None:
            self._queue.join()
            done.set()

        threading.Thread(target=wait, daemon=True).start()
        return done.wait(timeout_s)


class ProgressWatcher:
    """Turns a running query's progress into ``dbus_stage`` points from a daemon thread of the driver:
    every ``interval_s`` it reads ``query.recentProgress`` and queues a point per micro-batch not seen
    yet, and an idle point (zeros) when no batch ran for ``IDLE_S`` plus ``batch_s`` (a real-time query's
    batch length: its progress comes at each batch's end).

    Not a ``StreamingQueryListener``: a Python listener is called through py4j for every event, on the
    query's path, and raised the stages' latency (measured: docs/performance.md). Polling stays off it."""

    def __init__(
        self,
        query: Any,
        ds: str,
        stage: str,
        writer: PointWriter,
        interval_s: float = 5.0,
        batch_s: float = 0.0,
        waiting: Callable[[], bool] | None = None,
        more_points: Callable[[dict[str, Any], int | None], list[Any]] | None = None,
    ) -> None:
        self.query, self.ds, self.stage, self.writer, self.interval_s = query, ds, stage, writer, interval_s
        self.batch_s, self.waiting, self.more_points = batch_s, waiting, more_points
        self.last_batch = -1
        self._last_seen = time.monotonic()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"dbus-stage-metrics-{stage}", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(self.interval_s + 5)
        self.poll()  # the last batches
        self.writer.flush()

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.poll()

    def poll(self) -> int:
        """Queue the points of batches not seen yet; returns how many."""
        try:
            progresses = [progress_dict(p) for p in (self.query.recentProgress or [])]
        except Exception as e:  # the query or the JVM is going away: nothing to report
            log.debug("stage metrics: progress of %s not read: %s", self.stage, e)
            return 0
        new = [p for p in progresses if int(p.get("batchId", -1)) > self.last_batch]
        for p in sorted(new, key=lambda p: int(p.get("batchId", -1))):
            try:
                self.writer.put(stage_point(p, self.ds, self.stage, checkpoint_ms=self.batch_s * 1000))
                if self.more_points is not None:
                    at = _timestamp(p.get("timestamp"))
                    for point in self.more_points(p, None if at is None else int(at.timestamp() * 1000)):
                        self.writer.put(point)
            except Exception as e:
                log.warning("stage metrics: progress of %s not turned into a point: %s", self.stage, e)
        if new:
            self.last_batch = max(int(p.get("batchId", -1)) for p in new)
            self._last_seen = time.monotonic()
        elif self._waiting():  # no progress because no task can run: said at once, every poll
            self.writer.put(idle_point(None, self.ds, self.stage, True, self.batch_s * 1000))
        elif time.monotonic() - self._last_seen >= IDLE_S + self.batch_s:
            self.writer.put(idle_point(None, self.ds, self.stage, checkpoint_ms=self.batch_s * 1000))
            self._last_seen = time.monotonic()
        return len(new)

    def _waiting(self) -> bool:
        try:
            return bool(self.waiting and self.waiting())
        except Exception as e:  # the context is going away: not known
            log.debug("stage metrics: resources of %s not read: %s", self.stage, e)
            return False


def progress_dict(progress: Any) -> dict[str, Any]:
    """A progress as PySpark returns it (a dict, or a StreamingQueryProgress with ``json``)."""
    if isinstance(progress, dict):
        return progress
    text = getattr(progress, "json", None)
    return json.loads(text) if isinstance(text, str) else dict(progress)


def batch_s(settings: Any) -> float:
    """The batch length of a stage's query in real-time mode (``dbuslib.config.StreamSettings``), else 0."""
    return float(settings.realtime_checkpoint_s) if settings.trigger == "realtime" else 0.0


def watch_stage(
    query: Any,
    session: Any,
    cfg: Any,
    ds: str,
    stage: str,
    more_points: Callable[[dict[str, Any], int | None], list[Any]] | None = None,
) -> Any:
    """``watch`` of a stage's query with the stage's settings: its batch length in real-time mode, and
    whether its session waits for the cluster's resources (``dbuslib.spark.short_of_slots``);
    ``more_points``: further points of each progress (the log processor's counts)."""
    from dbuslib import spark

    if stage == "logprocessor":
        settings = cfg.log_source(ds).processor
    else:
        settings = getattr(cfg.source(ds), stage)
    return watch(
        query,
        cfg.endpoints.influxdb,
        ds,
        stage,
        batch_s=batch_s(settings),
        waiting=lambda: spark.short_of_slots(session),
        more_points=more_points,
    )


def watch(
    query: Any,
    endpoint: InfluxEndpoint,
    ds: str,
    stage: str,
    interval_s: float = 5.0,
    batch_s: float = 0.0,
    waiting: Callable[[], bool] | None = None,
    more_points: Callable[[dict[str, Any], int | None], list[Any]] | None = None,
) -> Any:
    """Starts a ProgressWatcher for ``query`` (a running stage's) and returns it (None when it cannot:
    metrics are optional); ``stop()`` it when the query ends. ``batch_s``: a real-time query's batch
    length (its progress comes once per batch: idle only after that much more); ``waiting()``: the query
    waits for resources; ``more_points(progress, timestamp ms)``: further points of each new progress."""
    if stage not in STAGES:
        msg = f"stage metrics: stage {stage!r} is not one of {STAGES}"
        raise ValueError(msg)
    try:
        return ProgressWatcher(
            query, ds, stage, PointWriter(endpoint), interval_s, batch_s, waiting, more_points
        )
    except Exception as e:
        log.warning("stage metrics: no watcher for %s %s: %s", stage, ds, e)
        return None


def unwatch(watcher: Any) -> None:
    """Stops a watcher ``watch`` returned (None is ignored); its last points are written."""
    if watcher is not None:
        try:
            watcher.stop()
        except Exception as e:
            log.warning("stage metrics: watcher not stopped cleanly: %s", e)
