"""The full-puller service on the real stack: ``spark-submit fullpuller/main.py`` serving requests sent with
``dbus fullpull request``. One service serves every test of this module except the kill test, which runs
its own (it is killed with ``kill -9`` and restarted).

Each pull is checked against a SELECT of the same table: every row exactly once, with the values
``ums.values`` gives, between the pull's start and end markers, all with the pull's ``ums_id_``.
"""

from __future__ import annotations

import json
import signal
import time
from collections import Counter

import pytest
from fullpull_env import cleanup_fullpull, make_fullpull_env
from test_rowdecode_types import as_decoded

from dbuslib import kafka, mysql
from fullpuller import catalog
from ums.values import encode_column

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def fp(tmp_path_factory, source):
    env = make_fullpull_env(tmp_path_factory.mktemp("fullpull"), source)
    try:
        env.start()
        yield env
    finally:
        cleanup_fullpull(env)


def expected_tuples(fp, table: str) -> Counter:
    """The table's rows as UMS values (the Python reference), one entry per row."""
    reader = mysql.connect(fp.cfg.source(fp.ds).mysql)
    try:
        info = catalog.table_info(reader, fp.database, table)
        with reader.cursor() as cur:
            cur.execute(f"SELECT * FROM `{fp.database}`.`{table}`")
            rows = cur.fetchall()
    finally:
        reader.close()
    return Counter(json.dumps([encode_column(c, as_decoded(c, v)) for c, v in zip(info.columns, row)])
                   for row in rows)


def check_pull(fp, table: str, seqno: int, rows: int) -> list[tuple]:
    p = fp.wait_finished(table, seqno)
    assert p.Status == "ending", p
    tuples, markers, fields = fp.pulled(table, seqno)
    assert markers == ["start", "end"]
    assert len(tuples) == rows == p.FinishedRows
    assert {t[0] for t in tuples} <= {p.UmsId} and {t[2] for t in tuples} <= {"i"}
    assert len({t[3] for t in tuples}) == rows  # ums_uid_ unique
    got = Counter(json.dumps(list(t[4:])) for t in tuples)
    assert got == expected_tuples(fp, table)
    reply = [c for c in fp.callback() if c["SEQNO"] == str(seqno)]
    assert [(r["STATUS"], r["ROWS"]) for r in reply] == [("ending", str(rows))]
    return tuples


def test_a_pull_writes_every_row_once_between_markers(fp):
    fp.sql("CREATE TABLE orders (id INT PRIMARY KEY, customer VARCHAR(40), amount DECIMAL(10,2), "
           "created DATETIME(3))",
           "INSERT INTO orders SELECT seq, CONCAT('c', seq % 97), seq / 7, "
           "TIMESTAMP('2024-01-02 03:04:05.123') + INTERVAL seq SECOND FROM seq_1_to_2500")
    seqno, out = fp.request("orders", "--shard-size", "1000")
    assert out.returncode == 0, out.stderr
    assert "accepted at ums_id" in out.stdout and "2500 rows in 3 shard(s), split by id" in out.stdout
    check_pull(fp, "orders", seqno, 2500)
    status = fp.dbus("fullpull", "status", "--source", fp.ds, "--id", str(seqno))
    assert status.returncode == 0 and "ending" in status.stdout and "3/3 shards" in status.stdout, status
    from dbuslib import influx

    points = influx.query(fp.cfg.endpoints.influxdb,
                          f'from(bucket:"{fp.cfg.endpoints.influxdb.bucket}") |> range(start:-1h) '
                          f'|> filter(fn:(r) => r._measurement == "dbus_fullpull" and r.ds == "{fp.ds}" '
                          f'and r.id == "{seqno}" and r._field == "rows")')
    assert points and max(p["_value"] for p in points) == 2500  # the last point: every row


