"""logprocessor.adapters: one raw record -> lines, host, event time, heartbeat, or a record error (spec §1.2,
§1.3, §1.4, §6.1, §6.2). The JVM's adapter is checked against these in test_record_jvm.py."""

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from logprocessor.adapters import (
    BAD_HEARTBEAT,
    BAD_UMS,
    LOG_TYPES,
    NO_HOST,
    NO_MESSAGE,
    NOT_JSON,
    NOT_UTF8,
    TOO_LARGE,
    Adapted,
    AdapterSettings,
    KafkaRecord,
    RecordError,
    adapt,
    flatten_once,
    parse_time,
)
from logprocessor.sparkjson import read_object

KAFKA_MS = 1_700_000_000_000
SPEC_LOGSTASH = (  # spec §5.7
    '{"@timestamp":"2024-03-05T02:15:30.123Z","@version":"1","host":"app-01.prod","path":"/var/log/order.log",'
    '"type":"app_log","message":"2024-03-05 10:15:30.100 | [WARN] | OrderService order=98123 amount=45.50"}'
)


def run(log_type, value, key=None, partition=0, offset=4711, **settings):
    data = value.encode() if isinstance(value, str) else value
    return adapt(KafkaRecord(data, key, partition, offset, KAFKA_MS), AdapterSettings(log_type, **settings))


# ---------------------------------------------------------------- each type (spec §1.2's table)


def test_logstash_line_is_the_record_unchanged_host_dots_as_underscores_time_from_at_timestamp():
    out = run("log_logstash", SPEC_LOGSTASH)
    assert out == Adapted((SPEC_LOGSTASH,), "app-01_prod", 1709604930123, False)
    assert run("log_logstash_json", SPEC_LOGSTASH) == out


def test_at_timestamp_is_utc_without_the_originals_add_hours():
    # the original parsed "...Z" in the JVM's zone and added add.hours (8): right only on a Shanghai JVM
    assert run("log_logstash", SPEC_LOGSTASH).event_ms == 1709604930123  # 2024-03-05T02:15:30.123Z


def test_rsyslog_line_is_the_whole_record_so_to_index_can_pick_message_host_path():
    record = '{"host":"vm.local","path":"/srv/app/a.log","timestamp":"2024-03-05T10:15:30.123456+08:00","message":"x"}'  # noqa: E501
    out = run("log_rsyslog", record)
    assert out == Adapted((record,), "vm_local", 1709604930123, False)


def test_rsyslog_escaped_slashes_and_extra_keys_are_kept_in_the_line():
    record = '{"host":"vm","path":"\\/srv\\/a.log","timestamp":"2026-11-24T18:42:38.186Z","message":"hi","type":"t"}'  # noqa: E501
    assert run("log_rsyslog", record).lines == (record,)


def test_filebeat_flattens_one_level_keys_in_input_order_numbers_as_written():
    record = (
        '{"@timestamp":"2018-08-17T03:28:32.412Z","@metadata":{"beat":"filebeat","type":"doc"},'
        '"beat":{"name":"n2","hostname":"dbus-n2","version":"6.2.4"},"offset":12345,"amount":12.50,'
        '"message":"hello","prospector":{"type":"log","x":{"deep":1}},"tags":["a",1.0,null]}'
    )
    out = run("log_filebeat", record)
    line = json.loads(out.lines[0])
    assert list(line) == [
        "@timestamp",
        "@metadata.beat",
        "@metadata.type",
        "beat.name",
        "beat.hostname",
        "beat.version",
        "offset",
        "amount",
        "message",
        "prospector.type",
        "prospector.x",
        "tags",
    ]
    assert line["prospector.x"] == {"deep": 1}  # deeper objects stay objects (spec §1.2)
    assert '"amount":12.50,' in out.lines[0] and '"tags":["a",1.0,null]' in out.lines[0]
    assert (out.host, out.event_ms) == ("dbus-n2", 1534476512412)


def test_filebeat_takes_host_name_when_beat_hostname_is_missing():
    out = run("log_filebeat", '{"host":{"name":"web.1"},"message":"m","@timestamp":"2024-01-01T00:00:00Z"}')
    assert out.host == "web_1"


