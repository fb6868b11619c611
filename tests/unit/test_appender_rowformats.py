"""The appender's per-row output formats (docs/appender.md, Per-row formats), on captured raw records.

``PartitionProcessor`` with ``Outputs.row_format`` set writes a per-row table's rows as one record per row
change (ums.formats), keyed by its primary key, on its result topic (here ``demo.<schema>.<table>``: a
topic per table), and its UMS heartbeats and terminations on ``demo.<schema>.events``. Records are
tests/golden/records/14-16 (``dbus_unit_rowdecode.orders``, key ``(region, id)``) and 08-10
(``dbus_unit_fastdecode.narrow``, key ``id``). ``ShapeFormat`` below is a stand-in format that writes the
``RowChange`` it is given as JSON, so the processor's part is checked apart from any real format's; the
real formats follow (debezium-json, canal-json, avro with a fake ``SchemaIds``).
"""

from __future__ import annotations

import json
import re
from dataclasses import replace

import pytest
from appender_cases import HB_SCHEMA, HB_TABLE, NOW, beat_row, golden_record, heartbeat
from records import DELETE, INSERT, UPDATE

from appender.convert import ConvertSettings, chunked, to_ums
from appender.process import InRecord, Outputs, OutRecord, PartitionProcessor
from binlog import rawevent
from binlog.heartbeat import HeartbeatTable
from binlog.rows import decode_rows
from dbuslib.deadletter import DeadLetter
from dbuslib.metastore import Reason, Version
from ums import from_json
from ums.formats import Record, SchemaRefused
from ums.rowchange import RowChange

ORDERS, NARROW = "dbus_unit_rowdecode", "dbus_unit_fastdecode"
NARROW_INSERT, NARROW_UPDATE, NARROW_DELETE = (
    golden_record(f"{n}.hex") for n in ("08_narrow_insert", "09_narrow_update", "10_narrow_delete")
)


class ShapeFormat:
    """A stand-in per-row format: key = the primary-key values as JSON (None without a key), value = the
    change as JSON; a tombstone after a delete; a key change as a delete, its tombstone and a create."""

    name = "shape"

    def __init__(self, refuse: set[str] = frozenset()) -> None:
        self.refuse = refuse  # tables whose schema "the registry" refuses

    def records(self, topic: str, change: RowChange) -> list[Record]:
        t = change.table
        if t.table in self.refuse:
            raise SchemaRefused(f"subject {topic}-value: incompatible with an earlier schema (BACKWARD)")
        if change.key_changed:
            return [
                *self.records(topic, replace(change, op="d", after=None)),
                *self.records(topic, replace(change, op="c", before=None)),
            ]
        image = change.after if change.op != "d" else change.before
        names = [f.name for f in t.fields]
        key = json.dumps([image[names.index(k)] for k in t.primary_key]).encode() if t.primary_key else None
        value = json.dumps(
            {"op": change.op, "before": change.before, "after": change.after, "table": t.table}
        )
        out = [Record(key, value.encode(), (("ums_uid_", change.ums_uid.encode()),))]
        return out + [Record(key, None)] if change.op == "d" else out


def processor(fmt=None, tables=None, stored=None, mask=None, hb=False, before=False):
    """A processor writing ``tables`` (all when None) in a per-row format; ``fmt`` the Format object."""
    stored = stored if stored is not None else {}
    fmt = fmt or ShapeFormat()
    outputs = Outputs(
        result_topic=lambda s, t: f"demo.{s}.{t}",
        dead_letter_topic="demo.dlq",
        global_control_topic="global_ctrl_topic",
        row_format=lambda s, t: "shape" if tables is None or t in tables else None,
        events_topic=lambda s: f"demo.{s}.events",
        formatter=lambda name: fmt,
    )
    return PartitionProcessor(
        settings=ConvertSettings("demo", before_update_image=before),
        outputs=outputs,
        history=lambda s, t: list(stored.get((s, t), [])),
        persist=lambda s, t, v: stored.setdefault((s, t), []).append(v) or v,
        mask_plan=mask,
        heartbeat=HeartbeatTable(HB_SCHEMA, HB_TABLE, lambda schema: f"demo.{schema}") if hb else None,
        clock=lambda: NOW,
    )


