"""`make demo`: DBus on the local stack, MariaDB -> extractor -> dispatcher -> appender -> UMS in Kafka,
with a workload generator, and a full pull under that load reconciled and verified.

1. MariaDB: the demo schema `shop` (conf/demo/shop.sql), and the source's topics.
2. The four services start as an operator starts them (``python -m extractor run``, ``spark-submit
   dispatcher/main.py``, ``spark-submit appender/main.py``, ``spark-submit fullpuller/main.py``); logs
   in ``.stack/demo/``. They keep their positions and checkpoints, so a second demo resumes where the
   first stopped.
3. A workload writes orders (customers, products, orders, items: inserts, updates, deletes) for
   DEMO_SECONDS seconds; meanwhile a full pull of ``shop.orders`` is requested and runs under that load.
4. The demo waits until every row change is in the result topic as UMS, prints one message per table
   (masked columns of ``shop.customers`` included) and the rows/s of each stage, measured from the
   Kafka timestamps of what each stage wrote during this run.
5. The log step (cli/demolog.py): the log source ``applog``'s two demo tables and their rules in the meta
   store (step 1), its log processor started beside the other stages (step 2), an application log file
   written live, shipped by rsyslog, structured into the two tables and the unknown bucket, one UMS
   message of each table printed.
6. A replica of ``shop.orders`` in the stack's PostgreSQL (cli/demoreplica.py): ``dbus replicate``,
   started with the stages, bootstraps by itself under the workload; once it has read everything,
   ``verify --replica`` compares it with the table in MariaDB: 0 differences.
7. Reconcile merges the pull and the increments of ``shop.orders`` into a Parquet snapshot, and verify
   compares it with the table in MariaDB: 0 differences.
8. ZooKeeper and the time-series server are checked too; then the stages are stopped.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from influxdb_client import Point

from cli import demolog
from cli.demoreplica import DemoReplica
from cli.stages import Stages, stop_group
from dbuslib import influx, kafka, mysql, topics, zk, zkpaths
from dbuslib.config import DbusConfig, Source
from dbuslib.errors import EndpointError, StackError
from ums import ums_id

T = TypeVar("T")
SHOP_SQL = Path(__file__).resolve().parent.parent / "conf" / "demo" / "shop.sql"
DEMO_SECONDS = float(os.environ.get("DEMO_SECONDS", "10"))
DEMO_ORDERS_PER_S = int(os.environ.get("DEMO_ORDERS_PER_S", "400"))
TUPLE = b'{"tuple":'


def _sql_statements(text: str) -> list[str]:
    lines = [ln for ln in text.splitlines() if not ln.lstrip().startswith("--")]
    return [s.strip() for s in "\n".join(lines).split(";") if s.strip()]


def create_shop(src: Source) -> None:
    db = mysql.connect(src.mysql, as_writer=True)
    with db.cursor() as cur:
        for statement in _sql_statements(SHOP_SQL.read_text()):
            cur.execute(statement)
    db.close()


def workload(src: Source, seconds: float, orders_per_s: int) -> int:
    """Orders for ``seconds``: a customer every 10 orders, a product every 20, 3 items per order, a status
    update, an item deleted every 5 orders; one transaction per 50 orders. Returns the row changes."""
    db = mysql.connect(src.mysql, "shop", as_writer=True)
    rnd = random.Random(7)
    tag = uuid.uuid4().hex[:8]
    changes, n = 0, 0
    customers: list[int] = []
    skus: list[str] = []
    start = time.monotonic()
    with db.cursor() as cur:
        while time.monotonic() - start < seconds:
            cur.execute("BEGIN")
            for _ in range(50):
                if n % 10 == 0 or not customers:
                    changes += cur.execute(
                        "INSERT INTO customers (name, email, phone, id_card, tier, tags, profile) "
                        "VALUES (%s,%s,%s,%s,%s,'vip,newsletter',%s)",
                        (
                            f"Zoë {tag}-{n}",
                            f"zoe.{tag}.{n}@example.com",
                            f"+86-138{n % 10**8:08d}",
                            f"11010519491231{n % 10000:04d}",
                            rnd.choice(["basic", "silver", "gold"]),
                            json.dumps({"lang": "fr", "n": n}),
                        ),
                    )
                    customers.append(cur.lastrowid)
                if n % 20 == 0 or not skus:
                    sku = f"SKU-{tag}-{n}"
                    changes += cur.execute(
                        "INSERT INTO products (sku, title, price, weight_kg, flags, launched) "
                        "VALUES (%s, 'Teapot ☕', %s, 1.25, b'101', 2024)",
                        (sku, rnd.randint(100, 99999) / 100),
                    )
                    skus.append(sku)
                changes += cur.execute(
                    "INSERT INTO orders (customer_id, status, total, placed_at, ship_by, note) "
                    "VALUES (%s,'new',%s,NOW(3),CURDATE(),%s)",
                    (rnd.choice(customers), rnd.randint(100, 999999) / 100, f"order {n} ✓"),
                )
                order = cur.lastrowid
                items = ",".join(
                    f"({order},{line},'{rnd.choice(skus)}',{rnd.randint(1, 9)},9.90,'00:12:30.500')"
                    for line in range(1, 4)
                )
                changes += cur.execute(f"INSERT INTO order_items VALUES {items}")
                changes += cur.execute("UPDATE orders SET status = 'paid' WHERE id = %s", (order,))
                if n % 5 == 0:
                    changes += cur.execute(
                        "DELETE FROM order_items WHERE order_id = %s AND line_no = 3", (order,)
                    )
                n += 1
            cur.execute("COMMIT")
            time.sleep(max(0.0, start + n / orders_per_s - time.monotonic()))
    db.close()
    return changes


def tuples_in(records: list) -> int:
    return sum(r.value.count(TUPLE) for r in records)


def of_this_run(records: list, first_id: int) -> list:
    """UMS data records whose tuples come from binlog positions at or after ``first_id`` (``ums_id_``):
    a backlog left by an earlier, interrupted demo is not counted."""
    out = []
    for r in records:
        m = json.loads(r.value)
        if m["protocol"]["type"] == "data_increment_data" and int(m["payload"][0]["tuple"][0]) >= first_id:
            out.append(r)
    return out


def rate(count: int, records: list) -> str:
    if len(records) < 2:
        return f"{count} in 1 record"
    span = (max(r.timestamp for r in records) - min(r.timestamp for r in records)) / 1000
    return f"{count} in {span:.1f}s = {count / span:,.0f}/s" if span > 0 else f"{count} at once"


def show(message: bytes) -> str:
    m = json.loads(message)
    names = [f["name"] for f in m["schema"]["fields"]]
    masked = [f["name"] for f in m["schema"]["fields"] if f.get("encoded")]
    first = dict(zip(names, m["payload"][0]["tuple"], strict=True))
    text = json.dumps(first, ensure_ascii=False)
    return (
        f"   {m['protocol']['type']} {m['schema']['namespace']}: {len(m['payload'])} tuple(s)"
        f"{', masked ' + ','.join(masked) if masked else ''}\n     first: {text[:300]}"
    )


def _step(n: int, title: str, fn: Callable[[], T]) -> T:
    t0 = time.monotonic()
    print(f"{n}. {title}", flush=True)
    result = fn()
    print(f"   done in {time.monotonic() - t0:.1f}s", flush=True)
    return result


DEMO_STAGES = ("extractor", "dispatcher", "appender", "fullpuller")


def start_stages(stages: Stages) -> None:
    """The demo's services, started as an operator starts them; ``stages.stop_all()`` (the demo's last
    step, also on failure) stops them and returns once every process of theirs is gone."""
    for stage in DEMO_STAGES:
        stages.start(stage)
    stages.wait_ready(*DEMO_STAGES)
    stages.start("heartbeat")  # writer + monitor: one heartbeat row per captured table every interval


def run(cfg: DbusConfig, source_name: str) -> int:
    if not SHOP_SQL.is_file():
        msg = f"dbus demo needs a source checkout: {SHOP_SQL} is not there (dbus is installed from a package)"
        raise StackError(msg)
    ds, src = source_name, cfg.source(source_name)
    stack_home = (Path(cfg.path).parent / cfg.spark.checkpoint_root).resolve().parent
    stages = Stages(cfg, ds, stack_home / "demo")
    t = src.topics
    raw, schema_topic, result = t.name("raw", ds), t.name("schema", ds, "shop"), t.name("result", ds, "shop")

    log_ds = demolog.LOG_SOURCE
    log_stages = Stages(cfg, log_ds, stages.log_dir)

    def setup() -> None:
        create_shop(src)
        kafka.ensure_topics(
            cfg.endpoints.kafka, topics.source_topics(ds, src), t.partitions, t.replication_factor
        )
        for line in demolog.ensure_rules(cfg, log_ds):
            print(f"   {line}")

    _step(
        1,
        f"MariaDB: schema shop; Kafka: the source's topics; meta store: the rules of {log_ds}'s tables "
        f"{' and '.join(demolog.TABLES)}",
        setup,
    )
    note = _resume_or_reset(cfg, ds)
    if note:
        print(f"   {note}")
    before = kafka.end_offsets(cfg.endpoints.kafka, [raw, schema_topic, result])
    replica = DemoReplica(cfg, ds, PULLED, stages.log_dir)
    exporter = _start_exporter(cfg, stages.log_dir)
    try:
        log_stages.start("logprocessor")  # its start-up overlaps the others'; the log step waits for it
        _step(
            2,
            "start extractor, dispatcher, appender and full puller (spark-submit each), then the heartbeat "
            f"writer and monitor, and the log processor of {log_ds}; logs in {stages.log_dir}",
            lambda: start_stages(stages),
        )
        replica.start()
        print(
            f"   dbus replicate of {PULLED} into PostgreSQL started (bootstraps by itself); log {replica.log}"
        )
        db = mysql.connect(src.mysql, as_writer=True)
        first = mysql.binlog_end(db)
        db.close()
        first_id = int(ums_id(first.file, first.pos))
        changes = _step(
            3,
            f"workload: orders at {DEMO_ORDERS_PER_S}/s for {DEMO_SECONDS:.0f}s; meanwhile a full "
            f"pull of {PULLED}",
            lambda: _workload_and_pull(cfg, ds, stages),
        )
        print(f"   {changes} row changes committed")

        def arrived() -> list:
            deadline = time.monotonic() + 600
            while True:
                stages.check_alive()
                out = of_this_run(kafka.read_range(cfg.endpoints.kafka, [result], before), first_id)
                if tuples_in(out) >= changes:
                    return out
                if time.monotonic() > deadline:
                    msg = f"{tuples_in(out)} of {changes} row changes reached {result}"
                    raise TimeoutError(msg)
                time.sleep(1)

        out = _step(4, f"wait for every row change as UMS in {result}", arrived)
        shown = set()
        for r in out:
            table = r.key.decode()
            if table not in shown:
                shown.add(table)
                print(show(r.value))
        raw_records = kafka.read_range(cfg.endpoints.kafka, [raw], before)
        schema_records = kafka.read_range(cfg.endpoints.kafka, [schema_topic], before)
        print(
            f"   extractor  -> {raw}: {rate(len(raw_records), raw_records)} rows events "
            f"({changes} row changes)"
        )
        print(f"   dispatcher -> {schema_topic}: {rate(len(schema_records), schema_records)} records")
        print(f"   appender   -> {result}: {rate(tuples_in(out), out)} UMS tuples in {len(out)} messages")
        ok = tuples_in(out) == changes
        beats = _step(
            5,
            "heartbeats: per-table latency in the time-series server and in Prometheus; `dbus status`",
            lambda: _heartbeats(cfg, ds, stages),
        )
        scraped = _prometheus_heartbeats(cfg, ds, stages) if exporter is not None else None
        logs = _step(
            6,
            f"log source {log_ds}: an application log written live for {demolog.DEMO_LOG_SECONDS:.0f}s, "
            f"shipped by rsyslog, structured by the log processor into {' and '.join(demolog.TABLES)} and "
            "the unknown bucket",
            lambda: demolog.run(cfg, log_ds, log_stages),
        )
        online = _step(
            7, f"a replica of {PULLED} in PostgreSQL (dbus replicate)", lambda: replica.wait_online(stages)
        )
        print(f"   {online}")
    except BaseException:
        replica.stop()
        if exporter is not None:
            stop_group(exporter)
        raise
    finally:
        log_stages.stop_all()
        stages.stop_all()

    try:  # the exporter runs on: the replica's metrics and the time-series check still write to it
        try:
            replicated = _step(
                8,
                "the replica reads the rest, exits idle, and is verified against MariaDB",
                replica.finish_and_verify,
            )
        finally:
            replica.stop()
        equal = _step(
            9,
            f"reconcile {PULLED} (pull + increments, Spark batch) and verify it against MariaDB",
            lambda: _reconcile_and_verify(cfg, ds, stack_home / "demo" / "snapshot"),
        )
        path = _step(10, "ZooKeeper and time series", lambda: _checks(cfg, ds))
    finally:
        if exporter is not None:
            stop_group(exporter)
    print(f"   {path}")
    print(
        "demo: OK, every row change arrived as UMS exactly once"
        if ok
        else "demo: FAILED: more UMS tuples than row changes (see the stage logs)"
    )
    print(
        f"demo: OK, the full pull of {PULLED} reconciles to an exact copy (verify: 0 differences)"
        if equal
        else f"demo: FAILED: the snapshot of {PULLED} differs from the table (see above)"
    )
    print(
        f"demo: OK, heartbeats of {len(beats)} table(s) measured end to end, latency "
        f"{min(beats):.0f}-{max(beats):.0f} ms"
        if beats
        else "demo: FAILED: no heartbeat latency reached the time-series server"
    )
    seen = scraped is None or (len(scraped) == len(beats) and bool(beats))
    if scraped is not None:
        print(
            f"demo: OK, Prometheus reads the heartbeat latency of {len(scraped)} table(s) from dbus metrics "
            f"exporter, {min(scraped):.0f}-{max(scraped):.0f} ms"
            if seen
            else f"demo: FAILED: Prometheus has the latency of {len(scraped)} of {len(beats)} tables"
        )
    print(logs.summary(log_ds))
    print(
        f"demo: OK, the replica of {PULLED} in PostgreSQL (dbus replicate, bootstrapped by itself) verifies "
        "equal (0 differences)"
        if replicated
        else f"demo: FAILED: the replica of {PULLED} in PostgreSQL differs from the table (see above)"
    )
    return 0 if ok and equal and beats and logs.ok and replicated and seen else 1


PULLED = "shop.orders"
SHOP_TABLES = {"customers", "products", "orders", "order_items"}  # the demo's tables with heartbeats


def _start_exporter(cfg: DbusConfig, log_dir: Path) -> subprocess.Popen | None:
    """``dbus metrics exporter`` in a process group of its own, when the points go to one
    (``endpoints.influxdb.exporter``) and a Prometheus scrapes it (``prometheus.server``); None else."""
    if not (cfg.endpoints.influxdb.exporter and cfg.prometheus.server):
        return None
    log_dir.mkdir(parents=True, exist_ok=True)
    log = (log_dir / "exporter.log").open("ab")
    argv = [sys.executable, "-m", "cli.main", "--config", str(cfg.path), "metrics", "exporter"]
    return subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)


def _prometheus_heartbeats(cfg: DbusConfig, ds: str, stages: Stages) -> list[float]:
    """The shop tables' heartbeat latency as Prometheus (``prometheus.server``) scraped it from the
    exporter, waited for up to a minute (its scrape interval is 5 s); printed, and returned in ms."""
    import urllib.parse
    import urllib.request

    query = f'dbus_heartbeat_latency_ms{{ds="{ds}",schema="shop"}}'
    url = f"{cfg.prometheus.server}/api/v1/query?{urllib.parse.urlencode({'query': query})}"
    got: dict[str, float] = {}
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and set(got) < SHOP_TABLES:
        stages.check_alive()
        try:
            with urllib.request.urlopen(url, timeout=10) as resp:
                result = json.load(resp)["data"]["result"]
            got = {r["metric"]["table"]: float(r["value"][1]) for r in result}
        except (OSError, ValueError, KeyError) as e:
            print(f"   Prometheus at {cfg.prometheus.server}: {e}")
        time.sleep(1)
    for table in sorted(got):
        print(f"   Prometheus dbus_heartbeat_latency_ms shop.{table}: {got[table]:.0f} ms")
    return list(got.values())


def _heartbeats(cfg: DbusConfig, ds: str, stages: Stages) -> list[float]:
    """Waits (up to three intervals) for a ``dbus_heartbeat`` point of every shop table newer than now,
    prints their latency and the ``dbus status`` screen; returns the latencies (ms) of the tables that
    have one. The points
    are read as the heartbeat monitor reads them (a point is timed at its packet's emit time)."""
    from cli import status
    from heartbeat.monitor import last_heartbeats
    from status import readers

    src = cfg.source(ds)
    since_ms = time.time() * 1000
    deadline = time.monotonic() + 3 * src.heartbeat.interval_s + 30
    latest: dict[str, dict] = {}
    while time.monotonic() < deadline and set(latest) < SHOP_TABLES:
        stages.check_alive()
        records = last_heartbeats(cfg, ds, 600)
        latest = {r["table"]: r for r in records if r["schema"] == "shop" and r["_time"] >= since_ms}
        time.sleep(1)
    for table in sorted(latest):
        print(f"   dbus_heartbeat shop.{table}: latency {latest[table]['_value']:.0f} ms")
    snap = readers.collect(cfg, ds)
    if not isinstance(snap, readers.Snapshot):  # a LogSnapshot: never for the demo's database source
        msg = f"{ds}: dbus status read a log source, not the demo's database source"
        raise ValueError(msg)
    print("\n".join(f"   | {line}" for line in status.render(snap).splitlines()))
    return [float(r["_value"]) for r in latest.values()]


def _workload_and_pull(cfg: DbusConfig, ds: str, stages: Stages) -> int:
    """The workload in a thread; a full pull of PULLED requested 2 s into it, followed to its end."""
    from fullpuller import request
    from fullpuller.progress import bar

    src = cfg.source(ds)
    result: dict[str, int] = {}
    thread = threading.Thread(target=lambda: result.update(n=workload(src, DEMO_SECONDS, DEMO_ORDERS_PER_S)))
    thread.start()
    time.sleep(min(2.0, DEMO_SECONDS / 3))
    schema, table = PULLED.split(".")
    message = request.build(ds, schema, table)
    key, value = request.to_record(message)
    producer = kafka.producer(cfg.endpoints.kafka)
    producer.send(src.topics.name("ctrl", ds), key=key, value=value).get(30)
    producer.close()
    print(
        f"   full pull {message.id} of {PULLED} requested (FULL_DATA_INDEPENDENT_PULL_REQ on "
        f"{src.topics.name('ctrl', ds)})",
        flush=True,
    )
    client = zk.client(cfg.endpoints.zookeeper)
    from fullpuller.progress import ProgressStore

    store = ProgressStore(client, zkpaths.fullpuller(cfg.endpoints.zookeeper.root, ds))
    try:
        deadline = time.monotonic() + 600
        while True:
            stages.check_alive()
            p = store.get(schema, table, message.id)
            if p is not None and p.finished:
                print(f"   {bar(store.refreshed(p))}", flush=True)
                break
            if time.monotonic() > deadline:
                msg = f"full pull {message.id} of {PULLED} did not end in 600 s"
                raise TimeoutError(msg)
            time.sleep(0.5)
    finally:
        client.stop()
        client.close()
    thread.join()
    if p.Status != "ending":
        msg = f"full pull {message.id} of {PULLED} ended {p.Status}: {p.ErrorMsg}"
        raise RuntimeError(msg)
    return int(result["n"])


def _reconcile_and_verify(cfg: DbusConfig, ds: str, out: Path) -> bool:
    from dbuslib import spark as dspark
    from fullpuller import reconcile, verify

    schema, table = PULLED.split(".")
    session = dspark.session(cfg, f"dbus-demo-reconcile-{ds}", spark__ui__showConsoleProgress="false")
    session.sparkContext.setLogLevel("ERROR")
    try:
        r = reconcile.run(session, cfg, ds, schema, table, str(out))
    finally:
        session.stop()
    print(
        f"   reconcile: {r.tuples_read} tuples of {r.messages_read} messages -> {r.rows} rows "
        f"({r.deletes_applied} deleted keys) in {out}"
    )
    comparison = verify.verify(cfg, ds, schema, table, str(out))
    for line in verify.report(comparison, PULLED):
        print(f"   verify: {line}")
    return comparison.equal


def _resume_or_reset(cfg: DbusConfig, ds: str) -> str:
    """The demo resumes where the last demo stopped, unless the server purged that binlog since (the
    test suite's purge test does, on the shared local MariaDB): then the demo source starts over at the
    binlog's end, as ``dbus extractor reset --to current`` would, and says so. A real source would need
    ``--full-pull`` as well (docs/extractor.md); the demo's rows are its own workload."""
    from extractor import commands as admin

    info = admin.status(cfg, ds)
    stored = info["zookeeper"] or info["local_file"]
    if not stored or not stored.get("file"):
        return ""
    db = mysql.connect(cfg.source(ds).mysql)
    try:
        files = mysql.binlog_files(db)
    finally:
        db.close()
    if stored["file"] in files:
        return ""
    done = admin.reset(cfg, ds, "current", force=True)
    return f"the demo's position {stored['file']}:{stored['pos']} was purged from the server; {done}"


def write_and_read_check(cfg: DbusConfig, ds: str) -> str:
    """Write one point tagged with a fresh id and read it back: the demo's check that the time-series
    store keeps what DBus writes (InfluxDB with Flux; without InfluxDB, Prometheus once it has scraped the
    exporter, within 30 s)."""
    from dbuslib import promread, seriesread

    ep = cfg.endpoints.influxdb
    check_id = uuid.uuid4().hex[:12]
    value = round(time.time() % 1000, 3)
    influx.write(
        ep, [Point("dbus_stack_check").tag("ds", ds).tag("check_id", check_id).field("value", value)]
    )
    where = f"dbus_stack_check,ds={ds},check_id={check_id} value={value:.3f} written and read back from"
    if seriesread.from_prometheus(cfg):
        server = cfg.prometheus.server or ""
        q = f"dbus_stack_check_value{promread.selector(ds, check_id=check_id)}"
        deadline = time.monotonic() + 30
        while not (got := [float(r["value"][1]) for r in promread.query(server, q)]):
            if time.monotonic() > deadline:
                break
            time.sleep(1)
        if got != [value]:
            msg = f"wrote {q} = {value} to {ep.where} but Prometheus at {server} read back {got}"
            raise EndpointError(msg)
        return f"{where} Prometheus at {server}"
    rows = influx.query(
        ep,
        f'from(bucket:"{ep.bucket}") |> range(start:-1h) '
        f'|> filter(fn:(r) => r._measurement == "dbus_stack_check" and r.check_id == "{check_id}")',
    )
    if [r["_value"] for r in rows] != [value]:
        msg = f"wrote dbus_stack_check check_id={check_id} value={value} to {ep.url} but read back {rows}"
        raise EndpointError(msg)
    return f"{where} {ep.url}"


def _checks(cfg: DbusConfig, ds: str) -> str:
    client = zk.client(cfg.endpoints.zookeeper)
    node = zkpaths.extractor(cfg.endpoints.zookeeper.root, ds)
    children = client.get_children(node) if client.exists(node) else []
    client.stop()
    client.close()
    point = write_and_read_check(cfg, ds)
    return f"ZooKeeper {node}: {children}; {point}"
