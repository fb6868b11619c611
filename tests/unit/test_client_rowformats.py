"""dbusclient.rowformats: every per-row format through the reader path gives what the UMS path gives.

The changes are tests/golden/cdc/every_type.sql's (tests/unit/every_type_changes.py) and its rows again as
a full pull, written as UMS messages the way the appender writes them with before images on (a ``b``
tuple before each ``u``, consecutive ``ums_uid_``s per binlog event; tests/unit/rowformat_records.py);
``ums.rowchange.from_message`` turns those messages into ``RowChange``s and each format's encoder into
records. The UMS messages read by ``Decoder`` and the records read by ``RowReader`` must merge
(``Merger``) into the same table, whatever mix of formats, order and duplicates the records come in
(hypothesis). Then the consumer: a topic per table of per-row records, tombstones among them, replicated
into an in-memory sink; records that contradict the configuration are dead letters naming their topic,
partition and offset.
"""

from __future__ import annotations

import dataclasses
import json
from collections import namedtuple
from pathlib import Path
from typing import Any

import pytest
import yaml
from every_type_changes import SHAPE, changes, pulled
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka import TopicPartition
from rowformat_records import REGISTRY, TOPIC, encode, messages, row_changes

from dbusclient.checkpoint import Checkpoint, CheckpointStore, Mode
from dbusclient.consumer import Consumer, ConsumerCallbacks, ConsumerConfig, Result, Topics
from dbusclient.decode import BadRowError, Decoder, RowChange, TableRef
from dbusclient.merge import Merger
from dbusclient.rowformats import RowReader, sniff, ums_schema
from dbuslib.config import DEFAULT_CONFIG, load_config
from dbuslib.errors import EndpointError
from ums import formats
from ums.control import from_json as control_from_json
from ums.decode import decode_value
from ums.encoding import to_json
from ums.message import Op, UmsSchema
from ums.types import UmsType

T = TableRef(SHAPE.ds, SHAPE.schema, SHAPE.table)
KEYS = {(SHAPE.schema, SHAPE.table): ("id",)}
TYPES = {f.name: f.type for f in SHAPE.fields}
Record = namedtuple("Record", "topic partition offset key value headers")


# ---------------------------------------------------------------- the changes, as UMS and as records


def read(reader: RowReader, record: formats.Record, where: str = f"{TOPIC}/0@0") -> list[RowChange]:
    return reader.read(record.key, record.value, record.headers, where)[0]


def value(name: str, wire: Any) -> Any:
    """A UMS wire value decoded, a zero date (or one with a zero part) as None: Debezium (debezium-json,
    avro) writes them as null, as its MySQL connector does (docs/formats.md)."""
    decoded = decode_value(TYPES[name], wire, name)
    zero = TYPES[name] in (UmsType.DATE, UmsType.DATETIME) and isinstance(decoded, str)
    return None if zero else decoded


def table(changes_: list[RowChange]) -> dict[tuple[Any, ...], dict[str, Any]]:
    """The rows a sink ends with after applying ``changes_`` by the merge rule, values decoded."""
    merger = Merger()
    merger.merge(changes_)
    applied: dict[tuple[Any, ...], RowChange] = {}
    for (_, key), state in merger.states.items():
        if state.live:
            applied[key] = next(c for c in changes_ if c.key == key and c.position == state.position)
    return {key: {n: value(n, v) for n, v in c.values.items()} for key, c in applied.items()}


def ums_side() -> list[RowChange]:
    decoder = Decoder({f"{SHAPE.schema}.{SHAPE.table}": ("id",)})
    return [c for m in messages() for c in decoder.changes(m)]


def per_row_side(fmt: str) -> list[RowChange]:
    reader = RowReader(KEYS, schemas=REGISTRY.schema)
    return [c for m in messages() for ch in row_changes(m) for r in encode(fmt, ch) for c in read(reader, r)]


# ---------------------------------------------------------------- each format, as UMS


