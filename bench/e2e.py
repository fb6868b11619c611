"""End to end, binlog -> UMS in Kafka: rows/s through extractor + dispatcher + appender, and latency.

All three stages run as they are deployed: the extractor as ``python -m extractor run``, the dispatcher
and the appender each as ``spark-submit ... --master local[2]``, on a throwaway source (own database,
topics with BENCH_E2E_PARTITIONS partitions, checkpoints, ZooKeeper path).

- ``e2e_rows_per_s``: BENCH_E2E_ROWS row changes (4/5 inserts of 1000-row statements, 1/5 updates) over
  BENCH_E2E_TABLES tables of 7 columns are written while the extractor is stopped (the dispatcher and
  the appender are up, and warm: BENCH_E2E_WARMUP_ROWS row changes went through them first, in
  BENCH_E2E_WARMUP_ROUNDS rounds, so the figure is a running pipeline's, not a JVM's first minute).
  A table's records share a key, hence a partition, and each partition is one Spark task: which
  partitions the tables land in depends on the database name (random per run; BENCH_E2E_DATABASE
  fixes it). Measured on one machine: all 4 tables in one of the 2 partitions 119.8k rows/s, 3 of 4
  127.2k. The default is 2M row changes, about 10 s of pipeline time: the stages' micro-batches start
  at wall-clock multiples of their trigger interval (200 ms), so the clock stops in steps of about
  that much; over the 3 s of 500k row changes a step was 7% of the figure (the same value recurred
  in several runs), over 10 s it is 2%.
- ``e2e_microbatch_rows_per_s``: the same, with the dispatcher and the appender in micro-batch mode
  (``trigger: microbatch``); the figures without ``microbatch`` are the default mode's (real-time,
  docs/realtime.md). BENCH_E2E_MICROBATCH=0 leaves this run out.
- ``e2e_secure_rows_per_s`` (variant ``secure``): the default mode with Kafka on the stack's SASL_SSL
  listener (SCRAM-SHA-512) and MariaDB over TLS (account dbus_tls), beside the ``e2e_rows_per_s`` of the
  same run (docs/security.md).
- ``cluster_e2e_rows_per_s``: the same in the default mode with the dispatcher and the appender on the
  Spark standalone cluster of stack/cluster.sh (a Master and 2 Workers of 8 cores, Worker 2 in its own
  mount namespace; ``dbus submit`` sizes each stage's ``spark.cores.max`` to its partitions, the executors
  run the packed venv), printed beside the ``e2e_rows_per_s`` of the same run (local[2]).
  BENCH_E2E_CLUSTER=0 leaves this run out.
- ``e2e_latency_p50_ms`` / ``p99``: a writer commits BENCH_E2E_LATENCY_RATE rows/s (one INSERT every
  100 ms) for as long as the stages' real-time batch (``realtime_checkpoint_s``, 300 s by default, so each
  stage's batch boundary falls in the window once: ``window_s``; BENCH_E2E_LATENCY_S sets another length);
  each row carries its statement's batch number, whose commit
  time (client clock, after COMMIT returned) is compared with the Kafka timestamp of the UMS record
  holding the row: every row, read back by a plain consumer, the result topic made with
  ``message.timestamp.type=LogAppendTime`` (the broker's clock: when a consumer can first read it). The
  table is created, and its first row sent through, then the writer holds the rate for
  BENCH_E2E_LATENCY_WARMUP_S (10) seconds before the clock starts: the figure is a steady stream's, not
  that of the first seconds after an idle pipeline (docs/performance.md). ``e2e_latency_p50_50k_ms``
  / ``p99``: the same at BENCH_E2E_LATENCY_RATE_HIGH (50,000) rows/s, after it on the same pipeline.
- ``e2e_masked_rows_per_s``: the same workload through a pipeline whose source masks two columns of every
  table (``status`` sha256 with a salt, ``note`` truncated to 6 characters: docs/masking.md), JSON out.
- ``e2e_ums_avro_rows_per_s``: the same workload with ``ums.format: avro`` (UMS in Avro), nothing masked.
- ``e2e_debezium_json_rows_per_s``, ``e2e_avro_rows_per_s``, ``e2e_canal_json_rows_per_s``: the same
  workload with ``output.format`` ``debezium-json``, ``avro`` and ``canal-json`` (per-row records keyed by
  primary key, Avro in the Confluent wire format through ``endpoints.registry``: docs/formats.md), printed
  beside the ``e2e_rows_per_s`` (UMS JSON) of the same run as baseline (the extractor baseline when
  ``plain`` is not run). A per-row record is one row change. Each variant is its own pipeline (own source,
  topics, warm-up) on the same database and tables, so the tables land in the same partitions;
  BENCH_E2E_VARIANTS (``plain,masked,ums_avro,debezium_json,avro,canal_json,secure``) picks some.
- baseline: python-mysql-replication decoding every row + one UMS-shaped JSON per row + kafka-python
  produce, over the same binlog (``bench.extractor.baseline``), in the same run; every rows/s figure is
  printed beside it.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import time
import uuid
from array import array
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from bench.extractor import baseline
from bench.report import bench_line
from cli.stages import Stages
from dbuslib import kafka, mysql, zk
from dbuslib.config import DbusConfig, load_config, raw_config
from ums.formats import UMS_UID_HEADER

CLUSTER_SH = Path(__file__).resolve().parent.parent / "stack" / "cluster.sh"

ROWS = int(os.environ.get("BENCH_E2E_ROWS", "2000000"))
WARMUP = int(os.environ.get("BENCH_E2E_WARMUP_ROWS", "100000"))
WARMUP_ROUNDS = int(os.environ.get("BENCH_E2E_WARMUP_ROUNDS", "5"))
TABLES = int(os.environ.get("BENCH_E2E_TABLES", "4"))
PARTITIONS = int(os.environ.get("BENCH_E2E_PARTITIONS", "2"))
BASELINE_ROWS = int(os.environ.get("BENCH_E2E_BASELINE_ROWS", "100000"))
LATENCY_RATE = int(os.environ.get("BENCH_E2E_LATENCY_RATE", "5000"))
LATENCY_S = os.environ.get("BENCH_E2E_LATENCY_S")  # unset: as long as the stages' real-time batch (window_s)
LATENCY_WARMUP_S = float(os.environ.get("BENCH_E2E_LATENCY_WARMUP_S", "10"))  # at the rate, before the clock
LATENCY_RATE_HIGH = int(os.environ.get("BENCH_E2E_LATENCY_RATE_HIGH", "50000"))
MICROBATCH = os.environ.get("BENCH_E2E_MICROBATCH", "1") == "1"  # 0: no micro-batch run beside the default
HOPS = os.environ.get("BENCH_E2E_HOPS") == "1"  # each hop's share of the latency, on stderr
CLUSTER = os.environ.get("BENCH_E2E_CLUSTER", "1") == "1"  # 0: no run on the standalone cluster
VARIANTS = {
    "plain": "e2e_rows_per_s",
    "masked": "e2e_masked_rows_per_s",
    "ums_avro": "e2e_ums_avro_rows_per_s",
    "debezium_json": "e2e_debezium_json_rows_per_s",
    "avro": "e2e_avro_rows_per_s",
    "canal_json": "e2e_canal_json_rows_per_s",
    "secure": "e2e_secure_rows_per_s",
}
# variants in a per-row output.format
OUTPUT_FORMATS = {"debezium_json": "debezium-json", "avro": "avro", "canal_json": "canal-json"}
CHOSEN = [v for v in os.environ.get("BENCH_E2E_VARIANTS", ",".join(VARIANTS)).split(",") if v]
MASKING = {"status": {"type": "sha256", "salt": "bench"}, "note": {"type": "truncate", "length": 6}}
COLUMNS = (
    "id BIGINT PRIMARY KEY, customer_id INT NOT NULL, status VARCHAR(16) NOT NULL, total DECIMAL(12,2) "
    "NOT NULL, placed_at DATETIME(3) NOT NULL, note VARCHAR(64), qty SMALLINT"
)
TUPLE = b'{"tuple":'


TLS = Path(os.environ.get("STACK_CACHE", CLUSTER_SH.parent.parent / ".stack")) / "tls"


def secure_kafka(base: DbusConfig) -> dict[str, Any]:
    """``endpoints.kafka`` of the stack's SASL_SSL listener (stack/services/kafka.sh), the same broker."""
    host = base.endpoints.kafka.bootstrap_servers.split(",")[0].rsplit(":", 1)[0]
    return {
        "bootstrap_servers": f"{host}:{os.environ.get('KAFKA_SECURE_PORT', '19094')}",
        "security": {
            "protocol": "SASL_SSL",
            "sasl": {
                "mechanism": "SCRAM-SHA-512",
                "username": "dbus",
                "password": f"${{file:{TLS / 'kafka-password'}}}",
            },
            "tls": {"ca": str(TLS / "ca.pem")},
        },
    }


