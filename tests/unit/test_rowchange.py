"""ums.rowchange: UMS data messages -> row changes (from_message), and key_changed."""

from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dbuslib.config import MaskRule
from ums.build import DataRow, build_data_message
from ums.errors import BadMessageError
from ums.ids import ums_id, ums_uid
from ums.masking import compile_rules
from ums.message import SYSTEM_FIELDS, Op, ProtocolType, UmsField, UmsMessage, UmsSchema
from ums.namespace import Namespace
from ums.rowchange import from_message
from ums.types import ColumnSpec, UmsType

NS = Namespace("mysql", "demo", "shop", "orders", 3)
COLUMNS = (
    ColumnSpec("id", "int(11)", False),
    ColumnSpec("name", "varchar(20)"),
    ColumnSpec("amount", "decimal(10,2)"),
)
TS = "2024-01-02 03:04:05.000"


def row(
    op: Op, values: tuple, event_pos: int = 100, index: int = 0, file: str = "mysql-bin.000003"
) -> DataRow:
    """A tuple to build: ``values`` as the message carries them (amount as its decimal text)."""
    uid_base = ums_id(file, event_pos)
    python = (values[0], values[1], None if values[2] is None else Decimal(values[2]))
    return DataRow(uid_base, TS, op, ums_uid(uid_base, index), python)


def changes(rows, protocol=ProtocolType.DATA_INCREMENT_DATA, columns=COLUMNS, **kw):
    message = build_data_message(NS, columns, rows, protocol=protocol)
    kw.setdefault("file", "mysql-bin.000003")
    return from_message(message, columns, ("id",), ts_ms=1_700_000_000_000, **kw)


def test_insert_update_delete_give_c_u_d_with_their_images_and_positions():
    got = changes(
        [
            row(Op.INSERT, (1, "a", "1.50"), 100, 0),
            row(Op.INSERT, (2, "b", None), 100, 1),
            row(Op.UPDATE, (1, "a", "2.00"), 250, 0),
            row(Op.DELETE, (2, "b", None), 400, 0),
        ],
        server_id=7,
        gtid="0-7-9",
    )
    assert [c.op for c in got] == ["c", "c", "u", "d"]
    assert got[0].before is None and got[0].after == (1, "a", "1.50")
    assert got[2].before is None and got[2].after == (1, "a", "2.00")  # no b tuple: before unknown
    assert got[3].before == (2, "b", None) and got[3].after is None
    at = got[1].at
    assert (at.ums_id, at.file, at.pos, at.row, at.ts_ms) == (
        30000000000100,
        "mysql-bin.000003",
        100,
        1,
        1_700_000_000_000,
    )
    assert (at.server_id, at.gtid, at.snapshot) == (7, "0-7-9", "false")
    assert got[1].ums_uid == "30000000000100000001"
    assert got[3].at.pos == 400 and got[3].at.row == 0


def test_the_shape_is_built_once_and_names_the_table_version():
    got = changes([row(Op.INSERT, (1, "a", "1.50"), 100, 0), row(Op.INSERT, (2, "b", None), 100, 1)])
    shape = got[0].table
    assert got[1].table is shape
    assert (shape.ds, shape.schema, shape.table, shape.version) == ("demo", "shop", "orders", 3)
    assert shape.columns == COLUMNS
    assert [f.name for f in shape.fields] == ["id", "name", "amount"]
    assert shape.fields[2] == UmsField("amount", UmsType.DECIMAL, True)
    assert shape.primary_key == ("id",) and shape.key_indices == (0,)


def test_a_b_tuple_is_the_before_image_of_the_u_after_it():
    got = changes([row(Op.BEFORE, (1, "a", "1.50"), 100, 0), row(Op.UPDATE, (1, "a", "2.00"), 100, 1)])
    assert len(got) == 1
    change = got[0]
    assert change.op == "u" and change.before == (1, "a", "1.50") and change.after == (1, "a", "2.00")
    assert change.at.row == 1 and change.ums_uid == "30000000000100000001"
    assert not change.key_changed


def test_key_changed_only_for_an_update_whose_key_differs():
    got = changes(
        [
            row(Op.BEFORE, (1, "a", "1.50"), 100, 0),
            row(Op.UPDATE, (10, "a", "1.50"), 100, 1),
            row(Op.UPDATE, (10, "z", "1.50"), 200, 0),
            row(Op.DELETE, (10, "z", "1.50"), 300, 0),
        ]
    )
    assert [c.key_changed for c in got] == [True, False, False]


def test_no_primary_key_never_changes_key():
    message = build_data_message(
        NS, COLUMNS, [row(Op.BEFORE, (1, "a", None)), row(Op.UPDATE, (2, "a", None), index=1)]
    )
    (change,) = from_message(message, COLUMNS, (), file="mysql-bin.000003", ts_ms=0)
    assert change.table.key_indices == () and not change.key_changed


