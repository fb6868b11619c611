from decimal import Decimal

import pytest

from appender.convert import ConvertSettings, data_rows, original_key, record_key, to_ums
from binlog.rawevent import RawHeader
from binlog.rows import DecodedRows, RowImage
from ums import ColumnSpec, Op, to_json

HEADER = RawHeader(kind="rows", file="mariadb-bin.000103", pos=12345678, ts=1795356844)
COLUMNS = (ColumnSpec("id", "bigint", False), ColumnSpec("total", "decimal(12,2)", True))


def rows(op, *images):
    return DecodedRows("shop", "orders", op, COLUMNS, ("id",), tuple(RowImage(*i) for i in images))


def test_tuples_carry_binlog_ids_and_stable_uids():
    decoded = rows("i", (None, {"id": 1, "total": Decimal("9.50")}), (None, {"id": 2, "total": None}))
    got = list(data_rows(HEADER, decoded, ConvertSettings("demo")))
    assert [(r.ums_id, r.ums_uid, r.op, r.values) for r in got] == [
        ("1030000012345678", "1030000012345678000000", Op.INSERT, (1, Decimal("9.50"))),
        ("1030000012345678", "1030000012345678000001", Op.INSERT, (2, None)),
    ]
    assert got[0].ums_ts == "2026-11-22 14:14:04.000"


@pytest.mark.parametrize(("before_image", "ops"), [(False, ["u"]), (True, ["b", "u"])])
def test_update_optionally_emits_the_before_image_first(before_image, ops):
    decoded = rows("u", ({"id": 1, "total": Decimal("1.00")}, {"id": 1, "total": Decimal("2.00")}))
    got = list(data_rows(HEADER, decoded, ConvertSettings("demo", before_update_image=before_image)))
    assert [r.op.value for r in got] == ops
    assert [r.values[1] for r in got] == [Decimal("1.00"), Decimal("2.00")][-len(ops) :]
    assert len({r.ums_uid for r in got}) == len(got)


def test_delete_carries_the_before_image():
    decoded = rows("d", ({"id": 7, "total": Decimal("3.00")}, None))
    (row,) = data_rows(HEADER, decoded, ConvertSettings("demo"))
    assert (row.op, row.values) == (Op.DELETE, (7, Decimal("3.00")))


def test_messages_are_cut_and_keyed_by_table():
    decoded = rows("i", *[(None, {"id": i, "total": None}) for i in range(5)])
    messages = to_ums(HEADER, decoded, 3, ConvertSettings("demo", max_tuples=2))
    assert [len(m.payload) for m in messages] == [2, 2, 1]
    assert str(messages[0].schema.namespace) == "mysql.demo.shop.orders.3.0.0"
    assert record_key(messages[0]) == "shop.orders"
    assert original_key(messages[0], HEADER, "demo") == (
        "data_increment_data.mysql.demo.shop.orders.3.0.0.1795356844000|demo.wh_placeholder"
    )
    assert (
        '"tuple":["1030000012345678","2026-11-22 14:14:04.000","i","1030000012345678000000","0",null]'
        in to_json(messages[0])
    )


@pytest.mark.parametrize("before_image", [False, True])
def test_uids_past_the_row_limit_raise_for_every_tuple_kind(monkeypatch, before_image):
    import ums.ids
    from appender.convert import rendered_tuples
    from ums.errors import UmsError

    monkeypatch.setattr(ums.ids, "ROW_LIMIT", 3)
    shape = rows("u")
    lines = [b'1,"1.00"', b'1,"2.00"'] * 2  # two rows: before, after, before, after
    settings = ConvertSettings("demo", before_update_image=before_image)
    if before_image:  # b, u, b(index 2), u(index 3): past the limit
        with pytest.raises(UmsError):
            rendered_tuples(HEADER, shape, lines, settings)
    else:
        got = rendered_tuples(HEADER, shape, lines, settings)
        assert [int(t[3]) - int(t[0]) * 3 for t in got] == [0, 1]
        assert [t[4:] for t in got] == [(1, "2.00")] * 2


def test_ums_uids_are_ums_uid_of_each_index():
    from ums import ums_uid
    from ums.ids import uid_tails, ums_uids

    base = "1030000012345678"
    assert ums_uids(base, 3) == [ums_uid(base, t) for t in range(3)]
    assert [base + t.decode() for t in uid_tails(3)[:3]] == ums_uids(base, 3)