class Pipeline(Stages):
    """The three stages of one throwaway source, as subprocesses."""

    def __init__(
        self,
        base: DbusConfig,
        database: str,
        tmp: Path,
        variant: str = "plain",
        trigger: str | None = None,
        cluster: dict[str, str] | None = None,
    ) -> None:
        ds = f"e2e_{uuid.uuid4().hex[:8]}"
        raw = raw_config(base.path)  # the configuration the bench runs with
        src = raw["sources"]["demo"]
        src["capture"] = {"include": [f"{database}.*"], "exclude": []}
        # a replica id of its own: two benches (or a bench and a test) reading the binlog with the
        # configuration's id throw each other off ("A slave with the same server_uuid/server_id")
        src["mysql"]["server_id"] = 100_000 + int(ds[4:], 16) % 900_000
        src["extractor"].update(
            {"start": "current", "state_dir": str(tmp / "state"), "metrics_interval_s": 5}
        )
        # tuning runs: BENCH_E2E_EXTRACTOR='{"producer": {"linger_ms": 0}}'
        src["extractor"].update(json.loads(os.environ.get("BENCH_E2E_EXTRACTOR", "{}")))
        src["topics"]["partitions"] = PARTITIONS
        src["masking"] = {f"{database}.*": MASKING} if variant == "masked" else {}
        src.setdefault("ums", {})["format"] = "avro" if variant == "ums_avro" else "json"
        if variant in OUTPUT_FORMATS:
            src["output"] = {"format": OUTPUT_FORMATS[variant]}
        if variant == "secure":  # Kafka over SASL_SSL (SCRAM-SHA-512), MariaDB over TLS: docs/security.md
            raw["endpoints"]["kafka"] = {**raw["endpoints"]["kafka"], **secure_kafka(base)}
            src["mysql"].update(
                {"user": "dbus_tls", "password": "dbus_tls", "tls": {"ca": str(TLS / "ca.pem")}}
            )
        for stage in (
            "dispatcher",
            "appender",
        ):  # tuning runs: BENCH_E2E_DISPATCHER='{"max_offsets_per_trigger": 500}'
            src.setdefault(stage, {}).update(json.loads(os.environ.get(f"BENCH_E2E_{stage.upper()}", "{}")))
            if trigger is not None:  # else the configuration's default mode
                src[stage]["trigger"] = trigger
        raw["sources"] = {ds: src}
        raw["spark"]["conf"].update(json.loads(os.environ.get("BENCH_E2E_SPARK_CONF", "{}")))
        # per stage: BENCH_E2E_SPARK_STAGES='{"appender": {"spark.driver.extraJavaOptions": "..."}}'
        for stage, conf in json.loads(os.environ.get("BENCH_E2E_SPARK_STAGES", "{}")).items():
            raw["spark"].setdefault("stages", {}).setdefault(stage, {}).update(conf)
        if cluster:  # the stages on the standalone cluster (stack/cluster.sh): master, executors' Python
            raw["spark"]["master"] = cluster.pop("master")
            raw["spark"]["conf"].update(cluster)
        raw["spark"]["jars_file"] = str((Path(base.path).parent / base.spark.jars_file).resolve())
        raw["spark"]["checkpoint_root"] = str(tmp / "checkpoints")
        raw["endpoints"]["meta_store"]["url"] = base.endpoints.meta_store.url.get_secret_value()
        cfg_path = tmp / f"{ds}.yaml"
        cfg_path.write_text(yaml.safe_dump(raw))
        super().__init__(load_config(cfg_path), ds, tmp)
        self.database, self.tmp, self.variant = database, tmp, variant
        # the result topics on the broker's clock (LogAppendTime), before any stage makes them: latency()
        made = self.cfg.source(ds)
        lat = [made.topics.name("result", ds, database, t) for t in ("lat", "lat_high")]
        names = list(dict.fromkeys([*self.result_topics(), *lat]))
        if HOPS:  # the raw and the schema topic too, for each hop's share (latency_hops)
            names += [made.topics.name("raw", ds), made.topics.name("schema", ds, database)]
        partitions = made.topics.partitions
        kafka.ensure_topics(self.cfg.endpoints.kafka, names, partitions, configs=kafka.LOG_APPEND_TIME)
        self._schemas: Any = None  # appender.output.SchemaCache, for counting Avro tuples

    def tuples(self, record: Any) -> int:
        """Tuples in one result record: JSON counted by text, Avro decoded (schema from the meta store); a
        per-row record is one row change (a tombstone none)."""
        if self.variant in OUTPUT_FORMATS:
            return int(record.value is not None and any(k == UMS_UID_HEADER for k, _ in record.headers or ()))
        if self.variant != "ums_avro":
            return record.value.count(TUPLE)
        from appender.output import SchemaCache, decode
        from dbuslib.metastore import MetaStore

        if self._schemas is None:
            self._schemas = SchemaCache(MetaStore(self.cfg.endpoints.meta_store.url.get_secret_value()))
        return len(decode(record.value, record.headers, self._schemas).payload)

    def result_topics(self) -> list[str]:
        src = self.cfg.source(self.ds)
        return list(
            dict.fromkeys(src.topics.name("result", self.ds, self.database, f"t{i}") for i in range(TABLES))
        )

    def cleanup(self) -> None:
        self.stop_all()
        src = self.cfg.source(self.ds)
        topics = [
            self.ds,
            src.topics.name("schema", self.ds, self.database),
            *self.result_topics(),
            src.topics.name("dead_letter", self.ds),
            src.topics.name("ctrl", self.ds),
            src.topics.name("events", self.ds, self.database),
        ]
        kafka.delete_topics(self.cfg.endpoints.kafka, topics)
        client = zk.client(self.cfg.endpoints.zookeeper)
        for stage in ("Extractor", "Appender"):
            client.delete(zk.path(self.cfg.endpoints.zookeeper, stage, self.ds), recursive=True)
        client.stop()
        client.close()


