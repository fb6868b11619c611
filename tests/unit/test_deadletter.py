"""The dead-letter contract: every member present; a record too large to copy is pointed at, not carried."""

import json

from hypothesis import given
from hypothesis import strategies as st

from dbuslib.deadletter import MAX_VALUE_BYTES, DeadLetter


def letter(value, withheld=""):
    return DeadLetter(
        "RAW_BAD_RECORD", "bad", "demo.shop", 1, 42, b"shop.orders", value, "appender", withheld
    )


def test_a_record_above_the_limit_is_withheld_with_its_size_and_keeps_its_coordinates():
    d = json.loads(letter(b"x" * (MAX_VALUE_BYTES + 1)).to_json())
    assert d["value_base64"] is None and str(MAX_VALUE_BYTES + 1) in d["withheld"]
    assert (d["topic"], d["partition"], d["offset"]) == ("demo.shop", 1, 42)


def test_a_record_at_the_limit_is_carried():
    assert DeadLetter.from_json(letter(b"x" * MAX_VALUE_BYTES).to_json()).value == b"x" * MAX_VALUE_BYTES


def test_a_masked_reason_is_kept_whatever_the_size():
    d = json.loads(letter(b"x" * (MAX_VALUE_BYTES + 1), withheld="the table has masked columns").to_json())
    assert d["withheld"] == "the table has masked columns"


@given(st.one_of(st.none(), st.binary(max_size=64)), st.one_of(st.none(), st.binary(max_size=64)))
def test_round_trip(value, key):
    d = DeadLetter("C", "e", "t", 0, 1, key, value, "dispatcher")
    back = DeadLetter.from_json(d.to_json())
    assert back.value == value and back.offset == 1 and back.stage == "dispatcher"
    assert set(json.loads(d.to_json())) == {
        "code",
        "error",
        "stage",
        "topic",
        "partition",
        "offset",
        "key",
        "value_base64",
        "withheld",
    }
