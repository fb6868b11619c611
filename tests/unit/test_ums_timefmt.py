"""ums_ts_: yyyy-MM-dd HH:mm:ss.SSS in an explicit zone, never naive."""

from datetime import UTC, datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ums.errors import BadTimestampError
from ums.timefmt import epoch_ms, from_epoch_ms, parse_ums_ts, ums_ts, ums_ts_ms

SHANGHAI = ZoneInfo("Asia/Shanghai")


@pytest.mark.parametrize(
    ("epoch_millis", "tz", "expected"),
    [
        (0, UTC, "1970-01-01 00:00:00.000"),
        (1704164645123, UTC, "2024-01-02 03:04:05.123"),
        (1704164645123, SHANGHAI, "2024-01-02 11:04:05.123"),
        (1503566352000, SHANGHAI, "2017-08-24 17:19:12.000"),
        (-1, UTC, "1969-12-31 23:59:59.999"),
    ],
)
def test_ums_ts_ms_formats_in_the_given_zone(epoch_millis, tz, expected):
    assert ums_ts_ms(epoch_millis, tz) == expected


def test_sub_millisecond_digits_are_truncated():
    moment = datetime(2024, 1, 2, 3, 4, 5, 123999, tzinfo=UTC)
    assert ums_ts(moment) == "2024-01-02 03:04:05.123"
    assert epoch_ms(moment) == 1704164645123


def test_other_offsets_are_converted_to_the_target_zone():
    moment = datetime(2024, 1, 2, 11, 4, 5, tzinfo=timezone(timedelta(hours=8)))
    assert ums_ts(moment) == "2024-01-02 03:04:05.000"


@pytest.mark.parametrize("bad", [datetime(2024, 1, 2), "2024-01-02", 1704164645123])  # noqa: DTZ001
def test_naive_or_non_datetime_moments_are_refused(bad):
    with pytest.raises(BadTimestampError, match="timezone-aware"):
        ums_ts(bad)


@pytest.mark.parametrize(
    "text",
    [
        "2024-01-02 03:04:05",
        "2024-01-02T03:04:05.000",
        "2024-13-02 03:04:05.000",
        "",
        None,
        "2024-01-02 03:04:05.1234",
    ],
)
def test_parse_rejects_other_formats_naming_the_text(text):
    with pytest.raises(BadTimestampError, match="ums_ts"):
        parse_ums_ts(text)


@pytest.mark.parametrize("bad", [1.5, True, "0"])
def test_epoch_ms_must_be_an_int(bad):
    with pytest.raises(BadTimestampError, match="epoch_ms"):
        from_epoch_ms(bad)


FIXED_ZONES = [UTC, timezone(timedelta(hours=8)), timezone(-timedelta(hours=3, minutes=30))]


@given(st.integers(-(10**12), 10**13), st.sampled_from(FIXED_ZONES))
def test_format_parse_round_trip_is_exact_to_the_millisecond(millis, tz):
    parsed = parse_ums_ts(ums_ts_ms(millis, tz), tz)
    assert parsed.utcoffset() is not None
    assert epoch_ms(parsed) == millis


def test_in_a_dst_zone_the_repeated_hour_is_ambiguous_which_is_why_utc_is_the_default():
    new_york = ZoneInfo("America/New_York")
    first, second = 1699162200000, 1699165800000  # 01:30 EDT and 01:30 EST on 2023-11-05
    assert ums_ts_ms(first, new_york) == ums_ts_ms(second, new_york) == "2023-11-05 01:30:00.000"
    assert ums_ts_ms(first) != ums_ts_ms(second)