def write_workload(db, tables: int, rows: int, first_id: int = 0) -> None:
    """``rows`` row changes: per table, inserts of 1000 rows (ids from ``first_id``), then updates of
    1000 rows each."""
    per_table = rows // tables
    updates = per_table // 5
    inserts = per_table - updates
    with db.cursor() as cur:
        for t in range(tables):
            next_id = first_id
            while next_id < first_id + inserts:
                n = min(1000, first_id + inserts - next_id)
                values = ",".join(
                    f"({i},{i % 9973},'paid',{i % 1000}.25,'2026-11-22 10:00:00.{i % 1000:03d}',"
                    f"{_note(i)},{i % 7})"
                    for i in range(next_id, next_id + n)
                )
                cur.execute(f"INSERT INTO t{t} VALUES {values}")
                next_id += n
            for lo in range(first_id, first_id + updates, 1000):
                cur.execute(
                    f"UPDATE t{t} SET status = 'shipped', qty = qty + 1 WHERE id >= {lo} "
                    f"AND id < {min(lo + 1000, first_id + updates)}"
                )


def _note(i: int) -> str:
    return "NULL" if i % 10 == 0 else f"'note {i} é'" if i % 7 == 0 else f"'note {i}'"


def warm_up(pipe: Pipeline, db, first_id: int = 10**9) -> int:
    """WARMUP row changes through all three stages in WARMUP_ROUNDS rounds, each waited for: the
    stages run several micro-batches before the clock starts (a Spark driver keeps JIT-compiling its
    planning code for its first micro-batches: measured 1300 compiled methods in the first, 100-500
    in each of the next ones); returns the tuples written."""
    per_round = WARMUP // WARMUP_ROUNDS // TABLES * TABLES
    done = 0
    for r in range(WARMUP_ROUNDS):
        write_workload(db, TABLES, per_round, first_id=first_id + r * per_round)
        done += per_round
        wait_tuples(pipe, done, 900)
    return done


