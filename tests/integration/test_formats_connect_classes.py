"""debezium-json and avro records read by Kafka Connect's own classes: the stack's Kafka Connect 4.2.2
``JsonConverter`` and Apicurio 2.0.2's ``AvroData`` (the converter the stack's registry goes with), through
tests/interop/connect/src/ConnectCheck.java compiled against the stack's jars (.stack/jars/connect).

For every row change of every_type.sql (tests/unit/every_type_changes.py), a masked table without a key and
a table of GEOMETRY, POINT, BOOL and BIT(12) columns, under four option sets: ``JsonConverter`` reads each
debezium-json value into a valid Connect value and writes it back as the same JSON; the Avro schema
``AvroData`` derives from that Connect schema is the one DBus registers; the avro value, read with its
schema and turned into Connect data by ``AvroData``, is the same Connect schema and payload.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from ums.formats import FormatOptions
from ums.formats.avro import AvroRows
from ums.formats.debezium import DebeziumJson
from ums.message import UmsField
from ums.rowchange import RowChange, TableShape
from ums.types import ColumnSpec

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "unit"))
from every_type_changes import changes, pulled  # noqa: E402

pytestmark = pytest.mark.integration

JARS = Path(os.environ.get("STACK_CACHE", REPO / ".stack")) / "jars" / "connect"
CLASSPATH = f"{JARS}/runtime/*:{JARS}/plugins/apicurio-converter/*"
OPTIONS = [
    FormatOptions(),
    FormatOptions(
        decimal_handling_mode="string", bigint_unsigned_handling_mode="precise", binary_handling_mode="hex"
    ),
    FormatOptions(
        time_precision_mode="connect", decimal_handling_mode="double", propagate_source_types=False
    ),
    FormatOptions(binary_handling_mode="base64-url-safe", tombstones=False),
]


def _changes() -> list[RowChange]:
    every = [*changes(), *pulled()]
    first = every[0]
    assert first.after is not None
    masked = tuple(replace(f, encoded=True) if f.name in ("vc", "i") else f for f in first.table.fields)
    after = tuple("x" if f.encoded else v for f, v in zip(masked, first.after, strict=True))
    every.append(replace(first, table=replace(first.table, fields=masked, primary_key=()), after=after))
    columns = (
        ColumnSpec("id", "int(11)", False),
        ColumnSpec("g", "geometry"),
        ColumnSpec("p", "point"),
        ColumnSpec("b", "bool"),
        ColumnSpec("bits", "bit(12)"),
    )
    fields = tuple(UmsField(c.name, c.ums_type, c.nullable) for c in columns)
    point = bytes.fromhex("0101000000000000000000f03f0000000000000040")  # POINT(1 2), SRID 4326
    value = base64.b64encode((4326).to_bytes(4, "little") + point).decode()
    shape = TableShape("demo", "geo", "places", 3, columns, fields, ("id",))
    every.append(replace(first, table=shape, after=(1, value, value, 1, 4095)))
    return every


QUICK_JVM = ("-J-XX:TieredStopAtLevel=1", "-J-XX:+UseSerialGC")  # javac's own JVM: a short run, C1 costs less


@pytest.fixture(scope="module")
def classes(tmp_path_factory) -> Path:
    if not (JARS / "runtime").is_dir():
        pytest.fail(f"no Kafka Connect jars in {JARS}: run make stack-up")
    out = tmp_path_factory.mktemp("connect-check")
    source = REPO / "tests" / "interop" / "connect" / "src" / "ConnectCheck.java"
    subprocess.run(
        ["javac", *QUICK_JVM, "--release", "17", "-nowarn", "-d", str(out), "-cp", CLASSPATH, str(source)],
        check=True,
        timeout=300,
    )
    return out


@pytest.mark.parametrize(
    "options", OPTIONS, ids=["default", "string-precise-hex", "connect-double-bare", "urlsafe"]
)
def test_connects_classes_read_the_records(classes, tmp_path, options):
    schemas: dict[str, int] = {}
    json_format = DebeziumJson(options)
    avro_format = AvroRows(options, lambda subject, text: schemas.setdefault(text, len(schemas) + 1))
    texts: list[str] = []
    for change in _changes():
        pairs = zip(json_format.records("t", change), avro_format.records("t", change), strict=True)
        for as_json, as_avro in pairs:
            if as_json.value is None:
                assert as_avro.value is None
                continue
            assert as_avro.value is not None
            n = len(texts)
            text = next(t for t, i in schemas.items() if i == int.from_bytes(as_avro.value[1:5], "big"))
            texts.append(text)
            (tmp_path / f"{n}.json").write_bytes(as_json.value)
            (tmp_path / f"{n}.avro").write_bytes(as_avro.value)
            (tmp_path / f"{n}.avsc").write_text(text, encoding="utf-8")
    done = subprocess.run(
        ["java", "-cp", f"{classes}:{CLASSPATH}", "ConnectCheck", str(tmp_path), str(len(texts))],
        capture_output=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode("utf-8", "replace")[-3000:]
    lines = [json.loads(line) for line in done.stdout.decode("utf-8").splitlines() if line.startswith("{")]
    assert len(lines) == len(texts) >= 19
    for line, text in zip(lines, texts, strict=True):
        assert line["json_round_trip"], line["record"]
        assert line["avro_payload"] and line["avro_connect_schema"], line["record"]
        assert json.loads(line["avro_schema"]) == json.loads(text), line["record"]
