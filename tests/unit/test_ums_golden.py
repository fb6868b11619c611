"""Golden UMS files (tests/golden/ums): parse, re-serialise, compare byte for byte.

Each file is one message followed by a newline. ``a_``..``d_`` are the spec's examples 1.13 A-D
(A with its values made consistent), ``control_`` files are control messages (spec 2.2), and
``built_from_python.json`` is what ``python_built_message()`` below must produce.
"""

import struct
from datetime import date, timedelta
from decimal import Decimal
from pathlib import Path

import pytest
from ums_strategies import wall

from ums import control
from ums.build import DataRow, build_data_messages
from ums.encoding import from_json, to_json
from ums.ids import ums_id, ums_uid
from ums.message import Op
from ums.namespace import Namespace
from ums.timefmt import ums_ts_ms
from ums.types import ColumnSpec

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "ums"
FILES = sorted(GOLDEN.glob("*.json"))


def test_there_are_golden_files():
    assert {p.name for p in FILES} >= {
        "a_increment.json",
        "b_desensitized.json",
        "c_heartbeat.json",
        "d_termination.json",
        "control_full_pull_request.json",
        "built_from_python.json",
    }


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_golden_file_survives_parse_and_reserialise_byte_for_byte(path):
    text = path.read_text(encoding="utf-8")
    codec = control if path.name.startswith("control_") else None
    again = codec.to_json(codec.from_json(text)) if codec else to_json(from_json(text))
    assert again + "\n" == text


COLUMNS = (
    ColumnSpec("id", "bigint(20) unsigned", nullable=False),
    ColumnSpec("qty", "int(11)"),
    ColumnSpec("flags", "int(10) unsigned"),
    ColumnSpec("amount", "decimal(65,30)"),
    ColumnSpec("ratio", "float"),
    ColumnSpec("score", "double"),
    ColumnSpec("born", "date"),
    ColumnSpec("created", "datetime(6)"),
    ColumnSpec("updated", "timestamp(3)"),
    ColumnSpec("plain", "datetime"),
    ColumnSpec("took", "time(3)"),
    ColumnSpec("yr", "year(4)"),
    ColumnSpec("active", "bit(1)"),
    ColumnSpec("mask", "bit(64)"),
    ColumnSpec("state", "enum('new','paid')"),
    ColumnSpec("tags", "set('red','green','blue')"),
    ColumnSpec("doc", "json"),
    ColumnSpec("note", "mediumtext"),
    ColumnSpec("photo", "longblob"),
    ColumnSpec("shape", "geometry"),
    ColumnSpec("ref", "char(36)"),
)
VALUES = (
    2**64 - 1,
    -(2**31),
    2**32 - 1,
    Decimal("12345678901234567890123456789012345.123456789012345678901234567890"),
    struct.unpack("<f", struct.pack("<f", 1.1))[0],
    0.1,
    date(1999, 12, 31),
    wall(2024, 1, 2, 3, 4, 5, 123456),
    wall(2024, 1, 2, 3, 4, 5, 120000),
    wall(2024, 1, 2, 3, 4, 5),
    -timedelta(hours=838, minutes=59, seconds=59),
    2024,
    1,
    2**64 - 1,
    "paid",
    {"blue", "red"},
    {"k": [1, "é", None, True]},
    "déjà vu 😀",
    b"\x89PNG\r\n\x1a\n",
    b"\x00\x00\x00\x00\x01\x01\x00\x00\x00" + struct.pack("<dd", 1.0, 2.0),
    None,
)


def python_built_message():
    """An insert (rows event 1), then an update with its before image (rows event 2)."""
    namespace = Namespace("mysql", "demo", "shop", "everything", 1)
    ts = ums_ts_ms(1704164645000)
    first, second = ums_id("mysql-bin.000103", 12345678), ums_id("mysql-bin.000103", 12349000)
    old_values = (VALUES[0], 0, *VALUES[2:])
    rows = [
        DataRow(first, ts, Op.INSERT, ums_uid(first, 0), old_values),
        DataRow(second, ts, Op.BEFORE, ums_uid(second, 0), old_values),
        DataRow(second, ts, Op.UPDATE, ums_uid(second, 1), VALUES),
    ]
    [message] = build_data_messages(namespace, COLUMNS, rows)
    return message


def test_message_built_from_python_values_matches_its_golden_file():
    expected = (GOLDEN / "built_from_python.json").read_text(encoding="utf-8")
    assert to_json(python_built_message()) + "\n" == expected