@pytest.mark.parametrize("fmt", formats.PER_ROW)
def test_every_type_rebuilds_the_same_table_as_ums(fmt):
    ums, rows = ums_side(), per_row_side(fmt)
    expected = table(ums)
    assert len(expected) >= 4
    assert table(rows) == expected
    # the same rows: same keys, values, versions and positions for each live row
    live = {c.key: c for c in rows if c.op.value in "iu"}
    for c in ums:
        if c.op.value in "iu" and not c.initial:
            assert live[c.key].version == c.version


@pytest.mark.parametrize("fmt", formats.PER_ROW)
def test_ops_positions_values_and_pulled_rows_are_as_ums_gives_them(fmt):
    decoder, reader = Decoder({"golden.cdc_types": ("id",)}), RowReader(KEYS, schemas=REGISTRY.schema)
    for msg in messages():
        ums = decoder.changes(msg)
        befores = {c.key for c in ums if c.op is Op.BEFORE}
        ums = [c for c in ums if c.op is not Op.BEFORE]
        moved_from = befores - {c.key for c in ums}  # the old keys of key changes
        got = [c for ch in row_changes(msg) for r in encode(fmt, ch, False) for c in read(reader, r)]
        # a key change is a delete of the old key and a create of the new one in every per-row format
        moves = [c for c in got if c.op is Op.DELETE and c.key in moved_from]
        assert len(moves) == len(moved_from)
        got = [c for c in got if c not in moves]
        assert [(c.key, c.ums_id, c.ums_uid, c.initial, c.version) for c in got] == [
            (c.key, c.ums_id, c.ums_uid, c.initial, c.version) for c in ums
        ]
        for g, u in zip(got, ums, strict=True):
            assert g.op is u.op or (u.op is Op.UPDATE and g.op is Op.INSERT and moves), (fmt, g.key)
            assert {n: value(n, v) for n, v in g.values.items()} == {
                n: value(n, v) for n, v in u.values.items()
            }, (fmt, g.key)
            if fmt == "canal-json":  # Canal's values are exact
                assert dict(g.values) == dict(u.values), g.key


@pytest.mark.parametrize("fmt", formats.PER_ROW)
def test_the_schema_of_a_version_is_the_ums_one(fmt):
    reader = RowReader(KEYS, schemas=REGISTRY.schema)
    record = encode(fmt, changes()[0])[0]
    _, schema = reader.read(record.key, record.value, record.headers, "t/0@0")
    assert schema is not None and schema.namespace == ums_schema(SHAPE).namespace
    # Canal's flat message says which columns are keys, not which may be null: names, types, masking
    assert [(f.name, f.type, f.encoded) for f in schema.fields] == [
        (f.name, f.type, f.encoded) for f in messages()[0].schema.fields
    ]


@pytest.mark.parametrize("fmt", formats.PER_ROW)
def test_a_tombstone_and_another_table_give_nothing(fmt):
    delete = next(c for c in changes() if c.op == "d")
    records = encode(fmt, delete)
    assert records[-1].value is None  # the tombstone after the delete
    reader = RowReader(KEYS, schemas=REGISTRY.schema)
    assert read(reader, records[-1]) == []
    assert [c.op.value for c in read(reader, records[0])] == ["d"]
    other = RowReader({("golden", "other"): ("id",)}, schemas=REGISTRY.schema)
    assert read(other, records[0]) == []


# ---------------------------------------------------------------- merge across formats


def all_records() -> list[tuple[str, Any]]:
    """Every change as a UMS tuple group and as a record of each per-row format: (format, payload)."""
    out: list[tuple[str, Any]] = []
    for msg in messages():
        out.append(("ums", msg))
        for ch in row_changes(msg):
            for fmt in formats.PER_ROW:
                out.extend((fmt, r) for r in encode(fmt, ch))
    return out