@pytest.mark.parametrize(("name", "ddl", "fill", "split"), [
    ("composite_pk", "a INT, b VARCHAR(10), v INT, PRIMARY KEY (a, b)",
     "SELECT seq % 7, CONCAT('k', seq), seq FROM seq_1_to_900", "a,b"),
    ("string_pk", "k VARCHAR(20) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci PRIMARY KEY, v INT",
     "SELECT CONCAT(IF(seq % 3, 'é', 'Z'), LPAD(seq, 5, '0')), seq FROM seq_1_to_700", "k"),
    ("no_pk", "v INT, w VARCHAR(10)", "SELECT seq % 50, CONCAT('w', seq) FROM seq_1_to_300", ""),
    ("empty", "id BIGINT PRIMARY KEY, v INT", "", "id"),
    ("json_blob", "id INT PRIMARY KEY, doc JSON, data BLOB",
     "SELECT seq, JSON_OBJECT('n', seq, 's', CONCAT('é\"', seq)), UNHEX(SHA2(seq, 256)) FROM seq_1_to_400", "id"),
])
def test_key_shapes_and_column_types_pull_correctly(fp, name, ddl, fill, split):
    fp.sql(f"CREATE TABLE {name} ({ddl})", *([f"INSERT INTO {name} {fill}"] if fill else []))
    seqno, out = fp.request(name, "--shard-size", "250")
    assert out.returncode == 0, out.stderr
    if split:
        assert f"split by {split}" in out.stdout, out.stdout
    else:
        assert "split by nothing" in out.stdout and "warning" in out.stdout, out.stdout
    with fp.db.cursor() as cur:
        cur.execute(f"SELECT COUNT(*) FROM {name}")
        (count,) = cur.fetchone()
    check_pull(fp, name, seqno, count)


def test_masked_columns_are_masked_in_the_pull(fp):
    import yaml

    conf = yaml.safe_load(fp.env.cfg_path.read_text())  # the shard readers reload the changed file
    conf["sources"][fp.ds]["masking"] = {f"{fp.database}.cards": {"card": {"type": "md5", "salt": "s1"},
                                                                   "holder": {"type": "truncate", "length": 2}}}
    fp.env.cfg_path.write_text(yaml.safe_dump(conf))
    fp.sql("CREATE TABLE cards (id INT PRIMARY KEY, card VARCHAR(19), holder VARCHAR(30))",
           "INSERT INTO cards SELECT seq, CONCAT('4111-0000-0000-', LPAD(seq, 4, '0')), CONCAT('Holder', seq) "
           "FROM seq_1_to_300")
    seqno, out = fp.request("cards")
    assert out.returncode == 0, out.stderr
    assert fp.wait_finished("cards", seqno).Status == "ending"
    tuples, markers, fields = fp.pulled("cards", seqno)
    assert len(tuples) == 300 and markers == ["start", "end"]
    encoded = {f["name"] for f in fields if f.get("encoded")}
    assert encoded == {"card", "holder"}
    raw = b"".join(r.value for r in kafka.read_range(fp.cfg.endpoints.kafka, [fp.result_topic("cards")]))
    assert b"4111-0000" not in raw and b"Holder" not in raw
    assert {t[6] for t in tuples} == {"Ho"}


def test_bad_requests_get_an_error_reply_and_the_service_goes_on(fp):
    fp.sql("CREATE TABLE good (id INT PRIMARY KEY, v INT)", "INSERT INTO good SELECT seq, seq FROM seq_1_to_50")
    seqno, out = fp.request("no_such_table")
    assert out.returncode == 2 and "FULLPULL_UNKNOWN_TABLE" in out.stderr and "no_such_table" in out.stderr
    seqno, out = fp.request("good", "--split-col", "nope")
    assert out.returncode == 2 and "FULLPULL_BAD_SPLIT_COL" in out.stderr and "nope" in out.stderr, out.stderr
    seqno, out = fp.request("good", "--where", "no_column > 1")
    assert out.returncode == 2 and "FULLPULL_BAD_REQUEST" in out.stderr, out.stderr
    src = fp.cfg.source(fp.ds)
    ctrl = src.topics.name("ctrl", fp.ds)
    producer = kafka.producer(fp.cfg.endpoints.kafka)
    producer.send(ctrl, key=b"FULL_DATA_INDEPENDENT_PULL_REQ", value=b'{"id": 77, "type": "FULL_DATA_')
    producer.send(ctrl, key=b"FULL_DATA_INDEPENDENT_PULL_REQ",
                  value=b'{"id": 78, "type": "NO_SUCH_TYPE", "timestamp": "t", "from": "f", "payload": {"a": 1}}')
    producer.flush()
    producer.close()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        replies = fp.callback()
        if any(r["SEQNO"] == "78" for r in replies):
            break
        time.sleep(0.5)
    by_code = {(r["SEQNO"], r["ERROR_CODE"]) for r in replies if r["STATUS"] == "abort"}
    assert ("", "FULLPULL_BAD_REQUEST") in by_code  # not JSON: no id to name
    assert ("78", "FULLPULL_BAD_REQUEST") in by_code
    assert any("unknown type 'NO_SUCH_TYPE'" in r["ERROR_MSG"] for r in replies)
    seqno, out = fp.request("good")
    assert out.returncode == 0, out.stderr
    check_pull(fp, "good", seqno, 50)