def test_flume_puts_the_key_first_as_timestamp_and_reads_the_time_from_it():
    out = run("log_flume", '{"message":"m","type":"dbus_log","host":"h.1"}', key=b"1709604930123")
    assert out == Adapted(
        ('{"timestamp":"1709604930123","message":"m","type":"dbus_log","host":"h.1"}',),
        "h_1",
        1709604930123,
        False,
    )


def test_flume_without_a_usable_key_takes_the_kafka_time():
    out = run("log_flume", ' {"host":"h"} ', key=b"not-ms")
    assert out.lines == ('{"timestamp":"not-ms","host":"h"} ',)
    assert (out.event_ms, out.kafka_time) == (KAFKA_MS, True)
    assert run("log_flume", '{"host":"h"}', key=None).lines == ('{"host":"h"}',)


def test_json_host_comes_from_the_configuration_and_time_from_kafka():
    out = run("log_json", '{"a":1}', json_host="app.example")
    assert out == Adapted(('{"a":1}',), "app_example", KAFKA_MS, True)
    assert run("log_json", '{"a":1}').code == NO_HOST


UMS_RECORD = (
    '{"protocol":{"type":"data_increment_data","version":"1.3"},"schema":{"namespace":"mysql.db1.s1.orders.3.0.0",'
    '"fields":[{"name":"ums_id_","type":"long"},{"name":"ums_ts_","type":"datetime"},{"name":"id","type":"int"},'
    '{"name":"amount","type":"double"}],"batchId":0},'
    '"payload":[{"tuple":["1030000012345678","2024-01-02 03:04:05.000",7,12.50]},'
    '{"tuple":["1030000012345679","2024-01-02 03:04:06.000",8,null]}]}'
)


def test_ums_gives_one_line_per_tuple_values_keeping_their_json_types():
    out = run("log_ums", UMS_RECORD, timezone="Asia/Shanghai")
    assert out.lines == (
        '{"ums_id_":"1030000012345678","ums_ts_":"2024-01-02 03:04:05.000","id":7,"amount":12.50,'
        '"namespace":"mysql.db1.s1.orders.3.0.0"}',
        '{"ums_id_":"1030000012345679","ums_ts_":"2024-01-02 03:04:06.000","id":8,"amount":null,'
        '"namespace":"mysql.db1.s1.orders.3.0.0"}',
    )
    # one rule for the host of data and heartbeats: ds_schema_table_dbPartition (the original slipped, §1.3)
    assert out.host == "db1_s1_orders_0"
    assert out.event_ms == 1704135845000  # the first tuple's ums_ts_, in the source's zone


def test_ums_heartbeat_is_told_by_its_key_and_timed_by_tx_time():
    key = b"data_increment_heartbeat.mysql.db1.s1.orders.3.0.0.1709604930000|1709604929000|ok|db1.wh_placeholder"  # noqa: E501
    assert run("log_ums", None, key=key) == Adapted(
        (), "db1_s1_orders_0", 1709604929000, False, True, 1709604929000
    )
    bad = run("log_ums", UMS_RECORD, key=b"data_increment_heartbeat.x.y")
    assert bad.code == BAD_HEARTBEAT


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ('{"schema":{"namespace":"a.b.c"}}', "schema.namespace"),
        ('{"schema":{"namespace":"a.b.c.d.e.f.g","fields":[{"name":1}]}}', "schema.fields"),
        ('{"schema":{"namespace":"a.b.c.d.e.f.g","fields":[]},"payload":{}}', "payload is not"),
        (
            '{"schema":{"namespace":"a.b.c.d.e.f.g","fields":[{"name":"a"}]},"payload":[{"tuple":[]}]}',
            "length",
        ),
    ],
)
def test_a_record_that_is_not_ums_is_refused_saying_what_is_wrong(value, reason):
    out = run("log_ums", value)
    assert out.code == BAD_UMS and reason in out.message


# ---------------------------------------------------------------- heartbeats (§6.1, §6.2)


def test_logstash_heartbeat_by_type_equality_has_no_lines():
    record = '{"host":"dbus-n2","@version":"1","clock":1534490912,"@timestamp":"2018-08-17T07:28:32.412Z","type":"dbus-heartbeat"}'  # noqa: E501
    assert run("log_logstash", record) == Adapted((), "dbus-n2", 1534490912412, False, True, 1534490912412)
    assert not run("log_logstash", record.replace('"dbus-heartbeat"', '"x dbus-heartbeat"')).heartbeat


