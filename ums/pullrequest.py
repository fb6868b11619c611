"""The appender's re-pull request (pure): a ``FULL_DATA_INDEPENDENT_PULL_REQ`` made by the one builder,
``ums.control.full_pull_request`` (``build`` here is that same function). The full puller's parsing and
checking of a request stays in fullpuller/request.py. A re-pull, as sent::

    {"id":1030000012345678,"type":"FULL_DATA_INDEPENDENT_PULL_REQ","timestamp":"2024-01-02 03:04:05.000",
     "from":"dbus-appender","payload":{"DBUS_DATASOURCE_ID":"demo","SCHEMA_NAME":"shop",
     "TABLE_NAME":"orders","PHYSICAL_TABLES":"orders","SEQNO":"1030000012345678",...,
     "PULL_REMARK":"row loss at 1030000012345678: ..."}}
"""

from __future__ import annotations

from datetime import UTC, datetime

from ums.control import PULL_REQUEST_FROM as FROM
from ums.control import ControlMessage, ControlType
from ums.control import full_pull_request as build

__all__ = ["FROM", "REPULL_FROM", "TYPE", "build", "repull"]

REPULL_FROM = "dbus-appender"
TYPE = ControlType.FULL_DATA_INDEPENDENT_PULL_REQ


def repull(ds: str, schema: str, table: str, at: int, ts_s: int, why: str) -> ControlMessage:
    """The whole-table request the appender sends after DDL at binlog id ``at`` (``ums_id_`` of its
    position, file number * 10^13 + offset) removed rows of ``schema.table``: ``SEQNO`` = id = ``at``,
    stamped with the DDL's binlog time ``ts_s`` (epoch seconds), so the same DDL always gives the same
    record and a replayed micro-batch names a pull the full puller has already served (it replies again
    and does not pull twice). ``at`` is also the ``since`` of the table version the DDL opened."""
    when = datetime.fromtimestamp(ts_s, UTC)
    return build(ds, schema, table, remark=f"row loss at {at}: {why}", seqno=at, from_=REPULL_FROM, now=when)
