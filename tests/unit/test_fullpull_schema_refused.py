"""A full pull in ``avro`` whose schema the registry refuses: the driver registers the pull's key and value
schemas before any shard runs (``fullpuller.perrow.register_schemas``, ``Puller._register_schemas``), so
the refusal aborts the pull at once as ``FULLPULL_SCHEMA_REFUSED`` naming the subject and the registry's
reason; a refusal met by a shard is found in its Spark failure's text (``fullpuller.job.refusal``)."""

from __future__ import annotations

from types import SimpleNamespace

import fullpull_jobs
import pytest

from dbuslib.config import OutputSettings, load_config
from dbuslib.ship import config_document
from fullpuller import job
from fullpuller.perrow import RowWriter, register_schemas
from fullpuller.progress import PULLING, Progress
from fullpuller.request import PullRejected
from fullpuller.source import ShardJob
from ums.formats import FormatOptions, SchemaRefused

COLUMNS = [
    {"name": "id", "column_type": "bigint(20)", "nullable": False},
    {"name": "name", "column_type": "varchar(32)", "nullable": True},
]
REFUSAL = (
    "registry http://127.0.0.1:18081/apis/ccompat/v6: register a schema under subject "
    "demo.shop.orders-value: "
    "refused (incompatible with the subject's level): Incompatible artifact: demo.shop.orders-value"
)


def shard_job(**kw) -> ShardJob:
    return fullpull_jobs.shard_job(COLUMNS, **{"format": "avro", **kw})


class Ids:
    """A ``SchemaIds`` that records what it was asked, and refuses the subjects in ``refuse``."""

    def __init__(self, refuse: tuple[str, ...] = ()) -> None:
        self.asked: list[tuple[str, str]] = []
        self.refuse = refuse

    def __call__(self, subject: str, text: str) -> int:
        self.asked.append((subject, text))
        if subject in self.refuse:
            msg = f"registry http://r: register a schema under subject {subject}: refused (...): no"
            raise SchemaRefused(msg)
        return len(self.asked)


def test_the_driver_registers_what_the_first_record_of_a_shard_asks_for():
    before, first = Ids(), Ids()
    register_schemas(RowWriter.for_job(shard_job(), FormatOptions(), None, before))
    RowWriter.for_job(shard_job(), FormatOptions(), None, first).records([b'"1","ann"'])
    assert [s for s, _ in before.asked] == ["demo.shop.orders-key", "demo.shop.orders-value"]
    assert before.asked == first.asked


def test_a_table_without_a_primary_key_has_no_key_schema():
    ids = Ids()
    register_schemas(RowWriter.for_job(shard_job(primary_key=[]), FormatOptions(), None, ids))
    assert [s for s, _ in ids.asked] == ["demo.shop.orders-value"]


@pytest.mark.parametrize("fmt", ["debezium-json", "canal-json"])
def test_a_json_format_registers_nothing(fmt):
    register_schemas(RowWriter.for_job(shard_job(format=fmt), FormatOptions()))  # no registry: nothing asked


def _puller(ids: Ids, fmt: str = "avro", compatibility: str = "BACKWARD") -> tuple[job.Puller, list[str]]:
    """A Puller whose shards would get conf/dbus.yaml (with ``output.compatibility``) and whose registry
    client gives ``ids``; and the levels it was asked for."""
    cfg = load_config()
    demo = cfg.source("demo").model_copy(update={"output": OutputSettings(compatibility=compatibility)})
    document = config_document(cfg.model_copy(update={"sources": {**cfg.sources, "demo": demo}}))
    levels: list[str] = []

    def schema_ids(level: str) -> Ids:
        levels.append(level)
        return ids

    p = job.Puller.__new__(job.Puller)
    p.ds = "demo"
    p._registry = (cfg.endpoints.registry, SimpleNamespace(schema_ids=schema_ids))
    p._job = lambda progress, index: shard_job(format=fmt, config=document)  # type: ignore[method-assign]
    return p, levels


def _progress(fmt: str = "avro") -> Progress:
    return Progress(7, "shop", "orders", Status=PULLING, Format=fmt, Topic="demo.shop.orders")


def test_a_refused_schema_rejects_the_pull_naming_the_subject_and_the_reason():
    ids = Ids(refuse=("demo.shop.orders-value",))
    with pytest.raises(PullRejected) as got:
        _puller(ids)[0]._register_schemas(_progress())
    assert got.value.code == "FULLPULL_SCHEMA_REFUSED" == job.SCHEMA_REFUSED
    assert got.value.seqno == 7
    assert str(got.value).startswith("request 7 (shop.orders): registry http://r: register a schema under")
    assert "subject demo.shop.orders-value: refused" in str(got.value)


def test_accepted_schemas_let_the_pull_go_on_and_other_formats_ask_no_registry():
    ids = Ids()
    _puller(ids)[0]._register_schemas(_progress())
    assert len(ids.asked) == 2
    untouched = Ids(refuse=("demo.shop.orders-value",))
    _puller(untouched, "debezium-json")[0]._register_schemas(_progress("debezium-json"))
    assert untouched.asked == []


def test_the_level_is_the_one_the_shards_get_from_the_configuration_file_as_it_is_now():
    puller, levels = _puller(Ids(), compatibility="NONE")  # relaxed in the file after the service started
    puller._register_schemas(_progress())
    assert levels == ["NONE"]


def test_a_refusal_in_a_shards_spark_failure_is_found_by_its_last_line():
    spark_error = (
        "An error occurred while calling o123.save.\n: org.apache.spark.SparkException: Job aborted due to "
        "stage failure: Task 0 in stage 3.0 failed 1 times: org.apache.spark.api.python.PythonException: "
        'Traceback (most recent call last):\n  File "/work/main/fullpuller/perrow.py", line 128, in records\n'
        f"    out += encode(topic, change)\nums.formats.SchemaRefused: {REFUSAL}\n\n\tat org.apache.spark.api"
        f".python.BasePythonRunner$ReaderIterator.handlePythonException(PythonRunner.scala:572)\n"
    )
    assert job.refusal(spark_error) == REFUSAL
    assert job.refusal("An error occurred while calling o123.save.\n: java.net.ConnectException") is None
