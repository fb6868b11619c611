"""Per-row result records (docs/formats.md) -> the row changes every reader merges.

A source (or a table glob of it) whose ``output.format`` is ``debezium-json``, ``canal-json`` or ``avro``
writes one Kafka record per row change, keyed by the primary key, with the change's UMS ids in the
headers ``ums_id_`` and ``ums_uid_``. ``RowReader.read`` turns one such record into the
``dbusclient.decode.RowChange``s a UMS message's tuples give, so the consumer merges both by
``(ums_id_, ums_uid_)`` alike (dbusclient/merge.py): the record is decoded by ``ums.formats.decode``
(one home per format) and its ``ums.rowchange.RowChange`` becomes

- ``c`` -> an insert (``i``), ``u`` -> an update (``u``), ``d`` -> a delete (``d``) whose values are the
  before image, ``r`` (a full pull's row) -> an insert with ``initial`` true, as a ``data_initial_data``
  tuple;
- an update whose before image has another key -> a before image (``b``) under the old key and the
  update under the new one, as UMS writes a key change with before images on (the formats write it as a
  delete and a create: two records, each read alone);
- a tombstone (a key with a null value, after a delete): no change (the delete before it did the work).

Which format a record is in: the configuration's (``output.format_for(schema, table)``, given per table
as ``formats``) when the reader has it, else the record's own look (``ums.formats.sniff``: no ``ums_id_``
header is UMS; Avro's magic byte 0; Canal's ``isDdl``; Debezium's ``payload``/``schema`` or ``op``). A
record that contradicts the configuration (another format, or a table the configuration writes in
another format) is a ``BadRowError`` naming its topic, partition and offset: the consumer sets it aside
as a dead letter (or stops), as it does for a UMS record that does not parse.

Example: the Debezium record of an update of ``shop.orders`` (key ``{"id": 42}``, headers ``ums_id_``
``1030000012345678``, ``ums_uid_`` ``1030000012345678000001``) gives one change::

    {"table": {"ds": "demo", "schema": "shop", "table": "orders"}, "version": 3, "key": [42],
     "op": "u", "ums_id": 1030000012345678, "ums_uid": 1030000012345678000001,
     "ums_ts": "2024-01-02 03:04:05.000", "initial": false,
     "values": {"id": 42, "amount": "19.90", "note": null}}
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from dbusclient.decode import BadRowError, RowChange, TableRef
from dbuslib.errors import DbusError
from ums import formats as ums_formats
from ums.decode import decode_value
from ums.errors import UmsError
from ums.formats import sniff
from ums.message import SYSTEM_FIELDS, Op, ProtocolType, UmsField, UmsSchema
from ums.namespace import Namespace
from ums.rowchange import RowChange as Change
from ums.rowchange import TableShape
from ums.scalars import JsonValue
from ums.timefmt import ums_ts_ms

UMS = "ums"
TOMBSTONE = "tombstone"  # what ``sniff`` says of a per-row record with a null value
_OPS = {"c": Op.INSERT, "u": Op.UPDATE, "d": Op.DELETE, "r": Op.INSERT}
_PLANS_KEPT = 1024  # table shapes remembered per reader (then it starts again)
# what a decoder raises for a record it cannot read: ValueError by its contract, and what bytes that are
# not as the encoder writes them may raise on the way (a date out of range, a short Avro buffer). Not a
# DbusError that is no ValueError: the registry unreachable stops the reader, its records are not bad.
_UNREADABLE = (ValueError, UmsError, ArithmeticError, TypeError, LookupError, AttributeError, EOFError)


def ums_schema(shape: TableShape) -> UmsSchema:
    """The UMS schema a ``data_increment_data`` message of this table version would carry: what a
    consumer's ``on_schema_change`` gets, and a sink makes its replica table from."""
    ns = Namespace("mysql", shape.ds, shape.schema, shape.table, shape.version)
    return UmsSchema(ns, SYSTEM_FIELDS[ProtocolType.DATA_INCREMENT_DATA] + shape.fields)


@dataclass(frozen=True)
class _Plan:
    """What the changes of one table shape need: its table, names, key positions and UMS schema."""

    table: TableRef
    names: tuple[str, ...]
    key_at: tuple[tuple[int, UmsField], ...]
    schema: UmsSchema


