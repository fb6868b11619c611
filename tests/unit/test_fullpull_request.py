"""Full-pull requests (fullpuller/request.py), progress (progress.py) and the shard message writer
(source.py)."""

from __future__ import annotations

import io
import json
import re
from dataclasses import replace

import pytest
from fullpull_jobs import shard_job
from hypothesis import given
from hypothesis import strategies as st

from dbuslib.config import MaskRule
from fullpuller import request
from fullpuller.progress import ABORT, DONE, ENDING, PULLING, Progress, ShardState, bar, rate_and_eta
from fullpuller.request import PullRejected
from fullpuller.source import MessageWriter, ShardJob
from ums import from_json
from ums.masking import compile_rules
from ums.message import ProtocolType
from ums.types import ColumnSpec


def _value(message) -> bytes:
    return request.to_record(message)[1]


def test_a_built_request_round_trips_with_the_originals_payload_keys():
    m = request.build("demo", "shop", "orders", split_col="id", shard_size=5000, where="id > 3")
    key, value = request.to_record(m)
    assert key == b"FULL_DATA_INDEPENDENT_PULL_REQ" and request.is_request(key)
    payload = json.loads(value)["payload"]
    for name in (
        "DBUS_DATASOURCE_ID",
        "SCHEMA_NAME",
        "TABLE_NAME",
        "PHYSICAL_TABLES",
        "SEQNO",
        "SPLIT_COL",
        "SPLIT_SHARD_SIZE",
        "SPLIT_SHARD_STYLE",
        "INPUT_CONDITIONS",
        "SINK_TYPE",
        "resultTopic",
        "INCREASE_VERSION",
        "INCREASE_BATCH_NO",
        "POS",
        "OP_TS",
    ):
        assert isinstance(payload[name], str), name
    req = request.parse(value, "demo")
    assert (req.seqno, req.schema, req.table, req.split_col, req.shard_size, req.where) == (
        m.id,
        "shop",
        "orders",
        "id",
        5000,
        "id > 3",
    )
    assert req.result_topic is None and req.name == "shop.orders"


def test_a_keeper_style_request_is_accepted():
    value = json.dumps(
        {
            "id": 1704164645123,
            "type": "FULL_DATA_INDEPENDENT_PULL_REQ",
            "timestamp": "2024-01-02 03:04:05.123",
            "from": "full-pull-request-from-project",
            "payload": {
                "SCHEMA_NAME": "shop",
                "TABLE_NAME": "orders",
                "SEQNO": 1704164645123,
                "SPLIT_SHARD_SIZE": "-1",
                "resultTopic": "x.y",
                "PULL_REMARK": "",
            },
            "project": {"id": 1, "name": "p"},
        }
    ).encode()
    req = request.parse(value, "demo")
    assert (req.seqno, req.shard_size, req.result_topic) == (1704164645123, -1, "x.y")


@pytest.mark.parametrize(
    ("value", "needle", "seqno"),
    [
        (b"{not json", "not a control message", None),
        (
            b'{"id": 7, "type": "FULL_DATA_BOGUS", "timestamp": "t", "from": "f", "payload": {"a": 1}}',
            "unknown type",
            7,
        ),
        (
            b'{"id": 8, "type": "APPENDER_RELOAD_CONFIG", "timestamp": "t", "from": "f",'
            b' "payload": {"a": 1}}',
            "is not FULL_DATA_INDEPENDENT_PULL_REQ",
            8,
        ),
    ],
)
def test_malformed_records_and_unknown_types_are_rejected_with_a_reason(value, needle, seqno):
    with pytest.raises(PullRejected) as e:
        request.parse(value, "demo")
    assert e.value.code == "FULLPULL_BAD_REQUEST" and needle in str(e.value) and e.value.seqno == seqno


