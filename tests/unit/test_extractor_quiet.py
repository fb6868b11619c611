"""``BinlogReader.quiet``: whether the binlog connection has nothing more for the reader right now, asked
without blocking (the extractor then sends a transaction's records at once instead of after the
producer's linger). Checked on a socket pair standing in for pymysql's connection."""

from __future__ import annotations

import socket
from types import SimpleNamespace

from extractor.reader import BinlogReader


def reader_on(sock: socket.socket, rfile) -> BinlogReader:
    reader = BinlogReader.__new__(BinlogReader)  # no server: only the connection matters here
    reader._stream = SimpleNamespace(_stream_connection=SimpleNamespace(_sock=sock, _rfile=rfile))
    return reader


def test_quiet_until_bytes_wait_and_again_once_they_are_read():
    server, client = socket.socketpair()
    rfile = client.makefile("rb")
    reader = reader_on(client, rfile)
    try:
        assert reader.quiet()
        server.sendall(b"event")
        assert not reader.quiet(), "bytes waiting on the socket"
        assert rfile.read(2) == b"ev"
        assert not reader.quiet(), "bytes waiting in the reader's buffer"
        assert rfile.read(3) == b"ent"
        assert reader.quiet()
        assert client.gettimeout() is None, "the connection is blocking again"
        server.sendall(b"x")
        assert rfile.read(1) == b"x", "and reads as before"
    finally:
        rfile.close()
        client.close()
        server.close()


def test_not_quiet_when_it_cannot_tell():
    assert not reader_on(None, None).quiet(), "not connected"
    server, client = socket.socketpair()
    rfile = client.makefile("rb")
    client.close()
    try:
        reader_on(client, rfile).quiet()  # a closed connection: an answer, never an error (a wrong
        # "quiet" costs one early send, nothing else)
    finally:
        server.close()
