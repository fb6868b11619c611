"""A reload's switch offsets (logprocessor/switch.py; issue #29, acceptance 6's core): every line before a
partition's switch offset is shaped by the rule set it replaced, every line from it by the new one, whatever
the restarted query reads again. The pure choices (``rules_at``, ``switch_at``, ``still_needed``, ``passed``,
the checkpoint's offset log read), the JVM's choice (``LogRecordUdf``/``LogBatch`` with ``earlier``: the
outputs of each record exactly those of the rule set its offset picks), and masking of a replaced version's
messages by their own fields."""

from __future__ import annotations

import json

import jvm_jar
import pytest
from hypothesis import given
from hypothesis import strategies as st

from dbuslib.config import DbusConfig, LogProcessorSettings, LogSource, MaskRule, load_config
from logprocessor.grammar import TableRules, groups_from_json, save_as_columns
from logprocessor.logums import LogRow, build_message, log_namespace
from logprocessor.masking import log_masks, mask_message
from logprocessor.rules import RuleSet
from logprocessor.switch import (
    Earlier,
    committed_end,
    passed,
    planned_end,
    rules_at,
    source_offsets,
    start_offsets,
    still_needed,
    switch_at,
)

DS = "sw"
SCHEMA = f"{DS}_schema"


def _orders(amount_type: str) -> list[dict]:
    rules = [
        ("filter", [{"ruleScope": "0", "ruleParamter": "order=", "ruleOperate": "==", "ruleType": "string"}]),
        ("toIndex", [{"ruleScope": "0", "ruleParamter": "message"}]),
        ("regexExtract", [{"ruleScope": "0", "ruleParamter": r"order=(\d+) amount=([\d.]+)"}]),
        (
            "saveAs",
            [
                {"ruleScope": "0", "name": "order_id", "type": "LONG"},
                {"ruleScope": "1", "name": "amount", "type": amount_type},
            ],
        ),
    ]
    return [
        {"groupName": "g", "rules": [{"ruleTypeName": op, "ruleGrammar": json.dumps(g)} for op, g in rules]}
    ]


def rule_set(version: int, amount_type: str) -> RuleSet:
    groups = groups_from_json(json.dumps(_orders(amount_type)))
    return RuleSet(DS, SCHEMA, (TableRules("orders", version, groups, save_as_columns(groups[0])),))


V1, V2, V3 = rule_set(1, "DOUBLE"), rule_set(2, "STRING"), rule_set(3, "DOUBLE")


# ---------------------------------------------------------------- pure


def test_a_line_takes_the_oldest_set_whose_switch_is_past_it():
    earlier = (Earlier(V1, {0: 10, 1: 4}), Earlier(V2, {0: 20, 1: 9}))
    assert [rules_at(earlier, V3, 0, o).tables[0].version for o in (0, 9, 10, 19, 20, 99)] == [
        1,
        1,
        2,
        2,
        3,
        3,
    ]
    assert [rules_at(earlier, V3, 1, o).tables[0].version for o in (3, 4, 8, 9)] == [1, 2, 2, 3]
    assert rules_at(earlier, V3, 2, 0) is V3  # a partition the old query never read: the new rules


@given(
    st.dictionaries(st.integers(0, 3), st.integers(0, 10**6)),
    st.one_of(st.none(), st.dictionaries(st.integers(0, 3), st.integers(0, 10**6))),
)
def test_the_switch_is_past_everything_the_old_query_finished_or_planned(finished, planned):
    switch = switch_at(finished, planned)
    assert set(switch) == set(finished) | set(planned or {})
    for p, o in [*finished.items(), *(planned or {}).items()]:
        assert switch[p] >= o


def test_an_earlier_set_is_kept_while_a_restart_may_read_its_lines():
    a, b = Earlier(V1, {0: 10, 1: 4}), Earlier(V2, {0: 20, 1: 9})
    assert still_needed((a, b), None) == (a, b)  # the checkpoint unknown (not a local folder): all kept
    assert still_needed((a, b), {0: 10, 1: 3}) == (a, b)
    assert still_needed((a, b), {0: 10, 1: 4}) == (b,)
    assert still_needed((a, b), {0: 25, 1: 9}) == ()
    assert passed({0: 10, 1: 4}, {0: 10, 1: 7}) and not passed({0: 10, 1: 4}, {0: 9, 1: 7})
    assert not passed({0: 10}, {1: 50})


def test_the_offsets_of_the_checkpoint_logs(tmp_path):
    assert planned_end(str(tmp_path)) is None and committed_end(str(tmp_path)) is None
    (tmp_path / "offsets").mkdir()
    (tmp_path / "commits").mkdir()
    for batch, offsets in ((0, {"0": 5, "1": 2}), (1, {"0": 23773, "1": 23690})):
        meta = '{"batchWatermarkMs":0,"batchTimestampMs":1,"conf":{}}'
        (tmp_path / "offsets" / str(batch)).write_text(f"v1\n{meta}\n{json.dumps({'sw': offsets})}")
    (tmp_path / "commits" / "0").write_text('v1\n{"nextBatchWatermarkMs":0}')
    (tmp_path / "offsets" / ".1.crc").write_text("")
    assert planned_end(str(tmp_path)) == {0: 23773, 1: 23690}
    assert committed_end(str(tmp_path)) == {0: 5, 1: 2}
    assert committed_end(f"file://{tmp_path}") == {0: 5, 1: 2}
    assert committed_end("hdfs://nn/checkpoints/x") is None
    with pytest.raises(ValueError, match="no source line"):
        source_offsets("v1\n{}")


