"""The console's logins, kept on the server (in memory: one console process), so that they can be ended.

The session cookie carries only a random session id (signed by Flask); the store maps it to the user's
name, a fingerprint of the user's ``password_hash`` when they logged in, when they did and when they last
made a request. A login ends, and its id is refused from then on, at a logout (``revoke``),
``lifetime_s`` after it was opened, ``idle_s`` after its last request, when the user's hash is no longer
the one it was opened with (a changed password, a user without a hash or removed) and when the console
restarts. At most ``max_sessions`` are kept (the oldest dropped first).

    >>> store = SessionStore(lifetime_s=12 * 3600, idle_s=3600)
    >>> sid = store.open("operator", "9f2c...")
    >>> store.find(sid, {"operator": "9f2c..."}.get)
    'operator'
    >>> store.revoke(sid); store.find(sid, {"operator": "9f2c..."}.get) is None
    True
"""

from __future__ import annotations

import hashlib
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

MAX_SESSIONS = 10_000


def fingerprint(password_hash: str) -> str | None:
    """What a session remembers of its user's hash (None for an empty hash: no login)."""
    return hashlib.sha256(password_hash.encode()).hexdigest() if password_hash else None


@dataclass
class _Login:
    name: str
    fingerprint: str
    opened: float
    seen: float


class SessionStore:
    def __init__(
        self,
        *,
        lifetime_s: float,
        idle_s: float,
        max_sessions: int = MAX_SESSIONS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.lifetime_s, self.idle_s, self.max_sessions = lifetime_s, idle_s, max_sessions
        self._clock = clock
        self._logins: OrderedDict[str, _Login] = OrderedDict()  # in the order they were opened
        self._lock = threading.Lock()

    def open(self, name: str, fingerprint: str) -> str:
        """A new login of ``name``: its session id."""
        sid = secrets.token_urlsafe(32)
        now = self._clock()
        with self._lock:
            for old in [s for s, login in self._logins.items() if self._ended(login, now)]:
                del self._logins[old]
            while len(self._logins) >= self.max_sessions:
                self._logins.popitem(last=False)
            self._logins[sid] = _Login(name, fingerprint, now, now)
        return sid

    def find(self, sid: str, fingerprint_of: Callable[[str], str | None]) -> str | None:
        """The user of the login ``sid``, seen now; None (and the login ended) when it has ended or the
        user's hash fingerprint (``fingerprint_of(name)``) is not the one it was opened with."""
        now = self._clock()
        with self._lock:
            login = self._logins.get(sid)
            if login is None:
                return None
            if self._ended(login, now) or fingerprint_of(login.name) != login.fingerprint:
                del self._logins[sid]
                return None
            login.seen = now
            return login.name

    def revoke(self, sid: str) -> None:
        """End the login ``sid`` (a logout)."""
        with self._lock:
            self._logins.pop(sid, None)

    def __len__(self) -> int:
        return len(self._logins)

    def _ended(self, login: _Login, now: float) -> bool:
        return now - login.opened >= self.lifetime_s or now - login.seen >= self.idle_s