def run(p, *values, topic=f"demo.{ORDERS}", rendered=None):
    rendered = rendered or [None] * len(values)
    return [
        o
        for i, (v, r) in enumerate(zip(values, rendered, strict=True))
        for o in p.process(InRecord(topic, 0, i, b"k", v), r)
    ]


def data(out, table="orders", schema=ORDERS):
    return [o for o in out if o.topic == f"demo.{schema}.{table}"]


def lines_of(raw: bytes) -> bytes:
    """What the JVM decoder renders for a rows record (``dbus_rows``): per row image its UMS values as
    JSON joined by ``,``, an update's before and after alternating (made here from the reference path)."""
    event = rawevent.decode(raw)
    rows = decode_rows(event)
    (message,) = to_ums(event.header, rows, 0, ConvertSettings("demo", before_update_image=True))
    users = json.loads(json.dumps([list(t[4:]) for t in message.payload], default=str))
    return b"\n".join(json.dumps(u, ensure_ascii=False)[1:-1].encode() for u in users)


# ---------------------------------------------------------------- the processor's part


def test_rows_become_one_record_per_row_keyed_by_primary_key_on_the_tables_topic():
    out = run(processor(), INSERT, UPDATE, DELETE)
    assert {o.topic for o in out} == {f"demo.{ORDERS}.orders"}
    values = [json.loads(o.value) if o.value is not None else None for o in out]
    assert [v and v["op"] for v in values] == ["c", "c", "u", "d", None]  # the delete's tombstone last
    assert [o.key for o in out] == [
        b'["eu", "1"]',
        b'["us", "4294967295"]',
        b'["eu", "1"]',
        *[b'["us", "4294967295"]'] * 2,
    ]
    # an update carries its before image although ums.before_update_image is off
    assert values[2]["before"][3] == "12.50" and values[2]["after"][3] == "-0.01"
    assert all(dict(o.headers)["ums_key"].startswith(b"data_increment_data.mysql.demo.") for o in out)


def test_the_jvms_lines_give_the_same_records_as_the_reference_decoder():
    raws = (INSERT, UPDATE, DELETE, NARROW_INSERT, NARROW_UPDATE, NARROW_DELETE)
    reference = run(processor(), *raws)
    rendered = run(processor(), *raws, rendered=[lines_of(r) for r in raws])
    assert rendered == reference and len(reference) == 2 + 1 + 2 + 4 + 2 + 2


def test_a_primary_key_change_is_a_delete_of_the_old_key_and_a_create_of_the_new():
    before_after = lines_of(UPDATE).split(b"\n")
    moved = before_after[1].replace(b'"1", "eu"', b'"2", "eu"', 1)
    assert moved != before_after[1]
    out = run(processor(), UPDATE, rendered=[before_after[0] + b"\n" + moved])
    assert [(o.key, o.value and json.loads(o.value)["op"]) for o in out] == [
        (b'["eu", "1"]', "d"),
        (b'["eu", "1"]', None),
        (b'["eu", "2"]', "c"),
    ]


def test_masked_columns_are_masked_in_every_image():
    from dbuslib.config import MaskRule
    from ums.masking import compile_rules

    mask = compile_rules({f"{ORDERS}.orders": {"note": MaskRule(type="sha256", salt="s")}})
    out = run(processor(mask=mask), INSERT, UPDATE, DELETE)
    text = b"".join(o.value or b"" for o in out).decode()
    assert "héllo" not in text and len(out) == 5
    update = json.loads(out[2].value)
    assert update["before"][2] == update["after"][2] and len(update["after"][2]) == 64  # a sha256, twice