@pytest.mark.parametrize(
    ("change", "needle"),
    [
        ({"TABLE_NAME": ""}, "payload.TABLE_NAME is missing"),
        ({"SPLIT_SHARD_SIZE": "0"}, "SPLIT_SHARD_SIZE 0"),
        ({"SPLIT_SHARD_SIZE": "many"}, "is not an integer"),
        ({"SINK_TYPE": "HDFS"}, "SINK_TYPE 'HDFS' is not supported"),
        ({"DBUS_DATASOURCE_ID": "other"}, "is not this source"),
        ({"PHYSICAL_TABLES": "orders_1;orders_2"}, "only the table itself"),
        ({"SPLIT_COL": ["id"]}, "payload.SPLIT_COL must be a string"),
    ],
)
def test_invalid_fields_are_named(change, needle):
    m = request.build("demo", "shop", "orders")
    obj = json.loads(_value(m))
    obj["payload"].update(change)
    with pytest.raises(PullRejected) as e:
        request.parse(json.dumps(obj).encode(), "demo")
    assert needle in str(e.value) and e.value.seqno == m.id


def test_other_stages_messages_are_not_requests():
    assert not request.is_request(b"APPENDER_RELOAD_CONFIG") and not request.is_request(None)


def test_the_reply_names_the_request_and_the_reason():
    r = request.reply(42, ABORT, ds="demo", table="shop.t", code="FULLPULL_UNKNOWN_TABLE", error="no table")
    assert r.type.value == "FULL_DATA_FINISH_REQ"
    assert r.payload["SEQNO"] == "42" and r.payload["STATUS"] == "abort"
    assert r.payload["ERROR_CODE"] == "FULLPULL_UNKNOWN_TABLE"
    assert request.reply(None, ABORT, ds="demo").payload["SEQNO"] == ""


# ---------------------------------------------------------------- progress


def test_progress_counts_rate_eta_and_bar():
    p = Progress(1, "shop", "orders", Status=PULLING, TotalCount=4, TotalRows=1000, StartSecs=100.0)
    p = p.with_shards({0: ShardState(250, DONE), 1: ShardState(150, PULLING)}, now=110.0)
    assert (p.FinishedCount, p.FinishedRows, p.ConsumeSecs) == (1, 400, 10.0)
    rate, eta = rate_and_eta(p)
    assert rate == 40.0 and eta == 15.0
    text = bar(p, width=10)
    assert text.startswith("[####------]  40% 400/1000 rows  1/4 shards  40 rows/s  ETA 15s  pulling")
    assert Progress.from_bytes(p.to_bytes()) == p
    assert (
        Progress.from_bytes(json.dumps({"SeqNo": 1, "Schema": "s", "Table": "t", "Later": 1}).encode()).SeqNo
        == 1
    )


def test_a_finished_pull_has_no_eta_and_a_full_bar():
    p = Progress(1, "s", "t", Status=ENDING, TotalRows=10, FinishedRows=12, ConsumeSecs=2.0, EndSecs=3.0)
    assert rate_and_eta(p) == (6.0, 0.0) and bar(p, 4).startswith("[####] 100%")
    failed = Progress(1, "s", "t", Status=ABORT, ErrorCode="FULLPULL_FAILED", ErrorMsg="boom")
    assert bar(failed).endswith("abort  FULLPULL_FAILED: boom")


# ---------------------------------------------------------------- shard messages

COLUMNS = (
    ColumnSpec("id", "int", False),
    ColumnSpec("name", "varchar(20)"),
    ColumnSpec("card", "varchar(20)"),
)


def _job(**kw) -> ShardJob:
    columns = [{"name": c.name, "column_type": c.column_type, "nullable": c.nullable} for c in COLUMNS]
    table = {"table": "t", "namespace": "mysql.demo.shop.t.2.0.0", "max_message_bytes": 1_000_000}
    return shard_job(columns, **{**table, "batch_id": 3, "shard": 7, **kw})


