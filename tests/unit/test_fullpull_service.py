"""The full-puller service's per-record step (fullpuller/service.py): every record of ``<ds>_ctrl`` is
committed past, and every full-pull record that is not served is answered ``abort`` with its coordinates;
nothing raises."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dbuslib.control import ControlRecord
from fullpuller import request, service
from fullpuller.request import PullRejected
from fullpuller.service import on_record
from ums.control import from_json

KEY = b"FULL_DATA_INDEPENDENT_PULL_REQ"
GOOD = request.to_record(request.build("demo", "shop", "orders"))[1]


def record(value, key=KEY, offset=17) -> ControlRecord:
    return ControlRecord("demo_ctrl", 0, offset, key, value)


def served(into: list):
    return lambda req: into.append(req)


def broken(req):
    msg = "kazoo said no"
    raise RuntimeError(msg)


def check_reply(out, code: str, offset: int = 17) -> dict:
    """The reply is a valid FULL_DATA_FINISH_REQ abort naming the record."""
    key, value = request.to_record(out.reply)
    assert key == b"FULL_DATA_FINISH_REQ"
    payload = from_json(value).payload
    assert payload["STATUS"] == "abort" and payload["ERROR_CODE"] == code
    assert (payload["TOPIC"], payload["PARTITION"], payload["OFFSET"]) == ("demo_ctrl", "0", str(offset))
    assert payload["ERROR_MSG"].startswith(f"demo_ctrl[0]@{offset}: ")
    return payload


@given(
    st.none() | st.binary(max_size=200),
    st.none() | st.sampled_from([KEY, b"FULL_DATA_X", b"OTHER", b""]),
    st.integers(0, 2**40),
    st.booleans(),
)
def test_any_record_is_committed_past_and_answered_unless_served_or_not_ours(value, key, offset, fails):
    seen: list = []
    out = on_record(record(value, key, offset), "demo", broken if fails else served(seen))
    assert out.commit == offset + 1
    if not request.is_request(key):
        assert out.reply is None and out.request is None
    elif out.request is None or fails:
        check_reply(out, "FULLPULL_BAD_REQUEST" if out.request is None else "FULLPULL_FAILED", offset)


@pytest.mark.parametrize(
    ("value", "needle", "seqno"),
    [
        (None, "the record has no value (null)", ""),
        (b"\xc3\x28garbage", "not UTF-8", ""),
        (b"not json", "not JSON", ""),
        (b"[1, 2, 3]", "expected a JSON object, got an array", ""),
        (
            GOOD[:-2] + b',"N":' + b"7" * 5000 + b"}}",
            "payload.N: a number of 5000 characters",
            json.loads(GOOD)["id"],
        ),
        (
            GOOD.replace(b"FULL_DATA_INDEPENDENT_PULL_REQ", b"FULL_DATA_NOPE"),
            "unknown type 'FULL_DATA_NOPE'",
            json.loads(GOOD)["id"],
        ),
        (b'{"pad": "' + b"x" * 2_000_000 + b'"}', "2000011 bytes, over the 1048576", ""),
        (
            GOOD.replace(b'"TABLE_NAME":"orders"', b'"TABLE_NAME":"' + b"t" * 70 + b'"'),
            "has 70 characters",
            json.loads(GOOD)["id"],
        ),
    ],
    # GOOD's id is the time it was built: not in a test's id, which every pytest-xdist worker must agree on
    ids=lambda v: "seqno" if isinstance(v, int) else None,
)
def test_poison_records_are_answered_with_the_reason(value, needle, seqno):
    seen: list = []
    out = on_record(record(value), "demo", served(seen))
    payload = check_reply(out, "FULLPULL_BAD_REQUEST")
    assert needle in payload["ERROR_MSG"] and payload["SEQNO"] == str(seqno) and payload["TABLE"] == ""
    assert not seen and out.commit == 18


def test_a_dotdot_table_is_served_as_a_name_not_a_path():
    seen: list = []
    value = request.to_record(request.build("demo", "..", ".."))[1]
    out = on_record(record(value), "demo", served(seen))
    assert out.reply is None and out.commit == 18 and [(r.schema, r.table) for r in seen] == [("..", "..")]


def test_a_good_request_is_served_and_committed_without_an_extra_reply():
    seen: list = []
    out = on_record(record(GOOD), "demo", served(seen))
    assert out.reply is None and out.request is seen[0] and seen[0].name == "shop.orders" and out.commit == 18


def test_a_failure_outside_the_pull_is_answered_failed_and_committed_past():
    out = on_record(record(GOOD), "demo", broken)
    payload = check_reply(out, "FULLPULL_FAILED")
    assert "RuntimeError: kazoo said no" in payload["ERROR_MSG"] and payload["TABLE"] == "shop.orders"
    assert payload["SEQNO"] == str(json.loads(GOOD)["id"]) and out.request is not None


def test_a_bug_in_parsing_is_answered_too(monkeypatch):
    def bug(message, ds):
        msg = "oops"
        raise KeyError(msg)

    monkeypatch.setattr(service, "check", bug)
    payload = check_reply(on_record(record(GOOD), "demo", served([])), "FULLPULL_FAILED")
    assert "KeyError" in payload["ERROR_MSG"]


def test_a_rejection_from_serving_is_left_to_the_puller():
    def rejects(req):  # Puller.handle answers its own rejections and does not raise them
        return None

    assert on_record(record(GOOD), "demo", rejects).reply is None


def test_a_stop_passes_through():
    def stop(req):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        on_record(record(GOOD), "demo", stop)


def test_other_stages_records_are_not_touched():
    out = on_record(record(None, key=b"APPENDER_RELOAD_CONFIG"), "demo", broken)
    assert (out.commit, out.request, out.reply) == (18, None, None)
    assert on_record(record(b"\xff", key=None), "demo", broken).reply is None


def test_pull_rejected_carries_the_code_into_the_reply():
    rec = record(b"x")
    r = service.refusal(
        rec, "demo", "FULLPULL_BAD_REQUEST", str(PullRejected("FULLPULL_BAD_REQUEST", "why")), 5
    )
    assert r.payload["SEQNO"] == "5" and r.payload["ERROR_MSG"] == "demo_ctrl[0]@17: why"
