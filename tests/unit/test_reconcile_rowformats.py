"""fullpuller.reconcile's per-row path without Spark: ``row_tuples`` of every format's records merge
(``reconcile.merge``) into the table that the UMS messages of the same changes give.

The changes are tests/golden/cdc/every_type.sql's and its rows as a full pull (tests/unit/
rowformat_records.py writes them as UMS messages, b before u, as the appender does); the UMS side
is each message's tuples as the Spark passes read them (every value as the text Spark's JSON reader
gives: ``value_text``), the per-row side ``row_tuples`` of each format's records, in any order.
"""

from __future__ import annotations

import dataclasses
import json
import random

import pytest
import yaml
from every_type_changes import SHAPE
from rowformat_records import REGISTRY, TOPIC, encode, messages, row_changes

from dbuslib.config import DEFAULT_CONFIG, load_config
from fullpuller.reconcile import merge, row_tuples, value_text
from ums import formats
from ums.encoding import to_json
from ums.message import SYSTEM_FIELDS, ProtocolType
from ums.types import UmsType

USER = len(SYSTEM_FIELDS[ProtocolType.DATA_INCREMENT_DATA])
DATES = {f.name for f in SHAPE.fields if f.type in (UmsType.DATE, UmsType.DATETIME)}


def ums_tuples() -> list[tuple]:
    """(key, ums_id_, ums_uid_, ums_op_, row) of every UMS tuple, values as Spark's text of them."""
    out = []
    for msg in messages():
        names = msg.schema.names[USER:]
        for t in msg.payload:
            row = {n: value_text(v) for n, v in zip(names, t[USER:], strict=True)}
            out.append((row["id"], t[0], t[3], t[2], row))
    return out


def per_row_tuples(fmt: str) -> list[tuple]:
    records = []
    for msg in messages():
        for change in row_changes(msg):
            for n, r in enumerate(encode(fmt, change)):
                records.append((r.key, r.value, r.headers, f"{TOPIC}/0@{len(records) + n}"))
    random.Random(7).shuffle(records)
    schemas = {i: text for text, i in REGISTRY.texts.items()}  # as reconcile fetches them, by id
    out = []
    for ns, _fields, ums_id, _ts, op, uid, vals, error in row_tuples(
        records, fmt, "golden", "cdc_types", ("id",), schemas
    ):
        assert error is None, error
        assert ns == "mysql.demo.golden.cdc_types.1.0.0"
        out.append((vals["id"], str(ums_id), uid, op, vals))
    return out


def without_zero_dates(rows: dict) -> dict:
    """Debezium (debezium-json, avro) writes MySQL's zero dates (or a zero month or day) as null
    (docs/formats.md): the same here for every side."""

    def zero(name: str, v: object) -> bool:
        return name in DATES and isinstance(v, str) and (v[:4] == "0000" or "00" in (v[5:7], v[8:10]))

    return {k: {n: None if zero(n, v) else v for n, v in r.items()} for k, r in rows.items()}


@pytest.mark.parametrize("fmt", formats.PER_ROW)
def test_every_format_reconciles_to_the_table_ums_gives(fmt):
    expected = merge(ums_tuples())
    got = merge(per_row_tuples(fmt))
    assert sorted(got) == sorted(expected)
    if fmt == "canal-json":
        assert got == expected
    else:
        assert without_zero_dates(got) == without_zero_dates(expected)


def test_the_first_tuple_of_each_shape_carries_its_fields_and_a_bad_record_its_error():
    change = row_changes(messages()[0])[0]
    records = [
        (r.key, r.value, r.headers, f"{TOPIC}/0@{n}") for n, r in enumerate(encode("canal-json", change))
    ]
    records += [(b"k", b'{"isDdl": false}', (("ums_id_", b"1"), ("ums_uid_", b"1")), f"{TOPIC}/0@9")]
    records += [(r.key, r.value, r.headers, "x") for r in encode("canal-json", change)]
    rows = list(row_tuples(records, "canal-json", "golden", "cdc_types", ("id",)))
    assert [r[1] is not None for r in rows] == [True, False, False]
    fields = json.loads(rows[0][1])
    assert [f["name"] for f in fields][:2] == ["id", "ti"] and fields[0]["type"] == "int"
    assert rows[1][7].startswith(f"{TOPIC}/0@9: not a canal-json record")
    # another table's records give nothing
    assert list(row_tuples(records[:1], "canal-json", "golden", "other", ("id",))) == []


def test_value_text_is_spark_s_text_of_the_json_token():
    assert [value_text(v) for v in (None, "x", True, False, 42, -1.5, 1.7976931348623157e308)] == [
        None,
        "x",
        "true",
        "false",
        "42",
        "-1.5",
        "1.7976931348623157e+308",
    ]


@pytest.mark.parametrize("fmt", formats.PER_ROW)
def test_a_schema_topic_of_several_formats_and_ums_gives_the_table_s_tuples_only(fmt):
    """Another table's records in another format, and UMS messages, are not this table's: skipped
    without an error, as the UMS passes skip other tables."""
    other = next(f for f in formats.PER_ROW if f != fmt)
    records = []
    for msg in messages():
        records.append((b"k", to_json(msg).encode(), (), "ums"))
        for change in row_changes(msg):
            theirs = dataclasses.replace(change, table=dataclasses.replace(SHAPE, table="other"))
            records += [(r.key, r.value, r.headers, "theirs") for r in encode(other, theirs)]
            records += [(r.key, r.value, r.headers, "ours") for r in encode(fmt, change)]
    schemas = {i: text for text, i in REGISTRY.texts.items()}
    rows = list(row_tuples(records, fmt, "golden", "cdc_types", ("id",), schemas))
    assert [r[7] for r in rows if r[7] is not None] == []
    got = merge((vals["id"], str(ums_id), uid, op, vals) for _, _, ums_id, _, op, uid, vals, _ in rows)
    assert without_zero_dates(got) == without_zero_dates(merge(ums_tuples()))


def test_verify_compares_zero_dates_as_null_where_the_other_side_has_no_value_for_them(tmp_path):
    from fullpuller.verify import without_zero_dates as zero_as_null
    from fullpuller.verify import zero_dates_null

    types = (UmsType.INT, UmsType.DATE, UmsType.DATETIME, UmsType.STRING)
    render = zero_as_null(tuple, types)
    assert render((1, "0000-00-00", "2024-00-15 01:02:03", "0000-00-00")) == (1, None, None, "0000-00-00")
    assert render((1, "2024-01-02", "2024-01-02 00:00:00", "x")) == (
        1,
        "2024-01-02",
        "2024-01-02 00:00:00",
        "x",
    )
    raw = yaml.safe_load(DEFAULT_CONFIG.read_text())
    raw["sources"]["demo"]["output"] = {
        "tables": {"shop.a": "avro", "shop.d": "debezium-json", "shop.c": "canal-json"}
    }
    path = tmp_path / "dbus.yaml"
    path.write_text(yaml.safe_dump(raw))
    cfg = load_config(path)
    assert [zero_dates_null(cfg, "demo", "shop", t, False) for t in ("a", "d", "c", "u")] == [
        True,
        True,
        False,
        False,
    ]
    assert zero_dates_null(cfg, "demo", "shop", "u", True)
