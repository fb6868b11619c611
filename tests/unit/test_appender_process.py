"""The appender's per-partition processing, on real captured raw records (tests/golden/records/14-16)."""

import json
from dataclasses import replace

from appender_cases import golden_record

from appender.convert import ConvertSettings
from appender.process import InRecord, Outputs, PartitionProcessor
from binlog import rawevent
from dbuslib.deadletter import DeadLetter
from dbuslib.metastore import Reason, Version
from ums import from_json

INSERT, UPDATE, DELETE = (
    golden_record(f"{n}.hex") for n in ("14_orders_insert", "15_orders_update", "16_orders_delete")
)


def processor(stored=None):
    stored = stored if stored is not None else {}
    return PartitionProcessor(
        settings=ConvertSettings("demo"),
        outputs=Outputs(result_topic=lambda s, t: f"demo.{s}.result", dead_letter_topic="demo.dlq"),
        history=lambda s, t: list(stored.get((s, t), [])),
        persist=lambda s, t, v: stored.setdefault((s, t), []).append(v) or v,
    ), stored


def run(p, *values):
    out = []
    for i, v in enumerate(values):
        out += list(p.process(InRecord("demo.dbus_unit_rowdecode", 0, i, b"k", v)))
    return out


def test_rows_become_ums_on_the_result_topic_under_version_0():
    p, stored = processor()
    out = run(p, INSERT, UPDATE, DELETE)
    assert {o.topic for o in out} == {"demo.dbus_unit_rowdecode.result"}
    messages = [from_json(o.value) for o in out]
    assert [m.payload[0][2] for m in messages] == ["i", "u", "d"]
    assert {str(m.schema.namespace) for m in messages} == {"mysql.demo.dbus_unit_rowdecode.orders.0.0.0"}
    assert [v.version for v in stored[("dbus_unit_rowdecode", "orders")]] == [0]
    assert out[0].key == b"dbus_unit_rowdecode.orders"
    assert dict(out[0].headers)["ums_key"].startswith(b"data_increment_data.mysql.demo.dbus_unit_rowdecode")


def test_incompatible_columns_terminate_the_old_version_first():
    older = Version(0, 1, (), Reason.FIRST)  # a version with other columns, valid from the start
    p, stored = processor({("dbus_unit_rowdecode", "orders"): [older]})
    out = run(p, INSERT)
    protocols = [json.loads(o.value)["protocol"]["type"] for o in out]
    assert protocols == ["data_increment_termination", "data_increment_data"]
    assert json.loads(out[0].value)["schema"]["namespace"].endswith(".orders.0.0.0")
    assert json.loads(out[1].value)["schema"]["namespace"].endswith(".orders.1.0.0")


def test_garbage_and_truncated_records_become_dead_letters_and_the_stream_goes_on():
    p, _ = processor()
    out = run(p, b"not a raw event", INSERT[:-30], INSERT)
    letters = [DeadLetter.from_json(o.value) for o in out if o.topic == "demo.dlq"]
    assert [d.code for d in letters] == ["RAW_BAD_RECORD", "RAW_UNDECODABLE"]
    assert letters[0].value == b"not a raw event" and letters[0].offset == 0
    assert [o.topic for o in out][-1] == "demo.dbus_unit_rowdecode.result"


def test_chunks_are_joined_before_decoding():
    p, _ = processor()
    chunks = [rawevent.encode(c) for c in rawevent.split(rawevent.decode(INSERT), 300)]
    assert len(chunks) > 1
    out = run(p, *chunks)
    assert len(out) == 1 and json.loads(out[0].value)["payload"][0]["tuple"][2] == "i"


def test_a_chunk_sequence_cut_by_a_batch_boundary_is_read_back():
    p, _ = processor()
    parts = rawevent.split(rawevent.decode(INSERT), 300)
    # what Kafka holds before this batch, with the record key the chunks were written with
    p.backfill = lambda rec, event: [replace(c, key=event.key) for c in parts[: event.chunk[0]]]
    out = run(p, *[rawevent.encode(c) for c in parts[2:]])
    assert len(out) == 1 and json.loads(out[0].value)["payload"][0]["tuple"][2] == "i"


def test_masked_columns_never_leave_in_clear():
    from dbuslib.config import MaskRule
    from ums.masking import compile_rules

    p, _ = processor()
    p.mask_plan = compile_rules(
        {
            "dbus_unit_rowdecode.orders": {
                "note": MaskRule(type="sha256", salt="s"),
                "region": MaskRule(type="default"),
            }
        }
    )
    out = run(p, INSERT)
    message = json.loads(out[0].value)
    fields = {f["name"]: f for f in message["schema"]["fields"]}
    assert fields["note"]["encoded"] and fields["region"]["encoded"] and not fields["id"]["encoded"]
    text = out[0].value.decode()
    assert "héllo" not in text and '"eu"' not in text and '"us"' not in text


