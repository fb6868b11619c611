"""appender.convert.chunked: output records above the Kafka record limit leave as ordered chunks."""

from __future__ import annotations

from appender.convert import chunked
from appender.process import OutRecord
from ums.chunks import HEADROOM, Reassembler

LIMIT = 4 * HEADROOM


def test_records_within_the_limit_are_the_same_objects():
    recs = [OutRecord("t", b"k", b"v" * n, (("ums_key", b"x"),)) for n in (0, 10, LIMIT - HEADROOM)]
    assert [id(r) for r in chunked(recs, LIMIT)] == [id(r) for r in recs]


def test_a_record_above_the_limit_becomes_chunks_with_its_topic_key_and_headers():
    big = OutRecord(
        "demo.shop.result", b"shop.files", bytes(range(256)) * 1000, (("ums_key", b"data_increment"),)
    )
    small = OutRecord("demo.shop.result", b"shop.other", b"{}", ())
    out = list(chunked([small, big, small], LIMIT))
    parts = out[1:-1]
    assert out[0] is small and out[-1] is small and len(parts) == -(-len(big.value) // (LIMIT - HEADROOM))
    assert {(p.topic, p.key, p.headers[0]) for p in parts} == {(big.topic, big.key, big.headers[0])}
    assert all(len(p.value) <= LIMIT - HEADROOM for p in parts)
    r = Reassembler()
    assert [v for p in out if (v := r.push(p.value, p.headers)) is not None] == [b"{}", big.value, b"{}"]
