"""Pulled rows as per-row records (docs/fullpull.md#per-row-formats): what a shard reader writes for a table
whose ``output.format`` is ``debezium-json``, ``canal-json`` or ``avro``.

MariaDB renders each row to its UMS tuple text as for UMS (fullpuller/render.py); ``RowWriter`` parses a
fetch's texts in one ``json.loads``, masks them as the UMS path does, makes each row a ``RowChange`` of op
``r`` (``source.snapshot`` "true", the pull's snapshot position, ``ums_uid_`` as a UMS pulled row's) and
hands it to the format's encoder (``ums.formats``), the same the appender uses for increments. The records
of a fetch leave as one Arrow record batch (``ARROW_SCHEMA``), the shape Spark's Python data source takes
without a per-row conversion.

A pulled row of a table keyed ``id`` in debezium-json (``schema`` parts left out)::

    key   {"payload": {"id": 42}}
    value {"payload": {"before": null, "after": {"id": 42, ...}, "op": "r", "ts_ms": 1704164645123,
                       "source": {"snapshot": "true", "file": "mysql-bin.000003", "pos": 12345678, ...}}}
    headers ums_id_ = 30000012345678, ums_uid_ = 30000012345678000001000000041
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from itertools import accumulate
from typing import Any

from ums.formats import Format, FormatOptions, Record, SchemaIds, formatter
from ums.masking import TableMask
from ums.rowchange import Position, RowChange, TableShape

POSITION_DIGITS = 10**13  # ums_id = binlog file number * 10^13 + position (ums.ids)
BATCH_BYTES = 32 << 20  # the values of one Arrow batch at most (rows of big BLOBs: RowWriter.batches)


def arrow_schema() -> Any:
    """The Arrow schema of ``fullpuller.source.SCHEMA`` as Spark expects a data source's batches."""
    import pyarrow as pa

    header = pa.struct([("key", pa.string()), ("value", pa.binary())])
    return pa.schema(
        [("key", pa.binary()), ("value", pa.binary()), ("headers", pa.list_(pa.field("element", header)))]
    )


class RowWriter:
    """Tuple texts of one shard -> per-row records (pure, given the shape, the encoder and the mask).

    ``ums_id``/``ums_ts``: the pull's (every pulled row has them); ``shard``: the shard index, for
    ``ums_uid_`` (``ums_id`` digits, shard in 6 digits, row index in the shard in 9, as UMS pulled rows);
    ``mask``: the table's masking bound to its UMS fields with the system fields in front (the UMS path's
    ``TableMask``), None when nothing is masked.
    """

    def __init__(
        self,
        shape: TableShape,
        fmt: Format,
        topic: str,
        *,
        ums_id: str,
        ums_ts: str,
        ts_ms: int,
        binlog_file: str,
        shard: int,
        mask: TableMask | None = None,
    ) -> None:
        self.shape = shape
        self.format = fmt
        self.topic = topic
        self.mask = mask
        self.ums_id, self.ums_ts = ums_id, ums_ts
        at = int(ums_id)
        self.position = Position(at, ts_ms, binlog_file, at % POSITION_DIGITS, 0, snapshot="true")
        self.uid_head = f"{ums_id}{shard:06d}"
        self.rows = 0

    @classmethod
    def for_job(
        cls,
        job: Any,
        options: FormatOptions,
        masking: Any = None,
        schema_ids: SchemaIds | None = None,
        fmt: Format | None = None,
    ) -> RowWriter:
        """The writer of a shard (``fullpuller.source.ShardJob``): its ``table_shape``, the encoder of
        ``job.format`` with ``options`` (``schema_ids`` for avro; ``fmt`` instead of it, for tests)."""
        shape, mask = table_shape(job, masking)
        return cls(
            shape,
            fmt or formatter(job.format, options, schema_ids),
            job.topic,
            ums_id=job.ums_id,
            ums_ts=job.ums_ts,
            ts_ms=job.ts_ms,
            binlog_file=job.binlog_file,
            shard=job.shard,
            mask=mask,
        )

    def changes(self, texts: Sequence[bytes]) -> list[RowChange]:
        """The next rows of the shard (tuple texts without brackets) as RowChanges of op r."""
        if not texts:
            return []
        rows = json.loads(b"[[" + b"],[".join(texts) + b"]]")
        start = self.rows
        self.rows += len(rows)
        shape, at, head = self.shape, self.position, self.uid_head
        if self.mask is None:
            return [
                RowChange(shape, "r", None, tuple(v), at, f"{head}{start + i:09d}")
                for i, v in enumerate(rows)
            ]
        out = []
        apply, system = self.mask.apply_row, (self.ums_id, self.ums_ts, "i")
        for i, v in enumerate(rows):
            uid = f"{head}{start + i:09d}"
            out.append(RowChange(shape, "r", None, apply((*system, uid, *v))[4:], at, uid))
        return out

    def records(self, texts: Sequence[bytes]) -> list[Record]:
        """The records of the next rows, in row order."""
        encode, topic = self.format.records, self.topic
        out: list[Record] = []
        for change in self.changes(texts):
            out += encode(topic, change)
        return out

    def batches(self, texts: Sequence[bytes]) -> Iterator[Any]:
        """The records of the next rows as Arrow record batches of ``arrow_schema()``: one, unless their
        values pass ``BATCH_BYTES`` (an Arrow binary array holds at most 2 GiB)."""
        records = self.records(texts)
        start = size = 0
        for i, r in enumerate(records):
            size += len(r.value or b"")
            if size >= BATCH_BYTES:
                yield to_batch(records[start : i + 1])
                start, size = i + 1, 0
        if start < len(records) or not records:
            yield to_batch(records[start:])


