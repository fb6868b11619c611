"""A Python process beside a Spark task in the JVM: the records the JVM does not handle alone, one at a time.

Spark's real-time mode runs no Python operator (docs/realtime.md), so in that mode a stage's record path
is a Java UDF (binlog/jvm, ``dbus.jvm.Sidecar``). It handles the usual record itself and hands each
other one (a heartbeat, a DDL, a masked table, a malformed record, the first record of a table) to a
Python process it started for its Kafka partition, and waits for the answer: the partition's records
stay in order, and the rules for the rare cases have one home, in Python.

The two sides speak in frames over the process's stdin and stdout::

    frame  = u32 big-endian body length, body
    body   = u16 big-endian field count, then per field: i32 big-endian length (-1: null), its bytes

A request's first field names what is asked; the answer's first field is ``ok`` followed by the
handler's fields, or ``error`` and a message, on which the JVM fails the task (only an endpoint down past
its retries gets there: a record's own faults are dead letters). The process ends at the end of stdin,
which is also what it sees when the JVM dies. Everything it logs goes to stderr: file descriptor 1 is
moved away from stdout first, so a stray ``print`` cannot break a frame.
"""

from __future__ import annotations

import logging
import os
import struct
import sys
from collections.abc import Callable, Sequence
from typing import Any, BinaryIO

from dbuslib.lifecycle import first_line

log = logging.getLogger("dbus.sidecar")

Field = bytes | None
Handler = Callable[[list[Field]], Sequence[Field]]
MAX_FRAME = 1 << 31  # a u32 length above this is a broken stream, not a record
OK, ERROR = b"ok", b"error"


class ProtocolError(ValueError):
    """A frame that does not parse: the stream is broken, so the process stops."""


def encode(fields: Sequence[Field]) -> bytes:
    """The frame of ``fields`` (bytes or None each)."""
    parts = [struct.pack(">H", len(fields))]
    for f in fields:
        if f is None:
            parts.append(b"\xff\xff\xff\xff")
        else:
            parts.append(struct.pack(">i", len(f)))
            parts.append(bytes(f))
    body = b"".join(parts)
    return struct.pack(">I", len(body)) + body


def decode(body: bytes) -> list[Field]:
    """The fields of a frame's body; ``ProtocolError`` when it is not one."""
    if len(body) < 2:
        msg = f"frame body of {len(body)} byte(s): no field count"
        raise ProtocolError(msg)
    (count,) = struct.unpack_from(">H", body)
    fields: list[Field] = []
    at = 2
    for i in range(count):
        if at + 4 > len(body):
            msg = f"field {i} of {count}: length cut at byte {at} of {len(body)}"
            raise ProtocolError(msg)
        (n,) = struct.unpack_from(">i", body, at)
        at += 4
        if n == -1:
            fields.append(None)
            continue
        if n < 0 or at + n > len(body):
            msg = f"field {i} of {count}: length {n} at byte {at - 4} of {len(body)}"
            raise ProtocolError(msg)
        fields.append(body[at : at + n])
        at += n
    if at != len(body):
        msg = f"{len(body) - at} byte(s) after the last of {count} field(s)"
        raise ProtocolError(msg)
    return fields


def read_frame(stream: BinaryIO) -> list[Field] | None:
    """The next frame's fields; None at the end of the stream (a clean stop between frames)."""
    head = _read(stream, 4)
    if head is None:
        return None
    (length,) = struct.unpack(">I", head)
    if length > MAX_FRAME:
        msg = f"frame length {length}"
        raise ProtocolError(msg)
    body = _read(stream, length) if length else b""
    if body is None:
        msg = f"stream ended inside a frame of {length} byte(s)"
        raise ProtocolError(msg)
    return decode(body)


def _read(stream: BinaryIO, n: int) -> bytes | None:
    chunks, got = [], 0
    while got < n:
        chunk = stream.read(n - got)
        if not chunk:
            if got:
                msg = f"stream ended after {got} of {n} byte(s)"
                raise ProtocolError(msg)
            return None
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def answer(handler: Handler, request: list[Field]) -> list[Field]:
    """``ok`` and the handler's fields, or ``error`` and why (the JVM then fails the task)."""
    try:
        return [OK, *handler(request)]
    except Exception as e:
        log.exception("sidecar: request %r failed", request[0] if request else None)
        return [ERROR, f"{type(e).__name__}: {first_line(e)[:2000]}".encode()]


def serve(handler: Handler, stdin: BinaryIO | None = None, stdout: BinaryIO | None = None) -> int:
    """Answer frames from ``stdin`` on ``stdout`` until stdin ends (0) or a frame is broken (2)."""
    if stdin is None or stdout is None:
        stdin, stdout = sys.stdin.buffer, _private_stdout()
    while True:
        try:
            request = read_frame(stdin)
        except ProtocolError as e:
            log.error("sidecar: broken frame from the JVM (%s); stopping", e)
            return 2
        if request is None:
            return 0
        stdout.write(encode(answer(handler, request)))
        stdout.flush()


