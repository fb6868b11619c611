"""logprocessor.logums: UMS for log tables (spec §5): namespace, ums_id_ without the original's collisions,
ums_uid_ stable across replays, ums_ts_, keys, messages. The JVM's: test_record_jvm.py, test_logums_jvm.py."""

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from logprocessor.adapters import AdapterSettings, KafkaRecord, adapt
from logprocessor.grammar import Column
from logprocessor.logums import (
    MAX_INDEX,
    MAX_OFFSET,
    MAX_PARTITION,
    LogRow,
    build_message,
    data_key,
    heartbeat_key,
    heartbeat_message,
    log_namespace,
    message_json,
    ums_id,
    ums_id_problem,
    ums_ts,
    ums_uid,
    value_problem,
)
from ums.encoding import from_json, to_json
from ums.errors import BadPositionError, BadValueError
from ums.ids import parse_ums_uid

SPEC_RECORD = (  # spec §5.7: a logstash record on partition 0, offset 4711
    b'{"@timestamp":"2024-03-05T02:15:30.123Z","@version":"1","host":"app-01.prod","path":"/var/log/order.log",'
    b'"type":"app_log","message":"2024-03-05 10:15:30.100 | [WARN] | OrderService order=98123 amount=45.50"}'
)
SPEC_COLUMNS = (
    Column("log_time", "datetime"),
    Column("level", "string"),
    Column("order_id", "long"),
    Column("amount", "double"),
    Column("src_host", "string"),
)
SPEC_ROW = ("2024-03-05 10:15:30.100", "WARN", "98123", "45.50", "app-01.prod")  # after the 8 rules of §5.7
ORIGINAL_MESSAGE = {  # spec §5.7, as the original wrote it
    "protocol": {"type": "data_increment_data", "version": "1.3"},
    "schema": {
        "namespace": "log_logstash.applog.applog_schema.order_events.3.app-01_prod.0",
        "batchId": 0,
        "fields": [
            {"name": "ums_id_", "type": "long", "nullable": False, "encoded": False},
            {"name": "ums_ts_", "type": "datetime", "nullable": False, "encoded": False},
            {"name": "ums_op_", "type": "string", "nullable": False, "encoded": False},
            {"name": "ums_uid_", "type": "string", "nullable": False, "encoded": False},
            {"name": "log_time", "type": "datetime", "nullable": False, "encoded": False},
            {"name": "level", "type": "string", "nullable": False, "encoded": False},
            {"name": "order_id", "type": "long", "nullable": False, "encoded": False},
            {"name": "amount", "type": "double", "nullable": False, "encoded": False},
            {"name": "src_host", "type": "string", "nullable": False, "encoded": False},
        ],
    },
    "payload": [
        {
            "tuple": [
                "949611104034777856",
                "2024-03-05 10:15:30.123",
                "i",
                "880001",
                "2024-03-05 10:15:30.100",
                "WARN",
                "98123",
                45.5,
                "app-01.prod",
            ]
        }
    ],
}
ORIGINAL_KEY = "data_increment_data.log_logstash.applog.applog_schema.order_events.3.app-01_prod.0.1709604930123.wh_placeholder"  # noqa: E501


def test_the_spec_end_to_end_example_reproduces_but_for_its_ids_and_nullable():
    adapted = adapt(KafkaRecord(SPEC_RECORD, None, 0, 4711, 0), AdapterSettings("log_logstash"))
    ns = log_namespace("log_logstash", "applog", "applog_schema", "order_events", 3, adapted.host)
    row = LogRow(0, 4711, 0, adapted.event_ms, SPEC_ROW)
    ours = json.loads(message_json(ns, SPEC_COLUMNS, [row], "Asia/Shanghai"))
    assert data_key(ns, adapted.event_ms) == ORIGINAL_KEY
    expected = json.loads(json.dumps(ORIGINAL_MESSAGE))
    # differs by design: ums_id_ from partition/offset/row (the original's came from time, offset mod 1023 and
    # row mod 255, and collided), ums_uid_ from the same coordinates (the original's was a ZooKeeper
    # sequence), and the saveAs columns are nullable (a regexExtract group that took no part is null)
    expected["payload"][0]["tuple"][0] = "19296256"  # 4711 << 12
    expected["payload"][0]["tuple"][3] = "4711000000"  # (0 * 10^13 + 4711) * 10^6 + 0
    for field in expected["schema"]["fields"][4:]:
        field["nullable"] = True
    assert ours == expected
    assert ours["payload"][0]["tuple"][1] == "2024-03-05 10:15:30.123"  # ums_ts_ in Asia/Shanghai


def test_the_message_text_is_ums_encodings_and_reads_back():
    ns = log_namespace("log_rsyslog", "applog", "applog_schema", "t", 1, "vm")
    msg = build_message(
        ns, SPEC_COLUMNS, [LogRow(2, 9, 0, 0, SPEC_ROW), LogRow(2, 9, 1, 0, (None,) * 5)], "UTC"
    )
    text = to_json(msg)
    assert text.startswith('{"protocol":{"type":"data_increment_data","version":"1.3"},"schema":{"namespace"')
    system = (str(ums_id(2, 9, 1)), "1970-01-01 00:00:00.000", "i", ums_uid(2, 9, 1))
    assert from_json(text).payload[1] == (*system, None, None, None, None, None)  # nulls stay null