def test_heartbeats_and_terminations_of_per_row_tables_go_to_the_events_topic():
    older = Version(0, 1, (), Reason.FIRST)  # a version with other columns: the insert opens version 1
    stored = {(ORDERS, "orders"): [older]}
    p = processor(stored=stored, hb=True)
    out = run(p, INSERT, heartbeat(beat_row(time_ms=NOW - 1500)))
    events = [o for o in out if o.topic == f"demo.{ORDERS}.events"]
    assert [from_json(o.value).protocol.value for o in events] == [
        "data_increment_termination",
        "data_increment_heartbeat",
    ]
    assert len(data(out)) == 2 and [o.topic for o in out if o.topic == "global_ctrl_topic"]  # meta warning
    assert len(p.beats) == 1 and p.beats[0].rows == 2  # the heartbeat's measurement as for UMS


def test_a_refused_schema_is_one_dead_letter_and_other_tables_go_on():
    p = processor(fmt=ShapeFormat(refuse={"orders"}))
    out = run(p, INSERT, NARROW_INSERT, UPDATE)
    letters = [DeadLetter.from_json(o.value) for o in out if o.topic == "demo.dlq"]
    assert [(d.code, d.offset) for d in letters] == [
        ("REGISTRY_SCHEMA_REFUSED", 0),
        ("REGISTRY_SCHEMA_REFUSED", 2),
    ]
    assert "incompatible with an earlier schema" in letters[0].error and "orders" in letters[0].error
    assert letters[0].value == INSERT  # nothing masked: the record's bytes go with it
    assert len(data(out, "narrow", NARROW)) == 4


def test_ums_tables_beside_per_row_ones_are_written_as_before():
    ums_only = PartitionProcessor(
        settings=ConvertSettings("demo"),
        outputs=Outputs(result_topic=lambda s, t: f"demo.{s}.{t}", dead_letter_topic="demo.dlq"),
        history=lambda s, t: [],
        persist=lambda s, t, v: v,
    )
    raws = (INSERT, UPDATE, DELETE)
    mixed = run(processor(tables={"narrow"}), *raws)
    assert mixed == run(ums_only, *raws) and from_json(mixed[0].value).payload  # UMS, byte for byte
    assert mixed == run(processor(tables={"narrow"}), *raws, rendered=[None] * 3)


def test_a_table_without_primary_key_has_null_keys_and_tombstones_pass_the_chunker():
    def no_key(schema, table):
        return "shape"

    p = processor()
    p.outputs.row_format = no_key
    original = decode_rows

    import appender.process as process

    def keyless(event):
        return replace(original(event), primary_key=())

    process.decode_rows, saved = keyless, process.decode_rows
    try:
        out = run(p, INSERT, DELETE)
    finally:
        process.decode_rows = saved
    assert [o.key for o in out] == [None, None, None, None]
    assert list(chunked(out, 1 << 20)) == out  # a tombstone (value None) passes the chunker as it is
    assert isinstance(out[-1], OutRecord) and out[-1].value is None


def test_the_sidecar_gives_the_jvm_no_shape_for_per_row_tables():
    from ums import Namespace

    shape = decode_rows(rawevent.decode(INSERT))
    ns = Namespace("mysql", "demo", ORDERS, "orders", 0)
    assert processor().unmasked_text_prefix(shape, ns) is None
    assert processor(tables={"narrow"}).unmasked_text_prefix(shape, ns) is not None


@pytest.mark.parametrize("raw", [INSERT, UPDATE, DELETE])
def test_every_output_record_is_for_the_result_topic_of_its_table(raw):
    assert {o.topic for o in run(processor(), raw)} == {f"demo.{ORDERS}.orders"}


# ---------------------------------------------------------------- where a table's changes go


def _source(**output):
    from dbuslib.config import load_config

    src = load_config().source("demo")
    return src.model_copy(update={"output": src.output.model_copy(update=output)})


def test_result_topic_per_schema_or_per_table_and_events_topics():
    from dbuslib import topics

    per_table = _source(format="debezium-json", topic="table")
    assert topics.result_topic("demo", per_table, "shop", "orders") == "demo.shop.orders"
    assert topics.result_topic("demo", _source(), "shop", "orders") == "demo.shop.result"
    assert topics.events_topic("demo", per_table, "shöp") == "demo.sh_x00f6p.events"
    assert topics.row_format(per_table, "shop", "orders") == "debezium-json"
    assert topics.row_format(_source(), "shop", "orders") is None
    names = topics.source_topics("demo", per_table)
    assert "demo.shop.events" in names and "demo.shop.result" not in names
    assert "demo.shop.events" not in topics.source_topics("demo", _source())


