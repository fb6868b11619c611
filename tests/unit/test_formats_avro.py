"""ums.formats.avro: Debezium's envelope in Avro as Confluent's AvroConverter writes it; golden schemas;
the wire format; the bytes against fastavro's writer and reader; decode_avro_row round trips.

Golden files (tests/golden/formats/avro/): ``key.avsc`` and ``value.avsc``, the Avro schemas of the
``cdc_types`` table registered under ``<topic>-key`` and ``<topic>-value``. Rewrite them with
``DBUS_GOLDEN_WRITE=1`` and read the diff before committing.
"""

import base64
import io
import json
import os
from dataclasses import replace
from pathlib import Path

import fastavro
import pytest
from debezium_cases import RANDOM_SHAPE, VALUES, key_changed, read_back
from every_type_changes import SHAPE, changes, pulled, rows
from hypothesis import given, settings
from hypothesis import strategies as st

from ums.formats import FormatOptions, SchemaRefused, decode, formatter
from ums.formats.avro import AvroRows, _strip_logical, avro_schemas, decode_avro_row, schema_text, zigzag
from ums.formats.connect import avro_field_name, avro_fullname, connect_table
from ums.formats.debezium import DebeziumJson, base_headers, envelope_dict, events
from ums.message import UmsField
from ums.rowchange import TableShape
from ums.scalars import float32_repr
from ums.types import ColumnSpec

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "formats" / "avro"
WRITE = os.environ.get("DBUS_GOLDEN_WRITE") == "1"
TOPIC = "demo.golden.cdc_types"


class Registry:
    """A schema registry in memory: an id per distinct schema text, the calls counted."""

    def __init__(self) -> None:
        self.ids: dict[str, int] = {}
        self.calls: list[str] = []

    def __call__(self, subject: str, text: str) -> int:
        self.calls.append(subject)
        return self.ids.setdefault(text, len(self.ids) + 1)

    def lookup(self, schema_id: int) -> str:
        return next(t for t, i in self.ids.items() if i == schema_id)


