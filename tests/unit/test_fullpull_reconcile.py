"""The reconcile rule: per key, the tuple with the greatest (ums_id_, ums_uid_) wins; deletes drop the key.

The hypothesis test plays random writes against a model table, takes a full pull at a random binlog
position while writes go on (each row read at its own later moment, as shards are), then shuffles the
pull's rows and every increment together: the merge must give the model's final state.
"""

from __future__ import annotations

import random

import pytest
from cdc_history import KEYS, transactions
from hypothesis import given, settings
from hypothesis import strategies as st

from cli import main as dbus
from dbuslib.errors import ConfigError
from fullpuller.reconcile import (
    OutColumn,
    check_out,
    merge,
    newest,
    order_key,
    output_columns,
    parse_table,
    table_versions,
)
from ums.namespace import Namespace


@st.composite
def histories(draw):
    """(tuples in a random order, the final table): increments of random transactions plus a full pull."""
    first_id, events, states = draw(transactions())
    state = states[-1] if states else {}
    tuples = [
        (key, str(at), str(at * 10**6 + i), op, value)
        for at, changes in events
        for i, (key, op, value) in enumerate(changes)
    ]
    # Full pull: accepted at the binlog end after event k-1, so its ums_id_ lies strictly between the ids
    # of events k-1 and k (ids step by >= 2); each key is read at its own moment t >= k (after event t-1),
    # and every pulled row carries the pull's ums_id_.
    k = draw(st.integers(0, len(events)))
    pull_id = (events[k - 1][0] if k else first_id - 1) + 1
    after = [{}] + states  # after[t]: the table once events 0..t-1 are applied
    for n, key in enumerate(KEYS):
        seen = after[draw(st.integers(k, len(events)))]
        if key in seen:
            tuples.append((key, str(pull_id), str(pull_id * 10**6 + n), "i", seen[key]))
    random.Random(draw(st.integers())).shuffle(tuples)
    return tuples, state


@given(histories())
@settings(max_examples=400, deadline=None)
def test_pull_under_live_writes_reconciles_to_final_state(history):
    tuples, final = history
    assert merge(tuples) == final


def test_ids_compare_as_numbers_not_text():
    # "999" > "1000" as text; as numbers the later change wins
    tuples = [(1, "1000", "1000000000", "u", "new"), (1, "999", "999000000", "i", "old")]
    assert merge(tuples) == {1: "new"}


def test_uid_breaks_a_tie_as_a_number():
    tuples = [(1, "5", "5000010", "u", "second"), (1, "5", "5000009", "u", "first")]
    assert merge(tuples) == {1: "second"}
    assert order_key("5", "5000010") > order_key("5", "5000009")


@pytest.mark.parametrize(
    ("ops", "expected"),
    [
        ([("i", 1), ("d", 2)], {}),  # deleted
        ([("i", 1), ("d", 2), ("i", 3)], {1: "v3"}),  # re-inserted after the delete
        ([("b", 1)], {}),  # before image whose update moved the row away
        ([("b", 1), ("u", 1)], {1: "v1"}),  # same event: the u (greater uid) wins
    ],
)
def test_delete_and_reinsert(ops, expected):
    tuples = [(1, str(at), str(at * 10**6 + i), op, f"v{at}") for i, (op, at) in enumerate(ops)]
    assert merge(tuples) == expected


def _fields(*names_types, encoded=()):
    fixed = (("ums_id_", "long"), ("ums_ts_", "datetime"), ("ums_op_", "string"), ("ums_uid_", "string"))
    system = [{"name": n, "type": t, "encoded": False} for n, t in fixed]
    return system + [{"name": n, "type": t, "encoded": n in encoded} for n, t in names_types]


def test_versions_of_the_table_only_and_the_newest_fields():
    v0 = _fields(("id", "long"), ("name", "string"))
    v1 = _fields(("id", "long"), ("name", "string"), ("amount", "decimal"))
    heads = [
        ("mysql.demo.shop.orders.0.0.0", v0),
        ("mysql.demo.shop.orders.1.0.0", v1),
        ("mysql.demo.shop.items.3.0.0", v0),
        ("not a namespace", v0),
    ]
    versions = table_versions(heads, "shop", "orders")
    assert {ns.version for ns, _ in versions.values()} == {0, 1}
    assert versions["mysql.demo.shop.orders.1.0.0"][0] == Namespace("mysql", "demo", "shop", "orders", 1)
    top, lists = newest(versions, heads)
    assert top == 1
    assert output_columns(lists) == (
        OutColumn("id", "long"),
        OutColumn("name", "string"),
        OutColumn("amount", "decimal"),
    )


def test_a_column_masked_differently_within_a_version_becomes_string():
    clear = _fields(("id", "int"), ("phone", "int"))
    masked = _fields(("id", "int"), ("phone", "string"), encoded=("phone",))
    assert output_columns([clear, masked]) == (OutColumn("id", "int"), OutColumn("phone", "string", True))


@pytest.mark.parametrize(
    ("ums_type", "spark_type"),
    [
        ("int", "int"),
        ("long", "decimal(20,0)"),  # source type not known: maybe a BIGINT UNSIGNED, up to 2^64-1
        ("float", "double"),
        ("double", "double"),
        ("boolean", "boolean"),
        ("decimal", "string"),
        ("datetime", "string"),
        ("jsonobject", "string"),
        ("binary", "string"),
    ],
)
def test_spark_types_only_where_the_cast_is_exact(ums_type, spark_type):
    assert OutColumn("c", ums_type).spark_type == spark_type


def test_parse_table():
    assert parse_table("shop.orders") == ("shop", "orders")
    assert parse_table("shop.t.dot") == ("shop", "t.dot")
    assert parse_table("`my.db`.orders") == ("my.db", "orders")
    with pytest.raises(ValueError, match="schema.table"):
        parse_table("orders")


@pytest.mark.parametrize(
    ("out", "master", "refused"),
    [
        ("/data/orders.parquet", "local[2]", False),
        ("snapshots/orders", "local", False),
        ("/data/orders.parquet", "spark://h:7077", True),
        ("snapshots/orders", "yarn", True),
        ("/data/orders.parquet", "k8s://https://k:6443", True),
        ("hdfs://nn:8020/snapshots/orders", "spark://h:7077", False),
        ("s3a://bucket/snapshots/orders", "yarn", False),
        ("file:///shared/snapshots/orders", "spark://h:7077", False),  # the user's word: a shared volume
    ],
)
def test_check_out_refuses_a_plain_path_on_a_cluster_master(out, master, refused):
    if not refused:
        check_out(out, master)
        return
    with pytest.raises(ConfigError) as e:
        check_out(out, master)
    assert f"--out {out} is a path on this machine, and the master {master}" in str(e.value)
    assert "hdfs://" in str(e.value) and "file:///shared" in str(e.value)


def test_check_out_leaves_jdbc_alone():
    check_out("", "spark://h:7077", "jdbc")


def test_dbus_reconcile_with_a_cluster_master_and_a_plain_out_exits_2_before_spark(capsys):
    code = dbus.main(
        [
            "reconcile",
            "--source",
            "demo",
            "--table",
            "shop.orders",
            "--out",
            "/tmp/o",
            "--master",
            "spark://h:7077",
        ]
    )
    assert code == 2
    err = capsys.readouterr().err
    assert "CONFIG_INVALID" in err and "the master spark://h:7077" in err and "shared filesystem URI" in err
