"""Talking to ``dbus.jvm.RowFormatMain``, the per-row JVM formats' test driver (not a test module: tests
import from here; test_jvm_canal).

``ask`` sends requests (``event_request``: one rows event's lines and a description) and reads each answer:
the records the JVM wrote, or None when it leaves the event to the sidecar. ``events_of`` groups row
changes into the binlog events they came from, numbered as the appender numbers an event's tuples.
"""

from __future__ import annotations

import io
import json
import subprocess
from dataclasses import replace
from pathlib import Path

from dbuslib import sidecar
from ums.ids import ums_uid
from ums.rowchange import RowChange

_LINE_OPS = {"c": "i", "u": "u", "d": "d"}


def ask(jar: Path, requests: list[list[bytes | None]]) -> list[tuple[bytes | None, list | None]]:
    """Each request's (lines, records or None): records as (key, value, headers)."""
    data = b"".join(sidecar.encode(r) for r in requests)
    out = subprocess.run(
        ["java", "-cp", str(jar), "dbus.jvm.RowFormatMain"],
        input=data,
        capture_output=True,
        check=True,
        timeout=300,
    ).stdout
    stream = io.BytesIO(out)
    answers: list[tuple[bytes | None, list | None]] = []
    for _ in requests:
        fields: list = sidecar.read_frame(stream)  # type: ignore[assignment]
        assert fields is not None
        lines, rest = fields[0], fields[1:]
        if rest == [None]:
            answers.append((lines, None))
            continue
        n, i, recs = int(rest[0]), 1, []
        for _ in range(n):
            key, value, hn = rest[i], rest[i + 1], int(rest[i + 2])
            i += 3
            headers = tuple((rest[i + 2 * j].decode(), rest[i + 2 * j + 1]) for j in range(hn))
            i += 2 * hn
            recs.append((key, value, headers))
        answers.append((lines, recs))
    assert sidecar.read_frame(stream) is None
    return answers


def line(values) -> bytes:
    """The JVM decoder's line of UMS wire values (json.dumps of each, joined by ',')."""
    return ",".join(json.dumps(v, ensure_ascii=False) for v in values).encode()


def event_request(changes: list[RowChange], desc: list) -> list[bytes | None]:
    """A ``lines`` request: the event's row images as the decoder's lines, then the description."""
    first = changes[0]
    lines = []
    for c in changes:
        if c.op == "u":
            lines.append(line(c.before))
        lines.append(line(c.after if c.op != "d" else c.before))
    at = first.at
    return [
        b"lines",
        str(at.ums_id).encode(),
        str(at.ts_ms).encode(),
        at.file.encode(),
        str(at.pos).encode(),
        None if at.server_id is None else str(at.server_id).encode(),
        None if at.gtid is None else at.gtid.encode(),
        _LINE_OPS[first.op].encode(),
        b"\n".join(lines),
        *desc,
    ]


def as_event(changes: list[RowChange]) -> list[RowChange]:
    """The changes renumbered as the appender numbers one event's tuples: an update's before image is a
    tuple, so its row is 2k + 1."""
    step = 2 if changes[0].op == "u" else 1
    out = []
    for k, c in enumerate(changes):
        t = k * step + step - 1
        out.append(replace(c, at=replace(c.at, row=t), ums_uid=ums_uid(c.at.ums_id, t)))
    return out


def events_of(changes: list[RowChange]) -> list[list[RowChange]]:
    """Consecutive changes of one position and operation as one event's."""
    out: list[list[RowChange]] = []
    for c in changes:
        if out and out[-1][0].at.ums_id == c.at.ums_id and out[-1][0].op == c.op:
            out[-1].append(c)
        else:
            out.append([c])
    return [as_event(e) for e in out]
