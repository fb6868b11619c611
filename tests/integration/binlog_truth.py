"""Ground truth for the pipeline tests: the rows events of one database, read straight from the binlog
(``rows_events``, and ``binlog_truth`` which sums them up per event)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from pymysqlreplication import BinLogStreamReader
from pymysqlreplication.row_event import DeleteRowsEvent, RowsEvent, UpdateRowsEvent, WriteRowsEvent

from dbuslib import mysql
from dbuslib.config import Source
from extractor.position import Position


@dataclass(frozen=True)
class TruthEvent:
    table: str
    file: str
    pos: int
    rows: int


def rows_events(
    mysql_cfg, file: str, pos: int, database: str, server_id: int
) -> Iterator[tuple[str, int, RowsEvent]]:
    """``(binlog file, event start position, event)`` of every rows event of ``database`` from
    ``file:pos`` to the binlog's end now, in binlog order (read as a replica with ``server_id``)."""
    stream = BinLogStreamReader(
        connection_settings=mysql.connection_settings(mysql_cfg),
        server_id=server_id,
        log_file=file,
        log_pos=pos,
        resume_stream=True,
        blocking=False,
        only_schemas=[database],
        only_events=[WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent],
        enable_logging=False,
    )
    try:
        for e in stream:
            yield stream.log_file, e.packet.log_pos - e.packet.event_size, e
    finally:
        stream.close()


def binlog_truth(src: Source, start: Position, database: str, server_id: int) -> list[TruthEvent]:
    """Every rows event of ``database`` from ``start`` to the binlog's end now, in binlog order."""
    return [
        TruthEvent(e.table, file, pos, len(e.rows))
        for file, pos, e in rows_events(src.mysql, start.file, start.pos, database, server_id)
    ]


def file_number(name: str) -> int:
    return int(name.rsplit(".", 1)[1])
