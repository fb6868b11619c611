"""The Kafka edge of the extractor: raw events out, acknowledgements tracked, reading throttled.

``publish`` never lets more than ``max_pending_records`` records or ``max_pending_bytes`` bytes wait for
acknowledgement: past that it blocks on the oldest send, so a slow Kafka slows the binlog reading and
memory stays bounded however large a transaction is. ``ready`` is the newest transaction boundary whose
records Kafka has all acknowledged (acks=all): the only position that may be committed.
"""

from __future__ import annotations

from binlog.rawevent import RawEvent, encode, split
from dbuslib import kafka
from dbuslib.config import ExtractorSettings, KafkaEndpoint
from extractor.position import Position
from extractor.tracker import AckTracker, SendFailed

ACK_TIMEOUT_S = 120


class Publisher:
    def __init__(self, endpoint: KafkaEndpoint, topic: str, settings: ExtractorSettings) -> None:
        self.topic = topic
        self._settings = settings
        self._producer = kafka.producer(
            endpoint, max_request_size=settings.max_record_bytes + 65536, **settings.producer
        )
        self._tracker: AckTracker[Position] = AckTracker()
        self.ready: Position | None = None
        self.records = 0
        self.bytes = 0

    def publish(self, event: RawEvent) -> None:
        key = event.key.encode()
        for part in split(event, self._settings.max_record_bytes):
            value = encode(part)
            self._tracker.add(self._producer.send(self.topic, key=key, value=value), len(value))
            self.records += 1
            self.bytes += len(value)
        self._throttle()

    def boundary(self, position: Position) -> None:
        self._tracker.mark(position)

    def advance(self) -> Position | None:
        """Walk the acknowledged prefix; the newest committable position (also kept in ``ready``)."""
        newest = self._tracker.advance()
        if newest is not None:
            self.ready = newest
        return self.ready

    def flush(self) -> Position | None:
        self._producer.flush(timeout=ACK_TIMEOUT_S)
        return self.advance()

    def close(self) -> None:
        self._producer.close(timeout=10)

    def _throttle(self) -> None:
        s, t = self._settings, self._tracker
        while t.pending > s.max_pending_records or t.pending_bytes > s.max_pending_bytes:
            oldest = t.oldest()
            if oldest is None:
                return
            try:
                oldest.get(timeout=ACK_TIMEOUT_S)
            except Exception as e:  # any send failure: the position must not pass this record
                msg = f"Kafka did not acknowledge a record of {self.topic}: {e!r}"
                raise SendFailed(msg) from e
            self.advance()
