"""dbuslib.lineprotocol reads what influxdb-client writes (Point.to_line_protocol, the writer DBus's points
go through), whatever the names and values."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from influxdb_client import Point

from dbuslib.lineprotocol import LineProtocolError, Sample, parse, parse_line

# what DBus writes as names and values; no control characters (line protocol has no escape for a newline)
names = st.text(st.characters(blacklist_categories=("Cc", "Cs")), min_size=1, max_size=12).filter(
    lambda s: s.strip() == s and not s.startswith("#") and "\\" not in s[-1:]
)
values = st.one_of(
    st.integers(-(2**63), 2**63 - 1),
    st.floats(allow_nan=False, allow_infinity=False),
    st.booleans(),
    st.text(st.characters(blacklist_categories=("Cc", "Cs")), max_size=20),
)


@given(
    measurement=names,
    tags=st.dictionaries(names, names, max_size=3),
    fields=st.dictionaries(names, values, min_size=1, max_size=4),
    time_ns=st.one_of(st.none(), st.integers(0, 2**62)),
)
def test_reads_back_what_influxdb_client_writes(measurement, tags, fields, time_ns):
    point = Point(measurement)
    for k, v in tags.items():
        point.tag(k, v)
    for k, v in fields.items():
        point.field(k, v)
    if time_ns is not None:
        point.time(time_ns)
    line = point.to_line_protocol()
    sample = parse_line(line)
    assert sample.measurement == measurement
    assert dict(sample.tags) == tags
    got = dict(sample.fields)
    assert got.keys() == fields.keys()
    for k, v in fields.items():
        if isinstance(v, float):
            assert got[k] == pytest.approx(v, rel=1e-15, abs=0)
        else:
            assert got[k] == v and type(got[k]) is type(v)
    assert sample.time_ns == time_ns


def test_a_dbus_stage_point():
    text = (
        "dbus_stage,ds=demo,stage=appender "
        'input_rows=120i,rows_per_s=40.5,waiting=0i,note="a \\"b\\"" 1700000000000000000\n'
    )
    assert parse(text) == [
        Sample(
            "dbus_stage",
            (("ds", "demo"), ("stage", "appender")),
            (("input_rows", 120), ("rows_per_s", 40.5), ("waiting", 0), ("note", 'a "b"')),
            1700000000000000000,
        )
    ]


@pytest.mark.parametrize(
    ("line", "says"),
    [
        ("m", "no fields"),
        ("m,t v=1", "tag 't' has no value"),
        ("m v=", "field 'v' has an empty value"),
        ('m v="open', "no closing quote"),
        ("m v=abc", "could not convert"),
        (",t=1 v=1", "no measurement"),
    ],
)
def test_a_bad_line_names_its_number_and_why(line, says):
    with pytest.raises(LineProtocolError, match=rf"line 2: .*{says}"):
        parse(f"m v=1\n{line}\n")
