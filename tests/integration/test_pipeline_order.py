"""Order through the whole pipeline on multi-partition topics (issue #4 acceptance).

Six tables of one database are written (inserts, updates, deletes) while the extractor runs; every topic of
the source has 3 partitions, so the tables spread over partitions at each stage. The dispatcher (small
micro-batches) and the appender run in this process's Spark, twice (the second run from their checkpoints
after more writes). In the result topic, read per partition in offset order (the order a consumer sees a
key in), every primary key's ``ums_id_`` must never decrease, and every row change of the binlog must be
there, exactly once.
"""

from __future__ import annotations

import random
import time
from collections import Counter, defaultdict

import pytest
from binlog_truth import binlog_truth
from pipeline_env import (
    Through,
    binlog_changes,
    cleanup_pipeline,
    make_pipeline_env,
    read_ums,
)

from extractor.position import Position

pytestmark = pytest.mark.integration

TABLES = [f"t{i}" for i in range(6)]


def create_tables(db) -> None:
    with db.cursor() as cur:
        for t in TABLES:
            cur.execute(
                f"CREATE TABLE {t} (id INT PRIMARY KEY, v INT NOT NULL, s VARCHAR(32), amt DECIMAL(10,2))"
            )


def workload(db, rng: random.Random, live: dict[str, set[int]], next_id: dict[str, int], txns: int) -> int:
    """Random small transactions over all tables; every change of a key makes its row content new."""
    changes = 0
    with db.cursor() as cur:
        for n in range(txns):
            cur.execute("BEGIN")
            for _ in range(rng.randint(1, 6)):
                t = rng.choice(TABLES)
                op = rng.random()
                if op < 0.5 or len(live[t]) < 5:
                    ids = [next_id[t] + i for i in range(rng.randint(1, 4))]
                    next_id[t] += len(ids)
                    cur.execute(f"INSERT INTO {t} VALUES " + ",".join(f"({i},0,'s{n}',{i}.25)" for i in ids))
                    live[t].update(ids)
                    changes += len(ids)
                elif op < 0.85:
                    ids = rng.sample(sorted(live[t]), min(3, len(live[t])))
                    keys = ",".join(map(str, ids))
                    cur.execute(f"UPDATE {t} SET v = v + 1, s = 'u{n}' WHERE id IN ({keys})")
                    changes += cur.rowcount
                else:
                    i = rng.choice(sorted(live[t]))
                    cur.execute(f"DELETE FROM {t} WHERE id = {i}")
                    live[t].discard(i)
                    changes += cur.rowcount
            cur.execute("COMMIT")
    return changes


def wait_extracted(env, name: str) -> list:
    truth = binlog_truth(
        env.cfg.source(env.ds),
        Position.parse(env.cfg.source(env.ds).extractor.start),
        name,
        server_id=random.randint(91_000, 96_999),  # test_abnormal's readers are 97001-97007
    )
    wanted = {(e.file, e.pos) for e in truth}
    return env.records(
        lambda rs: (
            wanted <= {(r.event.header.file, r.event.header.pos) for r in rs if r.event.kind == "rows"}
        ),
        timeout=90,
    )


@pytest.mark.parametrize("mode", ["microbatch", "realtime"])
def test_per_key_order_on_multi_partition_topics(spark, writer_db, tmp_path, kafka_up, mode):
    db, name = writer_db
    env = make_pipeline_env(tmp_path, name, partitions=3)
    through = Through(env, spark, tmp_path, mode, max_offsets=150)  # micro-batch mode: several batches
    try:
        src = env.cfg.source(env.ds)
        result = src.topics.name("result", env.ds, name)
        create_tables(db)
        rng = random.Random(4)
        live, next_id = defaultdict(set), Counter({t: 1 for t in TABLES})
        env.spawn()
        through.start()  # real-time mode: the stages run while the workload does
        t0 = time.monotonic()

        def out_holds(n: int):
            return lambda: sum(o.kind == "data_increment_data" for o in read_ums(kafka_up, result)) >= n

        made = workload(db, rng, live, next_id, 250)
        wait_extracted(env, name)
        through.step(out_holds(made))
        print(f"\n{time.monotonic() - t0:.0f}s: first round through ({mode})")
        made += workload(db, rng, live, next_id, 250)
        raw_partitions = {r.partition for r in wait_extracted(env, name)}
        through.step(out_holds(made))
        print(f"{time.monotonic() - t0:.0f}s: second round through")

        truth = binlog_changes(env, name)
        assert len(truth) == made >= 3000
        out = [o for o in read_ums(kafka_up, result) if o.kind == "data_increment_data"]
        result_partitions = {o.partition for o in out}
        print(
            f"{made} row changes over {len(TABLES)} tables; raw topic partitions {sorted(raw_partitions)}, "
            f"result partitions used {sorted(result_partitions)}"
        )
        assert len(raw_partitions) > 1 and len(result_partitions) > 1, "tables spread over partitions"

        # Per key, in the order a consumer sees it, ums_id_ (and ums_uid_) never go back.
        seen: dict[tuple[str, str], list[tuple[int, int]]] = defaultdict(list)
        partitions_of_table = defaultdict(set)
        for o in out:  # read_ums: per partition, in offset order
            partitions_of_table[o.table].add(o.partition)
            seen[(o.table, dict(o.values())["id"])].append((o.ums_id, int(o.uid)))
        assert all(len(p) == 1 for p in partitions_of_table.values()), dict(partitions_of_table)
        backwards = {k: ids for k, ids in seen.items() if ids != sorted(ids)}
        assert not backwards, f"{len(backwards)} keys go back: {next(iter(backwards.items()))}"

        # Every change of the binlog is there, once, in binlog order per table.
        got = Counter(o.content() for o in out)
        missing = [c for c in truth if got[c.content()] == 0]
        assert not missing, f"{len(missing)} of {len(truth)} changes not in {result}, first {missing[:3]}"
        assert len(out) == len(truth) == len({o.uid for o in out}), "each change exactly once, uids unique"
        for t in TABLES:
            want = [c.content() for c in truth if c.table == t]
            assert [o.content() for o in out if o.table == t] == want, f"{t}: changes out of binlog order"
    finally:
        through.stop()
        cleanup_pipeline(env)
