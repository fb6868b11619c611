"""UMS messages: validation, JSON envelope, builders, splitting and Kafka keys."""

import copy
import json
from decimal import Decimal

import pytest
from hypothesis import given
from ums_strategies import messages

from ums.build import (
    DataRow,
    build_data_message,
    build_data_messages,
    build_heartbeat_message,
    build_termination_message,
    split_tuples,
    tuple_bytes,
)
from ums.encoding import from_json, to_dict, to_json
from ums.errors import BadMessageError, BadValueError
from ums.keys import data_key, heartbeat_key, initial_data_key
from ums.message import Op, ProtocolType, UmsField, UmsMessage, UmsSchema
from ums.namespace import Namespace
from ums.types import ColumnSpec, UmsType

NS = Namespace("mysql", "demo", "shop", "orders", 3)
LOG_NS = Namespace("log_logstash", "applog", "applog_schema", "order_events", 3, "app-01_prod")
TS = "2024-01-02 03:04:05.000"
ID = "1030000012345678"
COLUMNS = (ColumnSpec("id", "bigint(20) unsigned", False), ColumnSpec("amount", "decimal(10,2)"))


def row(op=Op.INSERT, index=0, values=(7, Decimal("9.90"))):
    return DataRow(ID, TS, op, str(int(ID) * 10**6 + index), values)


def valid_dict():
    return to_dict(build_data_message(NS, COLUMNS, [row(), row(Op.DELETE, 1)]))


def test_data_message_json_is_the_original_envelope():
    msg = build_data_message(NS, COLUMNS, [row()], batch_id=2)
    assert to_json(msg) == (
        '{"protocol":{"type":"data_increment_data","version":"1.3"},'
        '"schema":{"namespace":"mysql.demo.shop.orders.3.0.0","fields":['
        '{"name":"ums_id_","type":"long","nullable":false,"encoded":false},'
        '{"name":"ums_ts_","type":"datetime","nullable":false,"encoded":false},'
        '{"name":"ums_op_","type":"string","nullable":false,"encoded":false},'
        '{"name":"ums_uid_","type":"string","nullable":false,"encoded":false},'
        '{"name":"id","type":"long","nullable":false,"encoded":false},'
        '{"name":"amount","type":"decimal","nullable":true,"encoded":false}],"batchId":2},'
        '"payload":[{"tuple":["1030000012345678","2024-01-02 03:04:05.000","i",'
        '"1030000012345678000000","7","9.90"]}]}'
    )


@pytest.mark.parametrize(
    ("msg", "names"),
    [
        (build_heartbeat_message(NS, ID, TS), ("ums_id_", "ums_ts_")),
        (build_termination_message(NS, TS), ("ums_ts_",)),
        (
            build_data_message(NS, COLUMNS, [row()], protocol=ProtocolType.DATA_INITIAL_DATA),
            ("ums_id_", "ums_ts_", "ums_op_", "ums_uid_", "id", "amount"),
        ),
    ],
)
def test_each_protocol_has_its_fixed_fields(msg, names):
    assert msg.schema.names == names


def test_user_columns_named_like_system_fields_are_skipped_as_in_the_original():
    columns = (ColumnSpec("ums_ts_", "datetime"), *COLUMNS)
    msg = build_data_message(NS, columns, [row(values=("x", 1, None))])
    assert msg.schema.names[4:] == ("id", "amount")
    assert msg.payload[0][4:] == ("1", None)


@pytest.mark.parametrize(
    ("values", "error"),
    [
        ((1, 1.5), r"amount: cannot encode 1\.5 as decimal"),
        ((1,), r"rows\[0\]: 1 values for 2 columns"),
    ],
)
def test_build_errors_name_the_row_or_column(values, error):
    with pytest.raises(BadValueError, match=error):
        build_data_message(NS, COLUMNS, [row(values=values)])


def set_in(obj, path, value):
    *head, last = path
    for key in head:
        obj = obj[key]
    if value is KeyError:
        del obj[last]
    else:
        obj[last] = value


