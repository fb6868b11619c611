"""A pulled row whose message is above the Kafka record limit leaves the shard reader as ordered chunks."""

from __future__ import annotations

import pytest
from fullpull_jobs import shard_job

from fullpuller.source import MessageWriter, ShardJob
from ums import from_json
from ums.chunks import HEADROOM, Reassembler

LIMIT = 4 * HEADROOM


def _job() -> ShardJob:
    columns = [
        {"name": "id", "column_type": "int(11)", "nullable": False},
        {"name": "data", "column_type": "longblob", "nullable": True},
    ]
    return shard_job(
        columns,
        table="t",
        namespace="mysql.demo.shop.t.0.0.0",
        tuples_per_message=100,
        max_message_bytes=1024,
    )


def test_a_huge_row_is_chunked_and_the_rows_around_it_are_not():
    writer = MessageWriter.for_job(_job(), {}, LIMIT)
    huge = "A" * (2 * LIMIT)  # the message: 3 chunks of LIMIT - HEADROOM bytes
    texts = [b'1,"AA=="', f'2,"{huge}"'.encode(), b"3,null"]
    out = list(writer.messages(texts))  # one row per message (1024 payload bytes); the 2nd in 3 chunks
    assert len(out) == 1 + 3 + 1
    assert all(key == b"shop.t" and len(value) <= LIMIT - HEADROOM for key, value, _ in out)
    r = Reassembler()
    whole = [v for _, value, headers in out if (v := r.push(value, headers)) is not None]
    assert [from_json(v).payload[0][4:] for v in whole] == [(1, "AA=="), (2, huge), (3, None)]
    assert [k for k, _ in out[0][2]] == ["ums_key"]  # a whole message carries no chunk header
    assert [k for k, _ in out[1][2]] == ["ums_key", "ums_chunk", "ums_chunk_id"]


def test_long_binaries_are_spliced_in_as_base64_in_column_order():
    from fullpuller.render import splice_binaries

    text = b'1,"\0",null,"AA==","\0","\\u0000"'
    assert splice_binaries(text, (b"\x00\x01", None, b"xyz")) == b'1,"AAE=",null,"AA==","eHl6","\\u0000"'
    assert splice_binaries(b'1,"AA=="', (None,)) == b'1,"AA=="'


def test_a_row_whose_placeholders_do_not_match_its_long_values_is_refused():
    from fullpuller.render import splice_binaries

    with pytest.raises(ValueError, match="1 binary placeholder"):
        splice_binaries(b'"\0"', (b"a", b"b"))
