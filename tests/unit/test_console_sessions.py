"""console/sessions.py: logins kept on the server, ended by a logout, their lifetime or a changed hash."""

from __future__ import annotations

from console.sessions import SessionStore, fingerprint

HASHES = {"operator": fingerprint("scrypt:1"), "viewer": fingerprint("scrypt:2")}


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def store(clock: Clock, max_sessions: int = 10_000) -> SessionStore:
    """Logins of at most 100 s, 30 s idle."""
    return SessionStore(lifetime_s=100, idle_s=30, max_sessions=max_sessions, clock=clock)


def test_a_login_is_found_until_it_is_revoked() -> None:
    s = store(Clock())
    sid = s.open("operator", HASHES["operator"] or "")
    assert s.find(sid, HASHES.get) == "operator"
    s.revoke(sid)
    assert s.find(sid, HASHES.get) is None


def test_ids_are_random_and_unknown_ids_find_nobody() -> None:
    s = store(Clock())
    a, b = s.open("operator", "f"), s.open("operator", "f")
    assert a != b and len(a) >= 40
    assert s.find("operator", HASHES.get) is None  # the name is no id
    assert s.find("", HASHES.get) is None


def test_the_lifetime_is_absolute_however_busy_the_login() -> None:
    clock = Clock()
    s = store(clock)
    sid = s.open("operator", HASHES["operator"] or "")
    for _ in range(9):
        clock.now += 11  # a request every 11 s: never idle
        assert s.find(sid, HASHES.get) == "operator"
    clock.now = 100
    assert s.find(sid, HASHES.get) is None
    assert len(s) == 0


def test_an_idle_login_ends() -> None:
    clock = Clock()
    s = store(clock)
    sid = s.open("viewer", HASHES["viewer"] or "")
    clock.now = 29.9
    assert s.find(sid, HASHES.get) == "viewer"
    clock.now = 59.8
    assert s.find(sid, HASHES.get) == "viewer"  # idle counts from the last request
    clock.now = 89.8
    assert s.find(sid, HASHES.get) is None


def test_a_changed_or_removed_hash_ends_the_login() -> None:
    s = store(Clock())
    sid = s.open("operator", HASHES["operator"] or "")
    other = s.open("viewer", HASHES["viewer"] or "")
    changed = {**HASHES, "operator": fingerprint("scrypt:new")}
    assert s.find(sid, changed.get) is None
    assert s.find(sid, HASHES.get) is None  # ended for good, even if the old hash came back
    assert s.find(other, {"viewer": None}.get) is None  # a user without a hash (or removed)


def test_the_store_is_bounded_and_drops_the_oldest() -> None:
    clock = Clock()
    s = store(clock, max_sessions=3)
    sids = []
    for _ in range(5):
        sids.append(s.open("operator", "f"))
        clock.now += 1
    assert len(s) == 3
    assert [s.find(sid, {"operator": "f"}.get) for sid in sids] == [None, None, *["operator"] * 3]


def test_fingerprint_of_an_empty_hash_is_none() -> None:
    assert fingerprint("") is None
    assert fingerprint("scrypt:a") != fingerprint("scrypt:b")
