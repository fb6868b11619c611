"""The JVM rows decoder (binlog/jvm, ``dbus.jvm.RowsUdf``) agrees byte for byte with the Python decoder.

Contract: for a raw rows record, ``dbus.jvm.RowsDecoder`` gives the UMS JSON texts of every row image
(insert: after images; delete: before; update: before0, after0, before1, ...), one line per image, the
columns' ``dumps_compact`` texts joined by ",", lines by "\\n"; or null, and then Python decodes the record
itself. A null is always safe, a wrong byte never is. Checked here through ``dbus.jvm.RowsMain`` (framed
records on stdin, framed results on stdout) against the reference decoder: ``binlog.rows.decode_rows``
with each value through ``ums.values.encode_column``:

- every captured record of tests/golden/records/ (MariaDB 10.11 ``every_type``, ``narrow``, ``inet``,
  ``orders``: inserts, updates, deletes, NULLs, zero dates, latin1, emoji);
- the same records in lenient mode (unsupported columns written as ``?``) value by value, so each
  supported type of ``every_type`` is compared even where the table also has an unsupported one;
- header and envelope variants (chunk, version, kind, checksum, MINIMAL image) that must give null;
- seeded random mutations of the rows events and table maps (checksums fixed up): each result must be
  null or exactly Python's, and null whenever Python refuses the record.

The jar is built by binlog/jvm/build.sh into the stack's jar directory (a no-op when current); java and
javac must be on PATH (JDK 17): a missing JDK fails the test, it does not skip.
"""

from __future__ import annotations

import math
import random
import struct
import subprocess
import zlib
from dataclasses import replace
from pathlib import Path

import jvm_jar
import pytest

from binlog import rawevent
from binlog.rows import decode_rows
from ums.encoding import dumps_compact
from ums.values import encode_column

pytestmark = pytest.mark.jvm  # needs a JDK and the pyspark jars: `pytest -m "not jvm"` leaves it out

REPO = Path(__file__).resolve().parents[2]
NULL = None
RECORD_FILES = sorted((REPO / "tests" / "golden" / "records").glob("*.hex"))


def _read_record(path: Path) -> bytes:
    return bytes.fromhex("".join(line for line in path.read_text().splitlines() if not line.startswith("#")))


RECORDS = [_read_record(p) for p in RECORD_FILES]
NARROW = [_read_record(p) for p in RECORD_FILES if "_narrow_" in p.name]  # insert, update, delete
INET_RECORDS = [_read_record(p) for p in RECORD_FILES if "_inet_" in p.name]  # insert, update, delete


@pytest.fixture(scope="session")
def jar() -> Path:
    return jvm_jar.build()


def run_jvm(jar: Path, records: list[bytes], *flags: str) -> list[bytes | tuple[None, str]]:
    """RowsMain over ``records``: bytes per record, or (None, why) for a null."""
    data = b"".join(struct.pack(">I", len(r)) + r for r in records)
    out = subprocess.run(
        ["java", "-cp", str(jar), "dbus.jvm.RowsMain", "--why", *flags],
        input=data,
        capture_output=True,
        check=True,
        timeout=300,
    ).stdout
    results: list[bytes | tuple[None, str]] = []
    o = 0
    while o < len(out):
        (n,) = struct.unpack_from(">i", out, o)
        o += 4
        if n < 0:
            (m,) = struct.unpack_from(">i", out, o)
            results.append((NULL, out[o + 4 : o + 4 + m].decode()))
            o += 4 + m
        else:
            results.append(out[o : o + n])
            o += n
    assert len(results) == len(records)
    return results


def images(value: bytes) -> tuple[object, list[tuple]]:
    """The reference decoder's rows of ``value``, each image's values in UMS wire form (the JVM's oracle)."""
    r = decode_rows(rawevent.decode(value))
    rows = [i for row in r.rows for i in (row.before, row.after) if i is not None]
    return r, [tuple(encode_column(c, image[c.name]) for c in r.columns) for image in rows]


def expected(value: bytes) -> bytes:
    """What the JVM decoder must give for ``value`` (raises when Python refuses the record)."""
    _, rows = images(value)
    return b"\n".join(",".join(dumps_compact(v) for v in row).encode() for row in rows)


def expected_or_none(value: bytes) -> bytes | None:
    try:
        return expected(value)
    except Exception:
        return None


# Column types the JVM decoder does not handle (the whole record is then left to Python): MySQL's binary
# JSON and GEOMETRY (none in these MariaDB records: MariaDB's JSON is LONGTEXT).
UNSUPPORTED = {"json", "geometry"}