class RowReader:
    """Row changes of per-row records of the tables in ``keys`` (``"schema.table"`` -> key columns, as
    for ``Decoder``). ``formats``: each table's configured format (absent: the record's look decides);
    ``schemas``: a registry id -> the writer's Avro schema (``dbuslib.registry.Registry.schema``), needed
    for ``avro`` records."""

    def __init__(
        self,
        keys: Mapping[tuple[str, str], Sequence[str]],
        formats: Mapping[TableRef, str] | None = None,
        schemas: ums_formats.SchemaLookup | None = None,
    ) -> None:
        self._keys = {k: tuple(v) for k, v in keys.items()}
        self._formats = dict(formats or {})
        self.schemas = schemas
        self._plans: dict[TableShape, _Plan] = {}
        # a decoder gives the same TableShape object for a table version: found by identity first (a
        # shape's hash walks every column and field)
        self._by_id: dict[int, tuple[TableShape, _Plan]] = {}
        self._json: str | None = None  # the JSON format last read without an expected one: tried first

    def expected(self, tables: Sequence[TableRef]) -> str | None:
        """The one per-row format the configuration gives ``tables`` (a topic's), None when they have
        none or several (the record's look decides, the table's format is checked once decoded)."""
        found = {self._formats.get(t) for t in tables}
        if len(found) == 1:
            (only,) = found
            return only if only in ums_formats.PER_ROW else None
        return None

    def check_ums(self, table: TableRef, where: str) -> None:
        """BadRowError when the configuration writes ``table`` in a per-row format and a UMS record of it
        came (the record contradicts the configuration)."""
        configured = self._formats.get(table)
        if configured is not None and configured != UMS:
            msg = f"{where}: a UMS record of {table}, which the configuration writes as {configured}"
            raise BadRowError(msg)

    def read(
        self,
        key: bytes | None,
        value: bytes | None,
        headers: Sequence[tuple[str, bytes]],
        where: str,
        expected: str | None = None,
    ) -> tuple[list[RowChange], UmsSchema | None]:
        """The row changes of one per-row record and the UMS schema of its table version; ``([], None)``
        for a tombstone or a table not in ``keys``. ``expected``: the format the configuration gives the
        record's topic (``expected``), else the record's look decides. ``where`` (``topic/partition@offset``)
        names the record in a ``BadRowError``."""
        if value is None:
            return [], None
        by_name = dict(headers)
        if ums_formats.UMS_ID_HEADER not in by_name:
            msg = f"{where}: not a per-row record (no {ums_formats.UMS_ID_HEADER} header)"
            raise BadRowError(msg)
        # no expected format: Avro by its magic byte, a JSON record in the JSON format last read (a topic
        # mixes few), the record's look (a JSON parse more) only for the first or when that one fails
        name = expected or (
            "avro" if value[:1] == b"\x00" else self._json or self._sniffed(value, by_name, where)
        )
        try:
            change = self._decode(name, key, value, headers, where)
        except BadRowError:
            looks = None if expected else self._sniffed(value, by_name, where)
            if looks is None or looks == name:
                raise
            name = looks
            change = self._decode(name, key, value, headers, where)
        if expected is None and name != "avro":
            self._json = name
        if change is None:
            return [], None
        shape = change.table
        if (shape.schema, shape.table) not in self._keys:
            return [], None
        plan = self._plan(shape, where)
        configured = self._formats.get(plan.table)
        if configured is not None and configured != name:
            msg = f"{where}: a {name} record of {plan.table}, which the configuration writes as {configured}"
            raise BadRowError(msg)
        return changes_of(change, plan, where), plan.schema

    def _decode(
        self, name: str, key: bytes | None, value: bytes, headers: Sequence[tuple[str, bytes]], where: str
    ) -> Change | None:
        if name == "avro" and self.schemas is None:
            msg = f"{where}: an Avro record (Confluent wire format), and no registry (endpoints.registry)"
            raise BadRowError(msg)
        try:
            return ums_formats.decode(name, key, value, tuple(headers), self.schemas)
        except _UNREADABLE as e:
            if isinstance(e, DbusError) and not isinstance(e, ValueError):
                raise
            msg = f"{where}: not a {name} record{self._looks(value, dict(headers), name)}: {e}"
            raise BadRowError(msg) from None

    def _sniffed(self, value: bytes, headers: Mapping[str, bytes], where: str) -> str:
        try:
            return sniff(value, headers)
        except ValueError as e:
            msg = f"{where}: {e}"
            raise BadRowError(msg) from None

    def _looks(self, value: bytes, headers: Mapping[str, bytes], name: str) -> str:
        try:
            looks = sniff(value, headers)
        except ValueError:
            return ""
        return f" (it looks like {looks})" if looks != name else ""

    def _plan(self, shape: TableShape, where: str) -> _Plan:
        hit = self._by_id.get(id(shape))
        if hit is not None and hit[0] is shape:
            return hit[1]
        plan = self._plans.get(shape)
        if plan is not None:
            self._by_id[id(shape)] = (shape, plan)
            return plan
        table = TableRef(shape.ds, shape.schema, shape.table)
        key_columns = self._keys[(shape.schema, shape.table)]
        names = tuple(f.name for f in shape.fields)
        index = {n: i for i, n in enumerate(names)}
        missing = [c for c in key_columns if c not in index]
        if missing:
            msg = (
                f"{where}: {table} version {shape.version}: key column(s) {missing} are not fields "
                f"(fields: {list(names)})"
            )
            raise BadRowError(msg)
        try:
            schema = ums_schema(shape)
        except UmsError as e:
            msg = f"{where}: {table} version {shape.version}: {e}"
            raise BadRowError(msg) from None
        plan = _Plan(table, names, tuple((index[c], shape.fields[index[c]]) for c in key_columns), schema)
        if len(self._plans) >= _PLANS_KEPT:
            self._plans.clear()
            self._by_id.clear()
        self._plans[shape] = plan
        self._by_id[id(shape)] = (shape, plan)
        return plan


