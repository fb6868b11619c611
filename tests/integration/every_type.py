"""The every-column-type workload: one table with every MariaDB column type, four rows at the extremes
(MAX, MIN, ODD: zero dates, padding, the invalid ENUM; NULL), the transactions run over them, and the checks
that compare decoded rows with what SELECT returns.

Used by test_rowdecode_types (decoder), test_extractor_golden and test_appender_golden (the pipeline),
test_fullpull_render and test_fullpull (the full puller); the readable form of what each row becomes is
tests/golden/cdc/every_type.sql.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from pymysqlreplication import BinLogStreamReader
from pymysqlreplication.event import MariadbGtidEvent, XidEvent
from pymysqlreplication.row_event import DeleteRowsEvent, TableMapEvent, UpdateRowsEvent, WriteRowsEvent

from binlog import rawevent
from binlog.rows import DecodedRows
from dbuslib import mysql
from dbuslib.coltypes import TypeCache, catalog_lookup, library_columns
from extractor.capture import raw_rows
from ums.types import ColumnSpec, UmsType, parse_column_type

T = UmsType
# name, DDL, column type the decoder must rebuild, UMS type
COLUMNS: list[tuple[str, str, str, UmsType]] = [
    ("id", "INT NOT NULL PRIMARY KEY", "int", T.INT),
    ("ti", "TINYINT", "tinyint", T.INT),
    ("tiu", "TINYINT UNSIGNED", "tinyint unsigned", T.INT),
    ("si", "SMALLINT", "smallint", T.INT),
    ("siu", "SMALLINT UNSIGNED", "smallint unsigned", T.INT),
    ("mi", "MEDIUMINT", "mediumint", T.INT),
    ("miu", "MEDIUMINT UNSIGNED", "mediumint unsigned", T.INT),
    ("i", "INT", "int", T.INT),
    ("iu", "INT UNSIGNED", "int unsigned", T.LONG),
    ("bi", "BIGINT", "bigint", T.LONG),
    ("biu", "BIGINT UNSIGNED", "bigint unsigned", T.LONG),
    ("de", "DECIMAL(65,30)", "decimal(65,30)", T.DECIMAL),
    ("d2", "DECIMAL(10,2)", "decimal(10,2)", T.DECIMAL),
    ("fl", "FLOAT", "float", T.FLOAT),
    ("db", "DOUBLE", "double", T.DOUBLE),
    ("b1", "BIT(1)", "bit(1)", T.INT),
    ("b64", "BIT(64)", "bit(64)", T.LONG),
    ("dt", "DATE", "date", T.DATE),
    ("dtm", "DATETIME", "datetime", T.DATETIME),
    ("dtm6", "DATETIME(6)", "datetime(6)", T.DATETIME),
    ("ts", "TIMESTAMP NULL", "timestamp", T.DATETIME),
    ("ts3", "TIMESTAMP(3) NULL", "timestamp(3)", T.DATETIME),
    ("tm", "TIME", "time", T.STRING),
    ("tm3", "TIME(3)", "time(3)", T.STRING),
    ("yr", "YEAR", "year", T.INT),
    ("ch", "CHAR(10)", "char(10)", T.STRING),
    ("vc", "VARCHAR(20)", "varchar(20)", T.STRING),
    ("tt", "TINYTEXT", "tinytext", T.STRING),
    ("tx", "TEXT", "text", T.STRING),
    ("mt", "MEDIUMTEXT", "mediumtext", T.STRING),
    ("lt", "LONGTEXT", "longtext", T.STRING),
    ("bn", "BINARY(4)", "binary(4)", T.BINARY),
    ("vb", "VARBINARY(16)", "varbinary(16)", T.BINARY),
    ("tb", "TINYBLOB", "tinyblob", T.BINARY),
    ("bl", "BLOB", "blob", T.BINARY),
    ("mb", "MEDIUMBLOB", "mediumblob", T.BINARY),
    ("lb", "LONGBLOB", "longblob", T.BINARY),
    ("en", "ENUM('small','medium','large')", "enum('small','medium','large')", T.STRING),
    ("st", "SET('red','green','blue')", "set('red','green','blue')", T.STRING),
    # MariaDB's JSON is LONGTEXT + CHECK(json_valid): information_schema and the binlog both say longtext
    ("js", "JSON", "longtext", T.STRING),
    # MariaDB's INET4/INET6/UUID: BINARY(4)/BINARY(16) in the binlog, named by the raw header's ``types``
    ("i4", "INET4", "inet4", T.STRING),
    ("i6", "INET6", "inet6", T.STRING),
    ("uu", "UUID", "uuid", T.STRING),
    ("nn", "VARCHAR(5) NOT NULL DEFAULT ''", "varchar(5)", T.STRING),
]
CREATE = (
    "CREATE TABLE every_type ("
    + ", ".join(f"`{n}` {ddl}" for n, ddl, _, _ in COLUMNS)
    + ") DEFAULT CHARSET=utf8mb4"
)

MAX_ROW = (
    1,
    127,
    255,
    32767,
    65535,
    8388607,
    16777215,
    2147483647,
    4294967295,
    2**63 - 1,
    2**64 - 1,
    "9" * 35 + "." + "9" * 30,
    "99999999.99",
    1.1,
    1.7976931348623157e308,
    b"\x01",
    b"\xff" * 8,
    "9999-12-31",
    "9999-12-31 23:59:59",
    "9999-12-31 23:59:59.999999",
    "2038-01-19 03:14:07",
    "2038-01-19 03:14:07.999",
    "838:59:59",
    "838:59:58.999",
    2155,
    "abcdefghij",
    "héllo 😀 ✓ 漢字",
    "tiny 😀",
    "text ✓",
    "medium 😀",
    "long😀" * 20000,
    b"\x01\x02\x03\x04",
    b"\x00\xff\x00",
    b"\x00",
    bytes(range(256)),
    b"\xab" * 70000,
    b"\x00\x01" * 40000,
    "large",
    "blue,red",
    '{"k": [1, 2.5, null, true, "😀"], "n": {"x": -1}}',
    "255.255.255.255",
    "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
    "ffffffff-ffff-ffff-ffff-ffffffffffff",
    "a",
)
MIN_ROW = (
    2,
    -128,
    0,
    -32768,
    0,
    -8388608,
    0,
    -2147483648,
    0,
    -(2**63),
    0,
    "-" + "9" * 35 + "." + "9" * 30,
    "-99999999.99",
    -3.14159274,
    -2.2250738585072014e-308,
    b"\x00",
    b"\x80\x00\x00\x00\x00\x00\x00\x01",
    "1000-01-01",
    "1000-01-01 00:00:00",
    "1000-01-01 00:00:00.000001",
    "1970-01-01 00:00:01",
    "1970-01-01 00:00:01.001",
    "-838:59:59",
    "-838:59:58.999",
    1901,
    "",
    "",
    "",
    "",
    "",
    "",
    b"",
    b"",
    b"",
    b"",
    b"",
    b"",
    "small",
    "",
    "[]",
    "0.0.0.0",
    "::",
    "00000000-0000-0000-0000-000000000000",
    "",
)
ODD_ROW = (  # zero dates, negative fractions, padding, the invalid ENUM value (non-strict sql_mode)
    3,
    -1,
    1,
    -1,
    1,
    -1,
    1,
    -1,
    1,
    -1,
    1,
    "0.000000000000000000000000000001",
    "0.5",
    0.0,
    -0.0,
    b"\x01",
    b"\x05",
    "0000-00-00",
    "0000-00-00 00:00:00",
    "2024-00-15 01:02:03.5",
    "0000-00-00 00:00:00",
    "0000-00-00 00:00:00.000",
    "-00:00:01",
    "-00:00:00.001",
    0,
    "pad  ",
    "trail ",
    " ",
    "\t",
    "x",
    "y",
    b"\xab",
    b"",
    None,
    None,
    None,
    None,
    "",
    "red,green,blue",
    '"😀"',
    "10.0.0.1",
    "::ffff:1.2.3.4",
    "123e4567-e89b-12d3-a456-426655440000",
    "x",
)
NULL_ROW = (4,) + (None,) * (len(COLUMNS) - 2) + ("n",)

TRANSACTIONS = [
    ["INSERT every_type rows 1-4"],  # replaced by the multi-row INSERT built in the test
    [
        "UPDATE every_type SET d2 = -d2, vc = CONCAT(vc, '✓'), st = 'green', js = '{\"updated\": true}', "
        "tm3 = '-12:00:00.5', b1 = b'1', ts3 = '2001-02-03 04:05:06.789', fl = fl * 2, lt = 'short now', "
        "bn = x'ff', i6 = '2001:db8::ff00:42:8329', uu = '6ccd780c-baba-1026-9564-5b8c656024db', "
        "i4 = '1.2.3.4' "
        "WHERE id IN (1, 2, 4)"
    ],
    ["DELETE FROM every_type WHERE id = 2"],
    [
        "BEGIN",
        "INSERT INTO every_type (id, ti, vc, js, nn) VALUES (5, 5, 'five ✋', '{}', 'f')",
        "UPDATE every_type SET id = 10, yr = 1999 WHERE id = 1",
        "DELETE FROM every_type WHERE id = 3",
        "UPDATE every_type SET ti = ti + 1 WHERE id = 5",
        "COMMIT",
    ],
]


def run(db, transactions: list[list[str]]) -> list[list[dict[str, Any]]]:
    """Run each transaction; the table as SELECT shows it (in UTC) right after each."""
    names = [n for n, _, _, _ in COLUMNS]
    snapshots = []
    with db.cursor() as cur:
        cur.execute("SET time_zone = '+00:00', sql_mode = ''")
        for statements in transactions:
            for sql in statements:
                cur.execute(sql)
            cur.execute("SELECT * FROM every_type ORDER BY id")
            snapshots.append([dict(zip(names, row, strict=True)) for row in cur.fetchall()])
    return snapshots


def multi_row_insert(db, rows: list[tuple]) -> str:
    marks = "(" + ",".join(["%s"] * len(COLUMNS)) + ")"
    with db.cursor() as cur:
        return "INSERT INTO every_type VALUES " + ",".join(cur.mogrify(marks, row) for row in rows)


def read_transactions(source, start: mysql.BinlogPosition, schema: str) -> list[list[rawevent.RawEvent]]:
    """Raw records of this schema's transactions since ``start``, one list per transaction, each with the
    header ``types`` the extractor adds (dbuslib.coltypes, from information_schema)."""
    types = TypeCache(catalog_lookup(lambda: mysql.connect(source.mysql)))
    stream = BinLogStreamReader(
        connection_settings=mysql.connection_settings(source.mysql),
        server_id=source.mysql.server_id + 1000 + uuid.uuid4().int % 50000,
        log_file=start.file,
        log_pos=start.pos,
        resume_stream=True,
        blocking=False,
        only_schemas=[schema],
        only_events=[
            MariadbGtidEvent,
            XidEvent,
            TableMapEvent,
            WriteRowsEvent,
            UpdateRowsEvent,
            DeleteRowsEvent,
        ],
    )
    transactions: list[list[rawevent.RawEvent]] = []
    gtid, table_map = "", None
    try:
        for event in stream:
            if isinstance(event, MariadbGtidEvent):
                gtid = event.gtid
                transactions.append([])
            elif isinstance(event, TableMapEvent):
                table_map = event
            elif not isinstance(event, XidEvent):
                crc = stream._BinLogStreamReader__use_checksum
                found = types.types(table_map.schema, table_map.table, library_columns(table_map))
                transactions[-1].append(
                    raw_rows("demo", stream.log_file, table_map, event, gtid, crc, types=found)
                )
    finally:
        stream.close()
    return [t for t in transactions if t]  # other sessions' transactions show up empty


def through_kafka(record: rawevent.RawEvent) -> rawevent.RawEvent:
    """Encode, cut into chunks of at most 16 kB, reassemble and parse, as the appender will see it."""
    assembler, whole = rawevent.Reassembler(), None
    for chunk in rawevent.split(record, 16384):
        whole = assembler.push(rawevent.decode(rawevent.encode(chunk), key=chunk.key.encode()))
    assert whole is not None
    return whole


def as_decoded(spec: ColumnSpec, value: Any) -> Any:
    """A SELECT value in the decoder's form, for the normalisations rowdecode documents."""
    base = parse_column_type(spec.column_type).base
    if value is None:
        return None
    if base == "bit":
        return int.from_bytes(value, "big")
    if base == "timestamp" and isinstance(value, datetime):
        return value.replace(tzinfo=UTC)
    if base == "set":
        return set(value.split(",")) if value else set()
    return value


