"""What the per-row format tests share (tests/integration/test_appender_rowformats_live.py,
test_formats_evolution_live.py, test_formats_compaction_live.py): a source's configuration writing one
format to a topic per table, and one appender run drained with ``available_now``."""

from __future__ import annotations

import yaml

from appender import job
from dbuslib.config import load_config


def per_row_config(env, fmt: str, trigger: str):
    """The env's configuration writing ``fmt`` to a topic per table, the appender in ``trigger`` mode;
    each run its own topic names (``{ds}.{schema}.{table}.<trigger>``, events likewise)."""
    raw = yaml.safe_load(env.cfg_path.read_text())
    src = raw["sources"][env.ds]
    src["output"] = {"format": fmt, "topic": "table"}
    src.setdefault("appender", {})["trigger"] = trigger
    src["topics"]["table"] = "{ds}.{schema}.{table}." + trigger
    src["topics"]["events"] = "{ds}.{schema}.events." + trigger
    path = env.cfg_path.with_name(f"dbus-{fmt}-{trigger}.yaml")
    path.write_text(yaml.safe_dump(raw))
    return load_config(path)


def run_appender(spark, cfg, ds: str, topic: str, checkpoint: str) -> None:
    query = job.start(spark, cfg, ds, [topic], checkpoint, available_now=True)
    try:
        query.awaitTermination(300)
        assert query.exception() is None, query.exception()
    finally:
        query.stop()