def test_full_pull_rows_are_reads_and_the_last_one_can_be_marked():
    rows = [row(Op.INSERT, (i, "x", None), 100, i) for i in range(3)]
    pulled = changes(rows, ProtocolType.DATA_INITIAL_DATA)
    assert [(c.op, c.at.snapshot, c.before) for c in pulled] == [("r", "true", None)] * 3
    last = changes(rows, ProtocolType.DATA_INITIAL_DATA, last_snapshot_row=True)
    assert [c.at.snapshot for c in last] == ["true", "true", "last"]
    increment = changes(rows, last_snapshot_row=True)
    assert {c.at.snapshot for c in increment} == {"false"}


def test_masked_fields_keep_their_columns_by_name():
    rules = compile_rules({"shop.orders": {"name": MaskRule(type="sha256", salt="s")}})
    message = build_data_message(NS, COLUMNS, [row(Op.INSERT, (1, "alice", "1.00"))])
    mask = rules.for_table("shop", "orders", message.schema.fields)
    assert mask is not None
    masked = UmsMessage(
        message.protocol,
        UmsSchema(NS, mask.fields),
        tuple(mask.apply_row(t) for t in message.payload),
    )
    (change,) = from_message(masked, COLUMNS, ("id",), file="mysql-bin.000003", ts_ms=0)
    assert change.table.fields[1].encoded and change.table.columns[1] == COLUMNS[1]
    assert change.after is not None and change.after[1] != "alice"


def test_columns_are_matched_by_name_not_position():
    shuffled = (COLUMNS[2], COLUMNS[0], COLUMNS[1], ColumnSpec("extra", "int(11)"))
    message = build_data_message(NS, COLUMNS, [row(Op.INSERT, (1, "a", None))])
    (change,) = from_message(message, shuffled, ("id",), file="mysql-bin.000003", ts_ms=0)
    assert change.table.columns == COLUMNS


@pytest.mark.parametrize(
    ("rows", "columns", "error"),
    [
        ([row(Op.INSERT, (1, "a", None))], COLUMNS[:2], r"\['amount'\] have no column"),
        (
            [row(Op.BEFORE, (1, "a", None)), row(Op.DELETE, (1, "a", None), index=1)],
            COLUMNS,
            "followed by 'd'",
        ),
        (
            [row(Op.INSERT, (1, "a", None)), row(Op.BEFORE, (1, "a", None), index=1)],
            COLUMNS,
            r"payload\[1\].*b without",
        ),
    ],
)
def test_bad_messages_are_named(rows, columns, error):
    message = build_data_message(NS, COLUMNS, rows)
    with pytest.raises(BadMessageError, match=error):
        from_message(message, columns, ("id",), file="mysql-bin.000003", ts_ms=0)


def test_a_heartbeat_carries_no_row_changes():
    protocol = ProtocolType.DATA_INCREMENT_HEARTBEAT
    message = UmsMessage(protocol, UmsSchema(NS, SYSTEM_FIELDS[protocol]), (("1", TS),))
    with pytest.raises(BadMessageError, match="data_increment_heartbeat carries no row changes"):
        from_message(message, COLUMNS, ("id",), file="mysql-bin.000003", ts_ms=0)


ops = st.sampled_from([Op.INSERT, Op.UPDATE, Op.DELETE, "bu"])
values = st.tuples(st.integers(0, 5), st.none() | st.text(max_size=3), st.none() | st.just("1.00"))


@given(st.lists(st.tuples(ops, values, values), min_size=1, max_size=20), st.integers(1, 999))
def test_every_tuple_but_b_is_one_change_in_order(script, file_number):
    file = f"mysql-bin.{file_number:06d}"
    rows, expected = [], []
    for event, (op, first, second) in enumerate(script):
        if op == "bu":
            rows += [row(Op.BEFORE, first, event, 0, file), row(Op.UPDATE, second, event, 1, file)]
            expected.append(("u", first, second, 1, first[0] != second[0]))
        else:
            rows.append(row(op, first, event, 0, file))
            images = {
                Op.INSERT: ("c", None, first),
                Op.UPDATE: ("u", None, first),
                Op.DELETE: ("d", first, None),
            }
            expected.append((*images[op], 0, False))
    got = changes(rows, file=file)
    assert [(c.op, c.before, c.after, c.at.row, c.key_changed) for c in got] == expected
    assert [c.at.pos for c in got] == list(range(len(script)))
    assert all(c.at.ums_id == file_number * 10**13 + c.at.pos for c in got)
    assert all(c.ums_uid == ums_uid(str(c.at.ums_id), c.at.row) for c in got)
