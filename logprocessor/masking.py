"""Masking of log tables: the log source's ``masking`` rules, the same rules and the same code as a database
source's (``ums.masking``, docs/masking.md), applied to the UMS data messages of the log tables they match
(docs/logs.md, Masking).

The rules name ``<schema>.<table>`` globs of the log source's schema (``<ds>_schema`` unless ``schema`` says
otherwise) and the table's saveAs columns::

    log_sources:
      applog:
        masking:
          applog_schema.app_orders: {user_id: {type: md5, salt: s3cret}, card: {type: truncate, length: 4}}

A masked column is ``encoded`` true in the message's schema (and ``string`` when the rule's output is a
string), NULL stays NULL, a rule never raises (a value it cannot mask gets the type's default), and the
system fields ``ums_*_`` are never masked: what ``ums.masking`` guarantees for database tables.

The rule engine and the messages are built in the JVM; a masked table's data messages then pass through
Python once more (``mask_outputs``: ``mapInArrow`` over the query's output, every other row passed through
as it is in the same Arrow batch), the price database sources pay too for masked tables (their rows take
the Python sidecar). Heartbeats, unknown lines and dead letters are not touched (a masking source's dead
letters never carry the record's value: ``dbuslib.deadletter``).

Pure except ``mask_outputs``, the Spark edge.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from logprocessor.grammar import TableRules
from logprocessor.logums import user_fields
from ums.encoding import to_json
from ums.masking import MaskPlan, RuleLike, TableMask, compile_rules
from ums.message import SYSTEM_FIELDS, ProtocolType, UmsField, UmsMessage, UmsSchema
from ums.namespace import Namespace
from ums.types import UmsType

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

DATA = ProtocolType.DATA_INCREMENT_DATA
DATA_PREFIX = f'{{"protocol":{{"type":"{DATA.value}"'  # how every data message's JSON starts (ums.encoding)


def table_fields(table: TableRules) -> tuple:
    """The schema fields of ``table``'s data messages (``logums.build_message``'s)."""
    return SYSTEM_FIELDS[DATA] + user_fields(table.columns)


def table_masks(plan: MaskPlan, schema: str, tables: Sequence[TableRules]) -> dict[str, TableMask]:
    """Per table name, the mask of its current version's fields; tables no rule masks are left out."""
    masks = {}
    for t in tables:
        mask = plan.for_table(schema, t.table, table_fields(t))
        if mask is not None:
            masks[t.table] = mask
    return masks


def mask_message(message: UmsMessage, mask: TableMask) -> UmsMessage:
    """``message`` (a data message of the table ``mask`` was made for, of any of its versions: after a reload
    the lines before the switch offsets keep their version's fields) with its masked columns."""
    schema = message.schema
    mask = mask.for_fields(schema.fields)
    fields = mask.apply_fields(schema.fields)
    payload = tuple(mask.apply_row(row) for row in message.payload)
    return UmsMessage.prevalidated(
        message.protocol, UmsSchema(schema.namespace, fields, schema.batch_id), payload
    )


def read_message(value: str) -> UmsMessage:
    """A log table's data message as ``logums.message_json`` wrote it, read without checking its values:
    LONG and DATETIME values are the rules' text, unchecked (as in the original), which
    ``ums.encoding.from_json`` would refuse."""
    doc = json.loads(value)
    schema = doc["schema"]
    fields = tuple(
        UmsField(f["name"], UmsType(f["type"]), f["nullable"], f["encoded"]) for f in schema["fields"]
    )
    payload = tuple(tuple(p["tuple"]) for p in doc["payload"])
    namespace = Namespace.parse(schema["namespace"])
    protocol = ProtocolType(doc["protocol"]["type"])
    return UmsMessage.prevalidated(protocol, UmsSchema(namespace, fields, schema["batchId"]), payload)


def mask_json(value: str, mask: TableMask) -> str:
    """The JSON text of a data message, masked; any other text (a heartbeat) is returned as it is."""
    if not value.startswith(DATA_PREFIX):
        return value
    return to_json(mask_message(read_message(value), mask))


@dataclass(frozen=True)
class LogMasks:
    """What ``mask_outputs`` ships to the executors: the masking rules (compiled there, once per task), the
    log source's schema, the head of its tables' data message keys (``data_increment_data.<type>.<ds>.
    <schema>.``, ``logums.data_key``: the table's name follows it) and the masked tables by name."""

    masking: Mapping[str, Mapping[str, RuleLike]]
    schema: str
    key_head: str
    tables: Mapping[str, TableRules]

    def compile(self) -> dict[str, TableMask]:
        """Per masked table's name, its mask (raises ``ums.masking.MaskError`` on a bad rule)."""
        return table_masks(compile_rules(self.masking), self.schema, list(self.tables.values()))

    def table_of(self, key: str | None) -> str | None:
        """The table of a data message's key, or None for any other key (heartbeats, unknown lines)."""
        if key is None or not key.startswith(self.key_head):
            return None
        end = key.find(".", len(self.key_head))
        return key[len(self.key_head) : end] if end > 0 else None


def log_masks(
    masking: Mapping[str, Mapping[str, RuleLike]],
    log_type: str,
    ds: str,
    schema: str,
    tables: Sequence[TableRules],
) -> LogMasks | None:
    """The ``LogMasks`` of the tables the rules mask, or None when they mask none (``ums.masking.MaskError``
    on a bad rule: the processor refuses to start, naming ``masking.<pattern>.<column>``). ``tables`` may
    hold several versions of a table (the current ones and those a reload replaced): a table is masked when
    one of its versions is, each message then by its own version's fields (``mask_message``)."""
    if not masking:
        return None
    plan = compile_rules(masking)
    masked = {t.table: t for t in tables if plan.for_table(schema, t.table, table_fields(t)) is not None}
    if not masked:
        return None
    head = f"{DATA.value}.{log_type}.{ds}.{schema}."
    return LogMasks(masking, schema, head, masked)


def mask_batches(batches: Iterator[Any], masks: LogMasks) -> Iterator[Any]:
    """``mapInArrow``'s function: each Arrow batch with the ``value`` of masked tables' data messages (found
    by their ``key``) masked, every other column and row as it came."""
    import pyarrow as pa

    compiled = masks.compile()  # per task: a few rules, compiled in microseconds
    for batch in batches:
        tables = [masks.table_of(_text(k)) for k in batch.column("key").to_pylist()]
        if not any(t in compiled for t in tables):
            yield batch
            continue
        index = batch.schema.get_field_index("value")
        field = batch.schema.field(index)
        binary = pa.types.is_binary(field.type) or pa.types.is_large_binary(field.type)
        out = []
        for t, v in zip(tables, batch.column(index).to_pylist(), strict=True):
            if v is not None and t in compiled:
                masked = mask_json(_text(v) or "", compiled[t])
                v = masked.encode() if binary else masked
            out.append(v)
        yield batch.set_column(index, field, pa.array(out, field.type))


def _text(value: str | bytes | None) -> str | None:
    """A key or value as text (the query's columns may be strings or UTF-8 bytes)."""
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value


def mask_outputs(out: DataFrame, masks: LogMasks | None) -> DataFrame:
    """``out`` (the processor's output rows, ``value`` the message text) with masked tables' messages
    masked; ``out`` itself when nothing is masked."""
    if masks is None:
        return out
    return out.mapInArrow(lambda batches: mask_batches(batches, masks), out.schema)
