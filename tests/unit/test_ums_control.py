"""Control messages: envelope, validation as the keeper does it, Kafka key."""

import json
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ums.control import (
    ControlMessage,
    ControlType,
    control_key,
    from_json,
    full_pull_request,
    identifier_problem,
    new_control_message,
    peek,
    to_json,
)
from ums.errors import BadControlError, BadTimestampError

NOW = datetime(2024, 1, 2, 3, 4, 5, 123000, tzinfo=UTC)
RELOAD = (
    '{"id":1,"type":"APPENDER_RELOAD_CONFIG","timestamp":"t","from":"dbus-web","payload":{"dsName":"demo"}}'
)


def test_new_message_takes_id_and_timestamp_from_now():
    msg = new_control_message(ControlType.APPENDER_RELOAD_CONFIG, "dbus-web", {"dsName": "demo"}, now=NOW)
    assert (msg.id, msg.timestamp) == (1704164645123, "2024-01-02 03:04:05.123")
    assert to_json(msg) == (
        '{"id":1704164645123,"type":"APPENDER_RELOAD_CONFIG","timestamp":"2024-01-02 03:04:05.123",'
        '"from":"dbus-web","payload":{"dsName":"demo"}}'
    )
    assert control_key(msg) == "APPENDER_RELOAD_CONFIG"


def test_timestamp_zone_is_explicit():
    shanghai = ZoneInfo("Asia/Shanghai")
    msg = new_control_message(ControlType.EXTRACTOR_RELOAD_CONF, "x", {"a": 1}, NOW, shanghai)
    assert msg.timestamp == "2024-01-02 11:04:05.123"


def test_default_now_is_the_current_time():
    before = int(datetime.now(UTC).timestamp() * 1000)
    assert new_control_message(ControlType.MONITOR_ALARM, "x", {"a": 1}).id >= before


def test_naive_now_is_refused():
    with pytest.raises(BadTimestampError):
        new_control_message(ControlType.MONITOR_ALARM, "x", {"a": 1}, now=datetime(2024, 1, 2))  # noqa: DTZ001


def test_project_is_written_only_when_present():
    msg = ControlMessage(
        5, ControlType.FULL_DATA_INDEPENDENT_PULL_REQ, "t", "p", {"SEQNO": "5"}, {"id": 1, "name": "proj"}
    )
    assert to_json(msg).endswith('"payload":{"SEQNO":"5"},"project":{"id":1,"name":"proj"}}')
    assert from_json(to_json(msg)) == msg


@pytest.mark.parametrize(
    ("key", "value", "error"),
    [
        ("id", 0, "id 0: must be a positive int"),
        ("id", "12", "id '12'"),
        ("type", "NO_SUCH_TYPE", "unknown type 'NO_SUCH_TYPE'"),
        ("type", "appender_reload_config", "unknown type"),
        ("from", "", "from '' of APPENDER_RELOAD_CONFIG 1: must be non-empty"),
        ("timestamp", None, "timestamp None"),
        ("payload", {}, "payload of APPENDER_RELOAD_CONFIG 1: must be a non-empty object"),
        ("payload", "x", "payload of"),
        ("project", [], "project of"),
    ],
)
def test_keeper_validation_rejects_bad_messages(key, value, error):
    obj = {**json.loads(RELOAD), key: value}
    with pytest.raises(BadControlError, match=error) as info:
        from_json(json.dumps(obj))
    assert info.value.code == "UMS_BAD_CONTROL"


@pytest.mark.parametrize("key", ["id", "type", "timestamp", "from", "payload"])
def test_missing_keys_are_named(key):
    obj = json.loads(RELOAD)
    del obj[key]
    with pytest.raises(BadControlError, match=f"missing {key}"):
        from_json(json.dumps(obj))


@pytest.mark.parametrize("text", ["", "[1]", "nope"])
def test_non_objects_are_rejected(text):
    with pytest.raises(BadControlError, match="control message"):
        from_json(text)