def test_dbus_config_check_says_where_rows_go():
    from dbuslib import topics

    src = _source(format="debezium-json", topic="table", tables={"shop.audit*": "ums"})
    assert topics.describe_outputs("demo", src) == (
        "writes debezium-json to demo.<schema>.<table> (a topic per table, made when first written); "
        "ums for 'shop.audit*' to demo.<schema>.<table> (a topic per table, made when first written); "
        "UMS heartbeats and terminations of per-row tables to demo.<schema>.events"
    )
    assert topics.describe_outputs("demo", _source()) == "writes ums to demo.<schema>.result"


def test_the_appender_never_reads_its_own_table_or_events_topics():
    import re

    from dbuslib import topics

    src = _source(format="canal-json", topic="table")
    src = src.model_copy(update={"capture": src.capture.model_copy(update={"include": ("*.*",)})})
    pattern = topics.schema_topic_pattern("demo", src)
    assert re.fullmatch(pattern, "demo.shop")
    assert not re.fullmatch(pattern, "demo.shop.orders") and not re.fullmatch(pattern, "demo.shop.events")


def test_per_row_sources_stay_real_time_where_the_jvm_writes_them():
    from dbuslib.config import Source

    base = {"mysql": {"host": "h", "user": "u", "password": "p", "server_id": 7}}
    assert Source.model_validate(base).appender.trigger == "realtime"
    for fmt in ("debezium-json", "canal-json", "avro"):
        assert Source.model_validate({**base, "output": {"format": fmt}}).appender.trigger == "realtime"
    per_glob = {**base, "output": {"tables": {"shop.o*": "debezium-json"}}}
    assert Source.model_validate(per_glob).appender.trigger == "realtime"
    ums_avro = {**base, "ums": {"format": "avro"}}  # UMS in Avro takes the sidecar in real-time mode
    assert Source.model_validate(ums_avro).appender.trigger == "microbatch"
    chosen = {**base, "output": {"format": "avro"}, "appender": {"trigger": "microbatch"}}
    assert Source.model_validate(chosen).appender.trigger == "microbatch"


# ---------------------------------------------------------------- the real formats


class FakeRegistry:
    """A ``SchemaIds``/``SchemaLookup`` pair in memory; ``refuse``: subjects whose new schemas it refuses."""

    def __init__(self, refuse: frozenset[str] = frozenset()) -> None:
        self.refuse = refuse
        self.texts: dict[int, str] = {}
        self.ids: dict[tuple[str, str], int] = {}

    def schema_id(self, subject: str, text: str) -> int:
        if subject in self.refuse:
            raise SchemaRefused(f"{subject}: Schema being registered is incompatible with an earlier schema")
        if (subject, text) not in self.ids:
            self.ids[(subject, text)] = len(self.texts) + 1
            self.texts[len(self.texts) + 1] = text
        return self.ids[(subject, text)]


class Seen:
    """A format that remembers the changes it was given (what the records must decode back to)."""

    def __init__(self, inner) -> None:
        self.inner, self.changes = inner, []

    def records(self, topic: str, change: RowChange) -> list[Record]:
        self.changes.append(change)
        return self.inner.records(topic, change)


REAL = ("debezium-json", "canal-json", "avro")


def _lossy(name, image):
    """``image`` as a format gives it back: Debezium writes a date with a zero month or day as null
    (docs/formats.md); canal-json is exact."""
    if image is None or name == "canal-json":
        return image
    zero = re.compile(r"^\d{4}-(00-\d\d|\d\d-00)")
    return tuple(None if isinstance(v, str) and zero.match(v) else v for v in image)


