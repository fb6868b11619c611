"""What the per-row format tests share (tests/integration/test_appender_rowformats_live.py,
test_appender_rowformats_jvm_live.py, test_appender_avro_jvm_live.py, test_formats_evolution_live.py,
test_formats_compaction_live.py, test_fullpull_rowformats_live.py, test_fullpull_schema_refused_live.py,
test_replicate_rowformats_live.py, test_canal_flatmessage.py):
a source's configuration writing one format to a topic per table, one appender run drained with
``available_now``, the workload the JVM's formats are appended from both ways, and the clean-ups."""

from __future__ import annotations

import contextlib
import urllib.request
from pathlib import Path

import yaml
from golden_cdc import cases, read_case

from appender import job
from dbuslib import topics
from dbuslib.config import load_config, raw_config
from dbuslib.metastore import MetaStore

WORKLOAD_ROWS = 600


def per_row_config(env, fmt: str, trigger: str, tag: str = ""):
    """The env's configuration writing ``fmt`` to a topic per table, the appender in ``trigger`` mode;
    each run its own topic names (``{ds}.{schema}.{table}.<tag><trigger>``, events likewise)."""
    raw = raw_config(env.cfg_path)
    src = raw["sources"][env.ds]
    src["output"] = {"format": fmt, "topic": "table"}
    src.setdefault("appender", {})["trigger"] = trigger
    src["topics"]["table"] = "{ds}.{schema}.{table}." + tag + trigger
    src["topics"]["events"] = "{ds}.{schema}.events." + tag + trigger
    path = env.cfg_path.with_name(f"dbus-{tag}{'-' if tag else ''}{fmt}-{trigger}.yaml")
    path.write_text(yaml.safe_dump(raw))
    return load_config(path)


def run_appender(spark, cfg, ds: str, topic: str, checkpoint: str) -> None:
    query = job.start(spark, cfg, ds, [topic], checkpoint, available_now=True)
    try:
        query.awaitTermination(300)
        assert query.exception() is None, query.exception()
    finally:
        query.stop()


def append_workload_both_ways(spark, env, db, cfg, cfg_jvm, checkpoints: Path) -> tuple[int, int]:
    """The JVM formats' workload written to ``db`` (``orders``: 600 rows inserted in batches, 100 updated,
    a primary-key change, 101 deleted; ``nokey`` without a key; every_type.sql), captured by the env's
    extractor, then appended in micro-batch mode (``cfg``) and in real-time mode (``cfg_jvm``) from the
    same raw records: the records the JVM wrote in the real-time run, and those the sidecar wrote."""
    every_type = [s.sql for path in cases() if path.name == "every_type.sql" for s in read_case(path)]
    with db.cursor() as cur:
        cur.execute(
            "CREATE TABLE orders (id INT PRIMARY KEY, total DECIMAL(10,2), note VARCHAR(20), "
            "at DATETIME(3), d DATE, big BIGINT UNSIGNED, f DOUBLE)"
        )
        cur.execute("CREATE TABLE nokey (a INT, b VARCHAR(5))")
        for start in range(0, WORKLOAD_ROWS, 50):
            values = ", ".join(
                f"({i}, {i}.25, 'n{i}', '2026-11-29 10:00:{i % 60:02d}.{i % 1000:03d}', '2026-01-01', "
                f"{2**63 + i}, {i}.5)"
                for i in range(start, start + 50)
            )
            cur.execute(f"INSERT INTO orders VALUES {values}")
        cur.execute("UPDATE orders SET note = 'u' WHERE id < 100")
        cur.execute("UPDATE orders SET id = 10000 WHERE id = 5")
        cur.execute("DELETE FROM orders WHERE id >= 500")
        cur.execute("INSERT INTO nokey VALUES (1, 'x'), (2, 'y')")
        for sql in every_type:
            cur.execute(sql)
        cur.execute("INSERT INTO nokey VALUES (3, 'end')")  # the last event: all before it are in
    env.spawn()

    def marker(records) -> bool:
        whole = env.whole_events(records)
        return sum(x.event.kind == "rows" and x.event.header.table == "nokey" for x in whole) >= 2

    env.records(marker, timeout=120)
    run_appender(spark, cfg, env.ds, env.topic, str(checkpoints / "ckpt-mb"))
    before = list(spark._jvm.dbus.jvm.AppendUdf.counts())  # local mode: the executors are this JVM
    run_appender(spark, cfg_jvm, env.ds, env.topic, str(checkpoints / "ckpt-rt"))
    in_jvm, in_python = (a - b for a, b in zip(spark._jvm.dbus.jvm.AppendUdf.counts(), before, strict=True))
    print(f"records written in the JVM: {in_jvm}, by the sidecar: {in_python}")
    return in_jvm, in_python


def check_workload_orders(changes: list) -> None:
    """The workload's ``orders`` topic decoded (``ums.formats.decode``, None for a tombstone): its
    operations and one created row's values."""
    ops = [c.op for c in changes if c is not None]
    # 600 inserts, 100 updates, the key change's delete and create, 101 deletes (and their tombstones)
    assert (ops.count("c"), ops.count("u"), ops.count("d")) == (WORKLOAD_ROWS + 1, 100, 1 + 101)
    created = {c.after[0]: c.after for c in changes if c is not None and c.op == "c"}
    assert created[7] == (7, "7.25", "n7", "2026-11-29 10:00:07.007", "2026-01-01", str(2**63 + 7), 7.5)


def forget_table_versions(env) -> None:
    """The meta store's table versions of the env's source, so no other test meets them."""
    store = MetaStore(env.cfg.endpoints.meta_store.url.get_secret_value())
    try:
        with store.engine.begin() as conn:
            conn.exec_driver_sql("DELETE FROM dbus_meta_version WHERE ds = %s", (env.ds,))
    finally:
        store.dispose()


def per_table_formats(fp, tables: dict[str, str]) -> None:
    """A full-pull env's configuration (file and loaded) writing each of ``tables`` (name: format) to a
    topic of its own."""
    raw = raw_config(fp.env.cfg_path)
    raw["sources"][fp.ds]["output"] = {
        "topic": "table",
        "tables": {f"{fp.database}.{t}": fmt for t, fmt in tables.items()},
    }
    fp.env.cfg_path.write_text(yaml.safe_dump(raw))
    fp.env.cfg = fp.stages.cfg = load_config(fp.env.cfg_path)


def delete_table_subjects(fp, table: str) -> None:
    """The registry subjects of ``table``'s topic (key and value), not left in the registry."""
    ccompat = fp.cfg.endpoints.registry.url.rstrip("/")
    topic = topics.result_topic(fp.ds, fp.cfg.source(fp.ds), fp.database, table)
    for subject in (f"{topic}-key", f"{topic}-value"):
        with contextlib.suppress(OSError):
            urllib.request.urlopen(urllib.request.Request(f"{ccompat}/subjects/{subject}", method="DELETE"))