def test_all_original_control_types_and_full_puller_keys_exist():
    names = {t.value for t in ControlType}
    assert len(names) == 27
    assert {
        "FULL_DATA_INDEPENDENT_PULL_REQ",
        "FULL_DATA_PULL_RELOAD_CONF",
        "FULL_DATA_FINISH_REQ",
        "ROUTER_TOPOLOGY_TABLE_STOP",
        "SINKER_DRAG_BACK_RUN_AGAIN",
    } <= names


payloads = st.dictionaries(st.text(min_size=1), st.text() | st.integers() | st.booleans(), min_size=1)


@given(
    st.integers(1, 2**62),
    st.sampled_from(ControlType),
    st.text(min_size=1),
    st.text(min_size=1),
    payloads,
    st.none() | payloads,
)
def test_json_round_trip(message_id, control_type, timestamp, sender, payload, project):
    msg = ControlMessage(message_id, control_type, timestamp, sender, payload, project)
    assert from_json(to_json(msg)) == msg


# ---------------------------------------------------------------- validated before anything touches them

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)
ENVELOPE = {
    "id": 5,
    "type": "FULL_DATA_INDEPENDENT_PULL_REQ",
    "timestamp": "t",
    "from": "f",
    "payload": {"SCHEMA_NAME": "shop", "TABLE_NAME": "orders"},
}


def _outcome(value) -> ControlMessage | BadControlError:
    try:
        return from_json(value)
    except BadControlError as e:
        assert e.code == "UMS_BAD_CONTROL" and len(str(e)) < 1000, "refusals are short, whatever the input"
        return e


@given(st.binary(max_size=300))
def test_arbitrary_bytes_give_a_message_or_bad_control(data):
    assert isinstance(_outcome(data), ControlMessage | BadControlError)


@given(json_values)
def test_arbitrary_json_values_give_a_message_or_bad_control(value):
    assert isinstance(_outcome(json.dumps(value).encode()), ControlMessage | BadControlError)


@given(st.sampled_from(sorted(ENVELOPE)), json_values)
def test_any_value_in_any_envelope_key_gives_a_message_or_bad_control(key, value):
    out = _outcome(json.dumps({**ENVELOPE, key: value}))
    assert isinstance(out, ControlMessage | BadControlError)
    if isinstance(out, ControlMessage):
        assert from_json(to_json(out)) == out, "what is accepted can be written back"


@given(st.text(max_size=30), st.integers(-1, 200))
def test_truncated_and_mangled_records_give_bad_control(noise, cut):
    good = json.dumps(ENVELOPE)
    assert isinstance(_outcome(good[:cut] + noise), ControlMessage | BadControlError)


@pytest.mark.parametrize(
    ("value", "needle"),
    [
        (None, "the record has no value (null)"),
        (b"", "not JSON"),
        (b"\xff\xfe{}", "not UTF-8: byte 0"),
        (b"[1, 2]", "expected a JSON object, got an array"),
        (b'"text"', "got a string"),
        (b"null", "got null"),
        (b"7" * 5000, "the top level: a number of 5000 characters (at most 64)"),
        (
            b'{"id": 1, "payload": {"SEQNO": ' + b"9" * 4301 + b"}}",
            "payload.SEQNO: a number of 4301 characters",
        ),
        (b'{"id": 1, "x": [1e999]}', "x[0]: number 1e999 overflows"),
        (b'{"id": NaN}', "NaN is not a JSON number"),
        (b'{"id": -Infinity}', "Infinity is not a JSON number"),
        (b'{"a": "\\ud800"}', "a: a string with a lone surrogate escape"),
        (b'{"\\udfff": 1}', "a key with a lone surrogate escape"),
        (b"[" * 40 + b"]" * 40, "nested deeper than 32 levels"),
        (b"[" * 200_000, "nested too deeply"),
        (
            b'{"id": 1, "type": "X", "timestamp": "t", "from": "f", "payload": {"a": 1}, "pad": "'
            + b"x" * 1_048_576
            + b'"}',
            "bytes, over the 1048576 a control message may have",
        ),
        (json.dumps({**ENVELOPE, "id": 2**63}).encode(), "must be a positive int of at most 64 bits"),
        (json.dumps({**ENVELOPE, "type": ["x" * 1000]}).encode(), "unknown type ['xxxx"),
    ],
)
def test_bad_records_are_refused_naming_the_field(value, needle):
    with pytest.raises(BadControlError) as e:
        from_json(value)
    assert needle in str(e.value) and len(str(e.value)) < 400


