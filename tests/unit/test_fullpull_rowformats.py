"""A pull in a per-row format: the shard reader's rows become per-row records (fullpuller/perrow.py).

The rows are the tuple texts MariaDB renders (fullpuller/render.py), as a shard reader gets them; each
becomes a RowChange of op r carrying exactly what the UMS path's ``data_initial_data`` tuple of the same
row carries (values, masking, ``ums_uid_``), then the format's own records.
"""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from fullpull_jobs import UMS_ID, shard_job
from hypothesis import given
from hypothesis import strategies as st

from dbuslib.config import MaskRule
from fullpuller.perrow import RowWriter, arrow_schema, to_batch
from fullpuller.source import MessageWriter, ShardJob
from ums import from_json
from ums.formats import FormatOptions, Record
from ums.rowchange import RowChange

COLUMNS = [
    {"name": "id", "column_type": "bigint(20)", "nullable": False},
    {"name": "name", "column_type": "varchar(32)", "nullable": False},
    {"name": "total", "column_type": "decimal(10,2)", "nullable": True},
    {"name": "ratio", "column_type": "double", "nullable": True},
    {"name": "note", "column_type": "varchar(64)", "nullable": True},
]
# as MariaDB renders them (render.select_sql): BIGINT quoted, DECIMAL quoted with its scale
TEXTS = [
    b'"1","ann","2.50",0.5,null',
    b'"2","b\\u00e9a",null,1e+300,"x\\"y"',
    b'"3","",  "0.00",-0,"\\u0000"',
]


def _job(**kw) -> ShardJob:
    return shard_job(**{"columns": COLUMNS, "batch_id": 2, "shard": 7, "format": "debezium-json", **kw})


class Seen:
    """A Format that writes each change as the JSON of its parts: what the writer gave the encoder."""

    name = "seen"

    def __init__(self) -> None:
        self.topics: list[str] = []

    def records(self, topic: str, change: RowChange) -> list[Record]:
        self.topics.append(topic)
        key = json.dumps([change.after[i] for i in change.table.key_indices]).encode()  # type: ignore[index]
        value = json.dumps([change.op, change.after, change.ums_uid, change.at.snapshot]).encode()
        return [Record(key, value, (("ums_uid_", change.ums_uid.encode()),))]


def _writer(job: ShardJob, masking=None) -> RowWriter:
    return RowWriter.for_job(job, FormatOptions(), masking, fmt=Seen())


def _ums_tuples(job: ShardJob, texts: list[bytes], masking=None) -> list[tuple]:
    """The UMS path's data_initial_data tuples of the same rows (its own writer)."""
    ums = MessageWriter.for_job(job, masking)
    return [t for _, value, _ in ums.messages(texts) for t in from_json(value).payload]


def test_pulled_rows_are_changes_of_op_r_with_the_ums_path_values_ids_and_the_snapshot_position():
    job = _job()
    w = _writer(job)
    changes = w.changes(TEXTS[:2]) + w.changes(TEXTS[2:])
    tuples = _ums_tuples(job, TEXTS)
    assert [c.after for c in changes] == [t[4:] for t in tuples]
    assert (
        [c.ums_uid for c in changes] == [t[3] for t in tuples] == [f"{UMS_ID}000007{i:09d}" for i in range(3)]
    )
    assert {(c.op, c.before) for c in changes} == {("r", None)}
    at = changes[0].at
    assert (at.ums_id, at.pos, at.file, at.ts_ms, at.row, at.snapshot) == (
        int(UMS_ID),
        12345678,
        "mysql-bin.000103",
        1704164645123,
        0,
        "true",
    )
    shape = changes[0].table
    assert (shape.ds, shape.schema, shape.table, shape.version, shape.primary_key) == (
        "demo",
        "shop",
        "orders",
        3,
        ("id",),
    )
    assert [c.name for c in shape.columns] == [f.name for f in shape.fields] == [c["name"] for c in COLUMNS]
    assert w.rows == 3


def test_masked_columns_leave_the_writer_masked_as_the_ums_path_masks_them():
    job = _job()
    masking = {
        "shop.orders": {
            "name": MaskRule(type="sha256", salt="s"),
            "note": MaskRule(type="truncate", length=1),
        }
    }
    changes = _writer(job, masking).changes(TEXTS)
    tuples = _ums_tuples(job, TEXTS, masking)
    assert [c.after for c in changes] == [t[4:] for t in tuples]
    assert changes[0].after[1] != "ann"  # type: ignore[index]
    fields = {f.name: f for f in changes[0].table.fields}
    assert fields["name"].encoded and fields["note"].encoded and not fields["id"].encoded


def test_records_are_the_formats_own_in_row_order_to_the_pull_topic():
    w = _writer(_job())
    records = w.records(TEXTS)
    assert [r.key for r in records] == [b'["1"]', b'["2"]', b'["3"]']
    assert json.loads(records[1].value) == [
        "r",
        ["2", "béa", None, 1e300, 'x"y'],
        f"{UMS_ID}000007000000001",
        "true",
    ]
    assert w.format.topics == ["demo.shop.orders"] * 3  # type: ignore[attr-defined]


def test_records_past_the_batch_limit_leave_in_several_batches_in_order(monkeypatch):
    from fullpuller import perrow

    monkeypatch.setattr(perrow, "BATCH_BYTES", 100)
    w = _writer(_job())
    out = list(w.batches(TEXTS * 3))  # values of about 60 bytes: a batch each time two pass 100
    assert [b.num_rows for b in out] == [2, 2, 2, 2, 1]
    assert [json.loads(v)[2] for b in out for v in b.column("value").to_pylist()] == [
        f"{UMS_ID}000007{i:09d}" for i in range(9)
    ]
    assert [b.num_rows for b in _writer(_job()).batches([])] == [0]


