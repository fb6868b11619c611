import pytest

from extractor.tracker import AckTracker, SendFailed


class F:
    def __init__(self, done=False, failed=False):
        self.is_done, self._failed, self.exception = done, failed, "boom" if failed else None

    def failed(self):
        return self._failed


def test_boundary_is_committable_only_when_every_earlier_record_is_acked():
    t = AckTracker()
    a, b, c = F(), F(), F()
    t.add(a, 10)
    t.add(b, 20)
    t.mark("p1")
    t.add(c, 30)
    t.mark("p2")
    assert t.advance() is None and t.pending == 3 and t.pending_bytes == 60
    a.is_done = True
    assert t.advance() is None  # b still in flight
    b.is_done = True
    assert t.advance() == "p1" and t.pending == 1 and t.pending_bytes == 30
    c.is_done = True
    assert t.advance() == "p2" and t.pending == 0
    assert t.advance() is None


def test_consecutive_boundaries_return_the_newest():
    t = AckTracker()
    t.mark("p1")
    t.mark("p2")
    assert t.advance() == "p2"


def test_failed_send_blocks_the_position_and_raises():
    t = AckTracker()
    t.add(F(done=True, failed=True))
    t.mark("p1")
    with pytest.raises(SendFailed, match="boom"):
        t.advance()


def test_oldest_is_the_first_unacked_future():
    t = AckTracker()
    a, b = F(), F()
    t.mark("p0")
    t.add(a)
    t.add(b)
    assert t.oldest() is a
