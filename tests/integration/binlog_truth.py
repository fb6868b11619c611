"""Ground truth for extractor tests: the rows events of one database, read straight from the binlog."""

from __future__ import annotations

from dataclasses import dataclass

from pymysqlreplication import BinLogStreamReader
from pymysqlreplication.row_event import DeleteRowsEvent, UpdateRowsEvent, WriteRowsEvent

from dbuslib import mysql
from dbuslib.config import Source
from extractor.position import Position


@dataclass(frozen=True)
class TruthEvent:
    table: str
    file: str
    pos: int
    rows: int


def binlog_truth(src: Source, start: Position, database: str, server_id: int) -> list[TruthEvent]:
    """Every rows event of ``database`` from ``start`` to the binlog's end now, in binlog order."""
    stream = BinLogStreamReader(
        connection_settings=mysql.connection_settings(src.mysql),
        server_id=server_id,
        log_file=start.file,
        log_pos=start.pos,
        resume_stream=True,
        blocking=False,
        only_schemas=[database],
        only_events=[WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent],
        enable_logging=False,
    )
    out = []
    try:
        for e in stream:
            out.append(
                TruthEvent(e.table, stream.log_file, e.packet.log_pos - e.packet.event_size, len(e.rows))
            )
    finally:
        stream.close()
    return out


def file_number(name: str) -> int:
    return int(name.rsplit(".", 1)[1])