def _private_stdout() -> BinaryIO:
    """The frames' stream: the original stdout, with file descriptor 1 (and ``sys.stdout``) sent to
    stderr, where anything printed by a library belongs."""
    frames = os.fdopen(os.dup(1), "wb", buffering=1 << 16)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return frames


def main(prog: str, doc: str, make_handler: Callable[[str, str], Handler], argv: Sequence[str] | None) -> int:
    """A stage's sidecar process: ``--source DS`` with the configuration document (dbuslib/ship.py) in
    ``$DBUS_CONFIG_DOCUMENT``, as the JVM starts it on an executor, or ``--config FILE`` by hand; logging
    to stderr, then ``serve`` the handler ``make_handler(document, ds)`` builds (a bad configuration stops
    it there, with its message on stderr, before any request)."""
    import argparse

    from dbuslib.logs import setup_logging
    from dbuslib.ship import DOCUMENT_ENV, config_document

    p = argparse.ArgumentParser(prog=prog, description=doc.splitlines()[0])
    p.add_argument("--config", help=f"configuration file (default: the document in ${DOCUMENT_ENV})")
    p.add_argument("--source", required=True)
    args = p.parse_args(argv)
    setup_logging()
    if args.config:
        from dbuslib.config import load_config

        document = config_document(load_config(args.config))
    elif DOCUMENT_ENV in os.environ:
        document = os.environ.pop(DOCUMENT_ENV)  # not passed on to anything this process starts
    else:
        p.error(f"--config is needed when ${DOCUMENT_ENV} is not set")
    return serve(make_handler(document, args.source))


def text(field: Field) -> str | None:
    """A field as UTF-8 text (None stays None)."""
    return None if field is None else field.decode()


def number(field: Field) -> int:
    """A field holding a decimal integer."""
    if field is None:
        msg = "a number field is null"
        raise ProtocolError(msg)
    return int(field)


# Resolved by dbus.jvm.Sidecar on the executor: the folder where Spark put the job's files (--py-files), and
# its Spark's Python path (pyspark.zip, py4j: what its Python workers import pyspark from).
FILES, SPARK_PYTHON = "{files}", "{sparkpython}"


def command(spark: Any, module: str, document: str, ds: str) -> tuple[list[str], dict[str, str]]:
    """The argv and environment of a stage's sidecar (``python -m <module> --source ...``) as an executor
    runs it, maybe on another machine: the Python the job's executors run (``spark.pyspark.python``, else
    the driver's ``$PYSPARK_PYTHON`` as for Python UDFs, e.g. ``./env/bin/python`` from ``spark.archives``),
    DBus's code from the job's ``--py-files`` zips (``{files}/<zip>``), then this driver's copy (the same
    machine's, in local mode), then the executor's pyspark (``{sparkpython}``), and the configuration
    document (dbuslib/ship.py) in the environment."""
    from pathlib import Path

    from dbuslib.ship import DOCUMENT_ENV

    conf = spark.sparkContext.getConf()
    python = conf.get("spark.pyspark.python", None) or spark.sparkContext.pythonExec
    py_files = conf.get("spark.submit.pyFiles", "").split(",")
    shipped = [f"{FILES}/{Path(f).name}" for f in py_files if f.endswith(".zip")]
    root = str(Path(__file__).resolve().parent.parent)
    path = os.pathsep.join([*shipped, root, SPARK_PYTHON])
    return [python, "-m", module, "--source", ds], {"PYTHONPATH": path, DOCUMENT_ENV: document}


def java_strings(spark: object, values: list[str]) -> object:
    """``values`` as a Java ``String[]`` in ``spark``'s JVM (a Java UDF's settings)."""
    jvm = spark._jvm  # type: ignore[attr-defined]
    array = spark.sparkContext._gateway.new_array(jvm.java.lang.String, len(values))  # type: ignore[attr-defined]
    for i, v in enumerate(values):
        array[i] = v
    return array


def register_udf(
    spark: object,
    name: str,
    java_class: str,
    return_type: object,
    stage: str,
    module: str,
    document: str,
    ds: str,
    setup: Callable[[Any], Any] | None = None,
) -> None:
    """Register the Java UDF ``java_class(name, command, env)`` (binlog/jvm) as ``name``: the record path of
    ``stage`` in the JVM, with ``module``'s sidecar for the rest. Raises when the class is not on the
    classpath (the jar is built by ``make stack-up``)."""
    argv, env = command(spark, module, document, ds)
    jvm = spark._jvm  # type: ignore[attr-defined]
    from dbuslib.spark import jvm_class

    cls = jvm_class(jvm, java_class, stage)
    import hashlib

    # the sidecars' key: one per stage, source and configuration (the JVM adds the argv, without it)
    key = f"{stage}/{ds}/{hashlib.sha256(document.encode()).hexdigest()[:16]}"
    udf = cls(key, java_strings(spark, argv), java_strings(spark, [x for kv in env.items() for x in kv]))
    if setup is not None:  # more settings of the Java object, before it is registered
        udf = setup(udf)
    jtype = jvm.org.apache.spark.sql.types.DataType.fromJson(return_type.json())  # type: ignore[attr-defined]
    spark._jsparkSession.udf().register(name, udf, jtype)  # type: ignore[attr-defined]
