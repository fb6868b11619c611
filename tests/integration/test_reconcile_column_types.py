"""Where ``dbus reconcile`` finds the source types that decide a UMS long's Parquet type
(``fullpuller.reconcile.source_column_types``, docs/reconcile.md#the-snapshot), on the stack's MariaDB:
the version's columns in the meta store first, then the source table's columns now, else none."""

from __future__ import annotations

import pytest

from dbuslib.metastore import MetaStore, Reason, Version, meta_version
from fullpuller.reconcile import OutColumn, source_column_types, with_column_types
from ums.types import ColumnSpec

pytestmark = pytest.mark.integration


def test_the_meta_stores_version_then_the_source_table_then_nothing(cfg, writer_db):
    db, name = writer_db
    with db.cursor() as cur:  # the table now: its id became unsigned after version 1 was recorded
        cur.execute("CREATE TABLE t (id BIGINT UNSIGNED PRIMARY KEY, n BIGINT)")
    store = MetaStore(cfg.endpoints.meta_store.url.get_secret_value())
    try:
        store.create_schema()
        v1 = (ColumnSpec("id", "bigint(20)", False), ColumnSpec("n", "int(10) unsigned"))
        store.add("demo", name, "t", Version(1, 1000, v1, Reason.FIRST))
        assert source_column_types(cfg, "demo", name, "t", 1) == {"id": "bigint(20)", "n": "int(10) unsigned"}
        now = source_column_types(cfg, "demo", name, "t", 2)  # no version 2 recorded: the table now
        assert now == {"id": "bigint(20) unsigned", "n": "bigint(20)"}
        assert source_column_types(cfg, "demo", name, "gone", 0) == {}
        columns = (OutColumn("id", "long"), OutColumn("n", "long"))
        assert [c.spark_type for c in with_column_types(columns, now)] == ["decimal(20,0)", "bigint"]
    finally:
        with store.engine.begin() as conn:
            conn.execute(meta_version.delete().where(meta_version.c.schema_name == name))
        store.dispose()
