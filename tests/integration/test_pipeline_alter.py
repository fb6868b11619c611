"""Schema changes mid-stream through the whole pipeline (issue #4 acceptance).

A table is written, altered (ADD COLUMN, DROP COLUMN, MODIFY to another UMS type, MODIFY to a compatible
type), truncated, and written again after each step; the extractor, the dispatcher and the appender carry
it to the result topic (Spark stages in this process). Checked, in result-topic order:

- the namespace version (segment 5 of ``mysql.<ds>.<schema>.<table>.<version>.0.0``) bumps at each
  incompatible change and at TRUNCATE, and stays at the compatible one;
- a ``data_increment_termination`` under the old version comes after its last row and right before the
  first row of the new version;
- the rows of each version carry that version's fields (names and types) and the binlog's values;
- the meta store holds the versions with the binlog ids they start at.

Then the appender runs again from scratch (new checkpoint, new result topic, same meta store) over the same
schema topic: the old positions must reproduce their old namespaces, fields and tuples exactly.
"""

from __future__ import annotations

import itertools

import pytest
from pipeline_env import (
    Through,
    binlog_changes,
    cleanup_pipeline,
    make_pipeline_env,
    read_ums,
    run_appender_now,
    variant_config,
)

from dbuslib.metastore import MetaStore

pytestmark = pytest.mark.integration

TERM, DATA = "data_increment_termination", "data_increment_data"

# (statements, user fields (name, UMS type) of the rows written after them, version of those rows)
STEPS = [
    (
        [
            "CREATE TABLE t (id INT PRIMARY KEY, a VARCHAR(20), b INT, n INT)",
            "INSERT INTO t VALUES (1, 'one', 10, 100), (2, 'two', 20, 200), (3, 'three', 30, 300)",
            "UPDATE t SET a = 'uno' WHERE id = 1",
        ],
        [("id", "int"), ("a", "string"), ("b", "int"), ("n", "int")],
        0,
    ),
    (
        [
            "ALTER TABLE t ADD COLUMN c VARCHAR(10)",
            "INSERT INTO t VALUES (4, 'four', 40, 400, 'c4'), (5, 'five', 50, 500, NULL)",
            "DELETE FROM t WHERE id = 2",
        ],
        [("id", "int"), ("a", "string"), ("b", "int"), ("n", "int"), ("c", "string")],
        1,
    ),
    (
        [
            "ALTER TABLE t DROP COLUMN b",
            "INSERT INTO t VALUES (6, 'six', 600, 'c6')",
            "UPDATE t SET c = 'c4b' WHERE id = 4",
        ],
        [("id", "int"), ("a", "string"), ("n", "int"), ("c", "string")],
        2,
    ),
    (
        ["ALTER TABLE t MODIFY n BIGINT", "INSERT INTO t VALUES (7, 'seven', 7000000000, 'c7')"],
        [("id", "int"), ("a", "string"), ("n", "long"), ("c", "string")],
        3,
    ),
    (
        [
            "ALTER TABLE t MODIFY a VARCHAR(40)",  # string -> string: compatible, the version stays
            "INSERT INTO t VALUES (8, 'eight, a longer value than twenty', 8, 'c8')",
        ],
        [("id", "int"), ("a", "string"), ("n", "long"), ("c", "string")],
        3,
    ),
    (
        ["TRUNCATE TABLE t", "INSERT INTO t VALUES (9, 'nine', 9, 'c9')"],
        [("id", "int"), ("a", "string"), ("n", "long"), ("c", "string")],
        4,
    ),
]


def runs(out) -> list[tuple[str, int]]:
    """The output of table t as runs of (kind, version), in result order."""
    return [k for k, _ in itertools.groupby((o.kind, o.version) for o in out)]


