"""A live workload on one table, for the tests of a full pull or a replica under live writes.

``live`` is made by ``DDL`` and filled by ``FILL.format(n=rows)`` (MariaDB's sequence engine: ids 1..n).
``filled(source, rows)`` makes a new database ``dbus_test_<hex>`` with ``live`` filled, and gives its name
and a writer connection on it. ``Workload(source, database, next_id)`` is a thread of random single-row
inserts (from ``next_id`` on), updates and deletes (autocommit each) until ``stop_flag`` is set;
``total()`` counts them and fails at once if the thread died.
"""

from __future__ import annotations

import random
import threading
import time
import uuid
from typing import Any

from dbuslib import mysql

DDL = (
    "CREATE TABLE live (id INT PRIMARY KEY, customer VARCHAR(40) NOT NULL, amount DECIMAL(12,2), "
    "status ENUM('new','paid','shipped'), note TEXT, placed DATETIME(3), score DOUBLE)"
)
FILL = (
    "INSERT INTO live SELECT seq, CONCAT('customer ', seq % 9973), (seq % 100000) / 100, "
    "ELT(1 + seq % 3, 'new', 'paid', 'shipped'), IF(seq % 10 = 0, NULL, CONCAT('n', seq)), "
    "TIMESTAMP('2024-01-02 03:04:05.123') + INTERVAL seq SECOND, seq / 7 FROM seq_1_to_{n}"
)


def filled(source: Any, rows: int) -> tuple[str, Any]:
    """A new database with ``live`` of ``rows`` rows (made before any stage starts, so that only a full
    pull has them); its name and a writer connection on it."""
    database = f"dbus_test_{uuid.uuid4().hex[:12]}"
    writer = mysql.connect(source.mysql, as_writer=True)
    with writer.cursor() as cur:
        cur.execute(f"CREATE DATABASE `{database}`")
        cur.execute(f"USE `{database}`")
        cur.execute(DDL)
        cur.execute(FILL.format(n=rows))
    return database, writer


class Workload(threading.Thread):
    """Random single-row inserts, updates and deletes on ``live`` until stopped (autocommit each)."""

    def __init__(self, source, database: str, next_id: int, pause_s: float = 0.002) -> None:
        super().__init__(daemon=True)
        self.db = mysql.connect(source.mysql, database, as_writer=True)
        self.stop_flag = threading.Event()
        self.counts = {"insert": 0, "update": 0, "delete": 0}
        self.next_id = next_id
        self.pause_s = pause_s
        self.error: BaseException | None = None

    def total(self) -> int:
        """Writes so far; fails at once if the workload died."""
        assert self.error is None, self.error
        return sum(self.counts.values())

    def run(self) -> None:
        rnd = random.Random(5)
        try:
            with self.db.cursor() as cur:
                while not self.stop_flag.is_set():
                    op = rnd.choice(("insert", "update", "update", "delete"))
                    if op == "insert":
                        cur.execute(
                            "INSERT INTO live VALUES (%s, %s, %s, 'new', %s, NOW(3), %s)",
                            (
                                self.next_id,
                                f"live {self.next_id}",
                                rnd.randint(1, 10**6) / 100,
                                "inserted",
                                rnd.random(),
                            ),
                        )
                        self.next_id += 1
                    elif op == "update":
                        cur.execute(
                            "UPDATE live SET amount = %s, status = 'paid', note = %s WHERE id = %s",
                            (
                                rnd.randint(1, 10**6) / 100,
                                f"upd é {rnd.random()}",
                                rnd.randint(1, self.next_id),
                            ),
                        )
                    else:
                        cur.execute("DELETE FROM live WHERE id = %s", (rnd.randint(1, self.next_id),))
                    self.counts[op] += 1
                    time.sleep(self.pause_s)
        except BaseException as e:
            self.error = e
