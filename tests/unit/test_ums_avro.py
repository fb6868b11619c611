"""UMS <-> Avro: derived schema, exact round trip, sanitised names, the column writer against fastavro."""

import base64
import io
from decimal import Decimal

import fastavro
import pytest
from hypothesis import given
from hypothesis import strategies as st
from ums_strategies import messages

from ums.avro import (
    avro_field_name,
    avro_schema,
    decode_avro,
    encode_avro,
    encode_avro_fastavro,
    record_name,
)
from ums.build import DataRow, build_data_message, build_heartbeat_message
from ums.errors import BadAvroError
from ums.message import Op, ProtocolType, UmsField, UmsMessage, UmsSchema
from ums.namespace import Namespace
from ums.scalars import INT_MAX, INT_MIN, LONG_MAX, LONG_MIN
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


@st.composite
def event_messages(draw):
    """``messages()``, or the same with every tuple holding the first one's ums_id_, ums_ts_ and ums_op_
    (as one rows event's tuples do)."""
    msg = draw(messages())
    if not draw(st.booleans()):
        return msg
    system = sum(f.name in ("ums_id_", "ums_ts_", "ums_op_") for f in msg.schema.fields[:3])
    first = msg.payload[0][:system]
    return UmsMessage(msg.protocol, msg.schema, tuple(first + row[system:] for row in msg.payload))


@given(event_messages())
def test_column_writer_writes_what_fastavro_writes(msg):
    assert encode_avro(msg) == encode_avro_fastavro(msg)


EDGE_FIELDS = (
    UmsField("l", UmsType.LONG, False),
    UmsField("nl", UmsType.LONG, True),
    UmsField("i", UmsType.INT, False),
    UmsField("ni", UmsType.INT, True),
    UmsField("s", UmsType.STRING, False),
    UmsField("ns", UmsType.STRING, True),
    UmsField("b", UmsType.BINARY, True),
    UmsField("d", UmsType.DOUBLE, True),
    UmsField("f", UmsType.FLOAT, False),
    UmsField("t", UmsType.BOOLEAN, True),
    UmsField("u", UmsType.BOOLEAN, False),
)
EDGE_LONGS = [LONG_MIN, -(2**63) + 1, -129, -128, -1, 0, 1, 127, 128, 255, 256, 2**63, LONG_MAX]
EDGE_INTS = [INT_MIN, -65, -64, -1, 0, 63, 64, 8191, 8192, 2**14, 2**16, INT_MAX]
EDGE_TEXTS = ["", "a", "é" * 2047, "x" * 4095, "x" * 4096, "😀" * 20000]


def edge_rows(nulls: bool) -> tuple[tuple, ...]:
    rows = []
    for k in range(len(EDGE_TEXTS) * 3):
        text = EDGE_TEXTS[k % len(EDGE_TEXTS)]
        null = nulls and k % 3 == 1
        rows.append(
            (
                str(EDGE_LONGS[k % len(EDGE_LONGS)]),
                None if null else str(EDGE_LONGS[-k % len(EDGE_LONGS)]),
                EDGE_INTS[k % len(EDGE_INTS)],
                None if null else EDGE_INTS[-k % len(EDGE_INTS)],
                text,
                None if null else text[::-1],
                None if null else base64.b64encode(text.encode()[: k * 700]).decode(),
                None if null else k * -1.5e300,
                k / 3,
                None if null else k % 2 == 0,
                k % 2 == 1,
            )
        )
    return tuple(rows)


@pytest.mark.parametrize("nulls", [False, True])
@pytest.mark.parametrize("repeat", [1, 300])
def test_column_writer_at_the_edges_of_its_tables_and_types(nulls, repeat):
    """Longs at the byte-length steps of their decimal bytes (negatives too), ints around the varint
    steps and past the lookup table, texts around the length table's end, nullable columns with and
    without nulls: the same bytes as fastavro."""
    protocol = ProtocolType.DATA_INCREMENT_DATA
    head = build_data_message(NS, COLUMNS, [ROW]).payload[0][:4]
    schema = UmsSchema(NS, build_data_message(NS, COLUMNS, [ROW]).schema.fields[:4] + EDGE_FIELDS)
    rows = tuple(head + r for r in edge_rows(nulls)) * repeat
    msg = UmsMessage(protocol, schema, rows)
    assert encode_avro(msg) == encode_avro_fastavro(msg)
    assert decode_avro(encode_avro(msg), avro_schema(schema)) == msg


def test_column_writer_refuses_what_fastavro_refuses():
    fields = build_heartbeat_message(NS, "1", TS).schema.fields
    for bad in ("100000000000000000000", "-100000000000000000000"):
        msg = UmsMessage.prevalidated(
            ProtocolType.DATA_INCREMENT_HEARTBEAT, UmsSchema(NS, fields), ((bad, TS),)
        )
        with pytest.raises(ValueError, match="precision"):
            encode_avro_fastavro(msg)
        with pytest.raises(ValueError, match="precision"):
            encode_avro(msg)
