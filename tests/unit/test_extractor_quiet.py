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
    try:
        quiet_until_bytes_wait(reader_on(client, rfile), server, client, rfile)
    finally:
        rfile.close()
        client.close()
        server.close()


def quiet_until_bytes_wait(reader: BinlogReader, server, client, rfile, tries: int = 1) -> None:
    """Quiet; not once the server sent bytes (asked up to ``tries`` times: a TLS record may take a
    moment), nor while some wait in the reader's buffer; quiet again once they are read; the connection
    blocking and reading as before."""
    assert reader.quiet()
    server.sendall(b"event")
    assert _eventually(lambda: not reader.quiet(), tries), "bytes waiting on the socket"
    assert rfile.read(2) == b"ev"
    assert not reader.quiet(), "bytes waiting in the reader's buffer"
    assert rfile.read(3) == b"ent"
    assert reader.quiet()
    assert client.gettimeout() is None, "the connection is blocking again"
    server.sendall(b"x")
    assert rfile.read(1) == b"x", "and reads as before"


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


def test_quiet_over_tls_until_a_record_waits_and_again_once_it_is_read(tmp_path):
    """pymysql negotiates TLS whenever the server offers it: the binlog connection is then a TLS socket,
    and ``quiet`` must still answer (it said "cannot tell" before, so the extractor always waited for
    the producer's linger: about 5 ms of every transaction's latency)."""
    import ssl
    import subprocess
    import threading

    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=localhost", "-days", "1"]
        + ["-keyout", str(key), "-out", str(cert)],
        check=True,
        capture_output=True,
    )
    server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_ctx.load_cert_chain(cert, key)
    client_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    client_ctx.load_verify_locations(cert)
    a, b = socket.socketpair()
    done: dict[str, ssl.SSLSocket] = {}
    handshake = threading.Thread(target=lambda: done.update(s=server_ctx.wrap_socket(a, server_side=True)))
    handshake.start()
    client = client_ctx.wrap_socket(b, server_hostname="localhost")
    handshake.join(10)
    server = done["s"]
    rfile = client.makefile("rb")
    try:
        quiet_until_bytes_wait(reader_on(client, rfile), server, client, rfile, tries=200)
    finally:
        rfile.close()
        client.close()
        server.close()


def _eventually(check, tries: int) -> bool:
    import time

    for _ in range(tries):
        if check():
            return True
        time.sleep(0.01)
    return False
