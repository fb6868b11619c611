"""Position: JSON round trips, errors that name the key, order across rotations, command-line forms."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from extractor.errors import PositionError
from extractor.position import Position

files = st.builds(
    lambda base, n: f"{base}.{n:06d}",
    st.from_regex(r"[a-z][a-z0-9_-]{0,15}", fullmatch=True),
    st.integers(0, 999_999),
)
domains = st.from_regex(r"[0-9]{1,3}-[0-9]{1,5}-[0-9]{1,12}", fullmatch=True)
gtids = st.lists(domains, max_size=3).map(",".join)
positions = st.builds(
    Position,
    file=files,
    pos=st.integers(0, 2**63 - 1),
    gtid=gtids,
    ts=st.integers(0, 2**32),
    epoch=st.integers(0, 2**31),
)


@given(positions)
def test_dict_and_json_round_trip(p):
    assert Position.from_dict(p.to_dict()) == p
    assert Position.from_json(p.to_json()) == p


def test_json_by_example():
    p = Position("mariadb-bin.000003", 1234, "0-1-42", 1714557600, 7)
    assert p.to_dict() == {
        "file": "mariadb-bin.000003",
        "pos": 1234,
        "gtid": "0-1-42",
        "ts": 1714557600,
        "epoch": 7,
    }
    assert Position.from_dict({"file": "mariadb-bin.000003", "pos": 4}) == Position("mariadb-bin.000003", 4)


@pytest.mark.parametrize(
    ("d", "message"),
    [
        ({"pos": 4}, "position: missing key 'file'"),
        ({"file": "mariadb-bin.000003"}, "position: missing key 'pos'"),
        ({"file": "mariadb-bin.000003", "pos": "4"}, "position: bad key 'pos'"),
        ({"file": "mariadb-bin.000003", "pos": True}, "position: bad key 'pos'"),
        ({"file": "mariadb-bin.000003", "pos": -1}, "position: bad key 'pos'"),
        ({"file": "mariadb-bin.000003", "pos": 4, "epoch": 1.5}, "position: bad key 'epoch'"),
        ({"file": "mariadb-bin.000003", "pos": 4, "ts": -5}, "position: bad key 'ts'"),
        ({"file": "mariadb-bin.000003", "pos": 4, "gtid": 42}, "position: bad key 'gtid'"),
        ({"file": "mariadb-bin", "pos": 4}, "position: bad key 'file'"),
        ({"file": 3, "pos": 4}, "position: bad key 'file'"),
        ({"file": "", "pos": 0}, "position: needs a 'file' or a 'gtid'"),
        ({"file": "mariadb-bin.000003", "pos": 4, "offset": 9}, "position: unknown key 'offset'"),
        ([], "position: expected a JSON object"),
    ],
)
def test_bad_dict_raises_naming_the_key(d, message):
    with pytest.raises(PositionError) as info:
        Position.from_dict(d)
    assert str(info.value).startswith(message)
    assert info.value.code == "EXTRACTOR_BAD_POSITION"


def test_errors_name_where_the_position_came_from():
    with pytest.raises(PositionError, match=r"^/DBus/Extractor/demo/position: missing key 'pos'$"):
        Position.from_json('{"file": "mariadb-bin.000003"}', "/DBus/Extractor/demo/position")
    with pytest.raises(PositionError, match=r"^state.json: not valid JSON"):
        Position.from_json("{", "state.json")


@pytest.mark.parametrize(
    ("earlier", "later"),
    [
        (Position("mariadb-bin.000003", 4), Position("mariadb-bin.000003", 5)),
        (Position("mariadb-bin.000009", 99_999_999), Position("mariadb-bin.000010", 4)),
        (Position("mariadb-bin.999999", 4), Position("mariadb-bin.1000000", 4)),
        (Position("", 0, gtid="0-1-42"), Position("mariadb-bin.000001", 4)),
    ],
)
def test_sort_key_orders_across_rotations(earlier, later):
    assert earlier.sort_key() < later.sort_key()


def test_sort_key_ignores_gtid_ts_and_epoch():
    assert Position("a.000002", 7, "0-1-9", 5, 3).sort_key() == Position("a.000002", 7).sort_key() == (2, 7)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("mariadb-bin.000003:4", Position("mariadb-bin.000003", 4)),
        (" mysql-bin.000103:12345678 ", Position("mysql-bin.000103", 12345678)),
        ("host.with.dots-bin.000007:120", Position("host.with.dots-bin.000007", 120)),
        ("mariadb-bin.000003", Position("mariadb-bin.000003", 4)),
    ],
)
def test_parse_command_line_forms(text, expected):
    assert Position.parse(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "",
        ":4",
        "mariadb-bin:4",
        "mariadb-bin.000003:",
        "mariadb-bin.000003:x",
        "mariadb-bin.000003:-4",
        "0-1-42",
    ],
)
def test_parse_rejects_other_forms(text):
    with pytest.raises(PositionError, match="expected FILE:POS"):
        Position.parse(text)


def test_str_is_the_command_line_form():
    assert str(Position("mariadb-bin.000003", 4, epoch=2)) == "mariadb-bin.000003:4"
