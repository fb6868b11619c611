"""canal-json records read by Canal's own class: ``FlatMessage`` parsed by fastjson2 as Canal's Kafka client
does (tests/interop/canal: Canal 1.1.8's canal.protocol, its fastjson2 2.0.31, kafka-clients), from the
stack's Kafka.

The records of every_type.sql's row changes (tests/unit/every_type_changes.py: inserts, updates with and
without before images, deletes and their tombstones, the primary-key change, a full pull) and 100 more
inserts, written by ``ums.formats.canal.CanalJson`` to a fresh topic; the Java reader prints each parsed
message's fields through FlatMessage's getters, and every field must be the one written, every value
reading back (``decode_canal``) as the source's UMS value; the table Canal's messages rebuild (applied in
order by primary key, in Java: tests/integration/canal_reader.py) must be the source's last state.
"""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from dbuslib import kafka
from ums.formats import FormatOptions
from ums.formats.canal import CanalJson, decode_canal
from ums.rowchange import RowChange

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "unit"))
import canal_reader  # noqa: E402
from every_type_changes import changes, pulled, rows  # noqa: E402

pytestmark = pytest.mark.integration


def _source() -> list[RowChange]:
    every = changes()
    without_before = [replace(c, before=None) for c in every if c.op == "u" and not c.key_changed][:1]
    return every + without_before + pulled() + rows(100)


def _named(change: RowChange, values: tuple | None) -> dict | None:
    if values is None:
        return None
    return {f.name: (type(v).__name__, v) for f, v in zip(change.table.fields, values, strict=True)}


def test_canal_reads_every_record(kafka_up, new_topic):
    topic = new_topic()
    fmt = CanalJson(FormatOptions())
    written = [(change, r) for change in _source() for r in fmt.records(topic, change)]
    producer = kafka.producer(kafka_up)
    try:
        for _, r in written:
            producer.send(topic, key=r.key, value=r.value, headers=list(r.headers))
        producer.flush()
    finally:
        producer.close()

    parsed = canal_reader.messages(kafka_up.bootstrap_servers, topic)
    assert (
        len(parsed) == len(written) == 121
    )  # 117 changes: 114 one record each, 2 deletes + tombstones, 1 key change (3)

    tombstones = 0
    for (change, record), got in zip(written, parsed, strict=True):
        assert got["key"] == (None if record.key is None else record.key.decode())
        if record.value is None:
            assert got == {"key": got["key"], "tombstone": True}
            tombstones += 1
            continue
        sent = json.loads(record.value)
        # every field of Canal's FlatMessage, through its getters, is the one written
        assert got == {"key": got["key"]} | {name: sent[name] for name in got if name != "key"}
        assert set(got) - {"key"} == set(sent)
        assert got["id"] == change.at.ums_id and got["es"] == change.at.ts_ms
        assert (got["database"], got["table"]) == (change.table.schema, change.table.table)
        assert got["mysqlType"] == {c.name: c.column_type for c in change.table.columns}
        # and what Canal holds reads back as the source's UMS values
        again = decode_canal(
            record.key, json.dumps({k: v for k, v in got.items() if k != "key"}).encode(), record.headers
        )
        assert again is not None  # fastjson2's maps keep no order: compare by column name
        image = again.before if got["type"] == "DELETE" else again.after
        source = change.before if got["type"] == "DELETE" else change.after
        assert _named(again, image) == _named(change, source), f"{got['type']} id {got['data'][0]['id']}"
        if got["type"] == "UPDATE":
            assert _named(again, again.before) == _named(change, change.before)
    assert tombstones == sum(1 for c in _source() if c.op == "d" or c.key_changed)

    # the table Canal's messages rebuild is the source's last state
    expected: dict[tuple, dict] = {}
    for change in _source():
        names = [f.name for f in change.table.fields]
        if change.before is not None:
            expected.pop((change.before[0],), None)
        if change.after is not None:
            expected[(change.after[0],)] = dict(zip(names, change.after, strict=True))
    rebuilt = canal_reader.tables(kafka_up.bootstrap_servers, [topic])
    assert list(rebuilt) == [("golden", "cdc_types")]
    assert rebuilt[("golden", "cdc_types")] == expected
    assert len(expected) == 106  # 4, 5, 10 left by the changes; 1, 2, 3 pulled again; 1000..1099
