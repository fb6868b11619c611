"""ums.masktext: masked messages written from the JVM's lines equal the value path's (the JVM's lines
parsed, ``appender.convert.masked``, ``ums.to_json``) byte for byte, and count the same mask errors,
for any table, row, rule and message limit."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from ums_strategies import PYTHON_VALUES

from appender.convert import ConvertSettings, masked, rendered_messages
from binlog import rawevent
from binlog.rawevent import RawHeader
from binlog.rows import DecodedRows, decode_rows, table_of
from dbuslib.config import MaskRule
from ums import Namespace, to_json, ums_id, ums_ts_ms
from ums.build import data_schema
from ums.encoding import dumps_compact
from ums.masking import compile_rules
from ums.masktext import LineMask, masked_event_messages, masked_prefix
from ums.message import SYSTEM_NAMES
from ums.types import ColumnSpec
from ums.values import encode_column, encode_value

COLUMN_TYPES = (
    "int",
    "bigint",
    "float",
    "double",
    "decimal(12,2)",
    "date",
    "datetime(3)",
    "varchar(20)",
    "varbinary(20)",
    "json",
    "time",
)
names = st.text('abcdefgh_,"é', min_size=1, max_size=4).filter(lambda n: n not in SYSTEM_NAMES)
columns = st.lists(
    st.builds(ColumnSpec, names, st.sampled_from(COLUMN_TYPES), st.booleans()),
    min_size=1,
    max_size=6,
    unique_by=lambda c: c.name,
)
texts = st.text(max_size=12) | st.sampled_from(["", "a,b", 'x"y', "é,", "\\", ",", "1,2,3", "\x1f"])


@st.composite
def rules(draw, names: list[str]):
    kind = draw(st.sampled_from(["default", "replace", "md5", "sha256", "regex", "truncate"]))
    salt = draw(st.none() | st.text(max_size=4))
    salt_field = None if salt is not None else draw(st.none() | st.sampled_from([*names, "absent"]))
    return MaskRule(
        type=kind,
        value=draw(texts | st.sampled_from(["0", "1.5", "true", "2024-01-02"]))
        if kind == "replace"
        else None,
        salt=salt,
        salt_field=salt_field,
        pattern=draw(st.sampled_from(["(.).*", "(.*)", "(a)(.*)", "([0-9]+)"])) if kind == "regex" else None,
        replacement=draw(st.sampled_from([r"\1*", "x,y", ""])) if kind == "regex" else None,
        length=draw(st.integers(0, 8)) if kind == "truncate" else None,
    )


@st.composite
def events(draw):
    cols = tuple(draw(columns))
    col_names = [c.name for c in cols]
    masked_names = draw(st.lists(st.sampled_from(col_names), min_size=1, unique=True))
    table_rules = {}
    for name in masked_names:
        rule = draw(rules(col_names))
        if rule.salt_field == name:
            rule = rule.model_copy(update={"salt_field": None})
        table_rules[name] = rule
    op = draw(st.sampled_from("iud"))
    n = draw(st.integers(1, 7)) * (2 if op == "u" else 1)

    def value(c: ColumnSpec) -> object:
        if c.nullable and draw(st.booleans()):
            return None
        if c.ums_type.value == "string":
            return draw(texts)
        return encode_value(c.ums_type, draw(PYTHON_VALUES[c.ums_type]))

    # what the JVM writes (tests/unit/test_jvm_rows.py): each column's UMS JSON, joined by ","
    lines = [",".join(dumps_compact(value(c)) for c in cols).encode() for _ in range(n)]
    return cols, table_rules, op, lines


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    event=events(),
    before=st.booleans(),
    limits=st.sampled_from([(500, 1_000_000), (2, 1_000_000), (500, 300), (1, 1), (3, 700)]),
)
@example(
    event=(
        (ColumnSpec("id", "bigint", False), ColumnSpec("status", "varchar(16)"), ColumnSpec("note", "text")),
        {"status": MaskRule(type="sha256", salt="bench"), "note": MaskRule(type="truncate", length=6)},
        "u",
        [b'1,"new","note 1 \xc3\xa9"', b'1,"shipped","a, b"', b"2,null,null", b'2,"x","\\u001f,"'],
    ),
    before=True,
    limits=(500, 1_000_000),
)
def test_masked_text_equals_the_value_path(event, before, limits):
    cols, table_rules, op, lines = event
    max_tuples, max_bytes = limits
    conv = ConvertSettings(ds="demo", before_update_image=before, max_tuples=max_tuples, max_bytes=max_bytes)
    header = RawHeader(kind="rows", file="mysql-bin.000007", pos=4242, ts=1_700_000_000)
    shape = DecodedRows("db", "t", op, cols, (), ())
    old_plan, new_plan = compile_rules({"db.*": table_rules}), compile_rules({"db.*": table_rules})

    expected = [
        to_json(m).encode() for m in masked(old_plan, rendered_messages(header, shape, lines, 2, conv))
    ]

    ns = Namespace("mysql", "demo", "db", "t", 2)
    fields = data_schema(ns, cols).fields
    mask = new_plan.for_table("db", "t", fields)
    assert mask is not None
    line_mask = LineMask.of(mask, len(fields) - len(cols), len(cols))
    assert line_mask is not None
    uid, ts = ums_id(header.file, header.pos), ums_ts_ms(header.ts * 1000)
    got = masked_event_messages(
        masked_prefix(ns, mask.fields), line_mask, uid, ts, op, lines, before, max_tuples, max_bytes
    )
    assert got == expected
    assert new_plan.errors == old_plan.errors


RECORDS = [
    bytes.fromhex("".join(line for line in p.read_text().splitlines() if not line.startswith("#")))
    for p in sorted((Path(__file__).resolve().parents[1] / "golden" / "records").glob("*.hex"))
]
EVERY_RULE = [
    MaskRule(type="sha256", salt="s"),
    MaskRule(type="truncate", length=3),
    MaskRule(type="md5"),
    MaskRule(type="default"),
    MaskRule(type="replace", value="0"),
    MaskRule(type="regex", pattern="(.).*", replacement=r"\1*"),
]


@pytest.mark.parametrize("before", [False, True])
@pytest.mark.parametrize("shift", range(len(EVERY_RULE)))
@pytest.mark.parametrize("index", range(len(RECORDS)))
def test_captured_records_masked_on_every_column_equal_the_value_path(index, shift, before):
    event = rawevent.decode(RECORDS[index])
    shape = table_of(event)
    table_rules = {c.name: EVERY_RULE[(k + shift) % len(EVERY_RULE)] for k, c in enumerate(shape.columns)}
    old_plan, new_plan = compile_rules({"*.*": table_rules}), compile_rules({"*.*": table_rules})
    conv = ConvertSettings(ds="demo", before_update_image=before)
    lines = rendered_lines(event)
    expected = [
        to_json(m).encode() for m in masked(old_plan, rendered_messages(event.header, shape, lines, 1, conv))
    ]

    ns = Namespace("mysql", "demo", shape.schema, shape.table, 1)
    fields = data_schema(ns, shape.columns).fields
    mask = new_plan.for_table(shape.schema, shape.table, fields)
    line_mask = LineMask.of(mask, len(fields) - len(shape.columns), len(shape.columns))
    h = event.header
    uid, ts = ums_id(h.file, h.pos), ums_ts_ms(h.ts * 1000)
    got = masked_event_messages(
        masked_prefix(ns, mask.fields), line_mask, uid, ts, shape.op, lines, before, 500, 1_000_000
    )
    assert got == expected
    assert new_plan.errors == old_plan.errors


def rendered_lines(event) -> list[bytes]:
    """What the JVM decoder writes (tests/unit/test_jvm_rows.py holds it to this)."""
    d = decode_rows(event)
    images = [i for r in d.rows for i in (r.before, r.after) if i is not None]
    return [
        ",".join(dumps_compact(encode_column(c, im[c.name])) for c in d.columns).encode() for im in images
    ]
