"""The log processor's projection in one JVM call per record (``dbus.jvm.LogRecordUdf``, ``job.process``
with ``per_record``) gives what the Python references give, joined by tests/unit/log_oracle.py: the same
outputs, in the same order, byte for byte (topic, key, value; a dead letter's JSON compared parsed);
``dbus.jvm.LogBatch`` (``job.process``, the stage's form) gives the same with one record per chunk, and
with chunks of many records the same outputs but for the tables' messages, whose tuples are the same in
the same order in fewer messages; on every log type's corpus of tests/unit/log_corpus.py (golden and
seeded random records: malformed, not UTF-8, too large, heartbeats, keys given twice, surrogate escapes,
offsets past ``ums_id_``'s range), through a rule set with two tables that take rows (one with a DOUBLE),
a table that breaks on some lines (line errors), a table with no groups and an aborted one (heartbeats only),
lines no table takes (unknown); with multi_table on and off, and with masking (dead letters withheld); and
on the bench's rsyslog records through the demo's tables. Each output's ``metric`` (logprocessor/metrics.py)
agrees with the output it describes.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import jvm_jar
import log_oracle
import pytest
from log_corpus import HEARTBEAT_FILE, corpus

from dbuslib.config import (
    DbusConfig,
    LogHeartbeat,
    LogProcessorSettings,
    LogSource,
    LogUms,
    MaskRule,
    load_config,
)
from logprocessor.adapters import LOG_TYPES, KafkaRecord
from logprocessor.grammar import TableRules, groups_from_json, save_as_columns
from logprocessor.metrics import ERROR, HEARTBEAT, ROWS, UNKNOWN, parse_metric
from logprocessor.rules import RuleSet

pytestmark = pytest.mark.jvm  # needs a JDK and the pyspark jars: `pytest -m "not jvm"` leaves it out

DS = "rec"
SCHEMA = "value binary, key binary, partition int, offset bigint, ms bigint"


@pytest.fixture(scope="module")
def spark():
    session = jvm_jar.spark_session("test_record_jvm", "dbus.jvm.LogRecordUdf")
    zone = session.conf.get("spark.sql.session.timeZone")
    session.conf.set("spark.sql.session.timeZone", "America/New_York")  # nothing may depend on it
    yield session
    session.conf.set("spark.sql.session.timeZone", zone)


def _group(name: str, rules: list[tuple[str, list[dict[str, str]]]]) -> dict[str, object]:
    return {
        "groupName": name,
        "rules": [{"ruleTypeName": op, "ruleGrammar": json.dumps(g)} for op, g in rules],
    }


HOST_RX = r'"host"\s*:\s*"([^"\\]*)"(?:.*?([-0-9]+\.[0-9]+(?:[eE][-+]?[0-9]+)?))?'
BY_HOST = [
    _group(
        "hosts",
        [
            (
                "filter",
                [{"ruleScope": "0", "ruleParamter": "host", "ruleOperate": "==", "ruleType": "regex"}],
            ),
            ("regexExtract", [{"ruleScope": "0", "ruleParamter": HOST_RX}]),
            (
                "saveAs",
                [
                    {"ruleScope": "0", "name": "host", "type": "STRING"},
                    {"ruleScope": "1", "name": "amount", "type": "DOUBLE"},
                ],
            ),
        ],
    )
]
MESSAGES = [  # toIndex breaks on a line that is not a JSON object (trailing text, a shipper's own form)
    _group(
        "messages",
        [
            (
                "filter",
                [{"ruleScope": "0", "ruleParamter": "message", "ruleOperate": "==", "ruleType": "regex"}],
            ),
            ("toIndex", [{"ruleScope": "0", "ruleParamter": "message"}]),
            ("saveAs", [{"ruleScope": "0", "name": "message", "type": "STRING"}]),
        ],
    )
]


def _table(name: str, version: int, doc: list[dict[str, object]]) -> TableRules:
    groups = groups_from_json(json.dumps(doc))
    return TableRules(name, version, groups, save_as_columns(groups[0]))


def _rules() -> RuleSet:
    tables = (_table("by_host", 2, BY_HOST), _table("messages", 1, MESSAGES), TableRules("empty", 0, ()))
    return RuleSet(DS, f"{DS}_schema", tables, aborted=(TableRules("gone", 3, ()),))


def _config(source: LogSource) -> DbusConfig:
    cfg = load_config()
    return cfg.model_copy(update={"log_sources": {**cfg.log_sources, DS: source}})


def _source(log_type: str, multi: bool = True, masked: bool = False) -> LogSource:
    return LogSource(
        type=log_type,
        host="json.host" if log_type == "log_json" else None,
        ums=LogUms(timezone="Asia/Shanghai"),
        processor=LogProcessorSettings(max_line_bytes=2048, multi_table=multi),
        heartbeat=LogHeartbeat(file=Path(HEARTBEAT_FILE)),  # log_rsyslog: heartbeats from it only
        masking={f"{DS}_schema.by_host": {"host": MaskRule(type="md5")}} if masked else {},
    )


def _frame(spark, records: list[KafkaRecord]):
    from pyspark.sql import functions as F

    rows = [(r.value, r.key, r.partition, r.offset, r.timestamp_ms) for r in records]
    return (
        spark.createDataFrame(rows, SCHEMA)
        .withColumn("timestamp", F.timestamp_millis("ms"))
        .withColumn("topic", F.lit(RAW_TOPIC))
        .orderBy("offset")
    )


def _triples(rows) -> list[tuple]:
    return [(r.topic, None if r.key is None else bytes(r.key), r.value) for r in rows]


def _assert_same(want: list[tuple], got: list[tuple], what: str) -> None:
    differ = [(i, w, g) for i, (w, g) in enumerate(zip(want, got, strict=False)) if w != g]
    assert len(got) == len(want) and not differ, (
        f"{what}: {len(want)} outputs and {len(got)}; first differences:\n"
        + "\n".join(f"#{i}\n  want: {w}\n  got:  {g}" for i, w, g in differ[:3])
    )


def _with_message_records(cfg: DbusConfig, n: int) -> DbusConfig:
    src = cfg.log_source(DS)
    processor = src.processor.model_copy(update={"message_records": n})
    return cfg.model_copy(update={"log_sources": {DS: src.model_copy(update={"processor": processor})}})


RAW_TOPIC = f"{DS}.raw"


def _oracle(cfg: DbusConfig, ds: str, rules: RuleSet, records: list[KafkaRecord]) -> list[tuple]:
    """log_oracle's outputs of ``records`` in the frame's order (by offset), a dead letter's JSON parsed."""
    src = cfg.log_source(ds)
    out = []
    for r in sorted(records, key=lambda r: r.offset):
        out += log_oracle.outputs(r, src, ds, rules, RAW_TOPIC, cfg.path.parent)
    return _comparable(src, ds, out)


