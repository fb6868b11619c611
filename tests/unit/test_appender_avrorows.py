"""appender.avrorows: Avro values written from the JVM's lines by column equal ``encode_avro`` of the
messages the tuple path builds (``rendered_messages``), byte for byte, for the captured records of
tests/golden/records/ and a bench-shaped event; and the processor sends the same records either way."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from appender.avrorows import rendered_avro
from appender.convert import ConvertSettings, rendered_messages, to_ums
from appender.output import MessageEncoder
from appender.process import InRecord, Outputs, PartitionProcessor
from binlog import rawevent
from binlog.rawevent import RawHeader
from binlog.rows import DecodedRows, decode_rows, table_of
from dbuslib.metastore import Reason, Version
from ums.avro import encode_avro
from ums.encoding import dumps_compact
from ums.types import ColumnSpec
from ums.values import encode_column

RECORDS_DIR = Path(__file__).resolve().parents[1] / "golden" / "records"
RECORDS = [
    bytes.fromhex("".join(line for line in p.read_text().splitlines() if not line.startswith("#")))
    for p in sorted(RECORDS_DIR.glob("*.hex"))
]
SPLITS = [(500, 1_000_000), (2, 1_000_000), (3, 1_000_000), (500, 300), (1, 1), (500, 2000)]


def rendered_lines(event) -> list[bytes]:
    """What the JVM decoder writes (tests/unit/test_jvm_rows.py holds it to this)."""
    d = decode_rows(event)
    images = [i for r in d.rows for i in (r.before, r.after) if i is not None]
    return [
        ",".join(dumps_compact(encode_column(c, im[c.name])) for c in d.columns).encode() for im in images
    ]


def expected(header, shape, lines, settings):
    messages = rendered_messages(header, shape, lines, 1, settings)
    return [encode_avro(m) for m in messages], {m.schema for m in messages}


@pytest.mark.parametrize("before_image", [False, True])
@pytest.mark.parametrize(("max_tuples", "max_bytes"), SPLITS)
@pytest.mark.parametrize("index", range(len(RECORDS)))
def test_by_column_equals_the_tuple_path(index, before_image, max_tuples, max_bytes):
    event = rawevent.decode(RECORDS[index])
    settings = ConvertSettings(
        ds="demo",
        timezone="Asia/Shanghai",
        before_update_image=before_image,
        max_tuples=max_tuples,
        max_bytes=max_bytes,
    )
    shape, lines = table_of(event), rendered_lines(event)
    values, schemas = expected(event.header, shape, lines, settings)
    schema, got = rendered_avro(event.header, shape, lines, 1, settings)
    assert got == values and schemas == {schema}
    reference = to_ums(event.header, decode_rows(event), 1, settings)
    assert got == [encode_avro(m) for m in reference]


BENCH_COLUMNS = (
    ColumnSpec("id", "bigint(20)", False),
    ColumnSpec("customer_id", "int(11)", False),
    ColumnSpec("status", "varchar(16)", False),
    ColumnSpec("total", "decimal(12,2)", False),
    ColumnSpec("placed_at", "datetime(3)", False),
    ColumnSpec("note", "varchar(64)", True),
    ColumnSpec("qty", "smallint(6)", True),
)


def bench_lines(n: int) -> list[bytes]:
    def note(i: int) -> str:
        return "null" if i % 10 == 0 else f'"note {i} é"' if i % 7 == 0 else f'"note {i}"'

    return [
        f'"{i - 7}",{i % 9973 - 50},"paid","{i % 1000}.25","2026-11-22 10:00:00.{i % 1000:03d}",{note(i)},'
        f"{'null' if i % 13 == 0 else i % 7}".encode()
        for i in range(n)
    ]


@pytest.mark.parametrize("op", ["i", "u", "d"])
@pytest.mark.parametrize("before_image", [False, True])
@pytest.mark.parametrize(("max_tuples", "max_bytes"), [(500, 1_000_000), (500, 60_000), (7, 1_000_000)])
def test_many_rows_of_the_bench_table(op, before_image, max_tuples, max_bytes):
    header = RawHeader("rows", file="mysql-bin.000003", pos=123456, ts=1763800000, schema="db", table="t0")
    shape = DecodedRows("db", "t0", op, BENCH_COLUMNS, ("id",), ())
    lines = bench_lines(2468 if op == "u" else 1234)
    settings = ConvertSettings(
        ds="demo", before_update_image=before_image, max_tuples=max_tuples, max_bytes=max_bytes
    )
    values, schemas = expected(header, shape, lines, settings)
    schema, got = rendered_avro(header, shape, lines, 1, settings)
    assert len(got) > 1 and got == values and schemas == {schema}


class Store:
    def __init__(self) -> None:
        self.schemas: dict[str, str] = {}

    def add_avro_schema(self, namespace: str, fp: str, text: str) -> None:
        self.schemas[fp] = text

    def avro_schema(self, fp: str) -> None:
        return None


def avro_processor(stored):
    return PartitionProcessor(
        settings=ConvertSettings("demo", max_tuples=1),
        outputs=Outputs(result_topic=lambda s, t: f"demo.{s}.result", dead_letter_topic="demo.dlq"),
        history=lambda s, t: list(stored.get((s, t), [])),
        persist=lambda s, t, v: stored.setdefault((s, t), []).append(v) or v,
        encoder=MessageEncoder("avro", Store()),
    )


@pytest.mark.parametrize("masked", [False, True])
def test_the_processor_sends_the_same_avro_records_by_column(masked):
    """Rendered rows (by column; masked tables through the tuple path) give the records the Python
    decoder's path gives: values, keys, headers (the schema fingerprint included), termination first."""
    from dbuslib.config import MaskRule
    from ums.masking import compile_rules

    plan = compile_rules({"dbus_unit_rowdecode.orders": {"note": MaskRule(type="sha256", salt="s")}})
    older = Version(0, 1, (), Reason.FIRST)
    for name in ("14_orders_insert", "15_orders_update", "16_orders_delete"):
        value = next(
            r for r, p in zip(RECORDS, sorted(RECORDS_DIR.glob("*.hex")), strict=True) if name in p.name
        )
        lines = b"\n".join(rendered_lines(rawevent.decode(value)))
        p = avro_processor({("dbus_unit_rowdecode", "orders"): [older]})
        q = avro_processor({("dbus_unit_rowdecode", "orders"): [older]})
        if masked:
            p.mask_plan = q.mask_plan = plan
        jvm = list(p.process(InRecord("t", 0, 0, b"k", value), rendered=lines))
        python = list(q.process(InRecord("t", 0, 0, b"k", value)))
        assert jvm == python and len(python) >= 2  # the old version's termination first
        assert {dict(o.headers)["ums_avro_schema"].decode() for o in python} == set(p.encoder._known.values())


