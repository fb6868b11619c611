"""ums_id_ / ums_uid_: binlog coordinates -> identities, and back."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ums.errors import BadPositionError
from ums.ids import LONG_MAX, parse_ums_id, parse_ums_uid, position_id, ums_id, ums_uid

MAX_FILE = LONG_MAX // 10**13 - 1


@pytest.mark.parametrize(
    ("binlog_file", "offset", "compensation", "expected"),
    [
        ("mysql-bin.000103", 12345678, 0, "1030000012345678"),
        ("mysql-bin.000011", 986886300, 0, "110000986886300"),
        ("mysql-bin.000001", 4, 0, "10000000000004"),
        ("mysql-bin.000000", 0, 0, "0"),
        ("host.with.dots-bin.000007", 120, 0, "70000000000120"),
        ("mysql-bin.000002", 154, 1000, "10020000000000154"),
        ("mysql-bin.000103", 10**13 - 1, 0, "1039999999999999"),
    ],
)
def test_ums_id_is_file_number_times_10_13_plus_offset(binlog_file, offset, compensation, expected):
    assert ums_id(binlog_file, offset, compensation) == expected


@pytest.mark.parametrize(
    ("binlog_file", "offset", "compensation"),
    [
        ("mysql-bin.000103", 10**13, 0),
        ("mysql-bin.000103", -1, 0),
        ("mysql-bin", 4, 0),
        ("mysql-bin.", 4, 0),
        ("mysql-bin.00a1", 4, 0),
        ("mysql-bin.000003", 4, -4),
        ("mysql-bin.999999", 4, 0),
        ("mysql-bin.000003", True, 0),
    ],
)
def test_bad_coordinates_raise_naming_the_file(binlog_file, offset, compensation):
    with pytest.raises(BadPositionError, match=binlog_file.replace(".", r"\.")) as info:
        ums_id(binlog_file, offset, compensation)
    assert info.value.code == "UMS_BAD_POSITION"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1030000012345678", (103, 12345678)),
        ("110000986886300", (11, 986886300)),
        (1030000012345678, (103, 12345678)),
        ("0", (0, 0)),
    ],
)
def test_parse_ums_id(text, expected):
    assert parse_ums_id(text) == expected


@pytest.mark.parametrize("text", ["0025390000550881764", "-1", "12a", "", " 1", "1_000", str(2**63)])
def test_parse_ums_id_rejects_non_canonical_text(text):
    with pytest.raises(BadPositionError, match="ums_id_"):
        parse_ums_id(text)


@pytest.mark.parametrize(
    ("uid_base", "row_index", "expected"),
    [
        ("1030000012345678", 0, "1030000012345678000000"),
        ("1030000012345678", 2, "1030000012345678000002"),
        (7, 999_999, "7999999"),
    ],
)
def test_ums_uid_is_id_times_10_6_plus_row_index(uid_base, row_index, expected):
    assert ums_uid(uid_base, row_index) == expected
    assert parse_ums_uid(expected) == (str(uid_base), row_index)


@pytest.mark.parametrize("row_index", [-1, 10**6, True, 1.0])
def test_ums_uid_rejects_row_index_out_of_range_naming_it(row_index):
    with pytest.raises(BadPositionError, match=f"row index {row_index!r}"):
        ums_uid("1030000012345678", row_index)


files = st.integers(0, MAX_FILE)
offsets = st.integers(0, 10**13 - 1)


@given(files, offsets)
def test_ums_id_parse_round_trip(file_number, offset):
    text = ums_id(f"mysql-bin.{file_number:06d}", offset)
    assert parse_ums_id(text) == (file_number, offset)


@given(files, offsets, files, offsets)
def test_ums_id_order_is_binlog_order(file_a, offset_a, file_b, offset_b):
    id_a = int(ums_id(f"b.{file_a}", offset_a))
    id_b = int(ums_id(f"b.{file_b}", offset_b))
    assert (id_a < id_b) == ((file_a, offset_a) < (file_b, offset_b))


coordinates = st.tuples(files, offsets, st.integers(0, 10**6 - 1))


@given(coordinates, coordinates)
def test_ums_uid_order_is_id_then_row_index(a, b):
    uid_a = int(ums_uid(ums_id(f"b.{a[0]}", a[1]), a[2]))
    uid_b = int(ums_uid(ums_id(f"b.{b[0]}", b[1]), b[2]))
    assert (uid_a < uid_b) == (a < b)
    assert (uid_a == uid_b) == (a == b)


@pytest.mark.parametrize(
    ("number", "offset", "expected"),
    [(0, 0, "0"), (0, 4711, "4711"), (3, 4711, "30000000004711"), (255, 2**43 - 1, "2558796093022207")],
)
def test_position_id_is_number_times_10_13_plus_offset_for_any_numbered_log(number, offset, expected):
    assert position_id(number, offset) == expected
    assert ums_uid(position_id(number, offset), 2) == str(int(expected) * 10**6 + 2)


@pytest.mark.parametrize(("number", "offset"), [(-1, 0), (0, -1), (0, 10**13), (LONG_MAX, 0), (True, 0)])
def test_position_id_refuses_what_does_not_fit_naming_the_position(number, offset):
    with pytest.raises(BadPositionError, match="partition 7"):
        position_id(number, offset, "partition 7", "partition")
