"""Throughput and lag of a Spark stage (dispatcher, appender) in InfluxDB, from its query's progress.

``StageMetrics`` is a ``StreamingQueryListener`` (``spark.streams.addListener``, see ``register``). Each
micro-batch's progress (``StreamingQuery.lastProgress``) becomes one point, by example::

    dbus_stage,ds=demo,stage=appender input_rows=20000i,rows_per_s=41234.5,batch_ms=485,lag_records=1200i
        <progress timestamp, ms>

Field types as docs/monitoring.md fixes them (InfluxDB 1.x refuses a field's other type within a shard):
``input_rows`` and ``lag_records`` integers, ``rows_per_s`` and ``batch_ms`` floats.

- ``input_rows``: ``numInputRows``, the records the micro-batch read;
- ``rows_per_s``: ``processedRowsPerSecond`` (0 when Spark leaves it out);
- ``batch_ms``: ``durationMs.triggerExecution``, the micro-batch's wall time;
- ``lag_records``: the Kafka source's ``maxOffsetsBehindLatest`` summed over the query's sources (records
  in the input topics not yet read when the batch ended; 0 when absent).

An idle query (no new data: Spark's ``onQueryIdle``, every ``noDataProgressEventInterval``, 10 s by
default) gives a point of zeros, so a quiet stage is visible as such. The listener runs on Spark's
listener thread; it only builds the point and hands it to a background thread that writes with
influxdb-client (``dbuslib.influx.write``). A full queue or a failed write is logged and dropped: the
query is never slowed down or failed by its metrics.
"""

from __future__ import annotations

import json
import logging
import math
import queue
import threading
from datetime import datetime
from typing import Any

from dbuslib.config import InfluxEndpoint

log = logging.getLogger("dbus.stagemetrics")
MEASUREMENT = "dbus_stage"
STAGES = ("dispatcher", "appender")
QUEUE_SIZE = 200  # points waiting for the writer at most; more are dropped
WRITE_BATCH = 50  # points per InfluxDB write at most


def stage_point(progress: dict[str, Any], ds: str, stage: str) -> Any:
    """The ``dbus_stage`` point of one progress (the dict of ``StreamingQueryProgress.json``)."""
    from influxdb_client import Point, WritePrecision

    rate = progress.get("processedRowsPerSecond")
    rate = float(rate) if isinstance(rate, (int, float)) and math.isfinite(rate) else 0.0
    point = (Point(MEASUREMENT).tag("ds", ds).tag("stage", stage)
             .field("input_rows", int(progress.get("numInputRows") or 0))
             .field("rows_per_s", rate)
             .field("batch_ms", float((progress.get("durationMs") or {}).get("triggerExecution") or 0))
             .field("lag_records", lag_records(progress)))
    at = _timestamp(progress.get("timestamp"))
    return point.time(at, WritePrecision.MS) if at is not None else point


def idle_point(timestamp: str | None, ds: str, stage: str) -> Any:
    """The point of an idle trigger: nothing read, nothing behind."""
    return stage_point({"timestamp": timestamp, "numInputRows": 0}, ds, stage)


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
                log.warning("stage metrics: %d point(s) dropped, the writer to %s is behind", self.dropped,
                            self.endpoint.url)

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
                    log.warning("stage metrics: %d point(s) not written to %s (%d failed writes): %s",
                                len(points), self.endpoint.url, self.failed_writes, e)
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


def _listener_class() -> type:
    from pyspark.sql.streaming import StreamingQueryListener

    class StageMetrics(StreamingQueryListener):
        """One ``dbus_stage`` point per progress (and per idle trigger) of the query ``query_name``."""

        def __init__(self, ds: str, stage: str, query_name: str | None, writer: PointWriter) -> None:
            self.ds, self.stage, self.query_name, self.writer = ds, stage, query_name, writer
            self._ids: set[str] = set()  # ids of the queries named query_name (idle events carry no name)

        def onQueryStarted(self, event: Any) -> None:  # noqa: N802 - Spark's method names
            if self.query_name is None or event.name == self.query_name:
                self._ids.add(str(event.id))

        def onQueryProgress(self, event: Any) -> None:  # noqa: N802
            try:
                progress = json.loads(event.progress.json)
                if self.query_name is not None and progress.get("name") != self.query_name:
                    return
                self._ids.add(str(progress.get("id")))  # registered after the start: idle events too
                self.writer.put(stage_point(progress, self.ds, self.stage))
            except Exception as e:  # a listener that raises is logged by Spark; keep it quiet and going
                log.warning("stage metrics: progress of %s not turned into a point: %s", self.stage, e)

        def onQueryIdle(self, event: Any) -> None:  # noqa: N802
            try:
                if str(event.id) in self._ids:
                    self.writer.put(idle_point(event.timestamp, self.ds, self.stage))
            except Exception as e:
                log.warning("stage metrics: idle event of %s not turned into a point: %s", self.stage, e)

        def onQueryTerminated(self, event: Any) -> None:  # noqa: N802
            self._ids.discard(str(event.id))

    return StageMetrics


def register(spark: Any, endpoint: InfluxEndpoint, ds: str, stage: str, query_name: str | None = None) -> Any:
    """Adds a StageMetrics listener to ``spark`` for ``stage`` of source ``ds`` (only the query named
    ``query_name`` when given; register before starting it, so its start is seen) and returns it;
    a listener that cannot be added is logged and None is returned (metrics are optional)."""
    if stage not in STAGES:
        msg = f"stage metrics: stage {stage!r} is not one of {STAGES}"
        raise ValueError(msg)
    try:
        listener = _listener_class()(ds, stage, query_name, PointWriter(endpoint))
        spark.streams.addListener(listener)
    except Exception as e:
        log.warning("stage metrics: listener for %s %s not added: %s", stage, ds, e)
        return None
    return listener


def unregister(spark: Any, listener: Any) -> None:
    """Removes a listener ``register`` returned (None is ignored); its queued points are still written."""
    if listener is None:
        return
    try:
        spark.streams.removeListener(listener)
    except Exception as e:
        log.warning("stage metrics: listener not removed: %s", e)
