"""DDL that removes rows without row events (TRUNCATE/DROP/EXCHANGE PARTITION ...) in the appender: a
termination and the next version (reason row_loss), and, when asked, a full-pull request on <ds>_ctrl
whose SEQNO is the DDL's ums_id."""

import json
from dataclasses import replace

from hypothesis import given
from hypothesis import strategies as st
from records import INSERT

from appender.convert import ConvertSettings
from appender.process import InRecord, Outputs, PartitionProcessor
from appender.versions import Reason, loss_reason, on_truncate, repull_record, row_loss
from binlog import rawevent
from binlog.rawevent import RawHeader
from fullpuller.request import is_request, parse

SCHEMA, TABLE = "dbus_unit_rowdecode", "orders"
DDL_POS = 2_900_000  # after the INSERT's 2843119, same file
AT = 7 * 10**13 + DDL_POS


def ddl(sql, *, pos=DDL_POS, table=TABLE, ddl_verb="ALTER", changes=("TRUNCATE PARTITION",)):
    header = {
        "kind": "ddl",
        "source": "demo",
        "server_id": 1,
        "file": "mariadb-bin.000007",
        "pos": pos,
        "next_pos": pos + 200,
        "gtid": "0-1-120",
        "ts": 1795356400,
        "schema": SCHEMA,
        "table": table,
        "ddl": ddl_verb,
        "sql": sql,
    }
    if changes:
        header.update(removes_rows=True, row_changes=list(changes))
    return rawevent.encode(rawevent.RawEvent(header=header, key=f"{SCHEMA}.{table}"))


def processor(stored, repull_topic=None):
    outputs = Outputs(
        result_topic=lambda s, t: f"demo.{s}.{t}.result",
        dead_letter_topic="demo.dlq",
        global_control_topic="global_ctrl_topic",
        repull_topic=repull_topic,
    )
    return PartitionProcessor(
        settings=ConvertSettings("demo"),
        outputs=outputs,
        history=lambda s, t: list(stored.get((s, t), [])),
        persist=lambda s, t, v: stored.setdefault((s, t), []).append(v) or v,
    )


def run(p, *values):
    out = []
    for i, v in enumerate(values):
        out += list(p.process(InRecord(f"demo.{SCHEMA}", 0, i, b"k", v)))
    return out


def kinds(out):
    return [
        (o.topic, json.loads(o.value).get("protocol", {}).get("type") or json.loads(o.value)["type"])
        for o in out
    ]


def test_truncate_partition_terminates_the_version_and_opens_the_next_with_reason_row_loss():
    stored = {}
    out = run(processor(stored), INSERT, ddl("ALTER TABLE orders TRUNCATE PARTITION p0"))
    assert kinds(out) == [
        (f"demo.{SCHEMA}.{TABLE}.result", "data_increment_data"),
        (f"demo.{SCHEMA}.{TABLE}.result", "data_increment_termination"),
        ("global_ctrl_topic", "G_META_SYNC_WARNING"),
    ]
    assert json.loads(out[1].value)["schema"]["namespace"].endswith(".orders.0.0.0")
    versions = stored[(SCHEMA, TABLE)]
    assert [(v.version, v.reason, v.since) for v in versions] == [
        (0, Reason.FIRST, versions[0].since),
        (1, Reason.ROW_LOSS, AT),
    ]
    assert versions[1].columns == versions[0].columns
    warning = json.loads(out[2].value)["payload"]
    got = (warning["compare-result"]["reason"], warning["version"], warning["since"])
    assert got == ("row_loss", 1, str(AT))


def test_with_repull_on_a_full_pull_request_of_the_table_goes_to_ctrl_and_a_replay_asks_for_the_same():
    stored = {}
    out = run(
        processor(stored, "demo_ctrl"),
        INSERT,
        ddl("ALTER TABLE orders DROP PARTITION p0, p1", changes=("DROP PARTITION",)),
    )
    requests = [o for o in out if o.topic == "demo_ctrl"]
    assert len(requests) == 1 and is_request(requests[0].key)
    req = parse(requests[0].value, "demo")
    assert (req.seqno, req.schema, req.table, req.where, req.split_col) == (AT, SCHEMA, TABLE, None, None)
    assert req.message.id == AT and "DROP PARTITION" in req.message.payload["PULL_REMARK"]
    # the micro-batch replayed by a fresh task: the version exists; the same request, byte for byte
    again = run(
        processor(stored, "demo_ctrl"),
        ddl("ALTER TABLE orders DROP PARTITION p0, p1", changes=("DROP PARTITION",)),
    )
    assert [(o.topic, o.key, o.value) for o in again] == [(r.topic, r.key, r.value) for r in requests]
    assert [v.version for v in stored[(SCHEMA, TABLE)]] == [0, 1]


def test_a_table_without_rows_yet_gets_no_version_but_is_still_pulled():
    stored = {}
    out = run(processor(stored, "demo_ctrl"), ddl("ALTER TABLE orders TRUNCATE PARTITION ALL"))
    assert [o.topic for o in out] == ["demo_ctrl"]
    assert stored == {}


