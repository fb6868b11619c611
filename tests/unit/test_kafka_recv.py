"""dbuslib.kafka's wrap of kafka-python's transports: the bytes read together with the end of a
connection (a broker's answer to a refused login) are handed on, the end reported at the next read."""

from __future__ import annotations

import pytest
from kafka.errors import KafkaConnectionError
from kafka.net.transport import KafkaSSLTransport, KafkaTCPTransport

import dbuslib.kafka  # noqa: F401  (wraps the transports when imported)


class Closing:
    """A non-blocking socket that yields ``chunks`` and then the end (recv returning b'')."""

    def __init__(self, *chunks: bytes) -> None:
        self.chunks = list(chunks)

    def recv(self, n: int) -> bytes:
        return self.chunks.pop(0) if self.chunks else b""


class Waiting(Closing):
    def recv(self, n: int) -> bytes:
        if self.chunks:
            return self.chunks.pop(0)
        raise BlockingIOError


def over(cls: type, sock: Closing) -> KafkaTCPTransport:
    """A transport of ``cls`` over ``sock``, without a connection (what its log lines print is given)."""
    transport = object.__new__(cls)
    transport._sock, transport._closed = sock, False
    transport.host_port = lambda: "127.0.0.1:19094"
    return transport


@pytest.mark.parametrize("cls", [KafkaTCPTransport, KafkaSSLTransport])
def test_bytes_before_the_end_are_handed_on_and_the_end_comes_next(cls):
    transport = over(cls, Closing(b"answer", b"-rest"))
    assert transport._sock_recv() == (b"answer-rest", None)
    data, err = transport._sock_recv()
    assert data == b"" and isinstance(err, KafkaConnectionError) and "socket disconnected" in str(err)


@pytest.mark.parametrize("cls", [KafkaTCPTransport, KafkaSSLTransport])
def test_an_open_connection_reads_as_before(cls):
    transport = over(cls, Waiting(b"part"))
    assert transport._sock_recv() == (b"part", None)
