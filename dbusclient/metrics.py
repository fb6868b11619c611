"""A consumer client's figures in InfluxDB: what it read and applied, its lag, its bootstrap, its errors.

The application (or the replicate command) feeds a ``ClientMetrics`` as it consumes, and it writes at
most one set of points every ``interval_s`` through the stages' writer (``dbuslib.stagemetrics.
PointWriter``: a bounded queue and a daemon thread; a failed write is logged and dropped, never the
consumer's problem). One flush of client ``orders-replica`` reading source ``demo``, in line protocol::

    dbus_client,ds=demo,client=orders-replica windows=12i,rows_read=60000i,applied=59870i,duplicates=100i,
        stale=30i,busy_s=4.21,rows_per_s=6000.0,applied_per_s=5987.0,lag_records=1200i,
        mode="BOOTSTRAP_SNAPSHOT",pulls=2i,pulls_ended=1i,bootstrap_rows=420001i,errors=1i
    dbus_client_lag,ds=demo,client=orders-replica,topic=demo.shop.result,partition=0 lag_records=1200i
    dbus_client_bootstrap,ds=demo,client=orders-replica,schema=shop,table=orders,id=1704164645123
        rows=420001i,ended=0i
    dbus_client_error,ds=demo,client=orders-replica,code=CLIENT_SINK_FAILED count=1i

- ``windows``, ``rows_read`` (records read), ``applied``, ``duplicates``, ``stale``, ``busy_s`` (seconds
  spent in windows): sums since the previous flush; ``rows_per_s``, ``applied_per_s``: those per second
  of the time since the previous flush;
- ``lag_records``: per partition, its end offset minus the checkpointed offset (``lag_records``); the sum
  in ``dbus_client``, left out while no lag was given;
- ``mode``, ``pulls``, ``pulls_ended``, ``bootstrap_rows``: from the latest checkpoint (``ONLINE``, 0 pulls
  when no bootstrap); one ``dbus_client_bootstrap`` point per pull of a bootstrap under way;
- ``errors``: errors since the previous flush, and one ``dbus_client_error`` point per code.

Names of measurements, tags and fields have their home here; ``dbus status`` (status/readers.py) reads them
from here. docs/client.md (Metrics) and docs/monitoring.md list them.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Protocol

from dbusclient.checkpoint import Checkpoint, Mode, TablePull
from dbuslib.config import InfluxEndpoint

MEASUREMENT = "dbus_client"
LAG_MEASUREMENT = "dbus_client_lag"
BOOTSTRAP_MEASUREMENT = "dbus_client_bootstrap"
ERROR_MEASUREMENT = "dbus_client_error"
TAG_DS, TAG_CLIENT = "ds", "client"  # on every point; the others: topic, partition; schema, table, id; code
RATE_FIELD = "rows_per_s"  # the field dbus status takes the newest point of
STATUS_FIELDS = ("lag_records", "mode", "pulls", "pulls_ended", "bootstrap_rows", "applied_per_s", "errors")
INTERVAL_S = 10.0  # the default time between two flushes (seconds)

Partition = tuple[str, int]  # (topic, partition); kafka-python's TopicPartition is one


@dataclass(frozen=True)
class WindowTally:
    """What the windows since the previous flush read and did; ``busy_s`` the seconds spent in them."""

    windows: int = 0
    rows_read: int = 0
    applied: int = 0
    duplicates: int = 0
    stale: int = 0
    busy_s: float = 0.0

    def add(self, rows_read: int, applied: int, duplicates: int, stale: int, seconds: float) -> WindowTally:
        return replace(
            self,
            windows=self.windows + 1,
            rows_read=self.rows_read + rows_read,
            applied=self.applied + applied,
            duplicates=self.duplicates + duplicates,
            stale=self.stale + stale,
            busy_s=self.busy_s + seconds,
        )


@dataclass(frozen=True)
class Report:
    """Everything one flush writes (pure input of ``points``): the tally over ``elapsed_s`` seconds, the
    lag per partition (None: not known), the checkpoint's mode and pulls, errors per code."""

    tally: WindowTally
    elapsed_s: float
    lag: Mapping[Partition, int] | None = None
    mode: Mode = Mode.ONLINE
    pulls: tuple[TablePull, ...] = ()
    errors: Mapping[str, int] | None = None


def lag_records(
    end_offsets: Mapping[Partition, int], offsets: Mapping[Partition, int]
) -> dict[Partition, int]:
    """Per partition of ``end_offsets`` with a checkpointed offset in ``offsets``, the records not read
    yet: end offset minus that offset, never below 0 (an end offset read before the last window). A
    partition with no offset yet is left out (its lag is not known). ``{("demo.shop.result", 0): 1200}``
    from ``{("demo.shop.result", 0): 2434}`` and ``{("demo.shop.result", 0): 1234}``; kafka-python's
    ``end_offsets`` (keyed by ``TopicPartition``) and ``Checkpoint.offsets()`` fit as they are."""
    out: dict[Partition, int] = {}
    for part, end in end_offsets.items():
        key = (part[0], int(part[1]))
        if key in offsets:
            out[key] = max(0, int(end) - int(offsets[key]))
    return dict(sorted(out.items()))


def _rate(count: int, seconds: float) -> float:
    return round(count / seconds, 3) if seconds > 0 else 0.0


