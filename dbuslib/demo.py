"""`make demo`: proves every server of the local stack does its part in DBus's data path.

1. MariaDB: creates the demo schema `shop` (conf/demo/shop.sql) and writes a small order.
2. Binlog: reads those rows back with python-mysql-replication as the replication account.
3. Kafka + Spark: produces them to a topic, runs a Structured Streaming query through spark-submit that
   copies them to another topic, and reads them back.
4. ZooKeeper: writes and reads a node under the configured root.
5. Time series: writes a metric with influxdb-client and reads it back.
Each step prints what it did and how long it took.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from dbuslib import influx, kafka, mysql, spark, zk
from dbuslib.config import DbusConfig, Source
from dbuslib.errors import DbusError

SHOP_SQL = Path(__file__).resolve().parent.parent / "conf" / "demo" / "shop.sql"


def _sql_statements(text: str) -> list[str]:
    lines = [ln for ln in text.splitlines() if not ln.lstrip().startswith("--")]
    return [s.strip() for s in "\n".join(lines).split(";") if s.strip()]


def create_shop(src: Source) -> None:
    db = mysql.connect(src.mysql, as_writer=True)
    with db.cursor() as cur:
        for statement in _sql_statements(SHOP_SQL.read_text()):
            cur.execute(statement)
    db.close()


def write_order(src: Source) -> tuple[mysql.BinlogPosition, str]:
    """One customer, one product, one order with an item, in one transaction; returns the start position."""
    db = mysql.connect(src.mysql, "shop", as_writer=True)
    start = mysql.binlog_end(db)
    tag = uuid.uuid4().hex[:8]
    with db.cursor() as cur:
        cur.execute("BEGIN")
        cur.execute(
            "INSERT INTO customers (name, email, phone, tier, tags, profile) VALUES (%s,%s,%s,'gold','vip',%s)",
            (f"Zoë {tag}", f"zoe.{tag}@example.com", "+86-13812345678", json.dumps({"lang": "fr"})),
        )
        customer_id = cur.lastrowid
        cur.execute("INSERT INTO products (sku, title, price, flags) VALUES (%s, 'Teapot ☕', 24.90, b'101')",
                    (f"SKU-{tag}",))
        cur.execute("INSERT INTO orders (customer_id, status, total, placed_at) VALUES (%s,'new',49.80,NOW(3))",
                    (customer_id,))
        order_id = cur.lastrowid
        cur.execute("INSERT INTO order_items VALUES (%s, 1, %s, 2, 24.90, '00:12:30.500')", (order_id, f"SKU-{tag}"))
        cur.execute("UPDATE orders SET status = 'paid' WHERE id = %s", (order_id,))
        cur.execute("COMMIT")
    db.close()
    return start, tag


def read_binlog(cfg: DbusConfig, src: Source, start: mysql.BinlogPosition) -> list[dict]:
    """Row changes of schema shop from ``start`` to the current end, as plain dicts."""
    from pymysqlreplication import BinLogStreamReader
    from pymysqlreplication.row_event import DeleteRowsEvent, UpdateRowsEvent, WriteRowsEvent

    ops = {WriteRowsEvent: "i", UpdateRowsEvent: "u", DeleteRowsEvent: "d"}
    stream = BinLogStreamReader(
        connection_settings=mysql.connection_settings(src.mysql), server_id=src.mysql.server_id + 1000,
        log_file=start.file, log_pos=start.pos, resume_stream=True, blocking=False,
        only_schemas=["shop"], only_events=list(ops),
    )
    changes = []
    for event in stream:
        for row in event.rows:
            values = row.get("after_values") or row.get("values")
            changes.append({"table": event.table, "op": ops[type(event)], "pos": event.packet.log_pos,
                            "values": {k: str(v) for k, v in values.items()}})
    stream.close()
    return changes


def spark_roundtrip(cfg: DbusConfig, changes: list[dict]) -> list[dict]:
    """Produce the changes, copy them with a streaming query run by spark-submit, read the copy."""
    endpoint = cfg.endpoints.kafka
    run_id = uuid.uuid4().hex[:8]
    source_topic, sink_topic = f"dbus_demo_check_{run_id}_in", f"dbus_demo_check_{run_id}_out"
    kafka.ensure_topics(endpoint, [source_topic, sink_topic], partitions=2)
    try:
        return _copy_through_spark(cfg, changes, source_topic, sink_topic)
    finally:
        kafka.delete_topics(endpoint, [source_topic, sink_topic])


def _copy_through_spark(cfg: DbusConfig, changes: list[dict], source_topic: str, sink_topic: str) -> list[dict]:
    endpoint = cfg.endpoints.kafka
    producer = kafka.producer(endpoint)
    for change in changes:
        producer.send(source_topic, key=f"shop.{change['table']}".encode(), value=json.dumps(change).encode())
    producer.flush()
    producer.close()

    python = sys.executable
    env = {**os.environ, "PYSPARK_PYTHON": python, "PYSPARK_DRIVER_PYTHON": python}
    submit = [str(Path(python).parent / "spark-submit"), *spark.submit_args(cfg),
              str(Path(__file__).with_name("sparkcheck.py")),
              "--config", str(cfg.path), "--in", source_topic, "--out", sink_topic]
    done = subprocess.run(submit, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        sys.stderr.write(done.stderr[-4000:])
        msg = f"spark-submit exited {done.returncode}"
        raise DbusError(msg)
    print("   " + done.stdout.strip().splitlines()[-1])

    consumer = kafka.consumer(endpoint, sink_topic, auto_offset_reset="earliest", consumer_timeout_ms=10_000,
                              group_id=None, enable_auto_commit=False)
    copied = []
    for record in consumer:
        copied.append(json.loads(record.value)["change"])
        if len(copied) == len(changes):
            break
    consumer.close()
    return copied


def zookeeper_node(cfg: DbusConfig) -> str:
    client = zk.client(cfg.endpoints.zookeeper)
    path = zk.path(cfg.endpoints.zookeeper, "demo", "stackcheck")
    stamp = str(time.time()).encode()
    client.ensure_path(path)
    client.set(path, stamp)
    data, _ = client.get(path)
    client.stop()
    client.close()
    assert data == stamp
    return path


def _step(n: int, title: str, fn: Callable[[], object]) -> object:
    t0 = time.monotonic()
    print(f"{n}. {title}")
    result = fn()
    print(f"   done in {time.monotonic() - t0:.1f}s")
    return result


def run(cfg: DbusConfig, source_name: str) -> int:
    src = cfg.source(source_name)
    _step(1, "MariaDB: create schema shop and write one order in a transaction", lambda: create_shop(src))
    start, tag = write_order(src)
    print(f"   wrote customer/product/order/item (tag {tag}) after binlog {start.file}:{start.pos}")

    changes = _step(2, "binlog: read the rows back with python-mysql-replication", lambda: read_binlog(cfg, src, start))
    for c in changes:
        print(f"   {c['op']} shop.{c['table']} @{c['pos']}: {json.dumps(c['values'], ensure_ascii=False)[:110]}")

    copied = _step(3, "Kafka + Spark: produce, copy with a streaming query via spark-submit, consume",
                   lambda: spark_roundtrip(cfg, changes))
    print(f"   {len(copied)} of {len(changes)} change(s) came back through Spark")

    path = _step(4, "ZooKeeper: write and read a node", lambda: zookeeper_node(cfg))
    print(f"   {path} round-tripped")

    point = _step(5, "time series: write a metric with influxdb-client and read it back",
                  lambda: influx.write_and_read_check(cfg.endpoints.influxdb, source_name))
    print(f"   {point}")

    ok = len(changes) == 5 and sorted(map(json.dumps, copied)) == sorted(map(json.dumps, changes))
    print("demo: OK, every server did its part" if ok else "demo: FAILED (see above)")
    return 0 if ok else 1