def test_real_records_are_exact_or_null_only_for_unsupported_types(jar):
    for value, got in zip(RECORDS, run_jvm(jar, RECORDS), strict=True):
        r, _ = images(value)
        if isinstance(got, tuple):
            types = {c.column_type.split("(")[0] for c in r.columns}
            assert types & UNSUPPORTED, f"{r.table} {r.op}: null ({got[1]}) without an unsupported column"
            assert got[1].startswith("column type"), got[1]
        else:
            assert got == expected(value)


def test_every_supported_column_value_is_exact_in_lenient_mode(jar):
    """Value by value (lenient mode would write unsupported columns as ?): names the column that differs."""
    compared = set()
    for value, got in zip(RECORDS, run_jvm(jar, RECORDS, "--lenient"), strict=True):
        assert not isinstance(got, tuple), got
        r, rows = images(value)
        lines = got.split(b"\n")
        assert len(lines) == len(rows)
        for line, row in zip(lines, rows, strict=True):
            texts = line.split(b"\0")
            assert len(texts) == len(row)
            for column, text, v in zip(r.columns, texts, row, strict=True):
                if text == b"?":
                    assert column.column_type.split("(")[0] in UNSUPPORTED, column
                    continue
                assert text == dumps_compact(v).encode(), (r.table, column.name, column.column_type)
                compared.add((r.table, column.name))
    every = {c.name for c in images(RECORDS[0])[0].columns}
    assert {n for t, n in compared if t == "every_type"} == every


COMMON = {
    "bigint",
    "int",
    "smallint",
    "tinyint",
    "mediumint",
    "decimal",
    "varchar",
    "char",
    "datetime",
    "timestamp",
    "date",
    "time",
    "year",
    "blob",
    "text",
    "varbinary",
    "binary",
    "float",
    "double",
    "enum",
    "set",
    "bit",
}


def test_common_types_take_the_fast_path(jar):
    """The fast path must not silently disappear: every real record (all common types) decodes, not null."""
    seen = set()
    for value, got in zip(RECORDS, run_jvm(jar, RECORDS), strict=True):
        r, _ = images(value)
        assert not isinstance(got, tuple), f"{r.table} {r.op}: null ({got[1]})"
        seen |= {
            c.column_type.split("(")[0]
            .split()[0]
            .removeprefix("tiny")
            .removeprefix("medium")
            .removeprefix("long")
            for c in r.columns
        }
    assert seen >= COMMON - {"tinyint", "mediumint"} | {"int"}, COMMON - seen


def _framed_repr(jar: Path, items: list[bytes]) -> list[str]:
    data = b"".join(struct.pack(">I", len(b)) + b for b in items)
    out = subprocess.run(
        ["java", "-cp", str(jar), "dbus.jvm.RowsMain", "--repr"],
        input=data,
        capture_output=True,
        check=True,
        timeout=300,
    ).stdout
    return out.decode().split("\n")[: len(items)]


def test_float_and_double_print_as_python_repr(jar):
    """DOUBLE: shortest round-trip digits, nearest on ties, Python's fixed/exponent layout; FLOAT: the
    shortest '%.Ng' that packs back to the same float32 (ums.scalars.float32_repr), printed by repr."""
    from ums.scalars import float32_repr

    rng = random.Random(1122)
    doubles = [
        1.0,
        -0.0,
        0.0,
        5e-324,
        2.0**-1022,
        1e16,
        1e15,
        0.0001,
        0.00001,
        1125899906842624.25,
        1125899906842624.75,
        2.0**60,
        2.0**-30,
        1.7976931348623157e308,
        0.1,
        1 / 3,
    ]
    for _ in range(20000):
        k = rng.random()
        if k < 0.5:
            x = struct.unpack("<d", rng.getrandbits(64).to_bytes(8, "little"))[0]
        elif k < 0.7:
            x = round(rng.uniform(-1e6, 1e6), rng.randrange(8))
        elif k < 0.85:
            x = math.ldexp(1.0, rng.randrange(-1074, 1024))
        else:
            x = float(f"{rng.randrange(1, 10 ** rng.randrange(1, 18))}e{rng.randrange(-320, 300)}")
        if math.isfinite(x):
            doubles.append(x)
    floats = [struct.unpack("<f", rng.getrandbits(32).to_bytes(4, "little"))[0] for _ in range(10000)]
    floats += [1.1, 3.4028234663852886e38, 1e-45, -0.0, 16777216.0, 0.1]
    floats = [f for f in floats if math.isfinite(f)]
    got = _framed_repr(jar, [struct.pack(">d", x) for x in doubles] + [struct.pack(">f", f) for f in floats])
    want = [repr(x) for x in doubles] + [repr(float32_repr(f)) for f in floats]
    assert [(w, g) for w, g in zip(want, got, strict=True) if w != g] == []


# ---------------------------------------------------------------- envelopes that must give null