def wait_tuples(pipe: Pipeline, want: int, timeout: float) -> tuple[int, float]:
    """Waits until the result topics stop growing with at least ``want`` tuples; (tuples, last ts)."""
    deadline = time.monotonic() + timeout
    last, still = -1, 0
    while time.monotonic() < deadline:
        pipe.check_alive()
        n = sum(kafka.end_offsets(pipe.cfg.endpoints.kafka, pipe.result_topics()).values())
        still = still + 1 if n == last else 0
        last = n
        if still >= 6 and n > 0:  # 3 s without a new record
            tuples, newest = 0, 0
            for r in kafka.iter_range(pipe.cfg.endpoints.kafka, pipe.result_topics()):  # none kept
                tuples += pipe.tuples(r)
                newest = max(newest, r.timestamp)
            if tuples >= want:
                return tuples, newest / 1000
            still = 0
        time.sleep(0.5)
    msg = f"the result topics hold fewer than {want} tuples after {timeout}s; logs in {pipe.tmp}"
    raise RuntimeError(msg)


def window_s(cfg: DbusConfig, ds: str) -> float:
    """How long the latency writer writes: BENCH_E2E_LATENCY_S, else as long as the longer real-time batch
    of the dispatcher and the appender (``realtime_checkpoint_s``), so that each stage's batch boundary falls
    in the window once, as often as in any stretch of a running pipeline; 30 s in micro-batch mode."""
    if LATENCY_S:
        return float(LATENCY_S)
    src = cfg.source(ds)
    batches = [s.realtime_checkpoint_s for s in (src.dispatcher, src.appender) if s.trigger == "realtime"]
    return float(max(batches, default=30))


