"""Crash tests of the extractor on the real stack: kill -9, standby takeover, ZooKeeper outage, purged binlog.

Each test checks against the binlog itself (binlog_truth): every rows event of the test's database must
be in the topic at least once, and per table the first occurrences must be in binlog order. Duplicates
(re-sent after a restart, as at-least-once allows) are counted and printed.
"""

from __future__ import annotations

import json
import os
import random
import re
import signal
import subprocess
import threading
import time
from collections import Counter, defaultdict

import pytest
import yaml
from binlog_truth import TruthEvent, binlog_truth, file_number
from extractor_env import REPO, covered, start_of, wait_for_log

from dbuslib import mysql
from dbuslib.config import load_config
from extractor.position import Position

pytestmark = pytest.mark.integration
ZK_OUTAGE_SESSION_S = 15  # the ZooKeeper outage test's session (test_zookeeper_outage_...)


def workload(db, transactions: int, rows_per_txn: int) -> int:
    """Inserts, updates and deletes over two tables, many transactions; returns row changes made."""
    changes = 0
    with db.cursor() as cur:
        for t in range(transactions):
            cur.execute("BEGIN")
            values = ",".join(
                f"({t},'{'x' * (t % 20)}',{t}.5,NOW(3),'note {t}')" for _ in range(rows_per_txn)
            )
            cur.execute(f"INSERT INTO orders (k, a, b, c, d) VALUES {values}")
            cur.execute("INSERT INTO audit (k, what) VALUES (%s, 'batch')", (t,))
            cur.execute("UPDATE orders SET a = 'updated' WHERE k = %s AND id %% 5 = 0", (t,))
            updated = cur.rowcount
            cur.execute("DELETE FROM orders WHERE k = %s AND id %% 7 = 0", (t,))
            changes += rows_per_txn + 1 + updated + cur.rowcount
            cur.execute("COMMIT")
    return changes


def create_tables(db) -> None:
    with db.cursor() as cur:
        cur.execute(
            "CREATE TABLE orders (id BIGINT AUTO_INCREMENT PRIMARY KEY, k INT, a VARCHAR(32), "
            "b DECIMAL(10,2), c DATETIME(3), d TEXT, KEY (k))"
        )
        cur.execute("CREATE TABLE audit (id BIGINT AUTO_INCREMENT PRIMARY KEY, k INT, what VARCHAR(16))")


def check_no_loss_and_order(env, truth: list[TruthEvent], records) -> tuple[int, int]:
    """Asserts coverage and per-table order; returns (rows events sent again, rows they held)."""
    events = [r for r in env.whole_events(records) if r.event.kind == "rows"]
    seen = {(r.event.header.file, r.event.header.pos) for r in events}
    missing = [e for e in truth if (e.file, e.pos) not in seen]
    assert not missing, f"{len(missing)} rows events never reached the topic, first {missing[:3]}"
    by_table: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for r in sorted(events, key=lambda r: (r.partition, r.offset)):
        by_table[r.event.header.table].append((file_number(r.event.header.file), r.event.header.pos))
    for table, positions in by_table.items():
        first = list(dict.fromkeys(positions))
        assert first == sorted(first), f"{table}: rows events out of binlog order"
    rows_of = {(e.file, e.pos): e.rows for e in truth}
    again = Counter((r.event.header.file, r.event.header.pos) for r in events) - Counter(seen)
    return again.total(), sum(rows_of.get(k, 0) * n for k, n in again.items())


def purge_up_to_now(db, must_go: str, timeout: float = 60) -> None:
    """Rotate and purge every older binlog; MariaDB keeps a file while a (dying) dump thread still reads
    it, so retry until ``must_go`` is really gone."""
    deadline = time.monotonic() + timeout
    with db.cursor() as cur:
        cur.execute("FLUSH BINARY LOGS")
        while True:
            cur.execute(f"PURGE BINARY LOGS TO '{mysql.binlog_end(db).file}'")
            if must_go not in mysql.binlog_files(db):
                return
            assert time.monotonic() < deadline, f"{must_go} could not be purged"
            cur.execute("FLUSH BINARY LOGS")  # a new event makes the server notice dead dump threads
            time.sleep(0.5)


def test_kill_9_five_times_loses_nothing(extractor_env, writer_db):
    env, (db, name) = extractor_env, writer_db
    create_tables(db)
    made = {}
    # 1,000 transactions of about 202 row changes each (150 inserts, 1 audit row, 30 updates, 21 or 22
    # deletes): 202,4xx, past the 200,000 asserted below, with no surplus for the binlog truth to decode
    writer = threading.Thread(target=lambda: made.setdefault("n", workload(db, 1000, 150)))
    writer.start()
    kills = 0
    while kills < 5 or writer.is_alive():
        index = len(env.procs)
        proc = env.spawn()
        wait_for_log(env, index, "leading with epoch")
        time.sleep(random.uniform(0.3, 2.0))  # let it run a random while, then crash it mid-stream
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        kills += 1
    writer.join()
    env.spawn()
    truth = binlog_truth(env.cfg.source(env.ds), start_of(env), name, server_id=97001)
    records = env.records(covered(truth), timeout=240)
    events_again, rows_again = check_no_loss_and_order(env, truth, records)
    rows = sum(e.rows for e in truth)
    print(
        f"\nkill -9 x{kills}: {made['n']} row changes in {len(truth)} rows events; duplicates: "
        f"{events_again} rows events ({rows_again} row changes) sent more than once"
    )
    assert rows == made["n"] >= 200_000
    secret = re.compile(
        r"passw(or)?d\W{1,4}" + re.escape(env.cfg.source(env.ds).mysql.password.get_secret_value())
    )
    leaked = [p.name for p in env.log_paths if secret.search(p.read_text())]
    assert not leaked, f"the MySQL password appears in {leaked}"


