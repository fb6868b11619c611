"""A full pull's shard job as the unit tests build it (not a test module: test_fullpull_rowformats,
test_fullpull_schema_refused, test_fullpull_chunks, test_fullpull_request)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from fullpuller.source import ShardJob

UMS_ID = "1030000012345678"


def shard_job(columns: list[dict[str, Any]], **kw: Any) -> ShardJob:
    """Shard 0 of pull batch 1 of demo's shop.orders (version 3) with ``columns``, primary key ``id``, to
    topic demo.shop.orders, 2 tuples a UMS message; ``kw`` replaces any field."""
    job = ShardJob(
        config="c",
        ds="demo",
        schema="shop",
        table="orders",
        namespace="mysql.demo.shop.orders.3.0.0",
        columns=columns,
        batch_id=1,
        ums_id=UMS_ID,
        ums_ts="2024-01-02 03:04:05.123",
        shard=0,
        sql="",
        zk_shard_path="/x",
        fetch_rows=10,
        tuples_per_message=2,
        max_message_bytes=1 << 20,
        progress_interval_s=1.0,
        topic="demo.shop.orders",
        primary_key=["id"],
        binlog_file="mysql-bin.000103",
        ts_ms=1704164645123,
    )
    return replace(job, **kw)