def latency(pipe: Pipeline, db, rate: int = LATENCY_RATE, table: str = "lat") -> array:
    """Commit -> UMS-in-Kafka latency (ms) of every row written at ``rate`` rows/s (one INSERT every
    100 ms) into a new table ``table`` for ``window_s``, after LATENCY_WARMUP_S at that rate: sorted."""
    per_insert = max(1, rate // 10)
    seconds = window_s(pipe.cfg, pipe.ds)
    commits: dict[int, float] = {}
    topic = pipe.cfg.source(pipe.ds).topics.name("result", pipe.ds, pipe.database, table)
    # made with LogAppendTime (Pipeline): a record's timestamp is when a consumer can first read it
    key = f"{pipe.database}.{table}".encode()
    with db.cursor() as cur:
        # the table's CREATE and first row make its schema version (an appender's sidecar idle for two
        # minutes starts again for them: about a second): once per table, before the clock, which starts
        # when that row is in the result topic (a topic per schema already holds the other tables' records)
        since = kafka.end_offsets(pipe.cfg.endpoints.kafka, [topic])
        cur.execute(f"CREATE TABLE {table} (id BIGINT PRIMARY KEY, batch INT NOT NULL, note VARCHAR(32))")
        cur.execute(f"INSERT INTO {table} VALUES (-1, -1, 'first')")
        deadline = time.monotonic() + 120
        while not any(r.key == key for r in kafka.iter_range(pipe.cfg.endpoints.kafka, [topic], since)):
            if time.monotonic() > deadline:
                msg = f"latency: the first row of {table} did not reach {topic}"
                raise RuntimeError(msg)
            time.sleep(0.2)
        # the rate held LATENCY_WARMUP_S before the clock (batches -2, -3, ...: not counted), so that the
        # window is a steady stream's and not the first seconds after an idle spell (docs/performance.md)
        write_at_rate(cur, table, per_insert, LATENCY_WARMUP_S, {}, step=-1, first=-2)
        batch = write_at_rate(cur, table, per_insert, seconds, commits)
    want, got, deadline = batch * per_insert, array("d"), time.monotonic() + 120
    worst: dict[int, float] = {}  # an insert's slowest row (HOPS)
    while len(got) < want and time.monotonic() < deadline:
        time.sleep(2)
        got, worst = array("d"), {}  # a float per row (15M rows at 50,000 rows/s over 300 s), no records
        for r in kafka.iter_range(pipe.cfg.endpoints.kafka, [topic]):
            if r.key != key:
                continue
            if r.timestamp_type != 1:
                msg = f"latency: {topic} has producer timestamps, not the broker's (LogAppendTime)"
                raise RuntimeError(msg)
            for t in json.loads(r.value)["payload"]:
                insert = int(t["tuple"][5])
                if insert >= 0:
                    got.append(r.timestamp - commits[insert] * 1000)
                    if HOPS:
                        worst[insert] = max(worst.get(insert, 0.0), got[-1])
    if len(got) < want:
        msg = f"latency: {len(got)} of {want} rows arrived"
        raise RuntimeError(msg)
    if HOPS:
        latency_hops(pipe, commits, worst, table)
    return array("d", sorted(got))


def write_at_rate(
    cur, table: str, per_insert: int, seconds: float, commits: dict[int, float], step: int = 1, first: int = 0
) -> int:
    """One INSERT of ``per_insert`` rows every 100 ms for ``seconds`` (batch ``first``, ``first + step``,
    ...: the ``batch`` column, ids from ``batch * per_insert``); each insert's commit time in ``commits``.
    Returns the number of inserts."""
    start, n = time.monotonic(), 0
    while time.monotonic() - start < seconds:
        batch = first + n * step
        values = ",".join(f"({batch * per_insert + i},{batch},'x{i}')" for i in range(per_insert))
        cur.execute(f"INSERT INTO {table} VALUES {values}")  # autocommit: committed when it returns
        commits[batch] = time.time()
        n += 1
        time.sleep(max(0.0, start + n * 0.1 - time.monotonic()))
    return n


def latency_hops(pipe: Pipeline, commits: dict[int, float], worst: dict[int, float], table: str) -> None:
    """BENCH_E2E_HOPS=1: each hop's share of the latency, on stderr, from each insert's own records. An
    insert is one transaction: its records in the raw topic and in the schema topic (the dispatcher copies
    values byte for byte) carry its GTID, and the n-th transaction of ``table`` after the clock started is
    insert n. Per insert, the last of its records to be appended in each topic (the broker's append
    times: those topics are LogAppendTime) gives commit -> raw (the extractor), raw -> schema (the
    dispatcher) and schema -> result (the appender, ``worst``: its slowest row)."""
    from binlog import rawevent

    src = pipe.cfg.source(pipe.ds)
    key = f"{pipe.database}.{table}".encode()
    start = min(commits.values()) * 1000
    last: dict[str, dict[str, float]] = {}
    for hop, topic in (
        ("raw", src.topics.name("raw", pipe.ds)),
        ("schema", src.topics.name("schema", pipe.ds, pipe.database)),
    ):
        seen: dict[str, float] = {}
        for r in kafka.iter_range(pipe.cfg.endpoints.kafka, [topic]):
            if r.key != key or r.timestamp < start:
                continue
            header = rawevent.decode(r.value, r.key).header
            if header.kind == "rows" and header.gtid:
                seen[header.gtid] = max(seen.get(header.gtid, 0.0), float(r.timestamp))
        last[hop] = seen
    gtids = sorted(last["raw"], key=lambda g: int(g.rsplit("-", 1)[-1].rsplit(":", 1)[-1]))
    if len(gtids) != len(commits):  # no split by hop: each insert's slowest row end to end
        slowest = sorted(worst.items(), key=lambda kv: -kv[1])[: max(30, len(worst) // 50)]
        print(
            f"latency hops ({table}): {len(gtids)} transactions in the raw topic for {len(commits)} inserts; "
            f"the slowest {len(slowest)} inserts end to end (s into the window, ms): "
            + ", ".join(f"{i / 10:.1f}s {ms:.0f}" for i, ms in slowest),
            file=sys.stderr,
        )
        return
    rows = []  # (end to end, extractor, dispatcher, appender, s into the window)
    for insert, gtid in enumerate(gtids):
        commit, raw, schema = commits[insert] * 1000, last["raw"][gtid], last["schema"].get(gtid)
        if schema is None or insert not in worst:
            continue
        result = commit + worst[insert]
        rows.append(
            (worst[insert], raw - commit, schema - raw, result - schema, commit / 1000 - start / 1000)
        )
    for i, hop in enumerate(
        (
            "end to end",
            "commit -> raw (extractor)",
            "raw -> schema (dispatcher)",
            "schema -> result (appender)",
        )
    ):
        lags = sorted(r[i] for r in rows)
        print(
            f"latency hops ({table}): {hop}: p50 {percentile(lags, 0.5):.1f} ms, "
            f"p90 {percentile(lags, 0.9):.1f} ms, p99 {percentile(lags, 0.99):.1f} ms, "
            f"max {lags[-1]:.1f} ms over {len(lags)} inserts",
            file=sys.stderr,
        )
    tail = sorted(rows, reverse=True)[: max(30, len(rows) // 50)]
    opened = time.strftime("%H:%M:%S", time.gmtime(start / 1000)) + f".{int(start) % 1000:03d} UTC"
    print(
        f"latency hops ({table}): the slowest {len(tail)} inserts (s into the window opened {opened}: "
        "end to end = extractor + dispatcher + appender, ms): "
        + ", ".join(f"{w:.1f}s {e:.0f}={x:.0f}+{d:.0f}+{a:.0f}" for e, x, d, a, w in tail),
        file=sys.stderr,
    )


def reading_since(log: Path) -> float:
    """Epoch seconds of the extractor's "reading from" line: the clock starts when the binlog reading
    does (the extractor process's start-up, about a second of imports and ZooKeeper, is not counted)."""
    from datetime import datetime

    line = next(ln for ln in log.read_text().splitlines() if "reading from" in ln)
    return datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f").astimezone().timestamp()


def percentile(sorted_values: Sequence[float], q: float) -> float:
    return sorted_values[min(len(sorted_values) - 1, int(q * len(sorted_values)))]


def run(cfg: DbusConfig) -> list[str]:
    src = cfg.source("demo")
    # the tables' keys (<database>.t<i>) pick their partitions: BENCH_E2E_DATABASE repeats a run's spread
    database = os.environ.get("BENCH_E2E_DATABASE") or f"dbus_e2e_{uuid.uuid4().hex[:8]}"
    unknown = set(CHOSEN) - set(VARIANTS)
    if unknown:
        msg = f"BENCH_E2E_VARIANTS: unknown {sorted(unknown)}; known: {sorted(VARIANTS)}"
        raise ValueError(msg)
    db = mysql.connect(src.mysql, as_writer=True)
    with db.cursor() as cur:
        cur.execute(f"CREATE DATABASE {database}")
        db.select_db(database)
        for t in range(TABLES):
            cur.execute(f"CREATE TABLE t{t} ({COLUMNS})")
    db.autocommit(True)
    lines: list[str] = []
    base = None
    # (variant, trigger); None: the configuration's default mode (real-time)
    runs: list[tuple[str, str | None]] = [(v, None) for v in CHOSEN]
    if "plain" in CHOSEN and MICROBATCH:
        runs.insert(CHOSEN.index("plain") + 1, ("plain", "microbatch"))
    if "plain" in CHOSEN and CLUSTER:
        runs.insert(CHOSEN.index("plain") + 1, ("plain", "cluster"))
    local = None  # the plain local[2] figure of this run: the cluster's baseline
    try:
        for k, (variant, trigger) in enumerate(runs):  # ids of run k from k * 10^8: the tables are shared
            rate, start, pipe = throughput(cfg, db, database, variant, k * 10**8, trigger)
            try:
                if base is None:
                    base = baseline(cfg, database, start, min(BASELINE_ROWS, ROWS))
                if trigger == "cluster":
                    lines.append(bench_line("cluster_e2e_rows_per_s", rate, "rows/s", local))
                    continue
                name = "e2e_microbatch_rows_per_s" if trigger == "microbatch" else VARIANTS[variant]
                # beside UMS JSON's figure over plaintext
                per_row = (variant in OUTPUT_FORMATS or variant == "secure") and local is not None
                lines.append(bench_line(name, rate, "rows/s", local if per_row else base))
                if variant == "plain" and trigger is None:
                    local = rate
                if variant == "plain" and trigger is None:
                    lat = latency(pipe, db)
                    lines.append(bench_line("e2e_latency_p50_ms", percentile(lat, 0.50), "ms"))
                    lines.append(bench_line("e2e_latency_p99_ms", percentile(lat, 0.99), "ms"))
                    lat = latency(pipe, db, LATENCY_RATE_HIGH, "lat_high")
                    lines.append(bench_line("e2e_latency_p50_50k_ms", percentile(lat, 0.50), "ms"))
                    lines.append(bench_line("e2e_latency_p99_50k_ms", percentile(lat, 0.99), "ms"))
            finally:
                pipe.cleanup()
                if not os.environ.get("BENCH_KEEP"):
                    shutil.rmtree(pipe.tmp, ignore_errors=True)
    finally:
        with db.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS {database}")
        db.close()
    return lines


def cluster_settings() -> dict[str, str]:
    """The standalone cluster of stack/cluster.sh, started (a no-op when it runs): its master and the
    settings that give the executors their Python (the packed venv; Worker 2 has no checkout)."""
    import subprocess

    def cluster(*args: str) -> str:
        out = subprocess.run(["bash", str(CLUSTER_SH), *args], check=True, stdout=subprocess.PIPE, text=True)
        return out.stdout.strip().splitlines()[-1]

    return {
        "master": cluster("up"),
        "spark.archives": f"{cluster('executor-env')}#env",
        "spark.pyspark.python": "./env/bin/python",
    }


def throughput(
    cfg: DbusConfig, db, database: str, variant: str, first_id: int, trigger: str | None = None
) -> tuple[float, Any, Pipeline]:
    """ROWS row changes through a warm pipeline of ``variant`` (its stages in mode ``trigger``, None: the
    default): (rows/s, binlog start, the pipeline, still running for the caller to use and clean up)."""
    tmp = Path(tempfile.mkdtemp(prefix=f"dbus-bench-e2e-{variant}-{trigger or 'default'}-"))
    cluster = None
    if trigger == "cluster":  # the default mode, on the standalone cluster: Master and 2 Workers
        cluster, trigger = cluster_settings(), None
    pipe = Pipeline(cfg, database, tmp, variant, trigger, cluster)
    try:
        # warm up: rows through all three stages, so the clock below sees no JVM/query start
        pipe.start("extractor")
        pipe.wait_log("extractor", "reading from", 120)
        pipe.start("dispatcher")
        pipe.start("appender")
        warm = warm_up(pipe, db, 10**9 + first_id)
        pipe.stop("extractor")
        start = mysql.binlog_end(db)
        write_workload(db, TABLES, ROWS, first_id)
        pipe.log("extractor").write_text("")  # the measured run's "reading from" is the only one
        pipe.start("extractor")
        pipe.wait_log("extractor", "reading from", 120)
        t0 = reading_since(pipe.log("extractor"))
        tuples, t_end = wait_tuples(pipe, warm + ROWS, 1800)
        if tuples != warm + ROWS:
            msg = f"{variant}: {tuples} tuples for {warm + ROWS} row changes"
            raise RuntimeError(msg)
    except BaseException:
        pipe.cleanup()
        raise
    return ROWS / (t_end - t0), start, pipe
