"""Schema versions persist in the meta store on the real MariaDB; writes are idempotent."""

import uuid

from appender.versions import on_rows
from dbuslib.metastore import MetaStore
from ums import ColumnSpec


def test_versions_round_trip_and_replays_change_nothing(cfg):
    store = MetaStore(cfg.endpoints.meta_store.url.get_secret_value())
    store.create_schema()
    ds = f"pytest_{uuid.uuid4().hex[:8]}"
    v0 = on_rows(None, (ColumnSpec("id", "int", False),), at=100).new
    v1 = on_rows(v0, (ColumnSpec("id", "bigint", False),), at=200).new
    try:
        assert store.add(ds, "shop", "orders", v0) == v0
        assert store.add(ds, "shop", "orders", v1) == v1
        assert store.add(ds, "shop", "orders", v1) == v1  # a replay writes the same version again
        assert store.history(ds, "shop", "orders") == [v0, v1]
        assert store.history(ds, "shop", "other") == []
    finally:
        with store.engine.begin() as conn:
            conn.exec_driver_sql("DELETE FROM dbus_meta_version WHERE ds = %s", (ds,))
        store.dispose()