@given(
    st.lists(
        st.tuples(st.integers(-(2**31), 2**31 - 1), st.text(max_size=5) | st.none(), st.text(max_size=5)),
        max_size=9,
    )
)
def test_shard_messages_are_valid_ums_with_every_row_once(rows):
    job = _job()
    writer = MessageWriter.for_job(job, {})
    texts = [json.dumps(list(r), separators=(",", ":"))[1:-1].encode() for r in rows]
    out = list(writer.messages(texts[:4])) + list(writer.messages(texts[4:]))
    tuples = []
    for key, value, headers in out:
        assert key == b"shop.t"
        assert headers[0][0] == "ums_key" and headers[0][1].startswith(
            b"data_initial_data.mysql.demo.shop.t.2.0.0."
        )
        m = from_json(value)
        assert m.protocol is ProtocolType.DATA_INITIAL_DATA and m.schema.batch_id == 3
        assert str(m.schema.namespace) == "mysql.demo.shop.t.2.0.0" and 1 <= len(m.payload) <= 2
        tuples.extend(m.payload)
    assert [t[4:] for t in tuples] == [tuple(r) for r in rows]
    assert all(t[:3] == ("1030000012345678", "2024-01-02 03:04:05.123", "i") for t in tuples)
    assert [t[3] for t in tuples] == [f"1030000012345678000007{i:09d}" for i in range(len(rows))]
    assert writer.rows == len(rows)


def test_masked_columns_never_leave_the_writer_in_clear():
    job = _job()
    masking = {"shop.t": {"card": MaskRule(type="md5")}}
    writer = MessageWriter.for_job(job, masking)
    ((key, value, _),) = writer.messages([b'1,"ann","4111-1111"'])
    assert b"4111-1111" not in value
    m = from_json(value)
    card = next(f for f in m.schema.fields if f.name == "card")
    assert card.encoded and m.payload[0][4:6] == (1, "ann")
    assert compile_rules(masking).has_rules


# ---------------------------------------------------------------- any record: a request or a refusal

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=12,
)
FIELDS = (
    "SEQNO",
    "DBUS_DATASOURCE_ID",
    "SCHEMA_NAME",
    "TABLE_NAME",
    "PHYSICAL_TABLES",
    "SINK_TYPE",
    "SPLIT_COL",
    "SPLIT_SHARD_SIZE",
    "INPUT_CONDITIONS",
    "resultTopic",
)


def _parsed(value):
    try:
        return request.parse(value, "demo")
    except PullRejected as e:
        assert e.code == "FULLPULL_BAD_REQUEST" and len(str(e)) < 1000
        assert e.seqno is None or 0 < e.seqno < 2**63
        return e


@given(st.none() | st.binary(max_size=300))
def test_parse_of_any_bytes_is_a_request_or_a_refusal(value):
    assert isinstance(_parsed(value), request.PullRequest | PullRejected)


@given(st.dictionaries(st.sampled_from(FIELDS), json_values | st.text(max_size=80)))
def test_parse_of_any_payload_is_a_request_or_a_refusal(change):
    obj = json.loads(_value(request.build("demo", "shop", "orders")))
    obj["payload"].update(change)
    out = _parsed(json.dumps(obj).encode())
    if isinstance(out, request.PullRequest):
        from ums.control import identifier_problem

        assert identifier_problem(out.schema) is None and identifier_problem(out.table) is None


@pytest.mark.parametrize(
    ("change", "needle"),
    [
        ({"TABLE_NAME": "x" * 65}, "payload.TABLE_NAME 'xxxxxxxx"),
        ({"TABLE_NAME": "t "}, "ends with a space"),
        ({"SCHEMA_NAME": "s\x00"}, "contains a NUL"),
        ({"SCHEMA_NAME": "\U0001f600"}, "contains U+1F600"),
        ({"SEQNO": "9" * 5000}, "payload.SEQNO '99999"),
        ({"SEQNO": "-4"}, "payload.SEQNO -4: must be a positive integer"),
        ({"SEQNO": "\u0661\u0662"}, "is not an integer"),
        ({"SPLIT_SHARD_SIZE": "99999999999999999999"}, "is not an integer of at most 64 bits"),
        ({"SPLIT_COL": "id,,x"}, "column '' is empty"),
        ({"resultTopic": ".."}, "payload.resultTopic '..' is not a Kafka topic name"),
        ({"resultTopic": "a b"}, "is not a Kafka topic name"),
    ],
)
def test_names_and_numbers_are_checked_and_named(change, needle):
    obj = json.loads(_value(request.build("demo", "shop", "orders")))
    obj["payload"].update(change)
    with pytest.raises(PullRejected) as e:
        request.parse(json.dumps(obj).encode(), "demo")
    assert e.value.code == "FULLPULL_BAD_REQUEST" and needle in str(e.value) and len(str(e.value)) < 400


