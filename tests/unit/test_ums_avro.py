"""UMS <-> Avro: derived schema, exact round trip, sanitised names."""

import io
from decimal import Decimal

import fastavro
import pytest
from hypothesis import given
from ums_strategies import messages

from ums.avro import avro_field_name, avro_schema, decode_avro, encode_avro, record_name
from ums.build import DataRow, build_data_message, build_heartbeat_message
from ums.errors import BadAvroError
from ums.message import Op, UmsField, UmsSchema
from ums.namespace import Namespace
from ums.types import ColumnSpec, UmsType

NS = Namespace("mysql", "demo", "shop", "orders", 3)
TS = "2024-01-02 03:04:05.000"
COLUMNS = (
    ColumnSpec("id", "bigint(20) unsigned", False),
    ColumnSpec("amount", "decimal(65,30)"),
    ColumnSpec("photo", "longblob"),
    ColumnSpec("order-no", "varchar(20)"),
    ColumnSpec("名字", "text"),
)
ROW = DataRow(
    "1030000012345678",
    TS,
    Op.INSERT,
    "1030000012345678000000",
    (2**64 - 1, Decimal("1.5"), b"\x00\xff", "A-1", "😀"),
)


def tuple_fields(schema):
    return schema["fields"][4]["type"]["items"]["fields"]


def test_schema_is_derived_from_the_ums_fields():
    schema = avro_schema(build_data_message(NS, COLUMNS, [ROW]).schema)
    assert (schema["name"], schema["namespace"]) == ("ums_mysql_demo_shop_orders_3_0_0", "dbus.ums")
    assert [f["name"] for f in schema["fields"]] == ["protocol", "version", "namespace", "batchId", "payload"]
    types = {f["ums_name"]: f["type"] for f in tuple_fields(schema)}
    assert types["ums_id_"] == {"type": "bytes", "logicalType": "decimal", "precision": 20, "scale": 0}
    assert types["id"] == types["ums_id_"]
    assert types["amount"] == ["null", "string"]
    assert types["photo"] == ["null", "bytes"]
    assert types["ums_ts_"] == "string"


@pytest.mark.parametrize(
    ("name", "index", "expected"),
    [
        ("id", 4, "id"),
        ("_x9", 1, "_x9"),
        ("order-no", 7, "_7_order_no"),
        ("名字", 8, "_8___"),
        ("9lives", 2, "_2_9lives"),
        ("", 3, "_3_"),
    ],
)
def test_field_names_avro_rejects_are_sanitised_and_indexed(name, index, expected):
    assert avro_field_name(name, index) == expected


def test_record_name_is_namespace_derived():
    assert record_name("mysql.demo!x.shop.orders.3.0.*") == "ums_mysql_demo_x_shop_orders_3_0__"


def test_round_trip_keeps_unsigned_bigint_blob_and_unicode_names():
    msg = build_data_message(NS, COLUMNS, [ROW])
    data = encode_avro(msg)
    assert decode_avro(data, avro_schema(msg.schema)) == msg


def test_other_avro_readers_see_plain_avro():
    msg = build_data_message(NS, COLUMNS, [ROW])
    record = fastavro.schemaless_reader(
        io.BytesIO(encode_avro(msg)), fastavro.parse_schema(avro_schema(msg.schema))
    )
    assert record["payload"][0]["id"] == Decimal(2**64 - 1)
    assert record["payload"][0]["photo"] == b"\x00\xff"
    assert record["payload"][0]["_7_order_no"] == "A-1"


@given(messages())
def test_avro_round_trip_gives_an_equal_message(msg):
    assert decode_avro(encode_avro(msg), avro_schema(msg.schema)) == msg


def test_colliding_sanitised_names_are_refused():
    fields = (
        *build_heartbeat_message(NS, "1", TS).schema.fields,
        UmsField("_3_a_b", UmsType.INT, True),
        UmsField("a-b", UmsType.INT, True),
    )
    with pytest.raises(BadAvroError, match="collide"):
        avro_schema(UmsSchema(NS, fields))


@pytest.mark.parametrize(
    ("data", "schema_change"),
    [
        (b"", None),
        (b"\x02", None),
        (None, "drop_ums_type"),
    ],
)
def test_bad_avro_input_raises_bad_avro(data, schema_change):
    msg = build_heartbeat_message(NS, "1", TS)
    schema = avro_schema(msg.schema)
    if schema_change == "drop_ums_type":
        del tuple_fields(schema)[0]["ums_type"]
    with pytest.raises(BadAvroError) as info:
        decode_avro(encode_avro(msg) if data is None else data, schema)
    assert info.value.code == "UMS_BAD_AVRO"