@pytest.mark.parametrize("name", REAL)
def test_real_formats_decode_back_to_the_changes_keyed_by_primary_key(name):
    from ums.formats import FormatOptions, decode, formatter

    registry = FakeRegistry()
    seen = Seen(formatter(name, FormatOptions(), registry.schema_id if name == "avro" else None))
    raws = (INSERT, UPDATE, DELETE, NARROW_INSERT, NARROW_UPDATE, NARROW_DELETE)
    out = run(processor(fmt=seen), *raws, rendered=[lines_of(r) for r in raws])
    assert {o.topic for o in out} == {f"demo.{ORDERS}.orders", f"demo.{NARROW}.narrow"}
    decoded = [decode(name, o.key, o.value, o.headers, registry.texts.__getitem__) for o in out]
    changes = [c for c in decoded if c is not None]
    assert [(c.op, c.before, c.after, c.ums_uid) for c in changes] == [
        (c.op, _lossy(name, c.before), _lossy(name, c.after), c.ums_uid) for c in seen.changes
    ]
    assert [c.table.primary_key for c in changes] == [c.table.primary_key for c in seen.changes]
    at = seen.changes[0].at  # the raw header's coordinates (records.py's INSERT)
    assert (at.file, at.pos, at.server_id, at.gtid, at.ts_ms) == (
        "mariadb-bin.000007",
        2843119,
        1,
        "0-1-111",
        1795356395000,
    )
    tombstones = [i for i, c in enumerate(decoded) if c is None]
    assert [decoded[i - 1].op for i in tombstones] == ["d", "d"]  # one after each delete
    assert all(out[i].key == out[i - 1].key and out[i].value is None for i in tombstones)
    by_key = {}
    for o, c in zip(out, decoded, strict=True):
        if c is not None:
            image = c.after if c.op != "d" else c.before
            names = [f.name for f in c.table.fields]
            by_key.setdefault(o.key, set()).add(tuple(image[names.index(k)] for k in c.table.primary_key))
    assert all(len(pks) == 1 for pks in by_key.values()), "one key per primary-key value"
    assert len(by_key) == 2 + 4  # orders (eu, 1), (us, 4294967295); narrow 1..4


@pytest.mark.parametrize("name", REAL)
def test_real_formats_write_a_key_change_as_delete_and_create(name):
    from ums.formats import FormatOptions, decode, formatter

    registry = FakeRegistry()
    fmt = formatter(name, FormatOptions(), registry.schema_id if name == "avro" else None)
    before_after = lines_of(UPDATE).split(b"\n")
    moved = before_after[1].replace(b'"1", "eu"', b'"2", "eu"', 1)
    out = run(processor(fmt=fmt), UPDATE, rendered=[before_after[0] + b"\n" + moved])
    decoded = [decode(name, o.key, o.value, o.headers, registry.texts.__getitem__) for o in out]
    assert [c and c.op for c in decoded] == ["d", None, "c"]
    assert out[0].key == out[1].key != out[2].key


def test_avro_a_refused_subject_is_a_dead_letter_and_other_tables_go_on():
    from ums.formats import FormatOptions, formatter

    registry = FakeRegistry(refuse=frozenset({f"demo.{ORDERS}.orders-value", f"demo.{ORDERS}.orders-key"}))
    p = processor(fmt=formatter("avro", FormatOptions(), registry.schema_id))
    out = run(p, INSERT, NARROW_INSERT)
    letters = [DeadLetter.from_json(o.value) for o in out if o.topic == "demo.dlq"]
    assert [(d.code, d.offset) for d in letters] == [("REGISTRY_SCHEMA_REFUSED", 0)]
    assert "incompatible" in letters[0].error
    assert len(data(out, "narrow", NARROW)) == 4 and registry.texts


def test_a_registry_unreachable_past_its_retries_stops_the_stage():
    from dbuslib.retry import RetriesExhausted
    from ums.formats import FormatOptions, formatter

    def down(subject: str, text: str) -> int:
        raise RetriesExhausted("registry http://127.0.0.1:18081: register a schema: connection refused")

    p = processor(fmt=formatter("avro", FormatOptions(), down))
    with pytest.raises(RetriesExhausted):
        run(p, INSERT)  # not a dead letter: an endpoint down is not the record's fault