@pytest.mark.parametrize(
    ("path", "value", "error"),
    [
        (("payload", 1, "tuple"), ["1", TS, "d", "1", "7"], r"payload\[1\]\.tuple: 5 values for 6 fields"),
        (("payload", 0, "tuple", 4), None, r"payload\[0\]\.tuple\[4\] \(id\): null in a non-nullable field"),
        (("payload", 0, "tuple", 4), 7, r"payload\[0\]\.tuple\[4\] \(id\): 7 is not a long value"),
        (("payload", 0, "tuple", 0), "0025", r"tuple\[0\] \(ums_id_\): '0025' is not a long"),
        (
            ("payload", 0, "tuple", 2),
            "x",
            r"tuple\[2\] \(ums_op_\): 'x' is not one of \['b', 'd', 'i', 'u'\]",
        ),
        (("payload", 0, "tuple", 5), 9.9, r"tuple\[5\] \(amount\): 9\.9 is not a decimal value"),
        (("payload", 0), ["1"], r"payload\[0\]: expected a JSON object, got list"),
        (("payload", 0, "tuple"), KeyError, r"payload\[0\]: missing key 'tuple'"),
        (("payload",), [], r"payload of mysql\.demo\.shop\.orders\.3\.0\.0: must be a non-empty"),
        (("schema", "fields", 5, "type"), "money", r"schema\.fields\[5\]\.type: unknown value 'money'"),
        (("schema", "fields", 0, "type"), "string", r"schema\.fields\[0\] of .*needs ums_id_ long"),
        (("schema", "fields", 5, "name"), "id", r"duplicate field 'id'"),
        (("schema", "namespace"), "mysql.demo.orders", r"schema\.namespace: .*7 dot-separated parts"),
        (("schema", "batchId"), -1, r"schema\.batchId of .*: -1 is not a non-negative int"),
        (("schema", "fields"), KeyError, r"schema: missing key 'fields'"),
        (("protocol", "type"), "data_increment_nothing", r"protocol\.type: unknown value"),
        (("protocol", "version"), "1.2", r"protocol\.version '1\.2': only 1\.3 is supported"),
    ],
)
def test_from_json_names_the_path_of_the_problem(path, value, error):
    obj = valid_dict()
    set_in(obj, path, value)
    with pytest.raises(BadMessageError, match=error) as info:
        from_json(json.dumps(obj))
    assert info.value.code == "UMS_BAD_MESSAGE"


@pytest.mark.parametrize("text", ["", "{", "[]", '{"protocol":1}', b"\xff"])
def test_from_json_rejects_non_messages(text):
    with pytest.raises(BadMessageError, match=r"^UMS_BAD_MESSAGE: (\$|protocol)"):
        from_json(text)


def test_full_pull_rows_must_be_inserts():
    with pytest.raises(BadMessageError, match=r"'u' is not one of \['i'\] for data_initial_data"):
        build_data_message(NS, COLUMNS, [row(Op.UPDATE)], protocol=ProtocolType.DATA_INITIAL_DATA)


def test_heartbeat_carries_no_user_columns():
    fields = (*build_heartbeat_message(NS, ID, TS).schema.fields, UmsField("x", UmsType.INT, True))
    with pytest.raises(BadMessageError, match="data_increment_heartbeat carries no user columns"):
        UmsMessage(ProtocolType.DATA_INCREMENT_HEARTBEAT, UmsSchema(NS, fields), ((ID, TS, 1),))


def test_missing_nullable_and_encoded_default_to_false_like_fastjson():
    obj = valid_dict()
    del obj["schema"]["fields"][5]["nullable"], obj["schema"]["fields"][5]["encoded"]
    obj["payload"][0]["tuple"][5] = obj["payload"][1]["tuple"][5] = "1.00"
    assert from_json(json.dumps(obj)).schema.fields[5] == UmsField("amount", UmsType.DECIMAL, False)


@given(messages())
def test_json_round_trip_gives_an_equal_message_and_the_same_text(msg):
    text = to_json(msg)
    assert from_json(text) == msg
    assert to_json(from_json(text.encode("utf-8"))) == text


def tuples(n, size=1):
    return [(str(i), "x" * size) for i in range(n)]


