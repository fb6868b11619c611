"""Reset points of a table: a binlog id before which no tuple of the result topic can still be a live row.

Reconcile keeps, per key, the newest tuple. That is wrong for rows that left the source without a rows
event: a TRUNCATE TABLE, or DDL that removed rows (TRUNCATE/DROP/EXCHANGE PARTITION ..., the appender's
version reason ``row_loss``). Their last tuple is an insert or update, and it would win for ever. Two
facts give a *reset point* ``R``, after which every live row has a tuple with ``ums_id_ >= R``:

- a ``truncate`` version at ``since = P``: the table was empty at ``P``, every row after it was
  written by a rows event after ``P``;
- a ``row_loss`` version at ``since = P`` and the full pull the appender asked for it (SEQNO = ``P``,
  a whole-table request, ``fullpull.repull_on_row_loss``), once its end marker is on the topic: the
  pull gave every row live at its snapshot position ``S`` a tuple with ``ums_id_ = S``, and a row
  deleted after ``S`` has its delete increment (``> S``). So ``R = S``. Until that pull has ended the
  row loss has no reset point: rows of a dropped partition stay in the snapshot (verify shows them).

A key whose winning tuple is older than the greatest reset point has no row. Pulls requested by hand
do not count: they may have ``INPUT_CONDITIONS`` (a part of the table), which the topic does not show.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from dbuslib.metastore import Reason, Version
from ums import headers as ums_headers

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from dbuslib.config import DbusConfig, KafkaEndpoint

# header of a pull's end marker (fullpuller/job.py)
END_MARKER = (ums_headers.FULLPULL, ums_headers.FULLPULL_END.encode())


def reset_point(history: Iterable[Version], pulls_ended: dict[int, int]) -> int | None:
    """The greatest reset point of a table: ``history`` its versions, ``pulls_ended`` the ended pulls
    of its result topic, SEQNO -> ``ums_id_`` of the pull; None when it has none."""
    points = []
    for v in history:
        if v.reason is Reason.TRUNCATE:
            points.append(v.since)
        elif v.reason is Reason.ROW_LOSS and v.since in pulls_ended:
            points.append(pulls_ended[v.since])
    return max(points, default=None)


def merge(tuples: Iterable[tuple[Any, str | int, str | int, str, Any]], reset: int | None) -> dict[Any, Any]:
    """``reconcile.merge`` with the reset rule, in plain Python: a key whose winning tuple has
    ``ums_id_ < reset`` has no row."""
    from fullpuller.reconcile import merge as plain_merge
    from fullpuller.reconcile import order_key

    tuples = list(tuples)
    newest: dict[Any, tuple[int, int]] = {}
    for key, ums_id, ums_uid, _, _ in tuples:
        newest[key] = max(newest.get(key, (-1, -1)), order_key(ums_id, ums_uid))
    rows = plain_merge(tuples)
    return {k: row for k, row in rows.items() if reset is None or newest[k][0] >= reset}


# ---------------------------------------------------------------- edges: meta store, Kafka (Spark)


def pulls_ended(spark: SparkSession, kafka: KafkaEndpoint | str, topic: str, ending: str) -> dict[int, int]:
    """SEQNO -> ``ums_id_`` of the pulls whose end marker is in ``topic`` before ``ending`` (Spark's
    ``endingOffsets`` JSON)."""
    from pyspark.sql import functions as F

    from dbuslib.spark import kafka_source

    records = (
        kafka_source(spark.read, kafka)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("endingOffsets", ending)
        .option("includeHeaders", "true")
        .load()
    )
    key, value = END_MARKER
    is_end = F.coalesce(
        F.exists(
            F.col("headers"), lambda h: (h["key"] == key) & (h["value"].cast("string") == value.decode())
        ),
        F.lit(False),
    )
    found: dict[int, int] = {}
    for r in records.where(is_end).select("headers").collect():
        got = {h["key"]: bytes(h["value"] or b"").decode("utf-8", "replace") for h in r["headers"]}
        try:
            found[int(got[ums_headers.FULLPULL_ID])] = int(got[ums_headers.FULLPULL_UMS_ID])
        except (KeyError, ValueError):
            continue  # not a marker of ours: no reset point from it
    return found


def table_reset(
    spark: SparkSession, cfg: DbusConfig, ds: str, schema: str, table: str, topic: str, ending: str
) -> int | None:
    """The reset point of ``schema.table`` (its versions from the meta store, its ended pulls from the
    topic, read only when a version has reason ``row_loss``)."""
    from dbuslib.metastore import MetaStore

    store = MetaStore(cfg.endpoints.meta_store.url.get_secret_value())
    try:
        store.create_schema()  # idempotent: a stack where no appender ran yet has no version table
        history = store.history(ds, schema, table)
    finally:
        store.dispose()
    if not any(v.reason in (Reason.TRUNCATE, Reason.ROW_LOSS) for v in history):
        return None
    ended = {}
    if any(v.reason is Reason.ROW_LOSS for v in history):
        ended = pulls_ended(spark, cfg.endpoints.kafka, topic, ending)
    return reset_point(history, ended)
