"""Real-time mode writes avro in the JVM (docs/realtime.md), on the real stack with its registry.

tests/golden/cdc/every_type.sql (every column type MariaDB has) and a workload of 600 rows (inserts in
batches, updates, a primary-key change, deletes, a table without a key) are captured by the extractor and
appended with ``output.format: avro`` twice from the same raw records: in micro-batch mode (the Python
formatter) and in real-time mode (``dbus.jvm.ConfluentAvro`` once the sidecar described each table, drained
with ``available_now``). Each run has its own topics, so its own registry subjects and ids: each table's
topic holds the same records both ways once each 4-byte id is read as the schema the registry holds for it
(key, value, headers byte for byte otherwise); confluent-kafka's ``AvroDeserializer`` with its
``SchemaRegistryClient``, unmodified, reads every record of both runs to the same envelopes; they decode to
the source's row changes; and the JVM wrote most records (``AppendUdf.counts()``).
"""

from __future__ import annotations

import contextlib
import urllib.request

import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer
from confluent_kafka.serialization import MessageField, SerializationContext
from rowformats_live import (
    append_workload_both_ways,
    check_workload_orders,
    forget_table_versions,
    per_row_config,
)

from dbuslib import kafka, topics
from dbuslib.registry import Registry
from ums.formats import decode

pytestmark = pytest.mark.integration


@pytest.fixture
def env(extractor_env):
    return extractor_env  # conftest.py: an extractor capturing only this test's database


def records_of(endpoint, topic: str) -> list:
    return sorted(kafka.read_range(endpoint, [topic]), key=lambda r: (r.partition, r.offset))


def comparable(records, schema) -> tuple[list, list]:
    """A topic's records as both modes must write them, each id read as its schema's text: keyed records by
    partition in offset order; records without a key sorted (the producer picks their partition)."""

    def framed(data: bytes | None) -> tuple[str, bytes] | None:
        return None if data is None else (schema(int.from_bytes(data[1:5], "big")), data[:1] + data[5:])

    keyed = [(r.partition, framed(r.key), framed(r.value), tuple(r.headers)) for r in records if r.key]
    keyless = sorted(((framed(r.value) or ("", b"")), tuple(r.headers)) for r in records if r.key is None)
    return keyed, keyless


def delete_subjects(url: str, subjects: list[str]) -> None:
    for subject in subjects:
        for query in ("", "?permanent=true"):
            with contextlib.suppress(OSError):
                request = urllib.request.Request(f"{url}/subjects/{subject}{query}", method="DELETE")
                urllib.request.urlopen(request, timeout=10)


def test_realtime_avro_is_written_in_the_jvm(spark, env, writer_db, tmp_path):
    db, name = writer_db
    cfg, cfg_jvm = (per_row_config(env, "avro", trigger, "avro") for trigger in ("microbatch", "realtime"))
    tables = ["orders", "nokey", "cdc_types"]
    table_topics = {
        t: [topics.result_topic(env.ds, c.source(env.ds), name, t) for c in (cfg, cfg_jvm)] for t in tables
    }
    dlq = cfg.source(env.ds).topics.name("dead_letter", env.ds)
    kafka.ensure_topics(env.cfg.endpoints.kafka, [env.topic, dlq])
    registry = Registry.of(cfg)
    url = registry.url.rstrip("/")
    subjects = [f"{t}-{side}" for pair in table_topics.values() for t in pair for side in ("key", "value")]
    try:
        in_jvm, in_python = append_workload_both_ways(spark, env, db, cfg, cfg_jvm, tmp_path)
        assert in_jvm >= 0.8 * (in_jvm + in_python), (in_jvm, in_python)
        assert kafka.read_range(cfg.endpoints.kafka, [dlq]) == []

        confluent = SchemaRegistryClient({"url": url})
        deserialize = AvroDeserializer(confluent)
        read = 0
        for table, (mb_topic, rt_topic) in table_topics.items():
            want, got = records_of(cfg.endpoints.kafka, mb_topic), records_of(cfg.endpoints.kafka, rt_topic)
            assert want, table
            assert comparable(got, registry.schema) == comparable(want, registry.schema), table

            def envelopes(records, topic):
                return [
                    (
                        None
                        if r.key is None
                        else deserialize(r.key, SerializationContext(topic, MessageField.KEY)),
                        None
                        if r.value is None
                        else deserialize(r.value, SerializationContext(topic, MessageField.VALUE)),
                    )
                    for r in records
                ]

            jvm_envelopes = envelopes(got, rt_topic)  # AvroDeserializer reads every record the JVM wrote
            read += len(jvm_envelopes)
            if table != "nokey":  # keyed: one partition order both ways
                assert jvm_envelopes == envelopes(want, mb_topic), table
        print(f"{read} records of the real-time run read by confluent-kafka's AvroDeserializer")

        orders = records_of(cfg.endpoints.kafka, table_topics["orders"][1])
        check_workload_orders(
            [decode("avro", r.key, r.value, tuple(r.headers), registry.schema) for r in orders]
        )
    finally:
        kafka.delete_topics(
            env.cfg.endpoints.kafka, [t for pair in table_topics.values() for t in pair] + [dlq]
        )
        delete_subjects(url, subjects)
        forget_table_versions(env)
