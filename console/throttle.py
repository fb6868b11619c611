"""Failed logins counted per user name and per client address, in memory (one console process).

Over the last ``window_s`` seconds, a name's failures and its address's failures are counted apart. From
``slow_after`` failures of either on, every attempt waits ``delay_s`` before its password is checked
(``wait``: at most ``MAX_WAITING`` attempts wait at once, the others are refused, so waits cannot hold
every request thread); from ``user_failures`` failures of the name, or ``address_failures`` of the address,
an attempt is refused without its password being checked (429), until the oldest failure that counts
leaves the window (``retry_after``, whole seconds). A success clears its name's failures, never its
address's (one known password must not buy an address more guesses). Unknown names count as known ones do
(the answer must not tell them apart). At most ``max_keys`` names and addresses are kept, the least
recently failed dropped first.

    >>> t = LoginThrottle(window_s=60, slow_after=5, delay_s=1, user_failures=10, address_failures=30)
    >>> t.verdict("operator", "10.0.0.7")
    Verdict(refused=False, retry_after=0, wait_s=0.0, by='', failures=0, audit=False)
"""

from __future__ import annotations

import math
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass

MAX_WAITING = 4  # attempts that may wait at once (waitress serves with 8 threads)
MAX_KEYS = 10_000
KEY_CHARS = 256  # of a name tried (a form may send megabytes): longer names share their first 256


@dataclass(frozen=True)
class Verdict:
    """What to do with one login attempt: ``refused`` (429, ``retry_after`` seconds; ``by`` ``user`` or
    ``address``, ``failures`` of it in the window; ``audit``: this refusal is one to write down, the 1st,
    2nd, 4th, 8th... of the same lock), or check it after waiting ``wait_s`` seconds."""

    refused: bool
    retry_after: int = 0
    wait_s: float = 0.0
    by: str = ""
    failures: int = 0
    audit: bool = False


class LoginThrottle:
    def __init__(
        self,
        *,
        window_s: float,
        slow_after: int,
        delay_s: float,
        user_failures: int,
        address_failures: int,
        max_keys: int = MAX_KEYS,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.window_s, self.slow_after, self.delay_s = window_s, slow_after, delay_s
        self.limits = {"user": user_failures, "address": address_failures}
        self.max_keys = max_keys
        self._clock, self._sleep = clock, sleep
        self._failures: OrderedDict[tuple[str, str], deque[float]] = OrderedDict()
        self._refused: dict[tuple[str, str], tuple[float, int]] = {}  # key -> (its lock's oldest failure, n)
        self._busy = (0.0, 0)  # attempts refused because MAX_WAITING waited: (since, how many)
        self._lock = threading.Lock()
        self._waiting = threading.BoundedSemaphore(MAX_WAITING)

    def verdict(self, name: str, address: str) -> Verdict:
        """Refuse, or let the attempt through (after ``wait_s``)."""
        now = self._clock()
        with self._lock:
            counts = []
            for key in _keys(name, address):
                recent = self._recent(key, now)
                limit = self.limits[key[0]]
                if len(recent) >= limit:
                    return self._refuse(key, recent, limit, now)
                counts.append(len(recent))
        wait = self.delay_s if max(counts) >= self.slow_after else 0.0
        return Verdict(refused=False, wait_s=wait, failures=max(counts))

    def wait(self, seconds: float) -> bool:
        """Wait ``seconds`` before a check; False at once when ``MAX_WAITING`` attempts wait already."""
        if seconds <= 0:
            return True
        if not self._waiting.acquire(blocking=False):
            return False
        try:
            self._sleep(seconds)
        finally:
            self._waiting.release()
        return True

    def failed(self, name: str, address: str) -> None:
        """A wrong name or password from ``address``."""
        now = self._clock()
        with self._lock:
            for key in _keys(name, address):
                recent = self._recent(key, now)
                if not recent:
                    recent = self._failures[key] = deque(maxlen=max(self.limits[key[0]], self.slow_after))
                recent.append(now)
                self._failures.move_to_end(key)
            while len(self._failures) > self.max_keys:
                dropped, _ = self._failures.popitem(last=False)
                self._refused.pop(dropped, None)

    def succeeded(self, name: str) -> None:
        """``name`` logged in: its failures are forgotten (its address's stay)."""
        key = _keys(name, "")[0]
        with self._lock:
            self._failures.pop(key, None)
            self._refused.pop(key, None)

    def busy(self, wait_s: float) -> Verdict:
        """The refusal of an attempt that should have waited ``wait_s`` when ``MAX_WAITING`` already do;
        audited as locks are (1st, 2nd, 4th... within a window)."""
        now = self._clock()
        with self._lock:
            since, n = self._busy
            since, n = (since, n + 1) if now - since < self.window_s else (now, 1)
            self._busy = (since, n)
        return Verdict(refused=True, retry_after=max(1, math.ceil(wait_s)), audit=n & (n - 1) == 0)

    def __len__(self) -> int:
        return len(self._failures)

    def _recent(self, key: tuple[str, str], now: float) -> deque[float]:
        """The failures of ``key`` still in the window (an empty deque, not kept, when none)."""
        recent = self._failures.get(key)
        if recent is None:
            return deque()
        while recent and recent[0] <= now - self.window_s:
            recent.popleft()
        if not recent:
            del self._failures[key]
            self._refused.pop(key, None)
        return recent

    def _refuse(self, key: tuple[str, str], recent: deque[float], limit: int, now: float) -> Verdict:
        frees_at = recent[-limit] + self.window_s  # then fewer than ``limit`` failures remain
        oldest, n = self._refused.get(key, (recent[0], 0))
        n = n + 1 if oldest == recent[0] else 1
        self._refused[key] = (recent[0], n)
        return Verdict(
            refused=True,
            retry_after=max(1, math.ceil(frees_at - now)),
            by=key[0],
            failures=len(recent),
            audit=n & (n - 1) == 0,
        )


def _keys(name: str, address: str) -> tuple[tuple[str, str], tuple[str, str]]:
    return ("user", name[:KEY_CHARS]), ("address", address)
