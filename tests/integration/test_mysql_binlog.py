"""python-mysql-replication reads rows written to the real MariaDB, with the reader account."""

from decimal import Decimal

from pymysqlreplication import BinLogStreamReader
from pymysqlreplication.event import MariadbGtidEvent, XidEvent
from pymysqlreplication.row_event import UpdateRowsEvent, WriteRowsEvent

from dbuslib import mysql


def test_binlog_carries_a_written_row_with_column_names(source, writer_db):
    db, name = writer_db
    with db.cursor() as cur:
        cur.execute("CREATE TABLE t (id INT PRIMARY KEY, note VARCHAR(20), amount DECIMAL(10,2))")
    start = mysql.binlog_end(db)
    with db.cursor() as cur:
        cur.execute("INSERT INTO t VALUES (1, 'héllo ✓', 12.50)")
        cur.execute("UPDATE t SET note = 'bye' WHERE id = 1")

    stream = BinLogStreamReader(
        connection_settings=mysql.connection_settings(source.mysql),
        server_id=source.mysql.server_id + 900,
        log_file=start.file,
        log_pos=start.pos,
        resume_stream=True,
        blocking=False,
        only_schemas=[name],
        only_events=[WriteRowsEvent, UpdateRowsEvent, MariadbGtidEvent, XidEvent],
    )
    try:
        events = list(stream)
    finally:
        stream.close()

    rows = [e for e in events if isinstance(e, (WriteRowsEvent, UpdateRowsEvent))]
    assert [type(e) for e in rows] == [WriteRowsEvent, UpdateRowsEvent]
    assert rows[0].rows[0]["values"] == {"id": 1, "note": "héllo ✓", "amount": Decimal("12.50")}
    assert rows[1].rows[0]["before_values"]["note"] == "héllo ✓"
    assert rows[1].rows[0]["after_values"]["note"] == "bye"
    # Each autocommit statement is a transaction, and with GTIDs on each has its own: GTID, rows, XID. GTID
    # and XID events are not filtered by schema (another test's transactions at the same time bring theirs),
    # so only the transactions around our two row events are counted.
    ours: list[list[type]] = []
    for e in events:
        if isinstance(e, MariadbGtidEvent):
            ours.append([])
        if ours:
            ours[-1].append(type(e))
    ours = [t for t in ours if WriteRowsEvent in t or UpdateRowsEvent in t]
    gtid, xid = MariadbGtidEvent, XidEvent
    assert ours == [[gtid, WriteRowsEvent, xid], [gtid, UpdateRowsEvent, xid]]


def test_reader_account_cannot_write(source):
    import pymysql
    import pytest

    db = mysql.connect(source.mysql)
    try:
        with pytest.raises(pymysql.err.OperationalError), db.cursor() as cur:
            cur.execute("CREATE DATABASE dbus_test_reader_must_not_create")
    finally:
        db.close()