def differences(spec: ColumnSpec, decoded: Any, selected: Any) -> bool:
    expected = as_decoded(spec, selected)
    if spec.column_type == "float" and isinstance(decoded, float):  # MariaDB prints FLOAT to 6 digits
        return float(f"{decoded:.6g}") != expected
    if type(decoded) is not type(expected) or decoded != expected:
        return True
    return isinstance(expected, Decimal) and str(decoded) != str(expected)  # the scale too


def compare(
    table: dict[int, dict[str, Any]],
    snapshot: list[dict[str, Any]],
    specs: tuple[ColumnSpec, ...],
    where: str,
) -> list[str]:
    problems = [] if sorted(table) == [r["id"] for r in snapshot] else [f"{where}: ids {sorted(table)}"]
    for selected in snapshot:
        decoded = table.get(selected["id"], {})
        problems += [
            f"{where} id={selected['id']} {s.name}: decoded {decoded.get(s.name)!r:.80} "
            f"SELECT {selected[s.name]!r:.80}"
            for s in specs
            if differences(s, decoded.get(s.name), selected[s.name])
        ]
    return problems


def replay(table: dict[int, dict[str, Any]], decoded: DecodedRows, where: str) -> list[str]:
    """Apply one decoded event; a before image must equal the row held."""
    problems = []
    for image in decoded.rows:
        if image.before is not None:
            held = table.pop(image.before["id"], None)
            if held != image.before:
                problems.append(
                    f"{where} {decoded.op}: before image {image.before!r:.200} != row held {held!r:.200}"
                )
        if image.after is not None:
            table[image.after["id"]] = image.after
    return problems
