"""Control messages: envelope, validation as the keeper does it, Kafka key."""

import json
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ums.control import ControlMessage, ControlType, control_key, from_json, new_control_message, to_json
from ums.errors import BadControlError, BadTimestampError

NOW = datetime(2024, 1, 2, 3, 4, 5, 123000, tzinfo=UTC)
RELOAD = ('{"id":1,"type":"APPENDER_RELOAD_CONFIG","timestamp":"t","from":"dbus-web",'
          '"payload":{"dsName":"demo"}}')


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
    msg = ControlMessage(5, ControlType.FULL_DATA_INDEPENDENT_PULL_REQ, "t", "p", {"SEQNO": "5"},
                         {"id": 1, "name": "proj"})
    assert to_json(msg).endswith('"payload":{"SEQNO":"5"},"project":{"id":1,"name":"proj"}}')
    assert from_json(to_json(msg)) == msg


@pytest.mark.parametrize(("key", "value", "error"), [
    ("id", 0, "id 0: must be a positive int"),
    ("id", "12", "id '12'"),
    ("type", "NO_SUCH_TYPE", "unknown type 'NO_SUCH_TYPE'"),
    ("type", "appender_reload_config", "unknown type"),
    ("from", "", "from '' of APPENDER_RELOAD_CONFIG 1: must be non-empty"),
    ("timestamp", None, "timestamp None"),
    ("payload", {}, "payload of APPENDER_RELOAD_CONFIG 1: must be a non-empty object"),
    ("payload", "x", "payload of"),
    ("project", [], "project of"),
])
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
    assert {"FULL_DATA_INDEPENDENT_PULL_REQ", "FULL_DATA_PULL_RELOAD_CONF", "FULL_DATA_FINISH_REQ",
            "ROUTER_TOPOLOGY_TABLE_STOP", "SINKER_DRAG_BACK_RUN_AGAIN"} <= names


payloads = st.dictionaries(st.text(min_size=1), st.text() | st.integers() | st.booleans(), min_size=1)


@given(st.integers(1, 2**62), st.sampled_from(ControlType), st.text(min_size=1), st.text(min_size=1),
       payloads, st.none() | payloads)
def test_json_round_trip(message_id, control_type, timestamp, sender, payload, project):
    msg = ControlMessage(message_id, control_type, timestamp, sender, payload, project)
    assert from_json(to_json(msg)) == msg
