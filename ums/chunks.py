"""UMS records larger than the Kafka record limit, cut into ordered chunks and joined again (pure).

A UMS message is one Kafka record. A message of many tuples is cut by ``ums.max_message_bytes`` long
before it nears Kafka's limit, but a single tuple is never split across messages, so one large row (a 30 MB
LONGBLOB is 40 MB of Base64) makes a message above ``endpoints.kafka.max_message_bytes``. Such a record
value is cut into ``n`` chunk records that each fit; a consumer joins them back (``Reassembler``):

- every chunk has the record's key (so the same partition) and its headers (``ums_key``, ...), plus
  ``ums_chunk`` = ``i/n`` (ASCII, ``i`` from 0) and ``ums_chunk_id`` = the SHA-256 (64 hex digits) of
  the whole value, which ties the chunks together and checks the join;
- the chunks' values, concatenated in ``i`` order, are the original value byte for byte (JSON or Avro);
  a chunk alone is not a UMS message;
- the chunks of one record are written in order by one producer to one partition; records of other
  keys may come between them. A chunk 0 seen again (a replay after a restart) starts the record over.

Example, a 40,000,000-byte message with the default 16 MiB limit::

    key "shop.files"  headers ums_key=..., ums_chunk="0/3", ums_chunk_id="9f2c...e1"  value bytes 0..16760831
    key "shop.files"  headers ums_key=..., ums_chunk="1/3", ums_chunk_id="9f2c...e1"  value bytes ..33521663
    key "shop.files"  headers ums_key=..., ums_chunk="2/3", ums_chunk_id="9f2c...e1"  value the rest
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

from ums.errors import UmsError

CHUNK = "ums_chunk"
CHUNK_ID = "ums_chunk_id"
# Bytes of a record that are not its value: key, headers (ums_key, ums_chunk, ums_chunk_id, Avro's schema
# id) and Kafka's record and batch framing. A value up to ``max_bytes - HEADROOM`` travels whole.
HEADROOM = 16_384

Headers = tuple[tuple[str, bytes], ...]


class BadChunkError(UmsError):
    """A chunk header that cannot be read, a chunk out of sequence, or a join that does not check."""

    code = "UMS_BAD_CHUNK"


@dataclass(frozen=True)
class Chunk:
    """The chunk headers of one record: ``index`` of ``count`` of the value with digest ``id``."""

    index: int
    count: int
    id: str


def limit(max_bytes: int) -> int:
    """The largest value that travels as one record under a record limit of ``max_bytes``."""
    if max_bytes <= 2 * HEADROOM:
        msg = f"record limit {max_bytes}: must be above {2 * HEADROOM} bytes"
        raise BadChunkError(msg)
    return max_bytes - HEADROOM


def split(value: bytes, max_bytes: int) -> list[tuple[bytes, Headers]]:
    """``[(value, ())]`` when ``value`` fits ``max_bytes``, else its chunks with their extra headers."""
    step = limit(max_bytes)
    if len(value) <= step:
        return [(value, ())]
    digest = hashlib.sha256(value).hexdigest().encode("ascii")
    view = memoryview(value)
    count = -(-len(value) // step)
    return [
        (
            bytes(view[i * step : (i + 1) * step]),
            ((CHUNK, f"{i}/{count}".encode("ascii")), (CHUNK_ID, digest)),
        )
        for i in range(count)
    ]


def chunk_of(headers: Headers | list | None) -> Chunk | None:
    """The record's ``Chunk``, None for a whole record (no ``ums_chunk`` header)."""
    found = {k: v for k, v in headers or () if k in (CHUNK, CHUNK_ID)}
    if CHUNK not in found:
        return None
    raw = found[CHUNK]
    text = raw.decode("ascii", "replace") if isinstance(raw, bytes) else str(raw)
    index, _, count = text.partition("/")
    if not (index.isdigit() and count.isdigit() and int(index) < int(count)):
        msg = f"header {CHUNK} {text[:40]!r}: expected i/n with 0 <= i < n"
        raise BadChunkError(msg)
    digest = found.get(CHUNK_ID)
    digest = digest.decode("ascii", "replace") if isinstance(digest, bytes) else digest
    if not digest or len(digest) != 64:
        msg = f"chunk {text}: header {CHUNK_ID} {str(digest)[:80]!r} is not a SHA-256 in hex"
        raise BadChunkError(msg)
    return Chunk(int(index), int(count), digest)


@dataclass
class Reassembler:
    """Joins chunk records back into whole values; one per partition (like rawevent.Reassembler).

    ``push`` returns the value of a whole record (as is) or of a record whose last chunk just arrived,
    and None for a chunk held back. A chunk out of sequence or a join whose SHA-256 differs raises
    BadChunkError naming ``where`` (e.g. ``topic/partition@offset``); the partial record is dropped.
    """

    _parts: dict[str, list[bytes]] = field(default_factory=dict)

    @property
    def pending(self) -> int:
        """Records whose chunks are partly in."""
        return len(self._parts)

    def push(self, value: bytes, headers: Headers | list | None, where: str = "") -> bytes | None:
        chunk = chunk_of(headers)
        if chunk is None:
            return value
        parts = self._parts.setdefault(chunk.id, [])
        if chunk.index == 0:
            parts.clear()
        elif len(parts) != chunk.index:
            del self._parts[chunk.id]
            msg = (
                f"{where or 'record'}: chunk {chunk.index}/{chunk.count} of {chunk.id[:12]} arrived after "
                f"{len(parts)} chunk(s)"
            )
            raise BadChunkError(msg)
        parts.append(bytes(value))
        if chunk.index + 1 < chunk.count:
            return None
        whole = b"".join(parts)
        del self._parts[chunk.id]
        if hashlib.sha256(whole).hexdigest() != chunk.id:
            msg = (
                f"{where or 'record'}: the {chunk.count} chunks of {chunk.id[:12]} do not join to their "
                "SHA-256"
            )
            raise BadChunkError(msg)
        return whole
