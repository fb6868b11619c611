"""appender.output: JSON or Avro record values, the schema published once, consumers decode either."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from decimal import Decimal

import pytest

from appender.output import (
    SCHEMA_HEADER,
    MessageEncoder,
    SchemaCache,
    decode,
    encode_record,
    fingerprint,
    schema_text,
)
from ums import (
    ColumnSpec,
    DataRow,
    Namespace,
    Op,
    avro_schema,
    build_data_message,
    build_termination_message,
    from_json,
    to_json,
)

NS = Namespace("mysql", "demo", "shop", "orders", 3)
TS = "2024-01-02 03:04:05.000"
COLUMNS = (
    ColumnSpec("id", "bigint(20) unsigned", False),
    ColumnSpec("amount", "decimal(65,30)"),
    ColumnSpec("photo", "longblob"),
    ColumnSpec("order-no", "varchar(20)"),
)
ROWS = [
    DataRow(
        "1030000012345678",
        TS,
        Op.INSERT,
        "1030000012345678000000",
        (2**64 - 1, Decimal("1.50"), b"\x00\xff", "A-1"),
    ),
    DataRow("1030000012345678", TS, Op.DELETE, "1030000012345678000001", (0, None, None, None)),
]


@dataclass
class Row:
    namespace: str
    fingerprint: str
    schema_json: str


class FakeStore:
    def __init__(self) -> None:
        self.rows: dict[str, Row] = {}
        self.adds = 0
        self.gets = 0

    def add_avro_schema(self, namespace: str, fp: str, text: str) -> Row:
        self.adds += 1
        return self.rows.setdefault(fp, Row(namespace, fp, text))

    def avro_schema(self, fp: str) -> Row | None:
        self.gets += 1
        return self.rows.get(fp)


def message(ns: Namespace = NS):
    return build_data_message(ns, COLUMNS, ROWS)


def test_json_is_the_default_and_adds_no_header():
    m = message()
    assert MessageEncoder().encode(m) == (to_json(m).encode(), ())
    assert encode_record(None, m) == (to_json(m).encode(), ())
    value, headers = MessageEncoder("json").encode(m)
    assert decode(value, headers) == m == from_json(value)


def test_avro_record_carries_the_fingerprint_of_the_stored_schema():
    store, m = FakeStore(), message()
    value, headers = MessageEncoder("avro", store).encode(m)
    [(name, fp)] = headers
    assert name == SCHEMA_HEADER and len(fp) == 64
    row = store.rows[fp.decode()]
    assert row.namespace == str(NS)
    assert json.loads(row.schema_json) == avro_schema(m.schema)
    assert fingerprint(row.schema_json) == fp.decode() == fingerprint(schema_text(m))
    assert decode(value, headers, store) == m


def test_the_store_is_written_once_per_schema_per_encoder():
    store = FakeStore()
    enc = MessageEncoder("avro", store)
    for _ in range(5):
        enc.encode(message())
    enc.encode(message(replace(NS, version=4)))
    assert store.adds == 2 and len(store.rows) == 2
    MessageEncoder("avro", store).encode(message())  # another executor: idempotent
    assert len(store.rows) == 2


def test_a_masked_field_type_gives_another_schema_of_the_same_namespace():
    store, m = FakeStore(), message()
    fields = list(m.schema.fields)
    fields[-1] = replace(fields[-1], encoded=True)
    masked = replace(m, schema=replace(m.schema, fields=tuple(fields)))
    enc = MessageEncoder("avro", store)
    fps = {enc.encode(m)[1][0][1], enc.encode(masked)[1][0][1]}
    assert len(fps) == 2 and {r.namespace for r in store.rows.values()} == {str(NS)}
    value, headers = enc.encode(masked)
    assert decode(value, headers, store) == masked


def test_termination_messages_encode_too():
    store = FakeStore()
    t = build_termination_message(NS, TS)
    value, headers = MessageEncoder("avro", store).encode(t)
    assert decode(value, headers, store) == t


def test_consumer_cache_fetches_each_schema_once_and_checks_it():
    store, enc = FakeStore(), None
    enc = MessageEncoder("avro", store)
    records = [enc.encode(message()) for _ in range(3)]
    cache = SchemaCache(store)
    assert [decode(v, h, cache) for v, h in records] == [message()] * 3
    assert store.gets == 1
    fp = records[0][1][0][1].decode()
    store.rows[fp] = Row(str(NS), fp, store.rows[fp].schema_json + " ")
    with pytest.raises(LookupError, match="does not match"):
        SchemaCache(store).get(fp)
    with pytest.raises(LookupError, match="not in the meta store"):
        SchemaCache(store).get("0" * 64)


def test_bad_settings_are_refused():
    with pytest.raises(ValueError, match="expected one of"):
        MessageEncoder("xml")
    with pytest.raises(ValueError, match="meta store"):
        MessageEncoder("avro", None)
    value, headers = MessageEncoder("avro", FakeStore()).encode(message())
    with pytest.raises(ValueError, match="meta store"):
        decode(value, headers)