# past this, the JSON parsers' own words (Python's json, Jackson) differ
NOT_JSON = re.compile(r"not JSON: .*")


def _letter(value: str) -> dict:
    letter = json.loads(value)
    letter["error"] = NOT_JSON.sub("not JSON: ...", letter["error"])
    return letter


def _comparable(src: LogSource, ds: str, triples: list[tuple]) -> list[tuple]:
    """The triples with each dead letter's JSON parsed, its error cut where the JSON parsers' words begin."""
    dlq = src.topics.name("dead_letter", ds)
    return [(t, k, _letter(v) if t == dlq else v) for t, k, v in triples]


def _compare(spark, cfg: DbusConfig, rules: RuleSet, records: list[KafkaRecord]) -> list:
    """The projections' outputs, asserted equal: the Python oracle, one JVM call per record, ``LogBatch`` with
    one record per chunk; then ``LogBatch`` with chunks of 50 records gives the same tuples in fewer
    messages. The per-record JVM rows (with ``metric``) returned."""
    from logprocessor.job import process

    raw = _frame(spark, records)
    want = _oracle(cfg, DS, rules, records)
    before = int(time.time() * 1000)
    jvm = process(raw, cfg, DS, rules, per_record=True).collect()
    one = process(raw.coalesce(1), _with_message_records(cfg, 1), DS, rules).collect()
    chunked = process(raw.coalesce(1), _with_message_records(cfg, 50), DS, rules).collect()
    after = int(time.time() * 1000)
    src = cfg.log_source(DS)
    _assert_same(want, _comparable(src, DS, _triples(jvm)), "the Python oracle, the JVM per record")
    _assert_same(_triples(jvm), _triples(one), "the JVM per record, LogBatch by 1 record")
    _assert_same_tuples(src, DS, jvm, chunked)
    for row in [*jvm, *chunked]:
        _check_metric(src, row, before, after)
    return jvm