def test_kill_9_mid_pull_resumes_and_repulls_only_unfinished_shards(tmp_path, source):
    fp = make_fullpull_env(tmp_path, source)
    try:
        fp.sql("CREATE TABLE big (id INT PRIMARY KEY, a VARCHAR(40), b BIGINT, c DECIMAL(12,3))",
               "INSERT INTO big SELECT seq, REPEAT('x', seq % 40), seq * 1000, seq / 3 FROM seq_1_to_150000")
        raw = fp.env.cfg_path.read_text()  # one shard at a time: the kill lands between shards' ends
        import yaml

        conf = yaml.safe_load(raw)
        conf["sources"][fp.ds]["fullpull"] = {"parallelism": 1, "progress_interval_s": 0.5}
        fp.env.cfg_path.write_text(yaml.safe_dump(conf))
        from dbuslib.config import load_config

        fp.env.cfg = load_config(fp.env.cfg_path)
        fp.stages.cfg = fp.env.cfg
        fp.start()
        seqno, out = fp.request("big", "--shard-size", "10000")
        assert out.returncode == 0, out.stderr
        store = fp.store()
        try:
            deadline = time.monotonic() + 240
            while True:
                p = store.refreshed(store.get(fp.database, "big", seqno))
                if 3 <= p.FinishedCount < p.TotalCount - 3 or time.monotonic() > deadline:
                    break
                time.sleep(0.2)
            done_before = p.FinishedCount
            assert 3 <= done_before < p.TotalCount, p
            fp.stages.stop("fullpuller", signal.SIGKILL)
            fp.start()
            final = fp.wait_finished("big", seqno)
        finally:
            store.zk.stop()
            store.zk.close()
        repulled = final.TotalCount - done_before
        print(f"\nkill -9 after {done_before} of {final.TotalCount} shards done: the restart re-pulled "
              f"{repulled} shard(s) (resumes: {final.Resumes})")
        assert final.Status == "ending" and final.Resumes == 1
        log = fp.stages.log("fullpuller").read_text()
        assert f"pulling {repulled} of {final.TotalCount} shard(s) (resume 1: {done_before} already done)" in log
        tuples, markers, _ = fp.pulled("big", seqno)
        assert markers[0] == "start" and markers[-1] == "end"
        ids = Counter(t[4] for t in tuples)
        assert set(ids) == set(range(1, 150_001))  # nothing lost
        duplicates = sum(n - 1 for n in ids.values())
        print(f"duplicates: {duplicates} rows written twice (the shard in flight at the kill)")
        assert duplicates <= 10_000  # one shard at a time: at most the one being pulled was written twice
        assert final.FinishedRows == 150_000
        fp.stages.stop("fullpuller")
        snapshot = tmp_path / "snapshot"
        out = fp.dbus("reconcile", "--source", fp.ds, "--table", f"{fp.database}.big", "--out", str(snapshot))
        assert out.returncode == 0, out.stdout + out.stderr
        out = fp.dbus("verify", "--source", fp.ds, "--table", f"{fp.database}.big", "--snapshot", str(snapshot))
        print(out.stdout.strip())
        assert out.returncode == 0 and "equal, 0 differences" in out.stdout, out.stdout + out.stderr
    finally:
        cleanup_fullpull(fp)
