"""dbuslib.registry on the local stack's registry (Apicurio, Confluent API; docs/stack.md#schema-registry):
subjects ``<topic>-key``/``<topic>-value``, a compatible change as version 2, an incompatible one refused
under BACKWARD, and the interoperability proof: records in the Confluent wire format with schemas
registered through dbuslib.registry (by ums.formats.avro's AvroRows, and one framed by hand around
fastavro's body), written to Kafka, read back by confluent-kafka's AvroDeserializer and
SchemaRegistryClient, unmodified. Basic auth is not tested here: the stack's Apicurio 2.0.2 has no users
(OpenID Connect only); tests/unit/test_registry.py tests it against a local HTTP server."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import time
import urllib.request
import uuid
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import fastavro
import pytest
from confluent_kafka import Consumer
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer
from confluent_kafka.serialization import MessageField, SerializationContext

from dbuslib import kafka
from dbuslib.registry import Registry, SchemaNotFound
from dbuslib.retry import RetryPolicy
from ums.build import field_for
from ums.formats import FormatOptions, SchemaRefused, decode
from ums.formats.avro import AvroRows
from ums.ids import ums_id, ums_uid
from ums.rowchange import Position, RowChange, TableShape
from ums.types import ColumnSpec

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]

KEY = {"type": "record", "name": "Key", "namespace": "pytest", "fields": [{"name": "id", "type": "int"}]}
VALUE = {
    "type": "record",
    "name": "Value",
    "namespace": "pytest",
    "fields": [{"name": "id", "type": "int"}, {"name": "name", "type": "string"}],
}


def text(schema: dict) -> str:
    return json.dumps(schema, separators=(",", ":"))


@pytest.fixture
def inspect(cfg) -> SchemaRegistryClient:
    """confluent-kafka's own client on the same registry: what a third party sees of it."""
    client = SchemaRegistryClient({"url": cfg.endpoints.registry.url})
    try:
        client.get_subjects()
    except Exception as e:  # a clear failure with the command that starts it
        url = cfg.endpoints.registry.url
        pytest.fail(
            f"the schema registry at {url} does not answer ({e}); start the stack with `make stack-up`"
        )
    return client


@pytest.fixture
def registry(cfg, inspect) -> Iterator[Registry]:
    """DBus's client; the subjects the test made under its names (``made``) are deleted afterwards."""
    reg = Registry.of(cfg)
    yield reg
    for subject in inspect.get_subjects():
        if any(subject.startswith(prefix) for prefix in made):
            inspect.delete_subject(subject)
    made.clear()
    reg.close()


made: list[str] = []  # prefixes of the subjects the running test registers


def subject_base() -> str:
    base = f"pytest_registry_{uuid.uuid4().hex[:8]}"
    made.append(base)
    return base


def test_key_and_value_subjects_evolve_under_backward(registry, inspect, cfg):
    topic = subject_base()
    ids = registry.schema_ids("BACKWARD")
    key_id = ids(f"{topic}-key", text(KEY))
    value_id = ids(f"{topic}-value", text(VALUE))
    assert key_id != value_id
    # another client (another worker, a restart): the same ids for the identical versions
    other = Registry.of(cfg)
    assert other.schema_id(f"{topic}-key", text(KEY)) == key_id
    assert json.loads(other.schema(value_id)) == VALUE
    assert inspect.get_compatibility(f"{topic}-value") == "BACKWARD"

    # an added optional field is a BACKWARD-compatible change: version 2 of the subject
    evolved = {
        **VALUE,
        "fields": [*VALUE["fields"], {"name": "note", "type": ["null", "string"], "default": None}],
    }
    v2_id = ids(f"{topic}-value", text(evolved))
    assert v2_id not in (key_id, value_id)
    assert inspect.get_versions(f"{topic}-value") == [1, 2]

    # a changed field type is not: refused, naming the subject and the registry's reason
    retyped = {**VALUE, "fields": [{"name": "id", "type": "string"}, {"name": "name", "type": "string"}]}
    with pytest.raises(SchemaRefused, match=rf"subject {topic}-value: refused .*Incompatible"):
        ids(f"{topic}-value", text(retyped))
    assert inspect.get_versions(f"{topic}-value") == [1, 2]


def test_the_id_is_apicurios_content_id(registry, cfg):
    """The stack's Apicurio hands out content ids through its Confluent API (docs/stack.md#schema-registry):
    the same schema text has the same id under any subject, and Apicurio's own API serves it under
    /ids/contentIds/<id>, where its converter (apicurio.registry.use-id=contentId) looks for it."""
    base = subject_base()
    first = registry.schema_id(f"{base}-a-value", text(VALUE))
    assert registry.schema_id(f"{base}-b-value", text(VALUE)) == first  # not a per-version global id
    core = re.sub(r"/apis/ccompat/v\d+$", "/apis/registry/v2", cfg.endpoints.registry.url)
    with urllib.request.urlopen(f"{core}/ids/contentIds/{first}", timeout=10) as answer:
        assert json.loads(answer.read()) == VALUE


def test_unknown_id(registry):
    with pytest.raises(SchemaNotFound, match="no such schema"):
        registry.schema(2_000_000_000)


COLUMNS = (
    ColumnSpec("id", "int(11)", False),
    ColumnSpec("name", "varchar(20)"),
    ColumnSpec("amount", "decimal(10,2)"),
)