def test_golden_schemas_are_valid_avro():
    key, value = avro_schemas(connect_table(SHAPE, FormatOptions()))
    for name, schema in (("key.avsc", key), ("value.avsc", value)):
        path = GOLDEN / name
        if WRITE:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(schema, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        assert json.loads(path.read_text(encoding="utf-8")) == schema
        fastavro.parse_schema(schema)


def test_confluent_avro_data_forms():
    """The AvroData rules: record names from Connect names, optional unions with null default, int16 with
    connect.type, Connect's Decimal as bytes/decimal, a record defined once and referenced after."""
    _, value = avro_schemas(connect_table(SHAPE, FormatOptions()))
    assert (value["name"], value["namespace"], value["connect.name"]) == (
        "Envelope",
        "demo.golden.cdc_types",
        "demo.golden.cdc_types.Envelope",
    )
    assert value["connect.version"] == 2
    fields = {f["name"]: f for f in value["fields"]}
    assert fields["after"] == {
        "name": "after",
        "type": ["null", "Value"],
        "default": None,
    }
    columns = {f["name"]: f for f in fields["before"]["type"][1]["fields"]}
    assert columns["si"]["type"][1]["connect.type"] == "int16" and columns["si"]["default"] is None
    d2 = columns["d2"]["type"][1]
    assert (d2["type"], d2["logicalType"], d2["precision"], d2["scale"]) == ("bytes", "decimal", 10, 2)
    assert d2["connect.name"] == "org.apache.kafka.connect.data.Decimal"
    source = fields["source"]["type"]
    assert (source["name"], source["namespace"]) == ("Source", "io.debezium.connector.mysql")
    snapshot = next(f for f in source["fields"] if f["name"] == "snapshot")
    assert snapshot["type"][1] == "null" and snapshot["default"] == "false"


def test_names_are_adjusted_for_avro():
    assert avro_fullname("demo.shop-1.orders.Value") == "demo.shop_1.orders.Value"
    assert avro_fullname("1demo.x") == "_demo.x"
    assert avro_field_name("order date") == "order_date" and avro_field_name("2fa") == "_fa"


def _records(fmt, changes_):
    return [(c, fmt.records(TOPIC, c)) for c in changes_]


def test_wire_format_subjects_and_cached_ids():
    registry = Registry()
    fmt = AvroRows(FormatOptions(), registry)
    out = _records(fmt, rows(50))
    assert registry.calls == [f"{TOPIC}-key", f"{TOPIC}-value"]  # once per (subject, shape)
    key, value = avro_schemas(connect_table(SHAPE, FormatOptions()))
    for _, (record,) in out:
        assert record.key[:5] == b"\x00" + registry.ids[schema_text(key)].to_bytes(4, "big")
        assert record.value[:5] == b"\x00" + registry.ids[schema_text(value)].to_bytes(4, "big")
    fmt.records("other.topic", rows(1)[0])
    assert registry.calls[2:] == ["other.topic-key", "other.topic-value"]


def test_the_bytes_are_fastavros_for_every_golden_row():
    fmt = AvroRows(FormatOptions(), Registry())
    key_schema, value_schema = (
        fastavro.parse_schema(s) for s in avro_schemas(connect_table(SHAPE, FormatOptions()))
    )
    for change in [*changes(), *pulled()]:
        plan = fmt.plan(change.table)
        datums = events(
            plan.table, change, plan.image, envelope_dict(plan.table, change.at), base_headers(change)
        )
        for event, record in zip(datums, fmt.records(TOPIC, change), strict=True):
            theirs = io.BytesIO()
            fastavro.schemaless_writer(theirs, key_schema, event.key)
            assert record.key[5:] == theirs.getvalue()
            if event.value is not None:
                theirs = io.BytesIO()
                fastavro.schemaless_writer(theirs, value_schema, event.value)
                assert record.value[5:] == theirs.getvalue()


def _as_json(value, float32: set[str]):
    """A datum fastavro read (logical types off) in JsonConverter's terms: bytes in Base64."""
    if isinstance(value, dict):
        return {k: (float32_repr(v) if k in float32 and isinstance(v, float) else _as_json(v, float32))
                for k, v in value.items()}  # fmt: skip
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    return value


def test_fastavro_reads_the_debezium_json_payload():
    """An independent reader (fastavro, with the registered schema) reads each value as the same envelope
    debezium-json writes."""
    registry = Registry()
    fmt, as_json = AvroRows(FormatOptions(), registry), DebeziumJson(FormatOptions())
    float32 = {"fl"}
    for change in [*changes(), *pulled()]:
        for record, json_record in zip(
            fmt.records(TOPIC, change), as_json.records(TOPIC, change), strict=True
        ):
            if record.value is None:
                assert json_record.value is None
                continue
            schema = json.loads(registry.lookup(int.from_bytes(record.value[1:5], "big")))
            datum = fastavro.schemaless_reader(
                io.BytesIO(record.value[5:]), fastavro.parse_schema(_strip_logical(schema)), None
            )
            assert _as_json(datum, float32) == json.loads(json_record.value)["payload"]


def test_every_change_reads_back_exactly():
    registry = Registry()
    fmt = AvroRows(FormatOptions(), registry)
    for change in [*changes(), *pulled()]:
        back = [
            decode("avro", r.key, r.value, r.headers, registry.lookup) for r in fmt.records(TOPIC, change)
        ]
        if key_changed(change):
            assert back == [
                replace(read_back(change), op="d", after=None),
                None,
                replace(read_back(change), op="c", before=None),
            ]
        elif change.op == "d":
            assert back == [read_back(change), None]
        else:
            assert back == [read_back(change)]


def test_formatter_needs_a_registry_and_a_refusal_propagates():
    with pytest.raises(ValueError, match="schema_ids"):
        formatter("avro", FormatOptions())

    def refuse(subject, text):
        raise SchemaRefused(f"{subject}: incompatible")

    with pytest.raises(SchemaRefused):
        formatter("avro", FormatOptions(), refuse).records(TOPIC, changes()[0])


def test_no_key_masked_fields_and_options_read_back():
    registry = Registry()
    fields = tuple(replace(f, encoded=True) if f.name in ("vc", "i") else f for f in SHAPE.fields)
    shape = replace(SHAPE, fields=fields, primary_key=())
    change = replace(changes()[0], table=shape)
    for options in (
        FormatOptions(),
        FormatOptions(bigint_unsigned_handling_mode="precise", binary_handling_mode="hex"),
    ):
        (record,) = AvroRows(options, registry).records(TOPIC, change)
        assert record.key is None
        assert decode_avro_row(record.key, record.value, record.headers, registry.lookup) == change


def test_unreadable_records_name_the_problem():
    with pytest.raises(ValueError, match="Confluent wire format"):
        decode_avro_row(None, b"\x01abc", (), Registry().lookup)


def test_zigzag_is_avros_long():
    for number in (0, -1, 1, 63, -64, 64, 8191, 8192, -8193, 2**31, 2**63 - 1, -(2**63)):
        theirs = io.BytesIO()
        fastavro.schemaless_writer(theirs, "long", number)
        assert zigzag(number) == theirs.getvalue()


@settings(max_examples=60, deadline=None)
@given(st.tuples(*[st.one_of(st.none(), s) for s in VALUES.values()]), st.sampled_from(["c", "u", "d", "r"]))
def test_random_values_read_back_exactly(values, op):
    registry = Registry()
    values = (values[0] if values[0] is not None else 0, *values[1:])
    change = replace(changes()[0], table=RANDOM_SHAPE, op=op, before=values if op in ("u", "d") else None,
                     after=None if op == "d" else values)  # fmt: skip
    record = AvroRows(FormatOptions(), registry).records("demo.prop.every", change)[0]
    assert decode_avro_row(record.key, record.value, record.headers, registry.lookup) == change


def test_geometry_columns_share_one_record_and_read_back():
    wkb = bytes.fromhex("0101000000000000000000f03f0000000000000040")  # POINT(1 2)
    columns = (ColumnSpec("id", "int(11)", False), ColumnSpec("g", "geometry"), ColumnSpec("h", "polygon"),
               ColumnSpec("p", "point"))  # fmt: skip
    fields = tuple(UmsField(c.name, c.ums_type, c.nullable) for c in columns)
    shape = TableShape("demo", "geo", "places", 3, columns, fields, ("id",))
    value = base64.b64encode((4326).to_bytes(4, "little") + wkb).decode()
    change = replace(changes()[0], table=shape, after=(1, value, None, value))
    registry = Registry()
    (record,) = AvroRows(FormatOptions(), registry).records("demo.geo.places", change)
    _, schema = avro_schemas(connect_table(shape, FormatOptions()))
    fastavro.parse_schema(schema)  # the Geometry record is defined once, then referenced
    after = {f["name"]: f for f in schema["fields"][0]["type"][1]["fields"]}
    assert after["h"]["type"] == ["null", "io.debezium.data.geometry.Geometry"]
    assert after["h"]["connect.parameters"]["__dbus.column.type"] == "polygon"
    assert decode_avro_row(record.key, record.value, record.headers, registry.lookup) == change
