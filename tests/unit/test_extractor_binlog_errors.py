"""extractor/reader.py: the binlog connection's MySQL errors as DBus's. Error 1236 is a purged position (exit
2 at once), but "not in the binary log index" for a file the server still lists, or while it cannot be asked,
is a server starting again: transient, retried."""

from __future__ import annotations

import pymysql
import pytest

from dbuslib.errors import EndpointError
from extractor.position import Position
from extractor.reader import NOT_IN_INDEX, BinlogPurgedError, _translate

AT = Position(file="mariadb-bin.000050", pos=4)
GTID = Position(file="", pos=0, gtid="0-1-10")
NOT_FOUND = pymysql.err.OperationalError(1236, f"{NOT_IN_INDEX}; the first event '' at 4")
PAST_END = pymysql.err.OperationalError(
    1236, "Client requested master to start replication from impossible position"
)


@pytest.mark.parametrize(
    ("err", "start", "listed", "want"),
    [
        (NOT_FOUND, AT, ["mariadb-bin.000049"], BinlogPurgedError),  # purged: exit 2 at once
        (NOT_FOUND, AT, ["mariadb-bin.000050", "mariadb-bin.000051"], EndpointError),  # a server starting
        (NOT_FOUND, AT, None, EndpointError),  # cannot be asked: retried, asked again next time
        (PAST_END, AT, ["mariadb-bin.000050"], BinlogPurgedError),  # another 1236: as before
        (NOT_FOUND, GTID, None, BinlogPurgedError),  # a GTID start names no file to look for
        (pymysql.err.OperationalError(2013, "Lost connection"), AT, None, EndpointError),
    ],
)
def test_1236_is_purged_unless_the_server_still_lists_the_file(err, start, listed, want):
    asked = []

    def files():
        asked.append(1)
        return listed

    got = _translate(err, start, files)
    assert type(got) is want, got
    assert (got.code == "EXTRACTOR_BINLOG_PURGED") == (want is BinlogPurgedError)
    if want is EndpointError and err.args[0] == 1236:
        assert got.retriable is not False and asked == [1]
        assert "1236" in str(got) and ("mariadb-bin.000050" in str(got) or "cannot be asked" in str(got))