def test_dead_letters_withhold_the_bytes_of_masked_tables():
    from dbuslib.config import MaskRule
    from ums.masking import compile_rules

    p, _ = processor()
    p.mask_plan = compile_rules({"dbus_unit_rowdecode.orders": {"note": MaskRule(type="default")}})
    out = [
        o
        for i, v in enumerate([INSERT[:-30], b"garbage"])
        for o in p.process(InRecord("t", 0, i, b"dbus_unit_rowdecode.orders" if i == 0 else None, v))
    ]
    letters = [DeadLetter.from_json(o.value) for o in out]
    assert [(d.value, bool(d.withheld)) for d in letters] == [(None, True), (None, True)]
    assert letters[0].offset == 0 and letters[1].offset == 1  # still pointing at the originals


def rendered_lines(event) -> list[bytes]:
    """What the JVM decoder writes (tests/unit/test_jvm_rows.py holds it to this)."""
    from binlog.rows import decode_rows
    from ums.encoding import dumps_compact
    from ums.values import encode_column

    d = decode_rows(event)
    images = [i for r in d.rows for i in (r.before, r.after) if i is not None]
    return [
        ",".join(dumps_compact(encode_column(c, im[c.name])) for c in d.columns).encode() for im in images
    ]


def test_rows_rendered_by_the_jvm_give_the_same_records_as_the_python_path():
    older = Version(0, 1, (), Reason.FIRST)  # a version change on the way: termination first, both paths
    for value in (INSERT, UPDATE, DELETE):
        lines = b"\n".join(rendered_lines(rawevent.decode(value)))
        p, _ = processor({("dbus_unit_rowdecode", "orders"): [older]})
        q, _ = processor({("dbus_unit_rowdecode", "orders"): [older]})
        python = list(p.process(InRecord("t", 0, 0, b"k", value)))
        jvm = list(q.process(InRecord("t", 0, 0, b"k", value), rendered=lines))
        assert jvm == python and len(python) == 2


def test_masked_tables_take_the_jvm_text_and_mask_it():
    from dbuslib.config import MaskRule
    from ums.masking import compile_rules

    rules = {"dbus_unit_rowdecode.orders": {"note": MaskRule(type="sha256", salt="s")}}
    p, _ = processor()
    p.mask_plan = compile_rules(rules)
    q, _ = processor()
    q.mask_plan = compile_rules(rules)
    for value in (INSERT, UPDATE, DELETE):
        lines = b"\n".join(rendered_lines(rawevent.decode(value)))
        jvm = list(p.process(InRecord("t", 0, 0, b"k", value), rendered=lines))
        assert jvm == list(q.process(InRecord("t", 0, 0, b"k", value)))  # the reference path
        assert "héllo" not in jvm[-1].value.decode() and json.loads(jvm[-1].value)["payload"]


def test_a_schema_change_sends_a_meta_sync_warning_on_the_global_control_topic():
    from ums.control import ControlType
    from ums.control import from_json as control_from_json

    older = Version(0, 1, (), Reason.FIRST)
    p, _ = processor({("dbus_unit_rowdecode", "orders"): [older]})
    p.outputs = replace(p.outputs, global_control_topic="global_ctrl_topic")
    out = run(p, INSERT)
    assert [o.topic for o in out] == [
        "demo.dbus_unit_rowdecode.result",
        "global_ctrl_topic",
        "demo.dbus_unit_rowdecode.result",
    ]
    warning = control_from_json(out[1].value)
    assert warning.type is ControlType.G_META_SYNC_WARNING and warning.from_ == "dbus-appender"
    assert out[1].key == b"G_META_SYNC_WARNING"
    payload = warning.payload
    assert (payload["datasource"], payload["schema"], payload["table"], payload["version"]) == (
        "demo",
        "dbus_unit_rowdecode",
        "orders",
        1,
    )
    assert payload["before"] == [] and "id" in [c["name"] for c in payload["after"]]
    assert payload["compare-result"]["added"] == [c["name"] for c in payload["after"]]
    assert payload["compare-result"]["reason"] == "columns" and payload["tableId"] > 0


def test_the_first_version_of_a_table_sends_no_warning():
    p, _ = processor()
    p.outputs = replace(p.outputs, global_control_topic="global_ctrl_topic")
    assert {o.topic for o in run(p, INSERT)} == {"demo.dbus_unit_rowdecode.result"}


def test_version_span_rereading_and_rules_for_the_real_time_sidecar():
    """What appender.sidecar asks of a processor: the version a position belongs to and where the next one
    starts, the versions read again from the store, a new masking plan taken."""
    from appender.process import LONG_MAX

    key = ("dbus_unit_rowdecode", "orders")
    p, stored = processor()
    assert p.version_span(*key, 10) is None  # no version yet
    run(p, INSERT)
    first = stored[key][0]
    assert p.version_span(*key, first.since) == (first, LONG_MAX)
    assert p.version_span(*key, first.since - 1) is None
    assert p.reread_versions() is False  # the store holds what the processor holds
    later = Version(1, first.since + 1000, first.columns, Reason.TRUNCATE)
    stored[key].append(later)  # another process stored the next version
    assert p.reread_versions() is True
    assert p.version_span(*key, first.since) == (first, later.since)
    assert p.version_span(*key, later.since + 5) == (later, LONG_MAX)
    plan = object()
    assert p.use_rules(plan) is True and p.mask_plan is plan
    assert p.use_rules(plan) is False
