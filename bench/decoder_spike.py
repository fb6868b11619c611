"""SPIKE: rows/s of dbuslib.rowdecode vs the compiled-layout prototype dbuslib.fastdecode, one core.

    .venv/bin/python -m bench.decoder_spike [--rows 200000] [--recapture] [--cpu 0]

Capture (once, cached in /tmp/dbus_decoder_spike.pickle): a fresh database on the demo source gets
``bench7`` (BIGINT PK, INT, VARCHAR(16), DECIMAL(12,2), DATETIME(3), VARCHAR(64), SMALLINT; utf8mb4),
``--rows`` rows inserted 1000 per INSERT (every 10th row has a NULL note, every 7th a non-ASCII one),
then one UPDATE of a quarter of the rows. The binlog is read as the replication account and each rows
event becomes a raw record exactly as the extractor writes it (``extractor.capture.raw_rows`` +
``rawevent.encode``); the database is dropped afterwards.

Measured (same records, same process, pinned to one CPU, best of ``--repeat`` passes):

- ``rowdecode_*`` / ``fastdecode_*``: ``rawevent.decode`` of the record value + decoding its rows;
- ``*_json``: the same, plus per row (and per before image of an update) ``json.dumps`` of a UMS-shaped
  tuple ``[ums_id_, ums_ts_, op, ums_uid_, v1..vn]`` with UMS's JSON values: rowdecode's values go
  through ``ums.values.encode_column``; fastdecode decodes straight to them (``ums=True``). The two
  JSON texts are checked equal before timing;
- ``fastdecode_arrow``: decode + transpose to columns + ``pyarrow.array`` per column (no JSON).

Prints ``BENCH <name> value=<rows/s> unit=rows/s baseline=<rowdecode rows/s> ratio=<r>``.
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import sys
import time
import uuid
from pathlib import Path
from typing import Any

CACHE = Path("/tmp/dbus_decoder_spike.pickle")
CREATE = ("CREATE TABLE bench7 (id BIGINT NOT NULL PRIMARY KEY, qty INT NOT NULL, code VARCHAR(16) NOT NULL, "
          "amount DECIMAL(12,2), at DATETIME(3), note VARCHAR(64), flag SMALLINT) DEFAULT CHARSET=utf8mb4")


# ---------------------------------------------------------------- capture


def _rows(start: int, count: int) -> list[tuple[Any, ...]]:
    out = []
    for i in range(start, start + count):
        note = None if i % 10 == 0 else (f"nöte ✓ {i}" if i % 7 == 0 else f"note number {i} for the bench")
        out.append((i, i * 3 % 100000, f"C{i % 9973:05d}", f"{(i * 37) % 10000000 - 5000000}.{i % 100:02d}",
                    f"2026-{1 + i % 12:02d}-{1 + i % 28:02d} "
                    f"{i % 24:02d}:{i % 60:02d}:{(i * 7) % 60:02d}.{i % 1000:03d}",
                    note, i % 32768 - 16384))
    return out


def capture(total: int) -> list[bytes]:
    from pymysqlreplication import BinLogStreamReader
    from pymysqlreplication.event import MariadbGtidEvent, XidEvent
    from pymysqlreplication.row_event import DeleteRowsEvent, TableMapEvent, UpdateRowsEvent, WriteRowsEvent

    from dbuslib import mysql, rawevent
    from dbuslib.config import load_config
    from extractor.capture import raw_rows

    source = load_config().source("demo")
    name = f"dbus_spike_{uuid.uuid4().hex[:10]}"
    db = mysql.connect(source.mysql, as_writer=True)
    try:
        with db.cursor() as cur:
            cur.execute(f"CREATE DATABASE `{name}`")
            cur.execute(f"USE `{name}`")
            cur.execute("SET time_zone = '+00:00'")
            cur.execute(CREATE)
            start = mysql.binlog_end(db)
            marks = "(" + ",".join(["%s"] * 7) + ")"
            for base in range(1, total + 1, 1000):
                batch = _rows(base, min(1000, total + 1 - base))
                cur.execute("INSERT INTO bench7 VALUES " + ",".join(cur.mogrify(marks, r) for r in batch))
                db.commit()
            cur.execute("UPDATE bench7 SET qty = qty + 1, note = CONCAT('upd ', id) WHERE id % 4 = 0")
            db.commit()
        stream = BinLogStreamReader(
            connection_settings=mysql.connection_settings(source.mysql),
            server_id=source.mysql.server_id + 1000 + uuid.uuid4().int % 50000,
            log_file=start.file, log_pos=start.pos, resume_stream=True, blocking=False, only_schemas=[name],
            only_events=[MariadbGtidEvent, XidEvent, TableMapEvent, WriteRowsEvent, UpdateRowsEvent,
                         DeleteRowsEvent])
        records, gtid, table_map = [], "", None
        try:
            for event in stream:
                if isinstance(event, MariadbGtidEvent):
                    gtid = event.gtid
                elif isinstance(event, TableMapEvent):
                    table_map = event
                elif not isinstance(event, XidEvent):
                    crc = stream._BinLogStreamReader__use_checksum
                    raw = raw_rows("demo", stream.log_file, table_map, event, gtid, crc)
                    records.append(rawevent.encode(raw))
        finally:
            stream.close()
    finally:
        with db.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS `{name}`")
        db.close()
    return records


# ---------------------------------------------------------------- measuring


def _ums(op: str, pos: int, values: list[Any] | tuple[Any, ...], t: int) -> str:
    """One UMS-shaped tuple as JSON text: [ums_id_, ums_ts_, op, ums_uid_, v1..vn] (values already UMS)."""
    return _ENCODE([str(pos), "2026-11-22 12:00:00.000", op, str(pos * 1000000 + t), *values])


_ENCODE = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode  # json.dumps with kwargs
# builds a new encoder per call (~3 us): the appender would keep one, as here


def run_rowdecode(records: list[bytes], with_json: bool, out: list[str] | None = None) -> int:
    """rowdecode, then (json) ums.values.encode_column per value and json.dumps per tuple."""
    from dbuslib import rawevent
    from dbuslib.rowdecode import decode_rows
    from ums.values import encode_column

    n = 0
    for value in records:
        ev = rawevent.decode(value)
        d = decode_rows(ev)
        n += len(d.rows)
        if with_json:
            cols = d.columns
            pos, t = ev.header["pos"], 0
            for image in d.rows:
                if image.before is not None and d.op == "u":
                    text = _ums("b", pos, [encode_column(c, image.before[c.name]) for c in cols], t)
                    t += 1
                    if out is not None:
                        out.append(text)
                row = image.after if image.after is not None else image.before
                text = _ums(d.op, pos, [encode_column(c, row[c.name]) for c in cols], t)
                t += 1
                if out is not None:
                    out.append(text)
    return n


def run_fastdecode(records: list[bytes], with_json: bool, out: list[str] | None = None) -> int:
    """fastdecode (json: straight to UMS values, ``ums=True``), then json.dumps per tuple."""
    from dbuslib import rawevent
    from dbuslib.fastdecode import decode_fast

    n = 0
    for value in records:
        ev = rawevent.decode(value)
        f = decode_fast(ev, ums=with_json)
        rows = f.after if f.after is not None else f.before
        n += len(rows)
        if with_json:
            pos, t = ev.header["pos"], 0
            if f.op == "u":
                texts = []
                for b, a in zip(f.before, f.after, strict=True):
                    texts.append(_ums("b", pos, b, t))
                    texts.append(_ums("u", pos, a, t + 1))
                    t += 2
            else:
                texts = [_ums(f.op, pos, r, t) for t, r in enumerate(rows)]
            if out is not None:
                out.extend(texts)
    return n


def run_fast_arrow(records: list[bytes], _: bool) -> int:
    import pyarrow as pa

    from dbuslib import rawevent
    from dbuslib.fastdecode import columns_of, decode_fast

    n = 0
    for value in records:
        f = decode_fast(rawevent.decode(value))
        rows = f.after if f.after is not None else f.before
        n += len(rows)
        pa.table([pa.array(col) for col in columns_of(rows, len(f.columns))], names=list(f.names))
    return n


def best_rate(fn: Any, records: list[bytes], with_json: bool, repeat: int) -> float:
    fn(records[:50], with_json)  # warm the table-map caches
    best = 0.0
    for _ in range(repeat):
        t0 = time.perf_counter()
        n = fn(records, with_json)
        best = max(best, n / (time.perf_counter() - t0))
    return best


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.decoder_spike", description=__doc__.split("\n")[0])
    p.add_argument("--rows", type=int, default=200_000)
    p.add_argument("--recapture", action="store_true")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--cpu", type=int, default=0, help="CPU to pin to (-1: no pinning)")
    args = p.parse_args(argv)
    if args.cpu >= 0:
        os.sched_setaffinity(0, {args.cpu})
    if args.recapture or not CACHE.exists():
        t0 = time.perf_counter()
        CACHE.write_bytes(pickle.dumps(capture(args.rows)))
        print(f"# captured in {time.perf_counter() - t0:.1f}s", file=sys.stderr)
    records = pickle.loads(CACHE.read_bytes())  # noqa: S301 - our own cache file
    from dbuslib import rawevent

    by_op: dict[str, list[bytes]] = {}
    for r in records:
        op = {23: "insert", 30: "insert", 24: "update", 31: "update", 25: "delete", 32: "delete"}[
            rawevent.decode(r).header["event_type"]]
        by_op.setdefault(op, []).append(r)
    for op, recs in by_op.items():
        slow_text: list[str] = []
        fast_text: list[str] = []
        rows = run_rowdecode(recs, True, slow_text)
        run_fastdecode(recs, True, fast_text)
        if slow_text != fast_text:
            print(f"# {op}: the two JSON outputs DIFFER", file=sys.stderr)
            return 1
        print(f"# {op}: {len(recs)} rows events, {rows} rows, {len(fast_text)} tuples (JSON equal), "
              f"{sum(map(len, recs)) / len(recs):.0f} bytes/record",
              file=sys.stderr)
    for op, recs in by_op.items():
        for suffix, with_json in (("", False), ("_json", True)):
            base = best_rate(run_rowdecode, recs, with_json, args.repeat)
            fast = best_rate(run_fastdecode, recs, with_json, args.repeat)
            print(f"BENCH rowdecode_{op}{suffix} value={base:.0f} unit=rows/s baseline={base:.0f} ratio=1.00",
                  flush=True)
            print(f"BENCH fastdecode_{op}{suffix} value={fast:.0f} unit=rows/s baseline={base:.0f} "
                  f"ratio={fast / base:.2f}", flush=True)
        if op == "insert":
            base = best_rate(run_rowdecode, recs, False, args.repeat)
            arrow = best_rate(run_fast_arrow, recs, False, args.repeat)
            print(f"BENCH fastdecode_{op}_arrow value={arrow:.0f} unit=rows/s baseline={base:.0f} "
                  f"ratio={arrow / base:.2f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
