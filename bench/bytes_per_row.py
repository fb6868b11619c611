"""Record bytes per row change of each output format: a pure measurement, no stack.

The rows are the e2e bench's own workload (bench/e2e.py ``write_workload``: per table 4/5 inserts in
statements of 1000 rows, then 1/5 updates of ``status`` and ``qty`` in statements of 1000 rows; 7 columns:
BIGINT key, INT, VARCHAR, DECIMAL(12,2), DATETIME(3), nullable VARCHAR, SMALLINT), BENCH_BYTES_ROWS row
changes (default 20,000) of one table, as the appender writes them:

- ``ums`` / ``ums_avro``: UMS ``data_increment_data`` messages of ``ums.tuples_per_message`` tuples (an
  update is its ``u`` tuple: ``ums.before_update_image`` off, the default), JSON or the UMS Avro form
  (``ums.format: avro``), each record with its key ``<schema>.<table>`` and ``ums_key`` header (and the
  Avro form's ``ums_avro_schema`` header);
- ``debezium_json``, ``canal_json``, ``avro``: one record per row change from ``ums.formats`` with the
  source's ``output`` options (debezium-json with its ``schema`` part, as Kafka Connect's JsonConverter
  writes it by default; avro in the Confluent wire format, 5 bytes before each key and value);
  ``debezium_json_schemaless``: debezium-json with ``output.debezium.schemas: false`` (``payload`` only,
  JsonConverter's ``schemas.enable=false``).

A record's bytes are its key, value, and header names and values; the figure is their sum over the
workload divided by its row changes. ``bytes_per_row_<format>`` is printed beside the UMS JSON figure as
baseline.
"""

from __future__ import annotations

import os
from dataclasses import replace
from decimal import Decimal
from typing import Any

from bench.report import bench_line
from dbuslib.config import DbusConfig

ROWS = int(os.environ.get("BENCH_BYTES_ROWS", "20000"))
DATABASE = "dbus_e2e_0123abcd"  # the e2e bench's names: dbus_e2e_<8 hex digits>, tables t<i>
TABLE = "t0"
COLUMNS = (
    ("id", "bigint(20)", False),
    ("customer_id", "int(11)", False),
    ("status", "varchar(16)", False),
    ("total", "decimal(12,2)", False),
    ("placed_at", "datetime(3)", False),
    ("note", "varchar(64)", True),
    ("qty", "smallint(6)", True),
)
FORMATS = ("ums", "ums_avro", "debezium_json", "debezium_json_schemaless", "canal_json", "avro")


def _note(i: int) -> str | None:  # bench/e2e.py's _note, as values
    return None if i % 10 == 0 else f"note {i} é" if i % 7 == 0 else f"note {i}"


def workload(rows: int) -> list[tuple[str, list[tuple[tuple[object, ...], tuple[object, ...] | None]]]]:
    """The e2e workload of one table as statements: (op, [(after, before)]) with before for updates."""
    from datetime import datetime

    updates = rows // 5
    inserts = rows - updates

    def row(i: int, status: str = "paid", qty_plus: int = 0) -> tuple[object, ...]:
        placed = datetime(2026, 11, 22, 10, 0, 0, (i % 1000) * 1000)  # noqa: DTZ001 (DATETIME is naive)
        return (i, i % 9973, status, Decimal(f"{i % 1000}.25"), placed, _note(i), i % 7 + qty_plus)

    statements: list[tuple[str, list[tuple[tuple[object, ...], tuple[object, ...] | None]]]] = []
    for lo in range(0, inserts, 1000):
        statements.append(("i", [(row(i), None) for i in range(lo, min(lo + 1000, inserts))]))
    for lo in range(0, updates, 1000):
        statements.append(("u", [(row(i, "shipped", 1), row(i)) for i in range(lo, min(lo + 1000, updates))]))
    return statements


