"""The changes of tests/golden/cdc/every_type.sql (tests/unit/every_type_changes.py) as UMS messages, and
their per-row records (not a test module: tests import from here; test_client_rowformats,
test_reconcile_rowformats).

``messages`` writes the changes and the full pull the way the appender writes them with before images on
(a ``b`` tuple before each ``u``, consecutive ``ums_uid_``s per binlog event), ``row_changes`` turns a
message back into ``RowChange``s and ``encode`` a change into one per-row format's records, Avro schemas
registered in ``REGISTRY``, a schema registry in memory.
"""

from __future__ import annotations

from itertools import groupby
from typing import Any

from every_type_changes import COLUMNS, FILE, SHAPE, TS_MS, changes, pulled

from ums import formats
from ums.ids import ums_uid
from ums.message import SYSTEM_FIELDS, ProtocolType, UmsMessage, UmsSchema
from ums.namespace import Namespace
from ums.rowchange import RowChange as Change
from ums.rowchange import from_message
from ums.timefmt import ums_ts_ms

TOPIC = f"{SHAPE.ds}.{SHAPE.schema}.{SHAPE.table}"


class FakeRegistry:
    """A schema registry in memory: ``ids`` registers (subject, schema) -> id, ``schema`` reads it back."""

    def __init__(self) -> None:
        self.texts: dict[str, int] = {}

    def ids(self, subject: str, schema: str) -> int:
        return self.texts.setdefault(schema, len(self.texts) + 1)

    def schema(self, schema_id: int) -> str:
        return next(t for t, i in self.texts.items() if i == schema_id)


REGISTRY = FakeRegistry()


def messages() -> list[UmsMessage]:
    """every_type.sql's changes and its full pull as the appender (and the puller) writes them: one
    message per binlog event, a ``b`` tuple before each ``u``."""
    out = []
    for initial, group in ((False, changes()), (True, pulled())):
        protocol = ProtocolType.DATA_INITIAL_DATA if initial else ProtocolType.DATA_INCREMENT_DATA
        ns = Namespace("mysql", SHAPE.ds, SHAPE.schema, SHAPE.table, SHAPE.version)
        schema = UmsSchema(ns, SYSTEM_FIELDS[protocol] + SHAPE.fields)
        for ums_id, event in groupby(group, key=lambda c: c.at.ums_id):
            tuples: list[tuple[Any, ...]] = []
            for c in event:
                ts = ums_ts_ms(c.at.ts_ms)
                if c.op == "u":
                    assert c.before is not None
                    tuples.append((str(ums_id), ts, "b", ums_uid(ums_id, len(tuples)), *c.before))
                op, image = {"c": ("i", c.after), "r": ("i", c.after), "u": ("u", c.after)}.get(
                    c.op, ("d", c.before)
                )
                assert image is not None
                tuples.append((str(ums_id), ts, op, ums_uid(ums_id, len(tuples)), *image))
            out.append(UmsMessage(protocol, schema, tuple(tuples)))
    return out


def row_changes(msg: UmsMessage) -> list[Change]:
    return from_message(msg, COLUMNS, ("id",), file=FILE, ts_ms=TS_MS, server_id=1)


def encode(fmt: str, change: Change, tombstones: bool = True) -> list[formats.Record]:
    options = formats.FormatOptions(tombstones=tombstones)
    return formats.formatter(fmt, options, REGISTRY.ids).records(TOPIC, change)