EXPECTED = None


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_any_mix_of_formats_order_and_duplicates_merges_to_the_same_table(data):
    global EXPECTED
    if EXPECTED is None:
        EXPECTED = table(ums_side())
    everything = all_records()
    chosen = data.draw(st.lists(st.sampled_from(range(len(everything))), min_size=0, max_size=60))
    # every change reaches the reader at least once in some format, plus the chosen duplicates
    picks = [data.draw(st.sampled_from(["ums", *formats.PER_ROW])) for _ in messages()]
    base = []
    n = -1
    for fmt, payload in everything:
        if fmt == "ums":
            n += 1
        if fmt == picks[n]:
            base.append((fmt, payload))
    stream = data.draw(st.permutations(base + [everything[i] for i in chosen]))
    decoder = Decoder({"golden.cdc_types": ("id",)})
    reader = RowReader(KEYS, schemas=REGISTRY.schema)
    got: list[RowChange] = []
    merger, window = Merger(), data.draw(st.integers(1, 10))
    for i in range(0, len(stream), window):
        batch = []
        for fmt, payload in stream[i : i + window]:
            batch.extend(decoder.changes(payload) if fmt == "ums" else read(reader, payload))
        got.extend(batch)
        merger.merge(batch)
    live = {key for (_, key), s in merger.states.items() if s.live}
    assert live == set(EXPECTED)
    assert table(got) == EXPECTED


# ---------------------------------------------------------------- which format, and contradictions


def test_sniff_tells_the_formats_apart():
    change = changes()[0]
    for fmt in formats.PER_ROW:
        r = encode(fmt, change)[0]
        assert sniff(r.value, dict(r.headers)) == fmt
    assert sniff(messages()[0].schema.namespace.table.encode(), {}) == "ums"
    assert sniff(None, {"ums_id_": b"1"}) == "tombstone"
    with pytest.raises(ValueError, match="neither"):
        sniff(b'{"x": 1}', {"ums_id_": b"1"})


@pytest.mark.parametrize("fmt", formats.PER_ROW)
def test_a_record_that_contradicts_the_configuration_is_a_bad_row_naming_it(fmt):
    other = next(f for f in formats.PER_ROW if f != fmt)
    record = encode(other, changes()[0])[0]
    reader = RowReader(KEYS, {T: fmt}, REGISTRY.schema)
    with pytest.raises(BadRowError, match=rf"{TOPIC}/2@7: .*{other}.*{fmt}"):
        reader.read(record.key, record.value, record.headers, f"{TOPIC}/2@7")
    # the configuration's format read first (a topic of one format): not such a record
    with pytest.raises(BadRowError, match=rf"{TOPIC}/2@7: not a {fmt} record \(it looks like {other}\)"):
        reader.read(record.key, record.value, record.headers, f"{TOPIC}/2@7", expected=fmt)
    with pytest.raises(BadRowError, match=rf"{TOPIC}/0@1: a UMS record of {T}, which .* {fmt}"):
        reader.check_ums(T, f"{TOPIC}/0@1")
    RowReader(KEYS, {T: "ums"}).check_ums(T, "x")  # UMS where UMS is configured: fine


def test_an_avro_record_without_a_registry_is_a_bad_row():
    record = encode("avro", changes()[0])[0]
    with pytest.raises(BadRowError, match="no registry"):
        RowReader(KEYS).read(record.key, record.value, record.headers, "t/0@0")


# ---------------------------------------------------------------- the consumer


class Kafka:
    """A KafkaConsumer without a group over topics in memory (topic -> one partition's records)."""

    def __init__(self, topics: dict[str, list[Record]]) -> None:
        self.topics = topics
        self.positions: dict[TopicPartition, int] = {}

    def subscribe(self, topics: Any, listener: Any) -> None:
        raise AssertionError("no group here")

    def assign(self, partitions: Any) -> None:
        self.positions = {tp: 0 for tp in partitions}

    def partitions_for_topic(self, topic: str) -> set[int] | None:
        return {0} if topic in self.topics else None

    def poll(self, timeout_ms: int, max_records: int) -> dict[TopicPartition, list[Record]]:
        out = {}
        for tp, pos in sorted(self.positions.items()):
            records = self.topics[tp.topic][pos : pos + max_records]
            if records:
                out[tp] = records
                self.positions[tp] = pos + len(records)
        return out

    def seek(self, tp: TopicPartition, offset: int) -> None:
        self.positions[tp] = offset

    def beginning_offsets(self, partitions: Any) -> dict[TopicPartition, int]:
        return {tp: 0 for tp in partitions}

    def end_offsets(self, partitions: Any) -> dict[TopicPartition, int]:
        return {tp: len(self.topics[tp.topic]) for tp in partitions}

    def committed(self, tp: TopicPartition) -> int | None:
        return None

    def commit(self, offsets: Any) -> None:
        pass

    def assignment(self) -> set[TopicPartition]:
        return set(self.positions)

    def close(self) -> None:
        pass