def test_a_maximal_id_and_numbers_up_to_the_limit_are_accepted():
    msg = from_json(json.dumps({**ENVELOPE, "id": 2**63 - 1, "payload": {"n": int("9" * 64), "f": 1.5e300}}))
    assert msg.id == 2**63 - 1 and msg.payload["n"] == int("9" * 64)


@pytest.mark.parametrize(
    ("value", "claims"),
    [
        (
            b'{"id": 12, "type": "APPENDER_RELOAD_CONFIG", "n": ' + b"1" * 5000 + b"}",
            (12, "APPENDER_RELOAD_CONFIG"),
        ),
        (b'{"id": "12", "type": 3}', (None, None)),
        (b'{"id": 0}', (None, None)),
        (b"[" * 100_000, (None, None)),
        (b"\xff", (None, None)),
        (None, (None, None)),
    ],
)
def test_peek_says_what_a_refused_record_claims_to_be(value, claims):
    assert peek(value) == claims


@pytest.mark.parametrize(
    ("name", "problem"),
    [
        ("orders", None),
        ("t.dot", None),
        ("..", None),
        (".", None),
        (" lead", None),
        ("é" * 64, None),
        ("a/b", None),
        ("\uffff", None),
        ("", "is empty"),
        ("x" * 65, "has 65 characters"),
        ("a\x00b", "contains a NUL"),
        ("trail ", "ends with a space"),
        ("t\U0001f600", "contains U+1F600"),
        ("\ud800", "contains U+D800"),
        (7, "must be a string, got a number"),
        (None, "got null"),
        (["t"], "got an array"),
    ],
)
def test_identifiers_follow_mariadb(name, problem):
    found = identifier_problem(name)
    assert (found is None) if problem is None else (problem in found)


def test_the_one_full_pull_request_has_the_original_keepers_payload():
    """ums.control.full_pull_request: what `dbus fullpull`, the extractor's reset, the appender's re-pull
    and the demo send; INCREASE_* "false" and SEQNO = id, as the original keeper's independent pull."""
    m = full_pull_request("demo", "shop", "orders", now=NOW)
    assert to_json(m) == (
        '{"id":1704164645123,"type":"FULL_DATA_INDEPENDENT_PULL_REQ","timestamp":"2024-01-02 03:04:05.123",'
        '"from":"dbus-cli-fullpull","payload":{"DBUS_DATASOURCE_ID":"demo","SCHEMA_NAME":"shop",'
        '"TABLE_NAME":"orders","PHYSICAL_TABLES":"orders","INCREASE_VERSION":"false",'
        '"INCREASE_BATCH_NO":"false","SEQNO":"1704164645123","SPLIT_COL":"","SPLIT_SHARD_SIZE":"",'
        '"SPLIT_SHARD_STYLE":"","INPUT_CONDITIONS":"","PULL_REMARK":"","SPLIT_BOUNDING_QUERY":"",'
        '"PULL_TARGET_COLS":"","SCN_NO":"","SINK_TYPE":"KAFKA","resultTopic":"","POS":"","OP_TS":"",'
        '"OGG_OP_TS":""}}'
    )
    again = full_pull_request("demo", "shop", "orders", seqno=7, from_="dbus-extractor-reset", now=NOW)
    assert (again.id, again.payload["SEQNO"], again.from_) == (7, "7", "dbus-extractor-reset")