def test_a_progress_start_offsets():
    progress = {"sources": [{"startOffset": {"sw": {"0": 7, "1": 3}}, "endOffset": {"sw": {"0": 9, "1": 3}}}]}
    assert start_offsets(progress) == {0: 7, 1: 3}
    assert start_offsets({"sources": [{"startOffset": json.dumps({"sw": {"0": 1}})}]}) == {0: 1}
    assert start_offsets({"sources": [{"startOffset": None}]}) is None
    assert start_offsets({}) is None


def test_a_replaced_version_is_masked_by_its_own_fields():
    """v1 (amount DOUBLE, masked) replaced by a v2 without amount: v1's messages read again after the
    switch are still masked, at amount's own position."""
    masking = {f"{SCHEMA}.orders": {"amount": MaskRule(type="default")}}
    groups = groups_from_json(json.dumps(_orders("DOUBLE")))
    no_amount = (save_as_columns(groups[0])[0],)
    v2 = TableRules("orders", 2, groups, no_amount)
    masks = log_masks(masking, "log_rsyslog", DS, SCHEMA, (v2, *V1.tables))
    assert masks is not None
    mask = masks.compile()["orders"]
    ns = log_namespace("log_rsyslog", DS, SCHEMA, "orders", 1, "vm")
    message = build_message(ns, V1.tables[0].columns, [LogRow(0, 5, 0, 0, ("7", "45.5"))], "UTC")
    masked = mask_message(message, mask)
    assert [f.encoded for f in masked.schema.fields][-2:] == [False, True]
    assert masked.payload[0][-2:] == ("7", 0.0)


# ---------------------------------------------------------------- the JVM


def _config() -> DbusConfig:
    cfg = load_config()
    src = LogSource(type="log_rsyslog", processor=LogProcessorSettings(message_records=1))
    return cfg.model_copy(update={"log_sources": {**cfg.log_sources, DS: src}})


def _record(n: int, heartbeat: bool = False) -> bytes:
    message = (
        json.dumps({"type": "dbus-heartbeat", "@timestamp": "2026-11-29T05:00:00.000Z"})
        if heartbeat
        else f"OrderService order={n} amount={n}.50"
    )
    doc = {"host": "vm", "path": "/srv/a.log", "timestamp": "2026-11-29T05:00:00.000Z", "message": message}
    return json.dumps(doc).encode()


@pytest.fixture(scope="module")
def spark():
    return jvm_jar.spark_session("test_logprocessor_switch", "dbus.jvm.LogRecordUdf")


def _raw(spark, records: list[tuple[int, int, bytes]]):
    from pyspark.sql import functions as F

    rows = [(v, b"k", p, o, 1_764_392_400_000) for p, o, v in records]
    return (
        spark.createDataFrame(rows, "value binary, key binary, partition int, offset bigint, ms bigint")
        .withColumn("timestamp", F.timestamp_millis("ms"))
        .withColumn("topic", F.lit(f"{DS}.raw"))
        .orderBy("partition", "offset")
        .coalesce(1)
    )


def _outputs(rows) -> list[tuple]:
    """(topic, key, value), sorted (a heartbeat's metric holds this moment's latency: left out)."""
    return sorted((r.topic, bytes(r.key), r.value) for r in rows)


@pytest.mark.jvm
@pytest.mark.parametrize("per_record", [False, True])
def test_the_jvm_shapes_each_record_by_the_set_its_offset_picks(spark, per_record):
    from logprocessor.job import process

    cfg = _config()
    records = [(p, o, _record(100 * p + o, heartbeat=o == 4)) for p in (0, 1, 2) for o in range(12)]
    earlier = (Earlier(V1, {0: 5, 1: 2}), Earlier(V2, {0: 8, 1: 9}))
    got = _outputs(process(_raw(spark, records), cfg, DS, V3, per_record, earlier).collect())
    expected: list = []
    for rules in (V1, V2, V3):  # the records of each set through that set alone
        mine = [(p, o, v) for p, o, v in records if rules_at(earlier, V3, p, o) is rules]
        expected += process(_raw(spark, mine), cfg, DS, rules, per_record).collect()
    assert got == _outputs(expected)
    versions = {}
    for topic, _, value in got:
        if topic.endswith(".result"):
            m = json.loads(value)
            if m["protocol"]["type"] == "data_increment_data":
                for t in m["payload"]:
                    versions[int(t["tuple"][3]) // 10**6] = int(m["schema"]["namespace"].split(".")[4])
    assert 4 not in versions  # offset 4 of every partition is a heartbeat: no row
    assert versions[0 * 10**13 + 5] == 2 and versions[0 * 10**13 + 8] == 3
    assert versions[1 * 10**13 + 1] == 1 and versions[1 * 10**13 + 2] == 2 and versions[1 * 10**13 + 9] == 3
    assert {versions[2 * 10**13 + o] for o in range(12) if o != 4} == {3}