def _with_header(value: bytes, **changes: object) -> bytes:
    ev = rawevent.decode(value)
    header = {k: v for k, v in {**ev.header, **changes}.items() if v is not ...}
    return rawevent.encode(replace(ev, header=header))


def _fix_event(event: bytes, crc: bool = True) -> bytes:
    """A binlog event with its size field and checksum made right again."""
    body = event[:-4] if crc else event
    body = body[:9] + struct.pack("<I", len(body) + (4 if crc else 0)) + body[13:]
    return body + struct.pack("<I", zlib.crc32(body)) if crc else body


def _with_rows_event(value: bytes, edit) -> bytes:
    ev = rawevent.decode(value)
    rows = bytearray(ev.rows_event_bytes())
    edit(rows)
    return rawevent.encode(replace(ev, body=ev.table_map_bytes() + _fix_event(bytes(rows))))


def _not_full(rows: bytearray) -> None:
    rows[19 + 8 + 1] &= 0xFE  # narrow is v1 (no extra data): clear column 0 of the present bitmap


NULL_CASES = {
    "chunk": lambda v: _with_header(v, chunk=[0, 1]),
    "kind ddl": lambda v: _with_header(v, kind="ddl", sql="DROP TABLE x"),
    "version 2": lambda v: v[:3] + b"\x02" + v[4:],
    "not DBR": lambda v: b"XBR" + v[3:],
    "bad checksum": lambda v: v[:-10] + bytes([v[-10] ^ 0xFF]) + v[-9:],
    "other table": lambda v: _with_header(v, table="other"),
    "tm_len off": lambda v: _with_header(v, tm_len=rawevent.decode(v).header["tm_len"] - 1),
    "no file": lambda v: _with_header(v, file=...),
    "event type mismatch": lambda v: _with_header(v, event_type=24),
    "not FULL": lambda v: _with_rows_event(v, _not_full),
    "empty": lambda v: b"",
}


@pytest.mark.parametrize("case", sorted(NULL_CASES))
def test_envelopes_python_does_not_decode_give_null(jar, case):
    value = NULL_CASES[case](NARROW[0])
    (got,) = run_jvm(jar, [value])
    assert isinstance(got, tuple), f"{case}: expected null, got {got[:80]!r}"


def _without_crc(value: bytes) -> bytes:
    ev = rawevent.decode(value)
    tm = _fix_event(ev.table_map_bytes()[:-4], crc=False)
    rows = _fix_event(ev.rows_event_bytes()[:-4], crc=False)
    header = {**ev.header, "crc": False, "tm_len": len(tm)}
    return rawevent.encode(replace(ev, header=header, body=tm + rows))


def test_records_without_checksums_and_v2_headers(jar):
    values = [_without_crc(v) for v in NARROW]
    values += [_with_header(v, flavor=..., gtid="") for v in NARROW]  # flavor from the event type
    for value, got in zip(values, run_jvm(jar, values), strict=True):
        assert got == expected(value)


# ---------------------------------------------------------------- random mutations


def _mutate(value: bytes, rng: random.Random) -> bytes:
    ev = rawevent.decode(value)
    tm, rows = bytearray(ev.table_map_bytes()), bytearray(ev.rows_event_bytes())
    target = tm if rng.random() < 0.25 else rows
    for _ in range(rng.choice((1, 1, 2, 4))):
        i = rng.randrange(19 + 8, len(target) - 4)
        target[i] = rng.randrange(256) if rng.random() < 0.7 else target[i] ^ (1 << rng.randrange(8))
    return rawevent.encode(replace(ev, body=_fix_event(bytes(tm)) + _fix_event(bytes(rows))))


def test_random_mutations_are_exact_or_null(jar):
    rng = random.Random(20261122)
    values = [_mutate(RECORDS[rng.randrange(len(RECORDS))], rng) for _ in range(1000)]
    decoded = 0
    for value, got in zip(values, run_jvm(jar, values), strict=True):
        want = expected_or_none(value)
        if isinstance(got, tuple):
            continue  # null is always allowed
        assert want is not None, f"JVM decoded a record Python refuses: {value.hex()}"
        assert got == want, value.hex()
        decoded += 1
    assert decoded > 150  # many value changes still decode


# ---------------------------------------------------------------- MariaDB INET4 / INET6 / UUID

INET6_AT = bytes.fromhex("1020010db8000000000000ff0000428329")  # length 16, then 2001:db8::ff00:42:8329


def _inet6_value(rng: random.Random) -> bytes:
    """16 bytes with zero runs, ffff groups and embedded IPv4 as often as plain random ones."""
    words = [rng.choice((0, 0, 0, 0xFFFF, 1, rng.randrange(0x10000))) for _ in range(8)]
    if rng.random() < 0.3:
        words[:6] = [0] * 6 if rng.random() < 0.5 else [0] * 5 + [0xFFFF]
    return struct.pack(">8H", *words) if rng.random() < 0.8 else rng.randbytes(16)