@pytest.mark.parametrize("mode", ["microbatch", "realtime"])
def test_alter_bumps_versions_and_a_replay_keeps_them(spark, writer_db, tmp_path, kafka_up, mode):
    """In real-time mode the stages run while the ALTERs and the TRUNCATE happen (mid-stream)."""
    db, name = writer_db
    env = make_pipeline_env(tmp_path, name, partitions=1)
    through = Through(env, spark, tmp_path, mode)
    try:
        src = env.cfg.source(env.ds)
        result = src.topics.name("result", env.ds, name)
        env.spawn()
        through.start()
        with db.cursor() as cur:
            for statements, _, _ in STEPS:
                for sql in statements:
                    cur.execute(sql)
        db.commit()
        truth = binlog_changes(env, name)
        assert len(truth) == 12
        env.records(
            lambda rs: (
                sum(r.event.kind == "rows" for r in rs) >= 9
                and any(r.event.header.ddl == "TRUNCATE" for r in rs)
            ),
            timeout=90,
        )

        def all_out():  # the 12 row changes and the 4 terminations
            kinds = [o.kind for o in read_ums(kafka_up, result) if o.table == "t"]
            return kinds.count(DATA) >= 12 and kinds.count(TERM) >= 4

        through.step(all_out)

        out = [o for o in read_ums(kafka_up, result) if o.table == "t"]
        namespace = f"mysql.{env.ds}.{name}.t"
        assert {o.namespace.rsplit(".", 3)[0] for o in out} == {namespace}
        assert all(o.namespace.endswith(".0.0") for o in out)
        assert runs(out) == [
            (DATA, 0),
            (TERM, 0),
            (DATA, 1),
            (TERM, 1),
            (DATA, 2),
            (TERM, 2),
            (DATA, 3),
            (TERM, 3),
            (DATA, 4),
        ], "versions bump, each ended by a termination right before the next"
        data = [o for o in out if o.kind == DATA]
        assert [o.content() for o in data] == [c.content() for c in truth], "values as in the binlog"
        expected_layout = []
        for (_, fields, version), step_rows in zip(STEPS, _rows_of_steps(truth), strict=True):
            expected_layout += [(version, fields)] * step_rows
        assert [(o.version, list(o.fields[4:])) for o in data] == expected_layout, "fields of each version"
        fixed = (("ums_id_", "long"), ("ums_ts_", "datetime"), ("ums_op_", "string"), ("ums_uid_", "string"))
        assert [o.fields[:4] for o in data] == [fixed] * len(data)
        terms = [o for o in out if o.kind == TERM]
        assert all(o.fields == (("ums_ts_", "datetime"),) and len(o.tuple_) == 1 for o in terms)

        store = MetaStore(env.cfg.endpoints.meta_store.url.get_secret_value())
        try:
            history = store.history(env.ds, name, "t")
        finally:
            store.dispose()
        assert [(v.version, v.reason.value) for v in history] == [
            (0, "first"),
            (1, "columns"),
            (2, "columns"),
            (3, "columns"),
            (4, "truncate"),
        ]
        first_of = {v: next(o.ums_id for o in data if o.version == v) for v in range(4)}
        assert [v.since for v in history[:4]] == [first_of[v] for v in range(4)], "starts at its rows"
        first_after_truncate = next(o.ums_id for o in data if o.version == 4)
        assert first_of[3] < history[4].since < first_after_truncate, "version 4 starts at the TRUNCATE"

        # Replay from scratch into another topic: the same namespaces, fields and tuples.
        replay_cfg = variant_config(env, tmp_path / "replay.yaml", result="{ds}.{schema}.replay")
        run_appender_now(spark, replay_cfg, env.ds, tmp_path / "replay-ckpt")
        replayed = [o for o in read_ums(kafka_up, f"{env.ds}.{name}.replay") if o.table == "t"]
        again = [(o.namespace, o.fields, o.tuple_) for o in replayed if o.kind == DATA]
        assert again == [(o.namespace, o.fields, o.tuple_) for o in data], "the replay gives the old versions"
        print(
            f"\nreplay: {len(again)} tuples as before; terminations replayed: "
            f"{[o.version for o in replayed if o.kind == TERM]} (first run: {[o.version for o in terms]})"
        )
    finally:
        through.stop()
        cleanup_pipeline(env)


def _rows_of_steps(truth) -> list[int]:
    """Row changes written by each step of STEPS (the binlog's count, step by step)."""
    counts = [4, 3, 2, 1, 1, 1]  # 3 inserts + 1 update; 2 inserts + 1 delete; insert + update; 1 insert each
    assert sum(counts) == len(truth)
    return counts