def test_rsyslog_heartbeat_is_a_heartbeat_line_in_the_message():
    beat = json.dumps({"host": "h", "@timestamp": "2024-03-05T02:15:31.000Z", "type": "dbus-heartbeat"})
    record = json.dumps({"host": "h", "path": "/a", "timestamp": "2024-03-05T02:15:31.500Z", "message": beat})
    assert run("log_rsyslog", record) == Adapted((), "h", 1709604931500, False, True, 1709604931000)
    assert run("log_rsyslog", record, heartbeat_type="other").lines == (record,)


def test_filebeat_heartbeat_by_outer_type_timed_by_the_json_in_message_in_the_source_zone():
    inner = '{"host":"n2","@timestamp":"2018-08-17 11:00:21.654","type":"dbus-heartbeat"}'
    record = json.dumps({"beat": {"hostname": "n2"}, "type": "dbus-heartbeat", "message": inner})
    out = run("log_filebeat", record, timezone="Asia/Shanghai")
    assert (out.heartbeat, out.heartbeat_ms, out.lines) == (True, 1534474821654, ())


@pytest.mark.parametrize("log_type", ["log_flume", "log_json"])
def test_flume_and_json_heartbeats_by_type_containing_it(log_type):
    record = '{"host":"h","type":"a dbus-heartbeat","@timestamp":"2024-01-01 08:00:00.000"}'
    out = run(log_type, record, json_host="h", timezone="Asia/Shanghai")
    assert (out.heartbeat, out.heartbeat_ms, out.lines) == (True, 1704067200000, ())


# ---------------------------------------------------------------- record errors (§1.4: never a poison pill)


@pytest.mark.parametrize(
    ("log_type", "value", "code", "what"),
    [
        ("log_rsyslog", b"not json", NOT_JSON, "not a JSON object"),
        ("log_rsyslog", b"[1,2]", NOT_JSON, "not a JSON object"),
        ("log_rsyslog", b"", NOT_JSON, "no value (null or empty)"),
        ("log_rsyslog", None, NOT_JSON, "no value (null or empty)"),
        ("log_rsyslog", b'{"host":"h","message":"\xff"}', NOT_UTF8, "not UTF-8"),
        ("log_rsyslog", b'{"host":"h","timestamp":"2024-01-01T00:00:00Z"}', NO_MESSAGE, 'no "message"'),
        ("log_rsyslog", b'{"host":"h","message":null}', NO_MESSAGE, 'no "message"'),
        ("log_rsyslog", b'{"host":"","message":"m"}', NO_HOST, 'no "host"'),
        ("log_logstash", b'{"message":"m"}', NO_HOST, 'no "host"'),
        ("log_filebeat", b'{"beat":{"name":"x"}}', NO_HOST, 'no "beat.hostname" (nor "host.name")'),
        ("log_flume", b'{"message":"m"}', NO_HOST, 'no "host"'),
        ("log_ums", b"{}", BAD_UMS, "not a UMS message: schema.namespace is not a 7-part string"),
    ],
)
def test_a_record_error_names_its_code_partition_and_offset(log_type, value, code, what):
    out = run(log_type, value, partition=3, offset=42)
    assert out == RecordError(code, f"record at partition 3, offset 42: {what}", 3, 42)


def test_a_10_mb_line_is_refused_by_size_before_it_is_read():
    value = b'{"host":"h","message":"' + b"x" * 10_000_000 + b'"}'
    out = run("log_rsyslog", value)
    assert out.code == TOO_LARGE
    assert out.message == (
        "record at partition 0, offset 4711: 10000025 bytes, over processor.max_line_bytes (1000000)"
    )
    assert run("log_rsyslog", value, max_record_bytes=20_000_000).lines == (value.decode(),)