def test_inet6_uuid_and_inet4_texts_equal_python_for_random_values(jar):
    """Column b (INET6) of the first inserted row set to random bytes; read as INET6, then as UUID, and
    the 4-byte column e as INET4: the JVM's text is exactly Python's (which test_rowdecode_types holds to
    MariaDB's SELECT)."""
    rng = random.Random(4646)
    values = []
    for n in range(600):
        raw = _inet6_value(rng)
        value = _with_rows_event(
            INET_RECORDS[0],
            lambda rows, raw=raw: rows.__setitem__(
                slice(bytes(rows).index(INET6_AT) + 1, bytes(rows).index(INET6_AT) + 17), raw
            ),
        )
        types = [{"a": "inet4", "b": "inet6", "c": "uuid"}, {"b": "uuid", "e": "inet4"}][n % 2]
        values.append(_with_header(value, types=types))
    got = run_jvm(jar, values)
    assert [(v.hex(), g) for v, g in zip(values, got, strict=True) if g != expected(v)] == []


@pytest.mark.parametrize(
    "types",
    [{}, None, {"d": "inet4"}, {"e": "inet6"}, {"b": "uuid", "c": "inet6"}, {"a": "INET4"}, {"zz": "uuid"}],
)
def test_types_headers_decode_as_python_does(jar, types):
    values = [_with_header(v, types=types) for v in INET_RECORDS]
    for value, got in zip(values, run_jvm(jar, values), strict=True):
        assert got == expected(value)


@pytest.mark.parametrize("types", [["a"], "inet4", {"a": 4}, 1])
def test_a_malformed_types_header_gives_null(jar, types):
    (got,) = run_jvm(jar, [_with_header(INET_RECORDS[0], types=types)])
    assert isinstance(got, tuple) and "types" in got[1]
    assert expected_or_none(_with_header(INET_RECORDS[0], types=types)) is None


# ---------------------------------------------------------------- Avro of the rows (dbus_rows_avro)


def _split_avro(got: bytes) -> tuple[bytes, bytes | None]:
    cut = got.find(b"\0")
    return (got, None) if cut < 0 else (got[:cut], got[cut + 1 :])


@pytest.mark.parametrize("before_image", [False, True])
def test_avro_rows_give_the_avro_python_writes(jar, before_image):
    """``decodeWithAvro`` (the UDF ``dbus_rows_avro``): its lines are ``decode``'s, and the messages written
    from its Avro section (appender.avrorows.rendered_avro with ``section``) are byte for byte the ones
    written from the lines alone, for every real record and 300 mutated ones. A section whose kinds are
    not the schema's is not used (the lines are parsed instead)."""
    from appender.avrorows import jvm_rows, rendered_avro
    from appender.convert import ConvertSettings
    from binlog.rows import table_of
    from ums.build import data_schema
    from ums.message import SYSTEM_FIELDS, ProtocolType
    from ums.namespace import Namespace

    rng = random.Random(20261124)
    values = RECORDS + [_mutate(RECORDS[rng.randrange(len(RECORDS))], rng) for _ in range(300)]
    settings = ConvertSettings(ds="demo", before_update_image=before_image, max_tuples=7)
    used = 0
    for value, plain, both in zip(values, run_jvm(jar, values), run_jvm(jar, values, "--avro"), strict=True):
        if isinstance(plain, tuple):
            assert isinstance(both, tuple)
            continue
        lines_text, section = _split_avro(both)
        assert lines_text == plain
        if section is None or not plain:
            continue
        event = rawevent.decode(value)
        shape, lines = table_of(event), plain.split(b"\n")
        want = rendered_avro(event.header, shape, lines, 1, settings)
        assert rendered_avro(event.header, shape, lines, 1, settings, section=section) == want
        ns = Namespace("mysql", "demo", shape.schema, shape.table, 1)
        schema = data_schema(ns, shape.columns, 0, ProtocolType.DATA_INCREMENT_DATA)
        if jvm_rows(section, schema, len(lines)) is not None:
            used += 1
            assert len(schema.fields) == len(SYSTEM_FIELDS[ProtocolType.DATA_INCREMENT_DATA]) + len(
                shape.columns
            )
            wrong = bytes([section[0] ^ 0x20]) + section[1:]  # nullable <-> not
            assert jvm_rows(wrong, schema, len(lines)) is None
            assert rendered_avro(event.header, shape, lines, 1, settings, section=wrong) == want
    assert used >= len(RECORDS) // 2, used
