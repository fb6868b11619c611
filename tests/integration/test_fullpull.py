"""The full-puller service on the real stack: ``spark-submit fullpuller/main.py`` serving requests sent with
``dbus fullpull request``. One service serves every test of this module except the kill test, which runs
its own (it is killed with ``kill -9`` and restarted) and comes first, so that the module's service is
started after it and does not wait idle through it.

Each pull is checked against a SELECT of the same table: every row exactly once, with the values
``ums.values`` gives, between the pull's start and end markers, all with the pull's ``ums_id_``.
"""

from __future__ import annotations

import json
import signal
import time
from collections import Counter

import pytest
from every_type import as_decoded
from fullpull_env import cleanup_fullpull, make_fullpull_env

from dbuslib import kafka, mysql
from fullpuller import catalog, request
from ums import pullrequest
from ums.values import encode_column

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def fp(hold_stack, tmp_path_factory, source):  # hold_stack: its full puller runs between the tests
    env = make_fullpull_env(tmp_path_factory.mktemp("fullpull"), source)
    try:
        env.start()
        yield env
    finally:
        cleanup_fullpull(env)


def _value(message) -> bytes:
    return request.to_record(message)[1]


def _send(producer, topic: str, key: bytes, value: bytes | None) -> int:
    """The offset the record got (the control topic has one partition in the test env)."""
    meta = producer.send(topic, key=key, value=value).get(60)
    assert meta.partition == 0
    return meta.offset


def test_kill_9_mid_pull_resumes_and_repulls_only_unfinished_shards(tmp_path, source):
    fp = make_fullpull_env(tmp_path, source)
    try:
        fp.sql(
            "CREATE TABLE big (id INT PRIMARY KEY, a VARCHAR(40), b BIGINT, c DECIMAL(12,3))",
            "INSERT INTO big SELECT seq, REPEAT('x', seq % 40), seq * 1000, seq / 3 FROM seq_1_to_60000",
        )
        import yaml

        from dbuslib.config import raw_config

        conf = raw_config(fp.env.cfg_path)  # one shard at a time: the kill lands between shards' ends
        conf["sources"][fp.ds]["fullpull"] = {"parallelism": 1, "progress_interval_s": 0.5}
        fp.env.cfg_path.write_text(yaml.safe_dump(conf))
        from dbuslib.config import load_config

        fp.env.cfg = load_config(fp.env.cfg_path)
        fp.stages.cfg = fp.env.cfg
        fp.start()
        seqno, out = fp.request("big", "--shard-size", "5000")
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
        print(
            f"\nkill -9 after {done_before} of {final.TotalCount} shards done: the restart re-pulled "
            f"{repulled} shard(s) (resumes: {final.Resumes})"
        )
        assert final.Status == "ending" and final.Resumes == 1
        log = fp.stages.log("fullpuller").read_text()
        assert (
            f"pulling {repulled} of {final.TotalCount} shard(s) (resume 1: {done_before} already done)" in log
        )
        tuples, markers, _ = fp.pulled("big", seqno)
        assert markers[0] == "start" and markers[-1] == "end"
        ids = Counter(t[4] for t in tuples)
        assert set(ids) == set(range(1, 60_001))  # nothing lost
        duplicates = sum(n - 1 for n in ids.values())
        print(f"duplicates: {duplicates} rows written twice (the shard in flight at the kill)")
        assert duplicates <= 5_000  # one shard at a time: at most the one being pulled was written twice
        assert final.FinishedRows == 60_000
        fp.stages.stop("fullpuller")
        snapshot = tmp_path / "snapshot"
        out = fp.dbus("reconcile", "--source", fp.ds, "--table", f"{fp.database}.big", "--out", str(snapshot))
        assert out.returncode == 0, out.stdout + out.stderr
        out = fp.dbus(
            "verify", "--source", fp.ds, "--table", f"{fp.database}.big", "--snapshot", str(snapshot)
        )
        print(out.stdout.strip())
        assert out.returncode == 0 and "equal, 0 differences" in out.stdout, out.stdout + out.stderr
    finally:
        cleanup_fullpull(fp)


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
    return Counter(
        json.dumps([encode_column(c, as_decoded(c, v)) for c, v in zip(info.columns, row, strict=False)])
        for row in rows
    )


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
    fp.sql(
        "CREATE TABLE orders (id INT PRIMARY KEY, customer VARCHAR(40), amount DECIMAL(10,2), "
        "created DATETIME(3))",
        "INSERT INTO orders SELECT seq, CONCAT('c', seq % 97), seq / 7, "
        "TIMESTAMP('2024-01-02 03:04:05.123') + INTERVAL seq SECOND FROM seq_1_to_2500",
    )
    seqno, out = fp.request("orders", "--shard-size", "1000")
    assert out.returncode == 0, out.stderr
    assert "accepted at ums_id" in out.stdout and "2500 rows in 3 shard(s), split by id" in out.stdout
    check_pull(fp, "orders", seqno, 2500)
    status = fp.dbus("fullpull", "status", "--source", fp.ds, "--id", str(seqno))
    assert status.returncode == 0 and "ending" in status.stdout and "3/3 shards" in status.stdout, status
    from dbuslib import influx

    points = influx.query(
        fp.cfg.endpoints.influxdb,
        f'from(bucket:"{fp.cfg.endpoints.influxdb.bucket}") |> range(start:-1h) '
        f'|> filter(fn:(r) => r._measurement == "dbus_fullpull" and r.ds == "{fp.ds}" '
        f'and r.id == "{seqno}" and r._field == "rows")',
    )
    assert points and max(p["_value"] for p in points) == 2500  # the last point: every row


