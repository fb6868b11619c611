"""A full pull in a per-row format on the real stack: ``dbus fullpull request`` of a table of every column
type of tests/golden/cdc/every_type.sql whose ``output.format`` is debezium-json, canal-json or avro (per
table globs; avro through the stack's registry), with ``output.topic: table``.

Every record of the table's own topic is decoded with ``ums.formats.decode`` (the readers' decoder) and
must give back the source rows: op r, ``source.snapshot`` true, the pull's ``ums_id_`` in the headers,
one record per row (unique ``ums_uid_``), keyed by the primary key, values equal to ``ums.values`` of a
SELECT of the same rows; the pull's start and end markers are on the schema's events topic, not among the
rows.
"""

from __future__ import annotations

import json

import pytest
from every_type import COLUMNS, CREATE, MAX_ROW, MIN_ROW, NULL_ROW, ODD_ROW, as_decoded, multi_row_insert
from fullpull_env import cleanup_fullpull, make_fullpull_env
from rowformats_live import delete_table_subjects, per_table_formats

from dbuslib import kafka, topics
from dbuslib.registry import Registry
from fullpuller import catalog
from fullpuller.render import python_columns
from ums.formats import UMS_ID_HEADER, UMS_UID_HEADER, decode
from ums.values import encode_column

pytestmark = pytest.mark.integration

TABLES = {"every_dbz": "debezium-json", "every_canal": "canal-json", "every_avro": "avro"}


@pytest.fixture(scope="module")
def fp(hold_stack, tmp_path_factory, source):  # hold_stack: its full puller runs between the tests
    env = make_fullpull_env(tmp_path_factory.mktemp("fullpull-rowformats"), source)
    try:
        per_table_formats(env, TABLES)
        env.sql("SET SESSION sql_mode = ''")  # the ODD_ROW zero dates and the invalid ENUM need it
        for table in TABLES:
            env.sql(
                CREATE.replace("TABLE every_type", f"TABLE {table}"),
                multi_row_insert(env.db, [MAX_ROW, MIN_ROW, ODD_ROW, NULL_ROW]).replace(
                    "INTO every_type", f"INTO {table}"
                ),
            )
        env.start()
        yield env
    finally:
        cleanup_fullpull(env)
        delete_table_subjects(env, "every_avro")  # the test's subjects, not left in the registry


def reference(fp, table: str) -> dict[str, list]:
    """ums.values of a SELECT of the table (FLOAT read exactly, as a DOUBLE), by the id's JSON text."""
    with fp.db.cursor() as cur:
        info = catalog.table_info(fp.db, fp.database, table)
        floats = python_columns(info.columns)
        exprs = ", ".join(
            f"CAST(`{c.name}` AS DOUBLE)" if c.name in floats else f"`{c.name}`" for c in info.columns
        )
        cur.execute(f"SELECT {exprs} FROM `{table}`")
        rows = cur.fetchall()
    return {
        json.dumps(row[0]): [
            json.loads(json.dumps(encode_column(c, as_decoded(c, v))))
            for c, v in zip(info.columns, row, strict=True)
        ]
        for row in rows
    }


def _zero_date(value: object) -> bool:
    return isinstance(value, str) and (value[:4] == "0000" or "00" in (value[5:7], value[8:10]))


@pytest.mark.parametrize("table", list(TABLES))
def test_every_pulled_record_decodes_back_to_the_source_row(fp, table):
    fmt = TABLES[table]
    seqno, out = fp.request(table, "--shard-size", "2")  # 4 rows, split by id: 2 shards
    assert out.returncode == 0, out.stderr
    p = fp.wait_finished(table, seqno)
    assert (p.Status, p.Format, p.PrimaryKey, p.FinishedRows) == ("ending", fmt, ["id"], 4), p
    src = fp.cfg.source(fp.ds)
    topic = topics.result_topic(fp.ds, src, fp.database, table)
    assert p.Topic == topic == f"{fp.ds}.{fp.database}.{table}"
    records = list(kafka.read_range(fp.cfg.endpoints.kafka, [topic]))
    registry = Registry.of(fp.cfg) if fmt == "avro" else None
    assert len(records) == 4
    want = reference(fp, table)
    if fmt != "canal-json":  # Debezium (and so its Avro) writes a zero date, month or day as null: formats.md
        for values in want.values():
            for i, (_, _, column_type, _) in enumerate(COLUMNS):
                if column_type.startswith(("date", "timestamp")) and _zero_date(values[i]):
                    values[i] = None
    names = [n for n, *_ in COLUMNS]
    got, uids = {}, set()
    for r in records:
        headers = tuple(r.headers or ())
        change = decode(fmt, r.key, r.value, headers, registry.schema if registry else None)
        assert change is not None
        assert (change.op, change.before, change.at.snapshot) == ("r", None, "true")
        assert dict(headers)[UMS_ID_HEADER] == p.UmsId.encode()
        assert dict(headers)[UMS_UID_HEADER] == change.ums_uid.encode()
        assert change.at.ums_id == int(p.UmsId) and change.at.file == (
            p.BinlogFile if fmt != "canal-json" else ""
        )
        assert [f.name for f in change.table.fields] == names and change.table.primary_key == ("id",)
        uids.add(change.ums_uid)
        got[json.dumps(change.after[0])] = json.loads(json.dumps(list(change.after)))
    assert len(uids) == 4 and all(u.startswith(p.UmsId) for u in uids)
    wrong = [
        f"id={k} {n}: pulled {g!r:.80} source {w!r:.80}"
        for k in want
        for n, g, w in zip(names, got.get(k, [None] * len(names)), want[k], strict=True)
        if g != w
    ]
    assert sorted(got) == sorted(want)
    assert wrong == [], "\n".join(wrong)
    events = topics.events_topic(fp.ds, src, fp.database)
    markers = [
        dict(r.headers)["dbus_fullpull"].decode()
        for r in kafka.read_range(fp.cfg.endpoints.kafka, [events])
        if dict(r.headers or ()).get("dbus_fullpull_id") == str(seqno).encode()
    ]
    assert markers == ["start", "end"]