@pytest.mark.parametrize(
    ("count", "size", "max_tuples", "max_bytes", "lengths"),
    [
        (12, 1, 5, 10**6, [5, 5, 2]),
        (5, 1, 5, 10**6, [5]),
        (0, 1, 5, 10**6, []),
        (4, 100, 100, 250, [2, 2]),
        (3, 1000, 100, 250, [1, 1, 1]),
    ],
)
def test_split_tuples_by_count_and_bytes_keeps_order(count, size, max_tuples, max_bytes, lengths):
    chunks = split_tuples(tuples(count, size), max_tuples, max_bytes)
    assert [len(c) for c in chunks] == lengths
    assert [r for c in chunks for r in c] == tuples(count, size)


def test_tuple_bytes_counts_utf8_of_the_payload_entry():
    assert tuple_bytes(("é",)) == len('{"tuple":["é"]},'.encode())


@pytest.mark.parametrize(("max_tuples", "max_bytes"), [(0, 10), (5, 0)])
def test_split_rejects_empty_limits(max_tuples, max_bytes):
    with pytest.raises(BadValueError, match="max_tuples"):
        split_tuples(tuples(1), max_tuples, max_bytes)


def test_build_data_messages_share_one_schema_and_keep_every_row():
    rows = [row(index=i) for i in range(7)]
    msgs = build_data_messages(NS, COLUMNS, rows, max_tuples=3)
    assert [len(m.payload) for m in msgs] == [3, 3, 1]
    assert {m.schema for m in msgs} == {msgs[0].schema}
    assert [t[3] for m in msgs for t in m.payload] == [r.ums_uid for r in rows]


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        (
            data_key(ProtocolType.DATA_INCREMENT_DATA, NS, 1704164645000, "demo"),
            "data_increment_data.mysql.demo.shop.orders.3.0.0.1704164645000|demo.wh_placeholder",
        ),
        (
            heartbeat_key(NS, 1704164645000, 1704164640000, "ok", "demo"),
            "data_increment_heartbeat.mysql.demo.shop.orders.3.0.0.1704164645000|1704164640000|ok|demo"
            ".wh_placeholder",
        ),
        (
            initial_data_key(NS, 1704164645000),
            "data_initial_data.mysql.demo.shop.orders.3.0.0.1704164645000.wh_placeholder",
        ),
        (  # the log processor's keys (log spec §5.6): no |dsName
            data_key(ProtocolType.DATA_INCREMENT_DATA, LOG_NS, 1709604930123, None),
            "data_increment_data.log_logstash.applog.applog_schema.order_events.3.app-01_prod.0.1709604930123"
            ".wh_placeholder",
        ),
        (
            heartbeat_key(LOG_NS, 1709604930123, 1709604930000, "ok", None),
            "data_increment_heartbeat.log_logstash.applog.applog_schema.order_events.3.app-01_prod.0"
            ".1709604930123|1709604930000|ok.wh_placeholder",
        ),
    ],
)
def test_kafka_keys_follow_the_original(key, expected):
    assert key == expected


def test_data_key_has_the_ten_dot_parts_the_heartbeat_monitor_expects():
    assert len(data_key(ProtocolType.DATA_INCREMENT_DATA, NS, 1, "demo").split(".")) == 10
    assert len(data_key(ProtocolType.DATA_INCREMENT_DATA, LOG_NS, 1, None).split(".")) == 10
    assert len(heartbeat_key(LOG_NS, 1, 1, "ok", None).split(".")) == 10


@pytest.mark.parametrize(("ms", "ds_name"), [(-1, "demo"), (1.5, "demo"), (1, "de.mo"), (1, "a|b"), (1, "")])
def test_keys_reject_parts_that_would_break_parsing(ms, ds_name):
    with pytest.raises(BadMessageError, match="key"):
        data_key(ProtocolType.DATA_INCREMENT_DATA, NS, ms, ds_name)


def test_messages_are_immutable_values():
    msg = build_heartbeat_message(NS, ID, TS)
    with pytest.raises(AttributeError):
        msg.payload = ()
    assert msg == copy.deepcopy(msg)
    assert hash(msg) == hash(build_heartbeat_message(NS, ID, TS))
