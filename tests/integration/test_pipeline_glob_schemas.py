"""Schemas captured through a glob reach UMS, also those that first appear after the stages started
(issue #29, acceptance 00).

``capture.include: ['*.*']``; the extractor, the dispatcher and the appender run as real stages (the two
Spark stages as ``spark-submit`` processes), in each trigger mode. A first schema gets its rows (its
topic made ahead by make_pipeline_env, matched by the pattern at start); then a second one, named with
characters Kafka refuses (``glob29_<hex>_späť``, its topic escaped), is CREATEd while everything runs: the
dispatcher makes its topic, and the appender must find it and read it from its first record. Every row
change of both (from the binlog) must reach its result topic. In real-time mode the new topic's partitions
run in the task slots the appender keeps spare (``appender.realtime_spare_tasks``).

The stack's MariaDB is shared with other tests: so that this source converts only its own schemas, it
excludes every schema whose name does not begin with ``glob29`` (``[!g]*.*``, ``g[!l]*.*``, ...), whole
schemas dropped by exclude globs as a user would.
"""

from __future__ import annotations

import uuid

import pytest
import yaml
from helpers import wait_until
from pipeline_env import (
    appender_stage,
    binlog_changes,
    cleanup_pipeline,
    dispatcher_stage,
    make_pipeline_env,
    read_ums,
    set_trigger,
    start_pipeline,
)

from dbuslib import mysql
from dbuslib.config import load_config
from dbuslib.topics import escape

pytestmark = pytest.mark.integration

PREFIX = "glob29"
ROWS = 40


def only_prefix(prefix: str) -> list[str]:
    """Exclude globs that drop every schema whose name does not begin with ``prefix``."""
    return [f"{prefix[:i]}[!{c}]*.*" for i, c in enumerate(prefix)]


@pytest.fixture
def databases(source):
    """Two schema names of this test (not created yet) and a writer connection; both dropped after."""
    tag = uuid.uuid4().hex[:8]
    names = [f"{PREFIX}_{tag}_a", f"{PREFIX}_{tag}_späť"]
    db = mysql.connect(source.mysql, as_writer=True)
    yield db, names
    with db.cursor() as cur:
        for name in names:
            cur.execute(f"DROP DATABASE IF EXISTS `{name}`")
    db.close()


def write_schema(db, name: str) -> None:
    """CREATE DATABASE, a table, inserts, updates and deletes, committed."""
    with db.cursor() as cur:
        cur.execute(f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4")
        cur.execute(f"CREATE TABLE `{name}`.t (id INT PRIMARY KEY, v VARCHAR(32))")
        for i in range(ROWS):
            cur.execute(f"INSERT INTO `{name}`.t VALUES (%s, %s)", (i, f"v{i}"))
        cur.execute(f"UPDATE `{name}`.t SET v = CONCAT(v, '+') WHERE id < 5")
        cur.execute(f"DELETE FROM `{name}`.t WHERE id >= {ROWS - 3}")
    db.commit()


@pytest.mark.parametrize("trigger", ["microbatch", "realtime"])
def test_a_schema_created_after_the_stages_started_reaches_its_result_topic(
    databases, tmp_path, kafka_up, trigger
):
    db, (first, late) = databases
    env = make_pipeline_env(tmp_path, first, partitions=2)
    raw = yaml.safe_load(env.cfg_path.read_text())
    raw["sources"][env.ds]["capture"] = {"include": ["*.*"], "exclude": only_prefix(PREFIX)}
    env.cfg_path.write_text(yaml.safe_dump(raw))
    set_trigger(env, trigger, checkpoint_s=5)
    env.cfg = load_config(env.cfg_path)
    src = env.cfg.source(env.ds)
    dispatcher, appender = dispatcher_stage(env), appender_stage(env)
    stages = (dispatcher, appender)
    results = {n: src.topics.name("result", env.ds, n) for n in (first, late)}
    assert src.topics.name("schema", env.ds, late) == f"{env.ds}.{escape(late)}"
    assert escape(late).endswith("_sp_x00e4_x0165")

    def all_in(name: str, count: int):
        def check() -> bool:
            try:
                out = [o for o in read_ums(kafka_up, results[name]) if o.kind == "data_increment_data"]
            except Exception:  # the result topic is made by the appender with its first record
                return False
            return len({o.uid for o in out}) >= count

        return check

    try:
        start_pipeline(env, dispatcher, appender)
        write_schema(db, first)
        first_truth = binlog_changes(env, first)
        assert len(first_truth) == ROWS + 5 + 3
        wait_until(all_in(first, len(first_truth)), 240, f"{first}'s rows in UMS", interval=2, alive=stages)

        write_schema(db, late)  # a schema that did not exist when the stages started
        truth = binlog_changes(env, late)
        assert len(truth) == ROWS + 5 + 3
        wait_until(all_in(late, len(truth)), 240, f"{late}'s rows in UMS", interval=2, alive=stages)

        for name, changes in ((first, first_truth), (late, truth)):
            out = [o for o in read_ums(kafka_up, results[name]) if o.kind == "data_increment_data"]
            assert {o.table for o in out} == {"t"}
            assert sorted({o.content() for o in out}) == sorted({c.content() for c in changes})
    finally:
        cleanup_pipeline(env, list(stages))