def test_standby_takes_over_and_stale_leader_cannot_commit(extractor_env, writer_db):
    env, (db, name) = extractor_env, writer_db
    create_tables(db)
    leader = env.spawn("leader")
    wait_for_log(env, 0, "leading with epoch 1")
    standby = env.spawn("standby")
    wait_for_log(env, 1, "waiting to lead")
    workload(db, 50, 100)

    # Freeze the leader past its ZooKeeper session: the standby must lead within 30 s.
    os.kill(leader.pid, signal.SIGSTOP)
    t0 = time.monotonic()
    wait_for_log(env, 1, "leading with epoch 2", timeout=30)
    print(f"\nstandby led {time.monotonic() - t0:.1f}s after the leader froze")
    workload(db, 50, 100)
    # The old leader wakes up with an expired session: it must stop without committing.
    os.kill(leader.pid, signal.SIGCONT)
    assert leader.wait(60) == 4, "a deposed extractor exits with code 4"
    status = env.run_cli("status", "--source", env.ds, "--json")
    assert '"epoch": 2' in status.stdout, status.stdout + status.stderr

    # kill -9 the new leader too: a third extractor, started and waiting beforehand (its start-up is not
    # part of what is timed), takes over and nothing is lost.
    env.spawn("third")
    wait_for_log(env, 2, "waiting to lead")
    os.kill(standby.pid, signal.SIGKILL)
    wait_for_log(env, 2, "leading with epoch 3", timeout=30)
    workload(db, 20, 100)
    truth = binlog_truth(env.cfg.source(env.ds), start_of(env), name, server_id=97002)
    check_no_loss_and_order(env, truth, env.records(covered(truth), timeout=120))


@pytest.mark.exclusive  # stops the stack's ZooKeeper
def test_zookeeper_outage_keeps_extracting_and_catches_up(extractor_env, writer_db):
    env, (db, name) = extractor_env, writer_db
    # an outage the extractor's session outlives: a stop and start of ZooKeeper under make test's load took
    # longer than the tests' 4 s session once (the extractor then exits deposed, as it must), so 15 s here
    raw = yaml.safe_load(env.cfg_path.read_text())
    raw["endpoints"]["zookeeper"]["timeout_s"] = ZK_OUTAGE_SESSION_S
    env.cfg_path.write_text(yaml.safe_dump(raw))
    env.cfg = load_config(env.cfg_path)
    create_tables(db)
    env.spawn()
    wait_for_log(env, 0, "leading with epoch")
    workload(db, 20, 100)
    truth = binlog_truth(env.cfg.source(env.ds), start_of(env), name, server_id=97007)
    env.records(covered(truth), timeout=60)
    local = env.position_path()
    deadline = time.monotonic() + 30
    while not local.exists():  # the first commit, before ZooKeeper goes
        assert time.monotonic() < deadline, f"{local} was never written"
        time.sleep(0.1)
    stack = ["bash", str(REPO / "stack" / "stack.sh")]
    subprocess.run([*stack, "down", "zookeeper"], check=True)
    try:
        before = local.read_text()
        workload(db, 100, 100)
        truth = binlog_truth(env.cfg.source(env.ds), start_of(env), name, server_id=97003)
        env.records(covered(truth), timeout=60)  # still extracting with ZooKeeper down
        deadline = time.monotonic() + 30
        while local.read_text() == before:
            assert time.monotonic() < deadline, (
                "the local position file did not move while ZooKeeper was down"
            )
            time.sleep(0.2)
    finally:
        subprocess.run([*stack, "up", "zookeeper"], check=True)
    workload(db, 20, 100)
    truth = binlog_truth(env.cfg.source(env.ds), start_of(env), name, server_id=97004)
    check_no_loss_and_order(env, truth, env.records(covered(truth), timeout=60))
    last = (file_number(truth[-1].file), truth[-1].pos)
    deadline = time.monotonic() + 30
    while True:  # ZooKeeper catches up with the local file
        status = json.loads(env.run_cli("status", "--source", env.ds, "--json").stdout)
        in_zk = status.get("zookeeper") or {}
        if in_zk and (file_number(in_zk["file"]), in_zk["pos"]) > last:
            break
        assert time.monotonic() < deadline, f"ZooKeeper's position did not catch up: {status}"
        time.sleep(0.5)
    assert env.procs[0].poll() is None, "the extractor must survive a ZooKeeper outage"


@pytest.mark.exclusive  # purges every binlog file but the newest: other tests read from theirs
def test_purged_binlog_stops_with_the_recovery_command(extractor_env, writer_db):
    env, (db, name) = extractor_env, writer_db
    create_tables(db)
    proc = env.spawn()
    wait_for_log(env, 0, "leading with epoch")
    workload(db, 5, 10)
    truth = binlog_truth(env.cfg.source(env.ds), start_of(env), name, server_id=97005)
    env.records(covered(truth), timeout=60)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(30) == 0

    workload(db, 5, 10)  # changes the stopped extractor has not read
    stored = Position.from_json(env.position_path().read_text())
    purge_up_to_now(db, stored.file)
    failed = env.spawn()
    assert failed.wait(60) == 2
    message = env.log_paths[1].read_text()
    assert "1236" in message and f"dbus extractor reset --source {env.ds}" in message, message

    after = mysql.binlog_end(db)
    reset = env.run_cli("reset", "--source", env.ds, "--to", "current")
    assert reset.returncode == 0, reset.stderr
    env.spawn()
    wait_for_log(env, 2, "leading with epoch")
    workload(db, 3, 10)
    truth = binlog_truth(env.cfg.source(env.ds), Position(after.file, after.pos), name, server_id=97006)
    assert truth
    env.records(covered(truth), timeout=60)