@pytest.mark.parametrize("base", ["0", "7", "1030000012345678", "9223372036854775807"])
def test_uids_are_ums_uids(base):
    from appender.avrorows import _uids
    from ums.ids import ums_uids

    for n in (0, 1, 1500, 3):
        assert _uids(base, n) == ums_uids(base, n)


@pytest.mark.parametrize("base", ["9223372036854775808", "01", "x"])
def test_uids_refuse_what_ums_uids_refuses(base):
    from appender.avrorows import _uids
    from ums.errors import BadPositionError

    with pytest.raises(BadPositionError):
        _uids(base, 3)


@settings(max_examples=300, deadline=None)
@given(tail=st.binary(max_size=64), count=st.integers(0, 12), kinds_ok=st.booleans())
def test_any_avro_section_is_used_only_when_it_fits_and_never_raises(tail, count, kinds_ok):
    """The JVM's Avro section (``dbus_rows_avro``) as arbitrary bytes after the kinds: rendered_avro gives
    the lines' own Avro unless the section's kinds, count and offsets fit, and never raises."""
    header = RawHeader("rows", file="mysql-bin.000003", pos=123456, ts=1763800000, schema="db", table="t0")
    shape = DecodedRows("db", "t0", "i", BENCH_COLUMNS, ("id",), ())
    lines = bench_lines(5)
    s = ConvertSettings(ds="demo")
    kinds = b"LISSSsi" if kinds_ok else b"LISSSSi"
    section = kinds + count.to_bytes(4, "little") + tail
    want = rendered_avro(header, shape, lines, 1, s)
    schema, got = rendered_avro(header, shape, lines, 1, s, section=section)
    if not kinds_ok or count != len(lines):
        assert got == want[1]
