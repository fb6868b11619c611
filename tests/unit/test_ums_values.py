"""Column values: Python -> UMS JSON value -> Python, per type (spec 1.9)."""

import json
import struct
from datetime import UTC, date, datetime, timedelta, timezone
from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st
from ums_strategies import wall

from ums.decode import check_wire_value, decode_value
from ums.errors import BadValueError
from ums.scalars import INT_MAX, INT_MIN, LONG_MAX, LONG_MIN, format_time, parse_time
from ums.types import ColumnSpec, UmsType
from ums.values import ValueFormat, encode_column, encode_value

T = UmsType
F32_1_1 = struct.unpack("<f", struct.pack("<f", 1.1))[0]  # what a binlog FLOAT 1.1 decodes to
PLUS_8 = timezone(timedelta(hours=8))


@pytest.mark.parametrize(
    ("ums_type", "value", "fmt", "expected"),
    [
        (T.INT, 42, None, 42),
        (T.INT, True, None, 1),
        (T.INT, INT_MIN, None, INT_MIN),
        (T.LONG, 2**64 - 1, None, "18446744073709551615"),
        (T.LONG, -(2**63), None, "-9223372036854775808"),
        (T.FLOAT, F32_1_1, None, 1.1),
        (T.DOUBLE, 0.1, None, 0.1),
        (T.DOUBLE, 5, None, 5.0),
        (T.DECIMAL, Decimal("12.50"), None, "12.50"),
        (T.DECIMAL, Decimal("0E-30"), None, "0.000000000000000000000000000000"),
        (T.DECIMAL, Decimal("1E+3"), None, "1000"),
        (T.DECIMAL, Decimal("-" + "9" * 35 + "." + "9" * 30), None, "-" + "9" * 35 + "." + "9" * 30),
        (T.DECIMAL, 7, None, "7"),
        (T.DATE, date(2024, 1, 2), None, "2024-01-02"),
        (T.DATE, "0000-00-00", None, "0000-00-00"),
        (T.DATETIME, wall(2024, 1, 2, 3, 4, 5, 123456), None, "2024-01-02 03:04:05.123456"),
        (T.DATETIME, wall(2024, 1, 2, 3, 4, 5), None, "2024-01-02 03:04:05"),
        (T.DATETIME, wall(2024, 1, 2, 3, 4, 5, 120000), 3, "2024-01-02 03:04:05.120"),
        (T.DATETIME, wall(2024, 1, 2, 3, 4, 5), 3, "2024-01-02 03:04:05.000"),
        (T.DATETIME, datetime(2024, 1, 2, 3, 4, 5, 5, tzinfo=PLUS_8), 6, "2024-01-01 19:04:05.000005"),
        (T.DATETIME, "0000-00-00 00:00:00", 0, "0000-00-00 00:00:00"),
        (T.STRING, timedelta(days=2, hours=3), 0, "51:00:00"),
        (T.STRING, -timedelta(hours=838, minutes=59, seconds=59), None, "-838:59:59"),
        (T.STRING, -timedelta(seconds=1.5), 1, "-00:00:01.5"),
        (T.STRING, {"y", "x", "z"}, None, "x,y,z"),
        (T.STRING, "héllo 😀 𝄞", None, "héllo 😀 𝄞"),
        (T.STRING, "😀".encode(), None, "😀"),
        (T.BINARY, b"\x00\xff", None, "AP8="),
        (T.BINARY, b"", None, ""),
        (T.JSONOBJECT, {"a": [1, 2.5, None, "é"]}, None, '{"a":[1,2.5,null,"é"]}'),
        (T.JSONOBJECT, "just a string", None, '"just a string"'),
        (T.BOOLEAN, True, None, True),
        (T.LONG, None, None, None),
    ],
)
def test_encode_value(ums_type, value, fmt, expected):
    result = encode_value(ums_type, value, ValueFormat(fsp=fmt))
    assert result == expected
    assert type(result) is type(expected)


@pytest.mark.parametrize(
    ("column_type", "value", "expected"),
    [
        ("set('z','y','x')", {"x", "z"}, "z,x"),
        ("datetime(3)", wall(2024, 1, 2, 3, 4, 5, 100000), "2024-01-02 03:04:05.100"),
        ("time(6)", timedelta(seconds=-0.000001), "-00:00:00.000001"),
        ("bit(64)", 2**64 - 1, "18446744073709551615"),
        ("year(4)", 2024, 2024),
        ("mediumtext", "x" * 70000, "x" * 70000),
        ("int(10) unsigned", 4294967295, "4294967295"),
    ],
)
def test_encode_column_uses_type_fsp_and_set_order(column_type, value, expected):
    assert encode_column(ColumnSpec("c", column_type), value) == expected