def messages(statements: Any, before_images: bool, tuples_per_message: int) -> list[Any]:
    """UMS data_increment_data messages of the statements (``before_images``: a b tuple before each u)."""
    from ums.build import DataRow, build_data_messages
    from ums.ids import ums_id, ums_uid
    from ums.message import Op, ProtocolType
    from ums.namespace import Namespace
    from ums.timefmt import ums_ts_ms
    from ums.types import ColumnSpec

    columns = tuple(ColumnSpec(n, t, nullable) for n, t, nullable in COLUMNS)
    ns = Namespace("mysql", "e2e_0123abcd", DATABASE, TABLE, 0)
    out = []
    for k, (op, rows) in enumerate(statements):
        at, ts = ums_id("mysql-bin.000003", 4 + 9000 * k), ums_ts_ms(1795000000000 + 10 * k)
        data: list[DataRow] = []
        for r, (after, before) in enumerate(rows):
            if op == "u" and before_images:
                data.append(DataRow(at, ts, Op.BEFORE, ums_uid(at, r), before))
            data.append(DataRow(at, ts, Op(op), ums_uid(at, r), after))
        out += build_data_messages(
            ns, columns, data, protocol=ProtocolType.DATA_INCREMENT_DATA, max_tuples=tuples_per_message
        )
    return out


def _bytes(key: bytes | None, value: bytes | None, headers: Any) -> int:
    return len(key or b"") + len(value or b"") + sum(len(k) + len(v) for k, v in headers)


def ums_bytes(msgs: list[Any], avro: bool) -> int:
    """The appender's UMS records of ``msgs``: key, value, ``ums_key`` (and Avro's schema header)."""
    from ums import to_json
    from ums.avro import encode_avro
    from ums.keys import data_key

    total = 0
    for m in msgs:
        key = f"{m.schema.namespace.schema}.{m.schema.namespace.table}".encode()
        headers = [
            ("ums_key", data_key(m.protocol, m.schema.namespace, 1795000000000, "e2e_0123abcd").encode())
        ]
        if avro:
            headers.append(("ums_avro_schema", b"0" * 64))  # a sha256 fingerprint in hex
            total += _bytes(key, encode_avro(m), headers)
        else:
            total += _bytes(key, to_json(m).encode(), headers)
    return total


def per_row_bytes(msgs: list[Any], fmt: str, options: Any) -> tuple[int, int]:
    """(bytes, row changes) of the per-row records of ``msgs`` in ``fmt``; avro ids are made up (an id is
    4 bytes whatever its value)."""
    from ums.formats import formatter
    from ums.rowchange import from_message
    from ums.types import ColumnSpec

    columns = tuple(ColumnSpec(n, t, nullable) for n, t, nullable in COLUMNS)
    ids: dict[tuple[str, str], int] = {}
    encoder = formatter(fmt, options, lambda s, t: ids.setdefault((s, t), len(ids) + 1))
    topic = f"e2e_0123abcd.{DATABASE}.result"
    total = changes = 0
    for m in msgs:
        for change in from_message(m, columns, ("id",), file="mysql-bin.000003", ts_ms=1795000000000):
            changes += 1
            total += sum(_bytes(r.key, r.value, r.headers) for r in encoder.records(topic, change))
    return total, changes


def measure(cfg: DbusConfig, rows: int = ROWS) -> dict[str, float]:
    """Mean record bytes per row change of each of ``FORMATS``."""
    src = cfg.source(next(iter(cfg.sources)))
    per_message = src.ums.tuples_per_message
    statements = workload(rows)
    plain = messages(statements, False, per_message)
    with_before = messages(statements, True, per_message)
    out = {"ums": ums_bytes(plain, False) / rows, "ums_avro": ums_bytes(plain, True) / rows}
    options = src.output.options()
    for name, fmt, opts in (
        ("debezium_json", "debezium-json", options),
        ("debezium_json_schemaless", "debezium-json", replace(options, schemas=False)),
        ("canal_json", "canal-json", options),
        ("avro", "avro", options),
    ):
        total, changes = per_row_bytes(with_before, fmt, opts)
        if changes != rows:
            msg = f"{name}: {changes} row changes for {rows} rows"
            raise RuntimeError(msg)
        out[name] = total / rows
    return out


def run(cfg: DbusConfig) -> list[str]:
    sizes = measure(cfg)
    return [bench_line(f"bytes_per_row_{name}", sizes[name], "bytes", sizes["ums"]) for name in FORMATS]