def points(ds: str, client: str, report: Report, at_ms: int) -> list[Any]:
    """The points of one flush, all timed ``at_ms`` (epoch ms): one ``dbus_client``, then one per
    partition, pull and error code (module docstring). Field types are fixed: counts are integers, rates
    and seconds floats, ``mode`` a string."""
    from influxdb_client import Point, WritePrecision

    def point(measurement: str) -> Any:
        return Point(measurement).tag(TAG_DS, ds).tag(TAG_CLIENT, client).time(at_ms, WritePrecision.MS)

    t, errors = report.tally, dict(report.errors or {})
    main = (
        point(MEASUREMENT)
        .field("windows", t.windows)
        .field("rows_read", t.rows_read)
        .field("applied", t.applied)
        .field("duplicates", t.duplicates)
        .field("stale", t.stale)
        .field("busy_s", float(t.busy_s))
        .field(RATE_FIELD, _rate(t.rows_read, report.elapsed_s))
        .field("applied_per_s", _rate(t.applied, report.elapsed_s))
        .field("mode", report.mode.value)
        .field("pulls", len(report.pulls))
        .field("pulls_ended", sum(1 for p in report.pulls if p.ended))
        .field("bootstrap_rows", sum(p.rows for p in report.pulls))
        .field("errors", sum(errors.values()))
    )
    out = [main]
    if report.lag is not None:
        main.field("lag_records", sum(report.lag.values()))
        for (topic, partition), lag in sorted(report.lag.items()):
            out.append(
                point(LAG_MEASUREMENT)
                .tag("topic", topic)
                .tag("partition", str(partition))
                .field("lag_records", lag)
            )
    for p in report.pulls:
        out.append(
            point(BOOTSTRAP_MEASUREMENT)
            .tag("schema", p.schema)
            .tag("table", p.table)
            .tag("id", str(p.seqno))
            .field("rows", p.rows)
            .field("ended", 1 if p.ended else 0)
        )
    for code, count in sorted(errors.items()):
        out.append(point(ERROR_MEASUREMENT).tag("code", code).field("count", count))
    return out


class PointSink(Protocol):
    """Where points go: ``dbuslib.stagemetrics.PointWriter`` (``put`` never blocks; ``flush`` waits)."""

    def put(self, point: Any) -> None: ...

    def flush(self, timeout_s: float = 5.0) -> bool: ...


class ClientMetrics:
    """The figures of consumer ``client`` of source ``ds``, fed by the application, written to ``sink``
    at most every ``interval_s`` seconds. Not thread-safe: feed it from the consumer's thread.

    - ``window(rows_read, applied, duplicates, stale, seconds)`` after every window (poll), empty ones too;
    - ``checkpoint(cp)`` with each checkpoint saved (mode and bootstrap progress);
    - ``error(code)`` for each error (a ``DbusError``'s ``code``);
    - ``due()``: a flush is due; then ``lag(end_offsets, offsets)`` if the caller reads the end offsets
      (one request to Kafka: only when due), and ``flush()``;
    - ``close()`` flushes what is left and waits (a few seconds at most) for the writer."""

    def __init__(
        self,
        ds: str,
        client: str,
        sink: PointSink,
        interval_s: float = INTERVAL_S,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        if not ds or not client:
            msg = f"client metrics: ds {ds!r} and client {client!r} must not be empty"
            raise ValueError(msg)
        self.ds, self.client, self.sink, self.interval_s = ds, client, sink, interval_s
        self._clock, self._wall = clock, wall
        self._since = clock()
        self._tally = WindowTally()
        self._lag: dict[Partition, int] | None = None
        self._mode: Mode = Mode.ONLINE
        self._pulls: tuple[TablePull, ...] = ()
        self._errors: dict[str, int] = {}

    @classmethod
    def connect(
        cls, endpoint: InfluxEndpoint, ds: str, client: str, interval_s: float = INTERVAL_S
    ) -> ClientMetrics:
        """Metrics written to ``endpoint`` (``endpoints.influxdb``) by a writer thread of their own."""
        from dbuslib.stagemetrics import PointWriter

        return cls(ds, client, PointWriter(endpoint, name=f"dbus-client-metrics-{client}"), interval_s)

    def window(self, rows_read: int, applied: int, duplicates: int, stale: int, seconds: float) -> None:
        self._tally = self._tally.add(rows_read, applied, duplicates, stale, seconds)

    def checkpoint(self, cp: Checkpoint) -> None:
        self._mode = cp.mode
        self._pulls = cp.bootstrap.pulls if cp.bootstrap is not None else ()

    def error(self, code: str) -> None:
        self._errors[code] = self._errors.get(code, 0) + 1

    def lag(self, end_offsets: Mapping[Partition, int], offsets: Mapping[Partition, int]) -> None:
        """The lag per partition (``lag_records``), kept until the next call."""
        self._lag = lag_records(end_offsets, offsets)

    def due(self) -> bool:
        return self._clock() - self._since >= self.interval_s

    def report(self) -> Report:
        """What a flush now would write."""
        return Report(
            self._tally,
            max(0.0, self._clock() - self._since),
            self._lag,
            self._mode,
            self._pulls,
            dict(self._errors),
        )

    def flush(self) -> int:
        """Queue the points of the figures since the previous flush and start counting anew; returns
        how many points."""
        batch = points(self.ds, self.client, self.report(), int(self._wall() * 1000))
        for p in batch:
            self.sink.put(p)
        self._since, self._tally, self._errors = self._clock(), WindowTally(), {}
        return len(batch)

    def flush_if_due(self) -> int:
        return self.flush() if self.due() else 0

    def close(self, timeout_s: float = 5.0) -> None:
        self.flush()
        self.sink.flush(timeout_s)