class Sink(ConsumerCallbacks, CheckpointStore):
    def __init__(self) -> None:
        self.rows: dict[tuple[Any, ...], dict[str, Any]] = {}
        self.schemas: list[UmsSchema] = []
        self.changes: list[RowChange] = []
        self.saved: Checkpoint | None = None

    def on_schema_change(self, table: TableRef, old: int | None, new: int, schema: UmsSchema) -> Result:
        self.schemas.append(schema)
        return Result.SUCCESS

    def on_data_event(self, change: RowChange) -> Result:
        self.changes.append(change)
        if change.gone:
            self.rows.pop(change.key, None)
        else:
            self.rows[change.key] = dict(change.values)
        return Result.SUCCESS

    def load(self) -> Checkpoint | None:
        return self.saved

    def save(self, checkpoint: Checkpoint) -> None:
        self.saved = checkpoint


def consume(topic: list[Record], fmt: str, tmp_path: Path, windows: int = 3) -> tuple[Sink, list[Any]]:
    sink, dead = Sink(), tmp_path / "dead.jsonl"
    config = ConsumerConfig(
        "demo",
        {"golden.cdc_types": ("id",)},
        max_records=windows,
        bootstrap=False,
        dead_letter_file=str(dead),
    )
    topics = Topics({T: TOPIC}, "demo_ctrl", {T: fmt}, {T: "demo.golden.events"})
    consumer = Consumer(config, sink, sink, Kafka({TOPIC: topic}), topics, row_schemas=REGISTRY.schema)
    consumer.start()
    while consumer.poll_once():
        pass
    consumer.close()
    lines = [json.loads(line) for line in dead.read_text().splitlines()] if dead.exists() else []
    return sink, lines


def as_topic(records: list[formats.Record | bytes], topic: str = TOPIC, start: int = 0) -> list[Record]:
    out = []
    for offset, r in enumerate(records, start):
        if isinstance(r, bytes):  # a UMS record
            out.append(Record(topic, 0, offset, b"golden.cdc_types", r, []))
        else:
            out.append(Record(topic, 0, offset, r.key, r.value, list(r.headers)))
    return out


@pytest.mark.parametrize("fmt", formats.PER_ROW)
def test_the_consumer_replicates_a_per_row_topic_per_table(fmt, tmp_path):
    records = [r for m in messages() for ch in row_changes(m) for r in encode(fmt, ch)]
    assert any(r.value is None for r in records)  # tombstones among them
    sink, dead = consume(as_topic(records), fmt, tmp_path)
    assert dead == []
    assert table_of(sink.rows) == table(ums_side())
    assert [s.namespace.version for s in sink.schemas] == [SHAPE.version]
    assert sink.saved is not None and sink.saved.offsets() == {(TOPIC, 0): len(records)}


def table_of(rows: dict[tuple[Any, ...], dict[str, Any]]) -> dict[tuple[Any, ...], dict[str, Any]]:
    return {k: {n: value(n, v) for n, v in vals.items()} for k, vals in rows.items()}


@pytest.mark.parametrize("fmt", formats.PER_ROW)
def test_records_that_contradict_the_configuration_are_dead_letters_with_their_offsets(fmt, tmp_path):
    other = next(f for f in formats.PER_ROW if f != fmt)
    good = [r for m in messages() for ch in row_changes(m) for r in encode(fmt, ch)]
    wrong = encode(other, changes()[0])[0]
    records: list[formats.Record | bytes] = [wrong, to_json(messages()[0]).encode(), *good]
    sink, dead = consume(as_topic(records), fmt, tmp_path)
    assert [(d["topic"], d["partition"], d["offset"], d["code"]) for d in dead] == [
        (TOPIC, 0, 0, "CLIENT_BAD_ROW"),
        (TOPIC, 0, 1, "CLIENT_BAD_ROW"),
    ]
    assert other in dead[0]["error"] and "UMS record" in dead[1]["error"]
    assert table_of(sink.rows) == table(ums_side())