def changes_of(change: Change, plan: _Plan, where: str) -> list[RowChange]:
    """The reader's row changes of one decoded per-row change (module docstring)."""
    try:
        ums_uid = int(change.ums_uid)
    except ValueError:
        msg = f"{where}: {ums_formats.UMS_UID_HEADER} {change.ums_uid!r} is not a decimal integer"
        raise BadRowError(msg) from None
    image = change.before if change.op == "d" else change.after
    if image is None or len(image) != len(plan.names):
        msg = f"{where}: a {change.op} change of {plan.table} without its {len(plan.names)} values"
        raise BadRowError(msg)
    try:
        ts = _ums_ts(change.at.ts_ms)
    except (ValueError, OverflowError) as e:
        msg = f"{where}: {plan.table}: ts_ms {change.at.ts_ms!r} is not a time ({e})"
        raise BadRowError(msg) from None
    common = (plan.table, change.table.version)
    key = _key(image, plan, where)
    out = []
    if change.op == "u" and change.before is not None and len(change.before) == len(plan.names):
        old = _key(change.before, plan, where)
        if old != key:  # the row moved: its old key has no row any more
            values = dict(zip(plan.names, change.before, strict=True))
            out.append(RowChange(*common, old, Op.BEFORE, change.at.ums_id, ums_uid, ts, values))
    values = dict(zip(plan.names, image, strict=True))
    initial = change.op == "r"
    out.append(RowChange(*common, key, _OPS[change.op], change.at.ums_id, ums_uid, ts, values, initial))
    return out


@lru_cache(maxsize=1024)
def _ums_ts(ts_ms: int) -> str:
    """``ums_ts_`` of a commit time (the changes of one transaction share it: cached)."""
    return ums_ts_ms(ts_ms)


def _key(image: Sequence[JsonValue], plan: _Plan, where: str) -> tuple[Any, ...]:
    key: list[Any] = []
    for i, field in plan.key_at:
        value = image[i]
        if value is None:
            msg = f"{where}: {plan.table}: key column {field.name!r} is null"
            raise BadRowError(msg)
        try:
            key.append(decode_value(field.type, value, field.name))
        except UmsError as e:
            msg = f"{where}: {plan.table}: key column {e}"
            raise BadRowError(msg) from None
    return tuple(key)