@pytest.mark.parametrize(
    ("values", "problem"),
    [
        (("x", "", "", "45,50", ""), "column amount (DOUBLE): not a finite number"),
        (("x", "", "", "NaN", ""), "column amount (DOUBLE): not a finite number"),
        (("x", "", "", "1e400", ""), "column amount (DOUBLE): not a finite number"),
        (("x", "", "", " 1", ""), "column amount (DOUBLE): not a finite number"),
        (
            ("x", "", "abc", "1.0E7", "2020-13-45"),
            None,
        ),  # LONG and DATETIME texts are kept, as the original did
        (("x", "", "", None, ""), None),
    ],
)
def test_a_double_that_is_no_number_is_a_line_error_not_a_dropped_row(values, problem):
    assert value_problem(values, SPEC_COLUMNS) == problem
    ns = log_namespace("log_json", "d", "s", "t", 1, "h")
    if problem:
        with pytest.raises(BadValueError, match="amount"):
            build_message(ns, SPEC_COLUMNS, [LogRow(0, 0, 0, 0, values)], "UTC")
    else:
        build_message(ns, SPEC_COLUMNS, [LogRow(0, 0, 0, 0, values)], "UTC")


def test_doubles_are_json_numbers_as_python_writes_them():
    ns = log_namespace("log_json", "d", "s", "t", 1, "h")
    cols = (Column("x", "double"),)
    rows = [LogRow(0, 0, i, 0, (v,)) for i, v in enumerate(["45.50", "1.0E7", "-0", "1e16", ".5"])]
    payload = json.loads(message_json(ns, cols, rows, "UTC"))["payload"]
    assert [p["tuple"][4] for p in payload] == [45.5, 10000000.0, -0.0, 1e16, 0.5]
    assert '"tuple":["0","1970-01-01 00:00:00.000","i","0",45.5]' in message_json(ns, cols, rows[:1], "UTC")


# ---------------------------------------------------------------- ums_id_ and ums_uid_


@pytest.mark.parametrize(
    ("partition", "offset", "index", "expected"),
    [
        (0, 0, 0, 0),
        (0, 4711, 0, 4711 << 12),
        (0, 4711, 1, (4711 << 12) + 1),
        (1, 0, 0, 1 << 55),
        (MAX_PARTITION, MAX_OFFSET, MAX_INDEX, 2**63 - 1),
    ],
)
def test_ums_id_layout_partition_offset_row(partition, offset, index, expected):
    assert ums_id(partition, offset, index) == expected


@pytest.mark.parametrize(
    ("coordinates", "problem"),
    [
        ((256, 0, 0), "partition 256 is outside 0..255, the partitions ums_id_ can hold"),
        ((-1, 0, 0), "partition -1 is outside 0..255, the partitions ums_id_ can hold"),
        ((0, 2**43, 0), "offset 8796093022208 is outside 0..8796093022207, the offsets ums_id_ can hold"),
        ((0, 0, 4096), "row 4096 of the record is outside 0..4095, the rows ums_id_ can number"),
    ],
)
def test_beyond_its_limits_ums_id_is_a_line_error_never_a_wrap(coordinates, problem):
    assert ums_id_problem(*coordinates) == problem
    with pytest.raises(BadPositionError, match="outside"):
        ums_id(*coordinates)


coordinates = st.tuples(st.integers(0, MAX_PARTITION), st.integers(0, MAX_OFFSET), st.integers(0, MAX_INDEX))


@given(coordinates, coordinates)
def test_ums_id_never_collides_and_increases_with_offset_within_a_partition(a, b):
    assert (ums_id(*a) == ums_id(*b)) == (a == b)
    if a[0] == b[0] and a[1] < b[1]:
        assert ums_id(*a) < ums_id(*b)
    assert 0 <= ums_id(*a) < 2**63


@given(coordinates, coordinates)
def test_ums_uid_is_the_database_convention_over_partition_and_offset(a, b):
    uid = ums_uid(*a)
    assert uid == ums_uid(*a)  # a replay gives the same uid
    position, index = parse_ums_uid(uid)
    assert (int(position), index) == (a[0] * 10**13 + a[1], a[2])
    assert (uid == ums_uid(*b)) == (a == b)


def test_ums_uid_examples():
    assert ums_uid(0, 4711, 0) == "4711000000"
    assert ums_uid(3, 4711, 2) == "30000000004711000002"
    assert ums_uid(0, 0, 0) == "0"


# ---------------------------------------------------------------- namespace, ums_ts_, keys, heartbeats


def test_namespace_and_heartbeat_namespace():
    ns = log_namespace("log_filebeat", "applog", "applog_schema", "order_events", 3, "dbus-n2")
    assert str(ns) == "log_filebeat.applog.applog_schema.order_events.3.dbus-n2.0"
    # the original's heartbeat key:
    # data_increment_heartbeat.<log.type>.<ds>.<schema>.<table>.<version>.<host>.0...
    assert heartbeat_key(ns, 1534490912412, 1534490912412) == (
        "data_increment_heartbeat.log_filebeat.applog.applog_schema.order_events.3.dbus-n2.0"
        ".1534490912412|1534490912412|ok.wh_placeholder"
    )
    assert str(log_namespace("log_json", "d", "s", "t", 0, "a%b")) == "log_json.d.s.t.0.a%25b.0"


@pytest.mark.parametrize(
    ("ms", "zone", "text"),
    [
        (1709604930123, "Asia/Shanghai", "2024-03-05 10:15:30.123"),
        (1709604930123, "UTC", "2024-03-05 02:15:30.123"),
        (0, "America/New_York", "1969-12-31 19:00:00.000"),
    ],
)
def test_ums_ts_is_written_in_the_sources_zone(ms, zone, text):
    assert ums_ts(ms, zone) == text


def test_heartbeat_message_has_the_heartbeat_records_id_and_time():
    ns = log_namespace("log_logstash", "applog", "applog_schema", "order_events", 3, "dbus-n2")
    msg = heartbeat_message(ns, 1, 77, 1534490912412, "Asia/Shanghai")
    assert msg.payload == ((str(ums_id(1, 77, 0)), "2018-08-17 15:28:32.412"),)