class Producer:
    """Where the consumer's pull requests go."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, bytes | None]] = []

    def send(
        self, topic: str, key: bytes | None = None, value: bytes | None = None, headers: Any = None
    ) -> None:
        self.sent.append((topic, value))

    def flush(self, timeout: float | None = None) -> None:
        pass


def marker(kind: str, seqno: int, ums_id: int) -> formats.Record:
    headers = (("dbus_fullpull", kind.encode()), ("dbus_fullpull_id", str(seqno).encode()))
    return formats.Record(
        b"golden.cdc_types", b"{}", (*headers, ("dbus_fullpull_ums_id", str(ums_id).encode()))
    )


@pytest.mark.parametrize("fmt", formats.PER_ROW)
def test_a_bootstrap_of_a_per_row_table_ends_at_its_end_marker_on_the_events_topic(fmt):
    events = "demo.golden.events"
    before = [r for ch in row_changes(messages()[0]) for r in encode(fmt, ch)]  # before the request: skipped
    kafka = Kafka({TOPIC: as_topic(before), events: []})
    sink, producer = Sink(), Producer()
    config = ConsumerConfig("demo", {"golden.cdc_types": ("id",)}, max_records=4)
    topics = Topics({T: TOPIC}, "demo_ctrl", {T: fmt}, {T: events})
    consumer = Consumer(config, sink, sink, kafka, topics, producer, row_schemas=REGISTRY.schema)
    consumer.start()
    assert set(kafka.positions) == {TopicPartition(events, 0), TopicPartition(TOPIC, 0)}
    ((ctrl, request),) = producer.sent
    pull = control_from_json(request or b"")
    assert ctrl == "demo_ctrl" and pull.payload["resultTopic"] == TOPIC
    assert consumer.checkpoint.mode is Mode.BOOTSTRAP_SNAPSHOT
    seqno = int(pull.payload["SEQNO"])
    # the full puller: its markers on the events topic, its rows (op r) on the table's topic
    rows = [r for ch in row_changes(messages()[-1]) for r in encode(fmt, ch)]
    position = row_changes(messages()[-1])[0].at.ums_id
    kafka.topics[events] = as_topic(
        [marker("start", seqno, position), marker("end", seqno, position)], events
    )
    kafka.topics[TOPIC] += as_topic(rows, TOPIC, start=len(before))
    while consumer.poll_once():
        pass
    assert consumer.checkpoint.mode is Mode.ONLINE
    assert sorted(sink.rows) == sorted((c.after[0],) for c in pulled() if c.after is not None)
    assert all(c.initial for c in sink.changes)


def test_a_schema_topic_of_tables_in_several_formats_and_ums_replicates_each(tmp_path):
    """One result topic per schema: a table in each per-row format and one in UMS, interleaved. No one
    format for the topic: each record's look says, and its table's configured format must agree."""
    tables = {f"t_{n}": fmt for n, fmt in enumerate(formats.PER_ROW)}
    refs = {name: TableRef(SHAPE.ds, SHAPE.schema, name) for name in [*tables, "t_ums"]}
    records: list[formats.Record | bytes] = []
    for msg in messages():
        for name, fmt in tables.items():
            shape = dataclasses.replace(SHAPE, table=name)
            for ch in row_changes(msg):
                records += encode(fmt, dataclasses.replace(ch, table=shape))
        ns = dataclasses.replace(msg.schema.namespace, table="t_ums")
        records.append(
            to_json(dataclasses.replace(msg, schema=dataclasses.replace(msg.schema, namespace=ns))).encode()
        )
    topic = "demo.golden.result"
    dead = tmp_path / "dead.jsonl"
    keys = {f"golden.{name}": ("id",) for name in refs}
    config = ConsumerConfig("demo", keys, max_records=7, bootstrap=False, dead_letter_file=str(dead))
    formats_of = {ref: tables.get(name, "ums") for name, ref in refs.items()}
    events = {ref: "demo.golden.events" for name, ref in refs.items() if name in tables}
    topics = Topics(dict.fromkeys(refs.values(), topic), "demo_ctrl", formats_of, events)
    rows: dict[TableRef, dict[tuple[Any, ...], dict[str, Any]]] = {}

    class PerTable(Sink):
        def on_data_event(self, change: RowChange) -> Result:
            held = rows.setdefault(change.table, {})
            if change.gone:
                held.pop(change.key, None)
            else:
                held[change.key] = dict(change.values)
            return Result.SUCCESS

    sink = PerTable()
    consumer = Consumer(
        config, sink, sink, Kafka({topic: as_topic(records, topic)}), topics, row_schemas=REGISTRY.schema
    )
    consumer.start()
    while consumer.poll_once():
        pass
    assert not dead.exists()
    expected = table(ums_side())
    assert {ref.table: table_of(r) for ref, r in rows.items()} == {name: expected for name in refs}


def test_topics_of_a_source_name_each_table_s_topic_format_and_events_topic(tmp_path):
    raw = yaml.safe_load(DEFAULT_CONFIG.read_text())
    raw["sources"]["demo"]["output"] = {"topic": "table", "tables": {"shop.orders*": "avro"}}
    path = tmp_path / "dbus.yaml"
    path.write_text(yaml.safe_dump(raw))
    cfg = load_config(path)
    config = ConsumerConfig("demo", {"shop.orders": ("id",), "shop.customers": ("id",)})
    topics = Topics.of(cfg, config)
    orders, customers = TableRef("demo", "shop", "orders"), TableRef("demo", "shop", "customers")
    assert topics.result == {orders: "demo.shop.orders", customers: "demo.shop.customers"}
    assert topics.formats == {orders: "avro", customers: "ums"}
    assert topics.events == {orders: "demo.shop.events"}
    assert topics.all == ["demo.shop.customers", "demo.shop.events", "demo.shop.orders"]
    raw["sources"]["demo"]["output"] = {}
    path.write_text(yaml.safe_dump(raw))
    plain = Topics.of(load_config(path), config)
    assert set(plain.result.values()) == {"demo.shop.result"} and plain.events == {}


@settings(max_examples=300, deadline=None)
@given(
    st.sampled_from(formats.PER_ROW),
    st.integers(0, 5),
    st.lists(
        st.tuples(st.integers(0, 10**6), st.integers(0, 2), st.binary(max_size=6)), min_size=1, max_size=4
    ),
    st.booleans(),
)
def test_whatever_its_bytes_a_per_row_record_gives_changes_or_a_bad_row_naming_it(
    fmt, pick, edits, configured
):
    """A record the encoder did not write (bytes changed, cut or added) is a BadRowError naming it, never
    another exception: the consumer sets it aside and goes on."""
    records = [r for r in encode(fmt, changes()[pick]) if r.value is not None]
    value = bytearray(records[0].value or b"")
    for at, kind, data in edits:
        p = at % len(value) if value else 0
        if kind == 0:
            value[p : p + len(data)] = data
        elif kind == 1:
            del value[p : p + len(data) + 1]
        else:
            value[p:p] = data
    reader = RowReader(KEYS, {T: fmt} if configured else {}, REGISTRY.schema)
    try:
        reader.read(records[0].key, bytes(value), records[0].headers, f"{TOPIC}/0@3")
    except BadRowError as e:
        assert str(e).startswith(f"{TOPIC}/0@3: ")


def test_a_registry_that_cannot_be_reached_stops_the_consumer_and_sets_nothing_aside(tmp_path):
    """Its records are not bad: the consumer stops (exit 3 in dbus replicate) and reads them again."""

    def down(schema_id: int) -> str:
        raise EndpointError("registry http://127.0.0.1:1: unreachable")

    records = [r for ch in row_changes(messages()[0]) for r in encode("avro", ch)]
    dead = tmp_path / "dead.jsonl"
    config = ConsumerConfig(
        "demo", {"golden.cdc_types": ("id",)}, bootstrap=False, dead_letter_file=str(dead)
    )
    topics = Topics({T: TOPIC}, "demo_ctrl", {T: "avro"})
    sink = Sink()
    consumer = Consumer(config, sink, sink, Kafka({TOPIC: as_topic(records)}), topics, row_schemas=down)
    consumer.start()
    with pytest.raises(EndpointError, match="unreachable"):
        consumer.poll_once()
    assert not dead.exists() and sink.saved is None