@pytest.mark.parametrize(
    ("schema", "table"), [("..", ".."), (".", "t.dot"), ("a/b", " lead"), ("shöp", "日本")]
)
def test_legal_mariadb_names_are_accepted_as_they_are(schema, table):
    req = request.parse(_value(request.build("demo", schema, table)), "demo")
    assert (req.schema, req.table) == (schema, table)


def test_a_huge_number_elsewhere_still_names_the_request():
    value = _value(request.build("demo", "shop", "orders"))
    bad = value[:-2] + b',"X":' + b"1" * 5000 + b"}}"
    with pytest.raises(PullRejected) as e:
        request.parse(bad, "demo")
    assert e.value.seqno == json.loads(value)["id"] and "payload.X: a number of 5000 characters" in str(
        e.value
    )


def test_a_reply_is_always_a_small_encodable_record():
    r = request.reply(1, ABORT, ds="demo", table="t\ud800", code="FULLPULL_FAILED", error="e\udcff" * 10_000)
    key, value = request.to_record(r)
    assert len(value) < 20_000 and json.loads(value)["payload"]["ERROR_MSG"].endswith("...")


def test_more_rows_than_counted_shows_the_rows_and_the_count_apart():
    """Rows written while a pull runs: it reads more than it counted when planned (was '1800/550 rows')."""
    p = Progress(1, "s", "t", Status=PULLING, TotalCount=4, FinishedCount=1, TotalRows=550, FinishedRows=1800)
    assert " 25% 1800 rows (550 counted when planned)  1/4 shards" in bar(p, 10)


class _Out(io.StringIO):
    def __init__(self, tty: bool):
        super().__init__()
        self.tty = tty

    def isatty(self):
        return self.tty


def _states():
    base = Progress(1, "shop", "orders", Status=PULLING, TotalCount=2, TotalRows=100, StartSecs=1.0)
    return iter(
        [
            base,
            base.with_shards({0: ShardState(10, PULLING)}, now=2.0),
            base.with_shards({0: ShardState(50, DONE)}, now=3.0),
            replace(
                base.with_shards({0: ShardState(50, DONE), 1: ShardState(50, DONE)}, now=4.0),
                Status=ENDING,
                EndSecs=4.0,
            ),
        ]
    )


def test_follow_off_a_terminal_writes_plain_lines_when_something_changes(monkeypatch):
    from fullpuller import commands

    monkeypatch.setattr(commands, "FOLLOW_S", 0.0)
    out = _Out(tty=False)
    states = _states()
    last = commands.follow(lambda: next(states), out)
    assert last.Status == ENDING
    text = out.getvalue()
    assert "\r" not in text
    lines = text.splitlines()
    assert [re.search(r"(\d+)% (\S+) rows", line).groups() for line in lines] == [
        ("0", "0/100"),
        ("50", "50/100"),
        ("100", "100/100"),
    ]  # the second state changed nothing but rows: no line of its own


def test_follow_on_a_terminal_draws_a_bar_with_tqdm(monkeypatch):
    from fullpuller import commands

    monkeypatch.setattr(commands, "FOLLOW_S", 0.0)
    out = _Out(tty=True)
    states = _states()
    assert commands.follow(lambda: next(states), out).Status == ENDING
    text = out.getvalue()
    assert "\r" in text and "shop.orders" in text and "2/2 shards ending" in text