@pytest.mark.parametrize(
    ("name", "ddl", "fill", "split"),
    [
        (
            "composite_pk",
            "a INT, b VARCHAR(10), v INT, PRIMARY KEY (a, b)",
            "SELECT seq % 7, CONCAT('k', seq), seq FROM seq_1_to_900",
            "a,b",
        ),
        (
            "string_pk",
            "k VARCHAR(20) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci PRIMARY KEY, v INT",
            "SELECT CONCAT(IF(seq % 3, 'é', 'Z'), LPAD(seq, 5, '0')), seq FROM seq_1_to_700",
            "k",
        ),
        ("no_pk", "v INT, w VARCHAR(10)", "SELECT seq % 50, CONCAT('w', seq) FROM seq_1_to_300", ""),
        ("empty", "id BIGINT PRIMARY KEY, v INT", "", "id"),
        (
            "json_blob",
            "id INT PRIMARY KEY, doc JSON, data BLOB",
            "SELECT seq, JSON_OBJECT('n', seq, 's', CONCAT('é\"', seq)), UNHEX(SHA2(seq, 256))"
            " FROM seq_1_to_400",
            "id",
        ),
    ],
)
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

    from dbuslib.config import raw_config

    conf = raw_config(fp.env.cfg_path)  # the shard readers reload the changed file
    conf["sources"][fp.ds]["masking"] = {
        f"{fp.database}.cards": {
            "card": {"type": "md5", "salt": "s1"},
            "holder": {"type": "truncate", "length": 2},
        }
    }
    fp.env.cfg_path.write_text(yaml.safe_dump(conf))
    fp.sql(
        "CREATE TABLE cards (id INT PRIMARY KEY, card VARCHAR(19), holder VARCHAR(30))",
        "INSERT INTO cards SELECT seq, CONCAT('4111-0000-0000-', LPAD(seq, 4, '0')), CONCAT('Holder', seq) "
        "FROM seq_1_to_300",
    )
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
    fp.sql(
        "CREATE TABLE good (id INT PRIMARY KEY, v INT)", "INSERT INTO good SELECT seq, seq FROM seq_1_to_50"
    )
    seqno, out = fp.request("no_such_table")
    assert out.returncode == 2 and "FULLPULL_UNKNOWN_TABLE" in out.stderr and "no_such_table" in out.stderr
    seqno, out = fp.request("good", "--split-col", "nope")
    assert out.returncode == 2 and "FULLPULL_BAD_SPLIT_COL" in out.stderr and "nope" in out.stderr, out.stderr
    seqno, out = fp.request("good", "--where", "no_column > 1")
    assert out.returncode == 2 and "FULLPULL_BAD_REQUEST" in out.stderr, out.stderr
    # Poison records between good ones (issue 12): each is answered abort and committed past, none stops the
    # service. Refused records are named by their coordinates; `..` names are names, not paths.
    src = fp.cfg.source(fp.ds)
    ctrl = src.topics.name("ctrl", fp.ds)
    key = b"FULL_DATA_INDEPENDENT_PULL_REQ"
    base = int(time.time() * 1000)
    good_before, good_between = base + 1, base + 2
    huge = _value(pullrequest.build(fp.ds, fp.database, "good", seqno=base + 3))
    poison = {  # name: (value, seqno in the reply, code, words of the reason)
        "truncated": (b'{"id": 77, "type": "FULL_DATA_', "", "FULLPULL_BAD_REQUEST", "not JSON"),
        "unknown type": (
            b'{"id": 78, "type": "NO_SUCH_TYPE", "timestamp": "t", "from": "f", "payload": {"a": 1}}',
            "78",
            "FULLPULL_BAD_REQUEST",
            "unknown type 'NO_SUCH_TYPE'",
        ),
        "null": (None, "", "FULLPULL_BAD_REQUEST", "the record has no value (null)"),
        "garbage": (b"\x00\xff\xfe garbage", "", "FULLPULL_BAD_REQUEST", "not UTF-8"),
        "array": (b"[1, 2, 3]", "", "FULLPULL_BAD_REQUEST", "expected a JSON object, got an array"),
        "huge number": (
            huge[:-2] + b',"X":' + b"9" * 5000 + b"}}",
            str(base + 3),
            "FULLPULL_BAD_REQUEST",
            "payload.X: a number of 5000 characters (at most 64)",
        ),
        "huge id": (
            b'{"id": ' + b"1" * 4400 + b"}",
            "",
            "FULLPULL_BAD_REQUEST",
            "id: a number of 4400 characters",
        ),
        "2 MB": (
            b'{"id": 5, "pad": "' + b"x" * 2_000_000 + b'"}',
            "",
            "FULLPULL_BAD_REQUEST",
            "over the 1048576 a control message may have",
        ),
        ".. table": (
            _value(pullrequest.build(fp.ds, fp.database, "..", seqno=base + 4)),
            str(base + 4),
            "FULLPULL_UNKNOWN_TABLE",
            f"table {fp.database}... does not exist",
        ),
        ".. schema": (
            _value(pullrequest.build(fp.ds, "..", "good", seqno=base + 5)),
            str(base + 5),
            "FULLPULL_UNKNOWN_TABLE",
            "table ...good does not exist",
        ),
    }
    log_start = len(fp.stages.log("fullpuller").read_bytes())
    producer = kafka.producer(fp.cfg.endpoints.kafka)
    try:
        first = pullrequest.build(fp.ds, fp.database, "good", seqno=good_before)
        offsets = {"good before": _send(producer, ctrl, key, _value(first))}
        for n, name in enumerate(poison):
            offsets[name] = _send(producer, ctrl, key, poison[name][0])
            if n == len(poison) // 2:
                offsets["good between"] = _send(
                    producer,
                    ctrl,
                    key,
                    _value(pullrequest.build(fp.ds, fp.database, "good", seqno=good_between)),
                )
    finally:
        producer.close()
    check_pull(fp, "good", good_before, 50)
    check_pull(fp, "good", good_between, 50)
    deadline = time.monotonic() + 120
    while True:
        replies = fp.callback()
        answered = {r["OFFSET"] for r in replies if "OFFSET" in r} | {r["SEQNO"] for r in replies}
        missing = [n for n, (_, seqno, _, _) in poison.items() if (seqno or str(offsets[n])) not in answered]
        if not missing:
            break
        fp.stages.check_alive()
        assert time.monotonic() < deadline, f"no answer to {missing}: {replies}"
        time.sleep(0.5)
    for name, (_, seqno, code, words) in poison.items():
        [reply] = [
            r for r in replies if r.get("OFFSET") == str(offsets[name]) or (seqno and r["SEQNO"] == seqno)
        ]
        assert (reply["STATUS"], reply["SEQNO"], reply["ERROR_CODE"]) == ("abort", seqno, code), (name, reply)
        assert words in reply["ERROR_MSG"], (name, reply)
        if code == "FULLPULL_BAD_REQUEST":  # refused unread: named by its coordinates
            assert reply["ERROR_MSG"].startswith(f"{ctrl}[0]@{offsets[name]}: "), (name, reply)
            assert (reply["TOPIC"], reply["PARTITION"]) == (ctrl, "0"), (name, reply)
    fp.stages.check_alive()
    seqno, out = fp.request("good")  # and a good pull through the CLI after all of them
    assert out.returncode == 0, out.stderr
    check_pull(fp, "good", seqno, 50)
    log = fp.stages.log("fullpuller").read_bytes()[log_start:].decode(errors="replace")
    assert "Traceback" not in log, log[-3000:]  # all refused as data, no failure on the way


