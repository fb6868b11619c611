"""Full-pull requests: the ``FULL_DATA_INDEPENDENT_PULL_REQ`` control message (spec 2.2), built (pure).

Built here, at the bottom, because more than one stage sends one: the CLI (``dbus fullpull``) and the
appender (a re-pull after DDL that removed rows, ``fullpull.repull_on_row_loss``). The full puller's
parsing and checking of a request stays in fullpuller/request.py. A request, as sent::

    {"id":1704164645123,"type":"FULL_DATA_INDEPENDENT_PULL_REQ","timestamp":"2024-01-02 03:04:05.123",
     "from":"dbus-cli-fullpull","payload":{"DBUS_DATASOURCE_ID":"demo","SCHEMA_NAME":"shop",
     "TABLE_NAME":"orders","PHYSICAL_TABLES":"orders","SEQNO":"1704164645123","SPLIT_COL":"",...}}
"""

from __future__ import annotations

from datetime import UTC, datetime

from ums.control import ControlMessage, ControlType
from ums.timefmt import epoch_ms, ums_ts

FROM = "dbus-cli-fullpull"
REPULL_FROM = "dbus-appender"
TYPE = ControlType.FULL_DATA_INDEPENDENT_PULL_REQ


def build(
    ds: str,
    schema: str,
    table: str,
    *,
    split_col: str | None = None,
    shard_size: int | None = None,
    where: str | None = None,
    result_topic: str | None = None,
    remark: str = "",
    seqno: int | None = None,
    from_: str = FROM,
    now: datetime | None = None,
) -> ControlMessage:
    """A request; ``SEQNO`` and the message id are ``seqno``, by default the message's time (epoch ms),
    stamped ``now`` (aware; default: the current time)."""
    moment = now if now is not None else datetime.now(UTC)
    ident = epoch_ms(moment) if seqno is None else seqno
    payload = {
        "DBUS_DATASOURCE_ID": ds,
        "SCHEMA_NAME": schema,
        "TABLE_NAME": table,
        "PHYSICAL_TABLES": table,
        "INCREASE_VERSION": "false",
        "INCREASE_BATCH_NO": "true",
        "SEQNO": str(ident),
        "SPLIT_COL": split_col or "",
        "SPLIT_SHARD_SIZE": "" if shard_size is None else str(shard_size),
        "SPLIT_SHARD_STYLE": "",
        "INPUT_CONDITIONS": where or "",
        "PULL_REMARK": remark,
        "SPLIT_BOUNDING_QUERY": "",
        "PULL_TARGET_COLS": "",
        "SCN_NO": "",
        "SINK_TYPE": "KAFKA",
        "resultTopic": result_topic or "",
        "POS": "",
        "OP_TS": "",
        "OGG_OP_TS": "",
    }
    return ControlMessage(ident, TYPE, ums_ts(moment), from_, payload)


def repull(ds: str, schema: str, table: str, at: int, ts_s: int, why: str) -> ControlMessage:
    """The whole-table request the appender sends after DDL at binlog id ``at`` (``ums_id_`` of its
    position, file number * 10^13 + offset) removed rows of ``schema.table``: ``SEQNO`` = id = ``at``,
    stamped with the DDL's binlog time ``ts_s`` (epoch seconds), so the same DDL always gives the same
    record and a replayed micro-batch names a pull the full puller has already served (it replies again
    and does not pull twice). ``at`` is also the ``since`` of the table version the DDL opened."""
    when = datetime.fromtimestamp(ts_s, UTC)
    return build(ds, schema, table, remark=f"row loss at {at}: {why}", seqno=at, from_=REPULL_FROM, now=when)