@pytest.mark.parametrize(
    ("ums_type", "value", "fsp"),
    [
        (T.INT, 2**31, None),
        (T.INT, 1.5, None),
        (T.LONG, 2**64, None),
        (T.LONG, "12", None),
        (T.DECIMAL, 1.5, None),
        (T.DECIMAL, Decimal("NaN"), None),
        (T.DATE, wall(2024, 1, 2), None),
        (T.DATE, "2024/01/02", None),
        (T.DATETIME, date(2024, 1, 2), None),
        (T.DATETIME, wall(2024, 1, 2, 3, 4, 5, 1), 3),
        (T.DATETIME, wall(2024, 1, 2, 3, 4, 5, 1), 0),
        (T.DOUBLE, float("nan"), None),
        (T.DOUBLE, float("inf"), None),
        (T.FLOAT, 1e40, None),
        (T.BINARY, "text", None),
        (T.STRING, 12, None),
        (T.STRING, b"\xff", None),
        (T.JSONOBJECT, {"a": float("nan")}, None),
        (T.JSONOBJECT, {1j}, None),
        (T.BOOLEAN, 2, None),
    ],
)
def test_bad_values_raise_naming_the_field(ums_type, value, fsp):
    with pytest.raises(BadValueError, match=r"^UMS_BAD_VALUE: amount: cannot encode") as info:
        encode_value(ums_type, value, ValueFormat(fsp=fsp), field="amount")
    assert info.value.code == "UMS_BAD_VALUE"


@pytest.mark.parametrize(
    ("ums_type", "wire", "expected"),
    [
        (T.LONG, "18446744073709551615", 2**64 - 1),
        (T.DECIMAL, "-0.50", Decimal("-0.50")),
        (T.DATE, "0000-00-00", "0000-00-00"),
        (T.DATETIME, "2024-00-00 00:00:00", "2024-00-00 00:00:00"),
        (T.DATETIME, "2024-01-02 03:04:05.1", wall(2024, 1, 2, 3, 4, 5, 100000)),
        (T.BINARY, "AP8=", b"\x00\xff"),
        (T.JSONOBJECT, '{"a":[1]}', {"a": [1]}),
        (T.FLOAT, 3, 3.0),
        (T.STRING, None, None),
    ],
)
def test_decode_value(ums_type, wire, expected):
    assert decode_value(ums_type, wire) == expected


@pytest.mark.parametrize(
    ("ums_type", "wire"),
    [
        (T.LONG, 12),
        (T.LONG, "0012"),
        (T.LONG, "+12"),
        (T.LONG, "1_000"),
        (T.INT, True),
        (T.INT, "1"),
        (T.DECIMAL, "1e5"),
        (T.DECIMAL, "NaN"),
        (T.BINARY, "AP8"),
        (T.BINARY, "AP9="),
        (T.DATETIME, "2024-01-02T03:04:05"),
        (T.DATE, "20240102"),
        (T.BOOLEAN, 1),
        (T.DOUBLE, "1.5"),
    ],
)
def test_non_canonical_wire_values_are_rejected(ums_type, wire):
    assert check_wire_value(ums_type, wire) is not None
    with pytest.raises(BadValueError, match="price: cannot decode"):
        decode_value(ums_type, wire, field="price")


def through_json(ums_type, value, fsp=None):
    """Encode, write and read JSON text, decode: the whole wire path of one value."""
    wire = json.loads(json.dumps(encode_value(ums_type, value, ValueFormat(fsp=fsp))))
    assert check_wire_value(ums_type, wire) is None
    return decode_value(ums_type, wire)


@given(st.integers(-(10**65) + 1, 10**65 - 1), st.integers(0, 30))
def test_decimal_65_30_round_trip_is_exact_with_scale(digits, scale):
    value = Decimal(f"{digits}E-{scale}")
    assert through_json(T.DECIMAL, value).as_tuple() == value.as_tuple()


@given(st.datetimes())
def test_naive_datetime_round_trip_keeps_microseconds(value):
    assert through_json(T.DATETIME, value) == value
    assert through_json(T.DATETIME, value, fsp=6) == value


@given(st.datetimes(timezones=st.just(PLUS_8), min_value=wall(1, 1, 2)))
def test_aware_datetime_is_written_as_utc_wall_clock(value):
    assert through_json(T.DATETIME, value) == value.astimezone(UTC).replace(tzinfo=None)


@given(
    st.timedeltas(
        min_value=-timedelta(hours=838, minutes=59, seconds=59),
        max_value=timedelta(hours=838, minutes=59, seconds=59),
    )
)
def test_time_round_trip_including_negative_and_over_24h(value):
    assert parse_time(format_time(value)) == value
    assert parse_time(encode_value(T.STRING, value, ValueFormat(fsp=6))) == value


@pytest.mark.parametrize(
    ("ums_type", "strategy"),
    [
        (T.INT, st.integers(INT_MIN, INT_MAX)),
        (T.LONG, st.integers(LONG_MIN, LONG_MAX)),
        (T.DOUBLE, st.floats(allow_nan=False, allow_infinity=False)),
        (T.DATE, st.dates()),
        (T.STRING, st.text()),
        (T.BINARY, st.binary()),
        (T.BOOLEAN, st.booleans()),
        (
            T.JSONOBJECT,
            st.recursive(
                st.none()
                | st.booleans()
                | st.integers()
                | st.floats(allow_nan=False, allow_infinity=False)
                | st.text(),
                lambda kids: st.lists(kids) | st.dictionaries(st.text(), kids),
                max_leaves=10,
            ),
        ),
    ],
)
@given(data=st.data())
def test_round_trip_per_type(ums_type, strategy, data):
    value = data.draw(strategy)
    assert through_json(ums_type, value) == value


@given(st.floats(width=32, allow_nan=False, allow_infinity=False))
def test_float_round_trip_gives_the_same_32_bit_float(value):
    decoded = through_json(T.FLOAT, value)
    assert struct.pack("<f", decoded) == struct.pack("<f", value)