def _assert_same_tuples(src: LogSource, ds: str, per_record: list, chunked: list) -> None:
    """The same outputs but the tables' data messages, whose tuples are, per topic and namespace, the same
    in the same order, in fewer messages (when some namespace had two); each message keyed by its namespace
    and the event time of its first tuple, the time of that tuple's record."""

    def split(rows) -> tuple[list, dict[tuple, list], dict[str, int]]:
        others, tuples, first_ms = [], {}, {}
        dead_letters = src.topics.name("dead_letter", ds)
        for r in rows:
            key = None if r.key is None else bytes(r.key)
            if r.topic != dead_letters and (key or b"").startswith(b"data_increment_data."):
                m = json.loads(r.value)
                ns = m["schema"]["namespace"]
                ms = int(key.decode().removesuffix(".wh_placeholder").rsplit(".", 1)[1])
                assert key.decode() == f"data_increment_data.{ns}.{ms}.wh_placeholder", key
                tuples.setdefault((r.topic, ns), []).append([t["tuple"] for t in m["payload"]])
                first_ms[json.dumps(m["payload"][0]["tuple"])] = ms
            else:
                others.append((r.topic, key, r.value))
        return others, tuples, first_ms

    others_1, messages_1, ms_1 = split(per_record)
    others_n, messages_n, ms_n = split(chunked)
    assert sorted(others_n, key=repr) == sorted(others_1, key=repr)
    flat = {k: [t for m in v for t in m] for k, v in messages_1.items()}
    assert {k: [t for m in v for t in m] for k, v in messages_n.items()} == flat
    assert all(len(messages_n[k]) <= len(v) for k, v in messages_1.items())
    if any(len(v) > 1 for v in messages_1.values()):
        assert sum(map(len, messages_n.values())) < sum(map(len, messages_1.values()))
    assert all(ms == ms_1[t] for t, ms in ms_n.items()), "a message's key: not its first tuple's record time"


def _check_metric(src: LogSource, row, before: int, after: int) -> None:
    m = parse_metric(row.metric)
    assert m is not None, row
    if row.topic == src.topics.name("unknown", DS):
        assert (m.kind, m.host, m.name, m.n) == (UNKNOWN, bytes(row.key).decode(), "", 1), row
    elif row.topic == src.topics.name("dead_letter", DS):
        assert (m.kind, m.name, m.n) == (ERROR, json.loads(row.value)["code"], 1), row
    else:
        key = bytes(row.key).decode("utf-8", "replace")
        host = key.split(".")[6].replace("%2E", ".").replace("%25", "%")
        table = key.split(".")[4]
        if key.startswith("data_increment_heartbeat."):
            own = int(key.split(".")[8].split("|")[0])
            assert (m.kind, m.name) == (HEARTBEAT, table), row
            assert before - own <= m.n <= after - own, (row, before, after)
        else:
            tuples = len(json.loads(row.value)["payload"])
            assert (m.kind, m.name, m.n) == (ROWS, table, tuples), row
        assert m.host == host or "?" in host, row


@pytest.mark.parametrize("log_type", LOG_TYPES)
def test_the_jvm_projection_gives_what_the_python_oracle_gives(spark, log_type):
    records = corpus(log_type)
    if log_type == "log_rsyslog":  # over MAX_VALUE_BYTES: its dead letter withholds the value
        records.append(KafkaRecord(b"x" * (4 * 1024 * 1024 + 1), b"big", 0, 7, 0))
    rows = _compare(spark, _config(_source(log_type)), _rules(), records)
    kinds = {parse_metric(r.metric).kind for r in rows}
    expected = {ERROR, HEARTBEAT} | ({ROWS} if log_type != "log_ums" else set())
    expected |= {UNKNOWN} if log_type != "log_filebeat" else set()  # a filebeat line names a host
    assert kinds >= expected, kinds
    codes = {parse_metric(r.metric).name for r in rows if parse_metric(r.metric).kind == ERROR}
    assert "LOG_LINE_UMS_ID_RANGE" in codes or log_type == "log_ums", codes


@pytest.mark.parametrize("log_type", ["log_rsyslog", "log_filebeat"])
def test_first_table_wins_and_masking_agree_too(spark, log_type):
    _compare(spark, _config(_source(log_type, multi=False, masked=True)), _rules(), corpus(log_type)[:120])


def test_the_bench_records_through_the_demo_tables(spark):
    from bench.logprocessor import DS as BENCH_DS
    from bench.logprocessor import bench_config, record, rule_set
    from logprocessor.job import process

    cfg = bench_config(load_config())
    rules = rule_set(cfg)
    records = [KafkaRecord(record(i), None, i % 2, i, 1795947330000 + i) for i in range(300)]
    raw = _frame(spark, records)
    src = cfg.log_source(BENCH_DS)
    per_record = process(raw, cfg, BENCH_DS, rules, per_record=True)
    got = per_record.select("topic", "key", "value").collect()
    want = []
    for r in records:
        want += log_oracle.outputs(r, src, BENCH_DS, rules, RAW_TOPIC, cfg.path.parent)
    assert _comparable(src, BENCH_DS, _triples(got)) == _comparable(src, BENCH_DS, want)
    assert len(got) == 300 and len({r.topic for r in got}) == 2  # the tables' result topic, the unknown one
    chunked = process(raw.coalesce(1), cfg, BENCH_DS, rules).collect()  # 300 records: one chunk
    _assert_same_tuples(src, BENCH_DS, got, chunked)
    assert len(chunked) == 100 + 7 * 2  # the unknown lines, one message per host and table