def test_a_missing_or_unreadable_time_is_the_kafka_time_never_minus_one():
    for ts in (None, "yesterday", "2024-02-30T00:00:00Z", "1969-12-31T23:59:59Z"):
        record = {"host": "h", "message": "m"} | ({} if ts is None else {"timestamp": ts})
        out = run("log_rsyslog", json.dumps(record))
        assert (out.event_ms, out.kafka_time) == (KAFKA_MS, True)
    assert (
        adapt(KafkaRecord(b'{"a":1}', None, 0, 0, -1), AdapterSettings("log_json", json_host="h")).event_ms
        == 0
    )


# ---------------------------------------------------------------- times


@pytest.mark.parametrize(
    ("text", "zone", "ms"),
    [
        ("2024-03-05T02:15:30.123Z", "UTC", 1709604930123),
        ("2024-03-05T02:15:30.123z", "UTC", 1709604930123),
        ("2024-03-05T10:15:30.123456+08:00", "UTC", 1709604930123),  # rsyslog's date-rfc3339
        ("2024-03-05T10:15:30.123456789+0800", "UTC", 1709604930123),
        ("2024-03-04T21:15:30-05:00", "UTC", 1709604930000),
        ("2024-03-05 10:15:30.1", "Asia/Shanghai", 1709604930100),  # no zone: the source's ums.timezone
        ("2024-03-05 10:15:30,1", "Asia/Shanghai", 1709604930100),
        (
            "2024-03-31T02:30:00",
            "Europe/Berlin",
            1711848600000,
        ),  # in the spring gap: shifted forward, as Java
        ("2024-10-27T02:30:00", "Europe/Berlin", 1729989000000),  # twice that night: the earlier, as Java
        ("1970-01-01T00:00:00Z", "UTC", 0),
    ],
)
def test_parse_time_reads_rfc_3339_and_zoneless_times(text, zone, ms):
    assert parse_time(text, zone) == ms


@pytest.mark.parametrize(
    "text",
    [
        "2024-03-05T02:15:30.123Z\n",
        " 2024-03-05T02:15:30Z",
        "2024-03-05T24:00:00Z",
        "2024-03-05T02:15:60Z",
        "2024-02-30T00:00:00Z",
        "2024-03-05T02:15Z",
        "2024-03-05T02:15:30.1234567890Z",
        "2024-03-05T02:15:30+24:00",
        "0000-01-01T00:00:00Z",
        "9999-12-31T23:59:59Z",
        "2024-03-05T02:15:30 +08:00",
        "٢٠٢٤-03-05T02:15:30Z",
        "1709604930123",
    ],
)
def test_parse_time_refuses_anything_else(text):
    assert parse_time(text, "UTC") is None


def test_flatten_once_leaves_nothing_for_an_empty_object():
    assert flatten_once(read_object('{"a":{},"b":1}')) == [("b", read_object('{"b":1}').get("b"))]


# ---------------------------------------------------------------- never an exception


settings_of = st.builds(
    AdapterSettings,
    st.sampled_from(LOG_TYPES),
    st.sampled_from(["dbus-heartbeat", "", "x"]),
    st.integers(0, 300),
    st.sampled_from([None, "h.x", ""]),
    st.sampled_from(["UTC", "Asia/Shanghai"]),
)
records = st.builds(
    KafkaRecord,
    st.none() | st.binary(max_size=300),
    st.none() | st.binary(max_size=120),
    st.integers(-5, 2**31),
    st.integers(-5, 2**63),
    st.integers(-(2**63), 2**63),
)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
FIELDS = ["host", "message", "timestamp", "@timestamp", "type", "beat", "schema", "payload", "namespace"]
json_records = st.dictionaries(st.sampled_from(FIELDS) | st.text(max_size=6), json_values, max_size=6)


@given(records, settings_of)
def test_any_bytes_give_lines_or_a_record_error_never_an_exception(record, settings):
    assert isinstance(adapt(record, settings), Adapted | RecordError)


@given(json_records, st.none() | st.binary(max_size=40), settings_of)
def test_any_json_object_gives_lines_or_a_record_error_never_an_exception(obj, key, settings):
    value = json.dumps(obj).encode()
    out = adapt(KafkaRecord(value, key, 1, 2, KAFKA_MS), settings)
    assert isinstance(out, Adapted | RecordError)
    if isinstance(out, Adapted):
        assert 0 <= out.event_ms and (out.heartbeat_ms is not None) == out.heartbeat
        assert not (out.heartbeat and out.lines)
