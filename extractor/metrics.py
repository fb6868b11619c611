"""Extractor figures: events/s, records/s, bytes/s, lag, committed position; logged and written to InfluxDB.

Rows are not decoded in the extractor, so it counts binlog rows events ("events"); rows per second are
measured where rows are decoded (the appender). Lag is now minus the server timestamp of the last event
read, in seconds, and 0 while the extractor has read everything the server has (``caught_up``: the last
transaction ended with nothing more waiting on the binlog connection, and no event came since): an idle
source is not behind, however old its last event. InfluxDB measurement ``dbus_extractor``, tag ``ds``; a
failed write is logged and skipped, never stopping the extractor.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

from dbuslib.config import InfluxEndpoint
from extractor.position import Position

log = logging.getLogger(__name__)


@dataclass
class Rates:
    events_per_s: float
    records_per_s: float
    bytes_per_s: float
    lag_s: float


@dataclass
class ExtractorMetrics:
    ds: str
    events: int = 0
    last_event_ts: int = 0
    caught_up: bool = False  # nothing more on the binlog connection at the last transaction's end
    committed: Position | None = None
    _last: tuple[float, int, int, int] = field(default_factory=lambda: (time.monotonic(), 0, 0, 0))

    def rates(self, records: int, bytes_: int, now: float | None = None) -> Rates:
        """Rates since the previous call."""
        now = time.monotonic() if now is None else now
        t0, e0, r0, b0 = self._last
        dt = max(now - t0, 1e-9)
        self._last = (now, self.events, records, bytes_)
        behind = self.last_event_ts and not self.caught_up
        lag = max(0.0, time.time() - self.last_event_ts) if behind else 0.0
        return Rates((self.events - e0) / dt, (records - r0) / dt, (bytes_ - b0) / dt, lag)

    def report(self, records: int, bytes_: int, influx: InfluxEndpoint | None) -> Rates:
        r = self.rates(records, bytes_)
        where = f"{self.committed.file}:{self.committed.pos}" if self.committed else "none yet"
        log.info(
            "%s: %.0f events/s, %.0f records/s, %.0f KB/s, lag %.1fs, committed %s",
            self.ds,
            r.events_per_s,
            r.records_per_s,
            r.bytes_per_s / 1024,
            r.lag_s,
            where,
        )
        if influx is not None:
            self._write(r, influx)
        return r

    def _write(self, r: Rates, influx: InfluxEndpoint) -> None:
        from influxdb_client import Point

        from dbuslib import influx as ifx

        point = (
            Point("dbus_extractor")
            .tag("ds", self.ds)
            .field("events_per_s", r.events_per_s)
            .field("records_per_s", r.records_per_s)
            .field("bytes_per_s", r.bytes_per_s)
            .field("lag_s", r.lag_s)
        )
        if self.committed:
            point = point.field("committed_pos", self.committed.pos).field(
                "committed_file", self.committed.file
            )
        try:
            ifx.write(influx, [point])
        except Exception as e:  # metrics must never stop the extractor
            log.warning("%s: could not write metrics to %s: %s", self.ds, influx.where, e)