def test_a_table_named_with_a_dot_is_pulled_reconciled_and_verified(fp, tmp_path):
    fp.sql(
        "CREATE TABLE `t.dot` (id INT PRIMARY KEY, v VARCHAR(10))",
        "INSERT INTO `t.dot` SELECT seq, CONCAT('v', seq) FROM seq_1_to_600",
    )
    seqno, out = fp.request("t.dot", "--shard-size", "250")
    assert out.returncode == 0, out.stderr
    check_pull(fp, "t.dot", seqno, 600)
    namespaces = {
        json.loads(r.value)["schema"]["namespace"]  # the topic is the schema's: other tables too
        for r in kafka.read_range(fp.cfg.endpoints.kafka, [fp.result_topic("t.dot")])
        if r.key == f"{fp.database}.t.dot".encode()
    }
    assert namespaces == {f"mysql.{fp.ds}.{fp.database}.t%2Edot.0.0.0"}  # docs/ums.md#namespace
    snapshot = tmp_path / "snapshot"
    out = fp.dbus("reconcile", "--source", fp.ds, "--table", f"{fp.database}.t.dot", "--out", str(snapshot))
    assert out.returncode == 0, out.stdout + out.stderr
    out = fp.dbus("verify", "--source", fp.ds, "--table", f"{fp.database}.t.dot", "--snapshot", str(snapshot))
    assert out.returncode == 0 and "600 source rows, 600 snapshot rows: equal, 0 differences" in out.stdout, (
        out.stdout + out.stderr
    )