def register_schemas(writer: RowWriter) -> None:
    """Register the key and value schemas of an ``avro`` writer's table version under ``<topic>-key`` /
    ``<topic>-value`` (the subjects its records name), as its first record would: the full puller asks
    on the driver before any shard runs, so a schema the registry refuses aborts the pull at once with
    the registry's ``SchemaRefused`` (subject and reason), not as a shard's Spark failure. Another
    format registers nothing."""
    from ums.formats.avro import AvroRows, schema_text

    if not isinstance(writer.format, AvroRows):
        return
    plan = writer.format.plan(writer.shape)
    if plan.key_schema is not None:
        writer.format.schema_ids(f"{writer.topic}-key", schema_text(plan.key_schema))
    writer.format.schema_ids(f"{writer.topic}-value", schema_text(plan.value_schema))


def table_shape(job: Any, masking: Any = None) -> tuple[TableShape, TableMask | None]:
    """The shape of a shard's table at the pull's version (``job``: a ``ShardJob``), its fields masked by
    ``masking`` (the source's rules) as the UMS path masks them, and that mask (None: nothing masked)."""
    from dataclasses import replace

    from ums.build import data_schema, user_columns
    from ums.masking import compile_rules
    from ums.message import SYSTEM_NAMES, ProtocolType
    from ums.namespace import Namespace
    from ums.types import ColumnSpec

    ns = Namespace.parse(job.namespace)
    columns = tuple(ColumnSpec(**c) for c in job.columns)
    schema = data_schema(ns, columns, job.batch_id, ProtocolType.DATA_INITIAL_DATA)
    mask = compile_rules(masking).for_table(job.schema, job.table, schema.fields) if masking else None
    if mask is not None:
        schema = replace(schema, fields=mask.fields)
    shape = TableShape(
        job.ds,
        job.schema,
        job.table,
        ns.version,
        tuple(columns[i] for i in user_columns(columns)),
        tuple(f for f in schema.fields if f.name not in SYSTEM_NAMES),
        tuple(job.primary_key),
    )
    return shape, mask


def to_batch(records: Sequence[Record]) -> Any:
    """Records -> an Arrow record batch (key, value, headers) for Spark's Kafka sink. The headers are built
    as flat name and value arrays with list offsets: a list of dicts per record cost as much as encoding
    the record."""
    import pyarrow as pa

    schema = arrow_schema()
    pairs_of = [r.headers for r in records]
    names = [name for pairs in pairs_of for name, _ in pairs]
    data = [value for pairs in pairs_of for _, value in pairs]
    offsets = [0, *accumulate(len(pairs) for pairs in pairs_of)]
    header_type = schema.field("headers").type
    pairs = pa.StructArray.from_arrays(
        [pa.array(names, pa.string()), pa.array(data, pa.binary())], fields=list(header_type.value_type)
    )
    return pa.RecordBatch.from_arrays(
        [
            pa.array([r.key for r in records], pa.binary()),
            pa.array([r.value for r in records], pa.binary()),
            pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), pairs, type=header_type),
        ],
        schema=schema,
    )