def test_a_batch_has_the_arrow_schema_spark_expects_of_the_data_source():
    from pyspark.sql.pandas.types import to_arrow_schema
    from pyspark.sql.types import ArrayType, BinaryType, StringType, StructField, StructType

    header = StructType([StructField("key", StringType()), StructField("value", BinaryType())])
    spark = StructType(
        [
            StructField("key", BinaryType()),
            StructField("value", BinaryType()),
            StructField("headers", ArrayType(header)),
        ]
    )
    assert arrow_schema().equals(to_arrow_schema(spark, timezone="UTC"))
    records = [Record(b"k", b"v", (("a", b"1"), ("b", b"2"))), Record(None, None)]
    batch = to_batch(records)
    assert batch.schema.equals(arrow_schema())
    assert batch.to_pylist() == [
        {"key": b"k", "value": b"v", "headers": [{"key": "a", "value": b"1"}, {"key": "b", "value": b"2"}]},
        {"key": None, "value": None, "headers": []},
    ]


_STRINGS = st.text(st.characters(exclude_categories=("Cs",)), max_size=8)


@given(
    st.lists(
        st.tuples(
            st.integers(0, 2**63 - 1), _STRINGS, st.none() | st.floats(allow_nan=False, allow_infinity=False)
        ),
        max_size=6,
    ),
    st.integers(1, 4),
)
def test_any_rows_in_any_fetches_give_the_ums_paths_tuples(rows, fetch):
    job = _job(
        columns=[COLUMNS[0], COLUMNS[1], COLUMNS[3]],
        tuples_per_message=3,
    )
    texts = [json.dumps([str(i), s, f])[1:-1].encode() for i, s, f in rows]
    w = _writer(job)
    changes = [c for k in range(0, len(texts), fetch) for c in w.changes(texts[k : k + fetch])]
    tuples = _ums_tuples(job, texts)
    assert [(c.ums_uid, *c.after) for c in changes] == [t[3:] for t in tuples]  # type: ignore[misc]


def test_the_shard_job_of_a_pull_accepted_before_per_row_formats_is_a_ums_job():
    old = json.loads(_job().to_json())
    for key in ("format", "topic", "primary_key", "binlog_file", "ts_ms"):
        del old[key]
    assert ShardJob.from_json(json.dumps(old)).format == "ums"


def test_a_per_row_pulls_markers_go_to_the_events_topic_and_a_ums_pulls_to_its_topic():
    from types import SimpleNamespace

    from dbuslib.config import OutputSettings, Topics
    from fullpuller import job
    from fullpuller.progress import PULLING, Progress

    class Sent:
        topics: list[str] = []

        def send(self, topic, key, value, headers=()):
            self.topics.append(topic)
            return SimpleNamespace(get=lambda timeout=None: None)

    p = job.Puller.__new__(job.Puller)
    p.ds, p.producer = "demo", Sent()
    p.src = SimpleNamespace(topics=Topics(), output=OutputSettings(topic="table"))  # type: ignore[assignment]
    pulled = Progress(
        1, "shop", "orders", Status=PULLING, UmsId="95", Namespace=_job().namespace, Columns=COLUMNS
    )
    p._marker(replace(pulled, Topic="demo.shop.orders", Format="canal-json"), "start")
    p._marker(replace(pulled, Topic="demo.shop.result"), "end")
    assert p.producer.topics == ["demo.shop.events", "demo.shop.result"]
    assert p._result_topic("shop", "orders") == "demo.shop.orders"


@pytest.mark.parametrize("fmt", ["debezium-json", "canal-json"])
def test_the_records_are_the_formats_own_and_decode_back_to_the_ums_paths_tuples(fmt):
    from ums.formats import decode, formatter

    job = _job(format=fmt)
    records = RowWriter.for_job(job, FormatOptions()).records(TEXTS)
    changes = _writer(job).changes(TEXTS)
    encoder = formatter(fmt, FormatOptions())
    assert records == [r for c in changes for r in encoder.records("demo.shop.orders", c)]
    decoded = [decode(fmt, r.key, r.value, r.headers) for r in records]
    tuples = _ums_tuples(job, TEXTS)
    assert (
        [(c.op, c.at.snapshot, c.ums_uid, *c.after) for c in decoded]
        == [  # type: ignore[union-attr, misc]
            ("r", "true", *t[3:]) for t in tuples
        ]
    )


def test_the_changes_are_those_from_message_reads_from_the_ums_paths_pulled_messages():
    from ums.rowchange import from_message
    from ums.types import ColumnSpec

    job = _job()
    messages = [from_json(v) for _, v, _ in MessageWriter.for_job(job, None).messages(TEXTS)]
    columns = tuple(ColumnSpec(**c) for c in COLUMNS)
    read = [
        c
        for m in messages
        for c in from_message(m, columns, ("id",), file="mysql-bin.000103", ts_ms=1704164645123)
    ]
    assert read == _writer(job).changes(TEXTS)  # row 0: a pulled uid is no increment's (ums.ids.row_of_uid)


def test_a_pulled_uid_is_row_0_and_an_increments_its_last_six_digits():
    from ums.ids import row_of_uid

    assert row_of_uid(UMS_ID, f"{UMS_ID}000001000000041") == 0
    assert row_of_uid(UMS_ID, f"{UMS_ID}000041") == 41