def test_ddl_that_keeps_rows_truncate_table_and_unnamed_tables_ask_for_no_pull():
    stored = {}
    p = processor(stored, "demo_ctrl")
    out = run(
        p,
        INSERT,
        ddl("ALTER TABLE orders COALESCE PARTITION 2", changes=()),
        ddl("ALTER TABLE * TRUNCATE PARTITION p0", table="*", pos=DDL_POS + 10),
        ddl("TRUNCATE TABLE orders", ddl_verb="TRUNCATE", changes=("TRUNCATE TABLE",), pos=DDL_POS + 20),
    )
    assert [o.topic for o in out if o.topic == "demo_ctrl"] == []
    assert [v.reason for v in stored[(SCHEMA, TABLE)]] == [Reason.FIRST, Reason.TRUNCATE]


def test_drop_table_and_create_or_replace_are_a_truncate_without_a_pull():
    stored = {}
    out = run(
        processor(stored, "demo_ctrl"),
        INSERT,
        ddl("DROP TABLE `orders` /* generated by server */", ddl_verb="DROP", changes=("DROP TABLE",)),
        ddl(
            "CREATE OR REPLACE TABLE orders (id INT)",
            ddl_verb="CREATE",
            pos=DDL_POS + 10,
            changes=("CREATE OR REPLACE TABLE",),
        ),
    )
    assert "demo_ctrl" not in {o.topic for o in out}
    assert [(v.version, v.reason) for v in stored[(SCHEMA, TABLE)]] == [
        (0, Reason.FIRST),
        (1, Reason.TRUNCATE),
        (2, Reason.TRUNCATE),
    ]
    assert [json.loads(o.value)["protocol"]["type"] for o in out if o.topic.endswith(".result")] == [
        "data_increment_data",
        "data_increment_termination",
        "data_increment_termination",
    ]


def test_a_partition_change_with_blackhole_is_still_row_loss():
    header = RawHeader(
        kind="ddl",
        ddl="ALTER",
        table="t",
        removes_rows=True,
        row_changes=["DROP PARTITION", "ENGINE BLACKHOLE"],
    )
    assert loss_reason(header) is Reason.ROW_LOSS
    assert loss_reason(replace(header, row_changes=["ENGINE BLACKHOLE"])) is Reason.TRUNCATE
    assert loss_reason(replace(header, removes_rows=False)) is None


def test_repull_off_sends_no_request():
    out = run(processor({}), INSERT, ddl("ALTER TABLE orders TRUNCATE PARTITION p0"))
    assert "demo_ctrl" not in {o.topic for o in out}


_HEADERS = st.fixed_dictionaries(
    {
        "kind": st.sampled_from(["ddl", "rows", None]),
        "ddl": st.sampled_from(["ALTER", "TRUNCATE", None]),
        "table": st.sampled_from(["t", "*"]),
        "removes_rows": st.sampled_from([True, False, "true", 1, None]),
        "row_changes": st.one_of(
            st.none(), st.lists(st.sampled_from(["TRUNCATE PARTITION", "DROP PARTITION"])), st.integers()
        ),
    }
)


@given(_HEADERS)
def test_row_loss_only_for_a_marked_ddl_of_a_named_table_that_is_not_truncate_table(header):
    header = {k: v for k, v in header.items() if v is not None}
    expected = (
        header.get("kind") == "ddl"
        and header.get("removes_rows") is True
        and header.get("table") != "*"
        and header.get("ddl") != "TRUNCATE"
    )
    found = row_loss(RawHeader(**{"kind": None, **header}))
    assert (found is not None) is expected
    assert found is None or found


@given(st.integers(1, 900_000), st.integers(4, 10**13 - 2), st.integers(0, 2**32 - 1))
def test_the_request_is_a_function_of_the_ddl_position(file_no, pos, ts):
    header = RawHeader(
        kind="ddl",
        ddl="ALTER",
        removes_rows=True,
        row_changes=["EXCHANGE PARTITION"],
        schema="s",
        table="t",
        file=f"mariadb-bin.{file_no:06d}",
        pos=pos,
        ts=ts,
    )
    key, value = repull_record("demo", header)
    assert (key, value) == repull_record("demo", replace(header))
    req = parse(value, "demo")
    assert req.seqno == req.message.id == file_no * 10**13 + pos
    other = repull_record("demo", replace(header, pos=pos + 1))[1]
    assert parse(other, "demo").seqno != req.seqno


def test_on_truncate_keeps_the_reason_it_is_given():
    from dbuslib.metastore import Version

    v0 = Version(0, 100, (), Reason.FIRST)
    assert on_truncate(v0, 150, Reason.ROW_LOSS).new.reason is Reason.ROW_LOSS
    assert on_truncate(v0, 100, Reason.ROW_LOSS) is None  # a replay of an older position
