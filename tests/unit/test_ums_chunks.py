"""ums.chunks: a value above the record limit is cut into ordered chunks that join back byte for byte."""

from __future__ import annotations

import hashlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ums.chunks import CHUNK, CHUNK_ID, HEADROOM, BadChunkError, Reassembler, chunk_of, limit, split

SMALL = 2 * HEADROOM + 100  # a record limit that leaves 100 + HEADROOM bytes of value per chunk


def test_a_value_that_fits_travels_whole_without_chunk_headers():
    assert split(b"x" * limit(SMALL), SMALL) == [(b"x" * limit(SMALL), ())]


def test_a_large_value_becomes_ordered_chunks_that_each_fit():
    value = bytes(range(256)) * 200
    parts = split(value, SMALL)
    assert len(parts) == -(-len(value) // limit(SMALL)) > 1
    digest = hashlib.sha256(value).hexdigest().encode()
    for i, (part, headers) in enumerate(parts):
        assert len(part) <= limit(SMALL)
        assert dict(headers) == {CHUNK: f"{i}/{len(parts)}".encode(), CHUNK_ID: digest}
    assert b"".join(p for p, _ in parts) == value


@given(st.lists(st.binary(max_size=3 * SMALL), max_size=6))
def test_whole_and_chunked_records_of_one_partition_come_back_in_order(values):
    r = Reassembler()
    got = []
    for v in values:
        for part, headers in split(v, SMALL):
            out = r.push(part, headers)
            if out is not None:
                got.append(out)
    assert got == values
    assert r.pending == 0


def test_records_of_other_keys_may_come_between_the_chunks_of_one():
    big, other = b"a" * (3 * SMALL), b"b" * (2 * SMALL)
    a, b = split(big, SMALL), split(other, SMALL)
    stream = [x for pair in zip(a, b, strict=False) for x in pair] + a[len(b) :] + [(b"small", ())]
    r = Reassembler()
    got = [out for part, h in stream if (out := r.push(part, h)) is not None]
    assert got == [other, big, b"small"]


def test_a_replayed_chunk_0_starts_the_record_over():
    value = b"z" * (3 * SMALL)
    parts = split(value, SMALL)
    r = Reassembler()
    assert r.push(*parts[0]) is None and r.push(*parts[1]) is None
    got = [r.push(p, h) for p, h in parts]  # the producer was restarted: the whole record again
    assert got[-1] == value and got[:-1] == [None] * (len(parts) - 1)


def test_a_chunk_out_of_sequence_names_where_and_the_chunk():
    parts = split(b"q" * (3 * SMALL), SMALL)
    r = Reassembler()
    r.push(*parts[0])
    with pytest.raises(BadChunkError, match=r"t/0@7: chunk 2/\d+ of .* after 1 chunk"):
        r.push(*parts[2], where="t/0@7")
    assert r.pending == 0


def test_a_join_that_does_not_match_its_digest_is_refused():
    parts = split(b"q" * (2 * SMALL), SMALL)
    r = Reassembler()
    for part, headers in parts[:-1]:
        r.push(part, headers)
    with pytest.raises(BadChunkError, match="do not join"):
        r.push(b"tampered", parts[-1][1])


@pytest.mark.parametrize(
    "headers",
    [
        [(CHUNK, b"3/3"), (CHUNK_ID, b"0" * 64)],
        [(CHUNK, b"x/2")],
        [(CHUNK, b"0/2")],
        [(CHUNK, b"0/2"), (CHUNK_ID, b"short")],
    ],
)
def test_bad_chunk_headers_are_refused_with_the_header_named(headers):
    with pytest.raises(BadChunkError, match="ums_chunk"):
        chunk_of(headers)


def test_a_record_limit_without_room_for_a_value_is_refused():
    with pytest.raises(BadChunkError, match="record limit"):
        split(b"x", 2 * HEADROOM)
