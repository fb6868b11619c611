"""Masking of log tables (logprocessor/masking.py): the source's ``masking`` rules applied to the UMS data
messages of the log tables they match, by ``ums.masking`` (the database tables' code), in the processor's
real Spark projection (``job.process`` then ``masking.mask_outputs``)."""

from __future__ import annotations

import hashlib
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dbuslib.config import LogSource, MaskRule, load_config
from logprocessor.grammar import Column, TableRules
from logprocessor.logums import (
    LogRow,
    data_key,
    heartbeat_key,
    heartbeat_message,
    log_namespace,
    message_json,
)
from logprocessor.masking import log_masks, mask_json, read_message, table_masks
from ums.encoding import to_json
from ums.masking import compile_rules

SCHEMA = "applog_schema"
COLUMNS = (Column("log_time", "datetime"), Column("user", "string"), Column("amount", "double"))
TABLE = TableRules("orders", 2, (), COLUMNS)
NS = log_namespace("log_rsyslog", "applog", SCHEMA, "orders", 2, "app-01_prod")
RULES = {f"{SCHEMA}.ord*": {"user": MaskRule(type="md5", salt="pepper"), "amount": MaskRule(type="default")}}


def _rows(values: list[tuple[str | None, str | None, str | None]]) -> list[LogRow]:
    return [LogRow(0, 4711, i, 1795947330000, v) for i, v in enumerate(values)]


def _masks():
    return table_masks(compile_rules(RULES), SCHEMA, [TABLE])


def test_a_masked_column_is_encoded_and_its_values_masked_as_for_a_database_table():
    text = message_json(NS, COLUMNS, _rows([("2026-11-25 01:00:00", "alice", "12.5")]), "UTC")
    masked = json.loads(mask_json(text, _masks()["orders"]))
    fields = {f["name"]: f for f in masked["schema"]["fields"]}
    assert fields["user"]["encoded"] is True and fields["amount"]["encoded"] is True
    assert fields["log_time"]["encoded"] is False and fields["ums_id_"]["encoded"] is False
    [row] = [p["tuple"] for p in masked["payload"]]
    assert row[5] == hashlib.md5(b"alicepepper").hexdigest(), "md5 of the value and the salt"
    assert row[6] == 0.0, "default: a DOUBLE's default"
    assert row[:5] == json.loads(text)["payload"][0]["tuple"][:5], "system fields and log_time untouched"


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.one_of(st.none(), st.text(max_size=8)),
            st.one_of(st.none(), st.text(max_size=12)),
            st.one_of(st.none(), st.floats(allow_nan=False, allow_infinity=False).map(repr)),
        ),
        min_size=1,
        max_size=4,
    )
)
def test_mask_json_is_the_masks_fields_and_rows_of_the_message(values):
    """Whatever the rows: the masked text is the message with ``TableMask``'s fields and rows (the
    appender's calls), NULL stays NULL, and a masked value never equals a clear non-default one."""
    mask = _masks()["orders"]
    text = message_json(NS, COLUMNS, _rows(values), "UTC")
    message = read_message(text)
    masked = read_message(mask_json(text, mask))
    assert to_json(message) == text, "read back as written"
    assert masked.schema.fields == mask.apply_fields(message.schema.fields)
    assert masked.payload == tuple(mask.apply_row(r) for r in message.payload)
    for clear, out in zip(message.payload, masked.payload, strict=True):
        assert (clear[5] is None) == (out[5] is None)
        assert clear[5] is None or out[5] != clear[5]


def test_heartbeats_and_unmatched_tables_are_left_alone():
    beat = to_json(heartbeat_message(NS, 0, 4711, 1795947330000, "UTC"))
    assert mask_json(beat, _masks()["orders"]) == beat
    other = TableRules("http_access", 1, (), COLUMNS)
    assert table_masks(compile_rules(RULES), SCHEMA, [other]) == {}
    assert log_masks({}, "log_rsyslog", "applog", SCHEMA, [TABLE]) is None
    assert log_masks(RULES, "log_rsyslog", "applog", SCHEMA, [other]) is None
    found = log_masks(RULES, "log_rsyslog", "applog", SCHEMA, [TABLE, other])
    assert found is not None and set(found.tables) == {"orders"}
    assert found.table_of(data_key(NS, 1795947330000)) == "orders"
    beat_key = heartbeat_key(NS, 1795947330000, 1795947330000)
    assert found.table_of(beat_key) is None and found.table_of("app-01_prod") is None


# ---------------------------------------------------------------- in the processor's Spark projection


@pytest.fixture(scope="module")
def spark():
    from tests.unit.jvm_jar import spark_session

    return spark_session("test_log_masking", "dbus.jvm.LogUmsUdf")


def test_the_processor_masks_the_messages_of_masked_tables_only(spark):
    """The demo's two tables over bench records: ``app_orders`` masked (``req_id`` md5, ``amount`` default),
    ``http_access`` not; every masked message is the unmasked one through ``mask_json``, every other output
    row is byte for byte the unmasked projection's."""
    from bench.logprocessor import DS, bench_config, frame, rule_set
    from logprocessor import job
    from logprocessor.masking import mask_outputs

    cfg = bench_config(load_config())
    rules = rule_set(cfg)
    schema = rules.schema
    masking = {
        f"{schema}.app_orders": {"req_id": MaskRule(type="md5", salt="s"), "amount": MaskRule(type="default")}
    }
    src = LogSource(masking=masking)
    cfg = cfg.model_copy(update={"log_sources": {**cfg.log_sources, DS: src}})
    masks = log_masks(src.masking, src.type, DS, schema, rules.tables)
    assert masks is not None and len(masks.tables) == 1
    raw = frame(spark, 300)
    plain = job.process(raw, cfg, DS, rules).select("topic", "key", "value").collect()
    masked = mask_outputs(job.process(raw, cfg, DS, rules), masks).select("topic", "key", "value").collect()
    assert len(plain) == len(masked) >= 100  # the 100 unknown lines, the tables' messages (many rows each)
    [mask] = masks.compile().values()
    seen = 0
    for a, b in zip(plain, masked, strict=True):
        assert (a.topic, a.key) == (b.topic, b.key)
        if masks.table_of(_text(a.key)) == "app_orders":
            seen += len(json.loads(_text(a.value))["payload"])
            assert _text(b.value) == mask_json(_text(a.value), mask) != _text(a.value)
            assert '"encoded":true' in _text(b.value)
        else:
            assert b.value == a.value
    assert seen == 100  # every app_orders row


def _text(value):
    return value.decode() if isinstance(value, (bytes, bytearray)) else value
