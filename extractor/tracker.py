"""Which position may be committed: the last transaction boundary whose records are all acknowledged.

Pure bookkeeping over futures (anything with ``is_done`` and ``failed()`` / ``exception``): the extractor
``add``s each record's send future in binlog order and ``mark``s a boundary after each transaction;
``advance`` walks the acknowledged prefix and returns the newest boundary it passed. A failed send
raises, so a position is never committed past a record Kafka did not take.
"""

from __future__ import annotations

from collections import deque
from typing import Any, Generic, Protocol, TypeVar

P = TypeVar("P")


class SendFailed(Exception):
    """A record was not acknowledged; the position must not move past it."""


class FutureLike(Protocol):
    is_done: bool

    def failed(self) -> bool: ...

    def get(self, timeout: float | None = None) -> object: ...  # waits for the ack (the publisher's throttle)


class AckTracker(Generic[P]):
    def __init__(self) -> None:
        self._queue: deque[tuple[FutureLike | None, P | None, int]] = deque()
        self.pending = 0  # records sent and not yet acknowledged
        self.pending_bytes = 0  # and their size

    def add(self, future: FutureLike, size: int = 0) -> None:
        self._queue.append((future, None, size))
        self.pending += 1
        self.pending_bytes += size

    def mark(self, position: P) -> None:
        """A transaction boundary: everything added before it belongs to committed transactions."""
        self._queue.append((None, position, 0))

    def oldest(self) -> FutureLike | None:
        """The oldest unacknowledged record (to wait on when too many are pending)."""
        for future, _, _ in self._queue:
            if future is not None:
                return future
        return None

    def advance(self) -> P | None:
        """The newest boundary whose preceding records are all acknowledged, or None if none was passed."""
        newest: P | None = None
        q = self._queue
        while q:
            future, position, size = q[0]
            if future is None:
                newest = position
            elif not future.is_done:
                break
            elif future.failed():
                raise SendFailed(_reason(future))
            else:
                self.pending -= 1
                self.pending_bytes -= size
            q.popleft()
        return newest


def _reason(future: Any) -> str:
    return f"Kafka did not acknowledge a record: {getattr(future, 'exception', None)!r}"