def _changes(table: str) -> list[RowChange]:
    shape = TableShape("pytest", "registry", table, 1, COLUMNS, tuple(field_for(c) for c in COLUMNS), ("id",))
    out = []
    rows = [
        ("c", None, (1, "one", "10.50")),
        ("c", None, (2, "two ✓", None)),
        ("u", (1, "one", "10.50"), (1, "uno", "-3.25")),
    ]
    rows.append(("d", (2, "two ✓", None), None))
    for n, (op, before, after) in enumerate(rows):
        base = ums_id("mysql-bin.000001", 4000 + 100 * n)
        at = Position(int(base), 1_700_000_000_000 + n, "mysql-bin.000001", 4000 + 100 * n, 0, 1)
        out.append(RowChange(shape, op, before, after, at, ums_uid(base, 0)))  # type: ignore[arg-type]
    return out


def _read_all(cfg, topic: str, count: int) -> list:
    """Every record of ``topic`` (one partition) by librdkafka's consumer, ``count`` expected."""
    consumer = Consumer(
        {
            "bootstrap.servers": cfg.endpoints.kafka.bootstrap_servers,
            "group.id": f"pytest-{uuid.uuid4().hex[:8]}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([topic])
    out: list = []
    deadline = time.monotonic() + 60
    try:
        while len(out) < count and time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is not None and msg.error() is None:
                out.append(msg)
    finally:
        consumer.close()
    assert len(out) == count, f"read {len(out)} of {count} records of {topic} in 60 s"
    return out


def test_confluent_avro_deserializer_reads_what_dbus_writes(registry, inspect, cfg, new_topic):
    topic = new_topic()
    made.append(topic)
    changes = _changes(topic)
    fmt = AvroRows(FormatOptions(), registry.schema_ids("BACKWARD"))
    records = [r for c in changes for r in fmt.records(topic, c)]

    # and one record framed by hand: magic byte 0, the 4-byte id dbuslib.registry got, fastavro's body
    plain_id = registry.schema_id(f"{topic}-plain-value", text(VALUE))
    body = io.BytesIO()
    fastavro.schemaless_writer(body, fastavro.parse_schema(VALUE), {"id": 7, "name": "seven"})
    framed = b"\x00" + plain_id.to_bytes(4, "big") + body.getvalue()

    producer = kafka.producer(cfg.endpoints.kafka)
    for r in records:
        producer.send(topic, key=r.key, value=r.value, headers=list(r.headers))
    producer.send(topic, key=None, value=framed)
    producer.flush()
    producer.close()

    # the unmodified third-party reader: schemas by id through the registry's Confluent API
    deserialize = AvroDeserializer(inspect)
    got = _read_all(cfg, topic, len(records) + 1)
    *rows, plain = got
    assert deserialize(plain.value(), SerializationContext(topic, MessageField.VALUE)) == {
        "id": 7,
        "name": "seven",
    }

    read = [
        (
            deserialize(m.key(), SerializationContext(topic, MessageField.KEY)),
            None
            if m.value() is None
            else deserialize(m.value(), SerializationContext(topic, MessageField.VALUE)),
        )
        for m in rows
    ]
    # c 1, c 2, u 1, d 2 + its tombstone
    assert [k["id"] for k, _ in read] == [1, 2, 1, 2, 2]
    assert [v and v["op"] for _, v in read] == ["c", "c", "u", "d", None]
    assert read[0][1]["after"] == {"id": 1, "name": "one", "amount": Decimal("10.50")}
    assert read[1][1]["after"] == {"id": 2, "name": "two ✓", "amount": None}
    assert read[2][1]["before"]["name"] == "one" and read[2][1]["after"]["amount"] == Decimal("-3.25")
    assert read[3][1]["before"]["id"] == 2 and read[3][1]["after"] is None

    # and DBus's own decoder, its schemas through dbuslib.registry by id, gives back each change
    lookup = Registry.of(cfg).schema
    back = [decode("avro", m.key(), m.value(), tuple(m.headers() or ()), lookup) for m in rows]
    assert [b for b in back if b is not None] == changes


@pytest.mark.exclusive  # restarts the registry every avro test uses
def test_a_restart_keeps_the_ids_and_costs_a_waiting_caller_latency_only(registry, cfg):
    """The stack's registry keeps its schemas on disk (docs/stack.md#schema-registry): after a restart an
    id still names its schema and the same schema gets the same id; a call made while it is down is
    retried (endpoints.retry) until it is back."""
    subject = f"{subject_base()}-value"
    schema_id = registry.schema_id(subject, text(VALUE))
    up = {**os.environ, "DOWN_S": "3"}
    restart = subprocess.Popen(["bash", str(REPO / "stack" / "stack.sh"), "restart", "registry"], env=up)
    try:
        fresh = Registry.from_config(cfg.endpoints.registry, RetryPolicy(180.0, 0.2, 1.0))
        deadline = time.monotonic() + 60
        while registry_answers(cfg) and time.monotonic() < deadline:  # wait until it is down
            pass
        assert not registry_answers(cfg), "the registry did not go down within 60 s"
        assert json.loads(fresh.schema(schema_id)) == VALUE  # asked while down: answered once back
        assert fresh.schema_id(subject, text(VALUE)) == schema_id
    finally:
        assert restart.wait(timeout=300) == 0
    assert Registry.of(cfg).schema_id(subject, text(VALUE)) == schema_id


def registry_answers(cfg) -> bool:
    try:
        with urllib.request.urlopen(f"{cfg.endpoints.registry.url}/subjects", timeout=2) as answer:
            return answer.status == 200
    except OSError:
        return False
