"""A pull that fails after its start marker ends with an ``abort`` marker in its result topic
(ums/headers.py), so a consumer bootstrapping from it (dbusclient) learns in its own stream that the pull
will not end; a pull rejected before its start marker writes none (nobody reading the topic waits for it)."""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace
from typing import Any

from fullpuller import job
from fullpuller.progress import PULLING, SPLITTING, Progress
from fullpuller.request import PullRejected

NS = "mysql.demo.shop.orders.3.0.0"
COLUMNS = [{"name": "id", "column_type": "int(11)", "nullable": False}]


class Sent:
    def __init__(self) -> None:
        self.records: list[tuple[str, bytes, list[tuple[str, bytes]]]] = []

    def send(self, topic: str, key: bytes, value: bytes, headers: Any = ()) -> Any:
        self.records.append((topic, value, list(headers)))
        return SimpleNamespace(get=lambda timeout=None: None)


def puller(stored: Progress, fail: Exception) -> tuple[job.Puller, Sent, list[Progress]]:
    p = job.Puller.__new__(job.Puller)
    sent, finished = Sent(), []
    p.ds, p.producer = "demo", sent
    p.store = SimpleNamespace(get=lambda *a: stored, put=lambda q: None)

    def pull(progress: Progress) -> Progress:
        raise fail

    p._pull = pull  # type: ignore[method-assign]
    p._finish = finished.append  # type: ignore[method-assign]
    p.reject = lambda e, name="": None  # type: ignore[method-assign]
    return p, sent, finished


def request(seqno: int) -> Any:
    return SimpleNamespace(seqno=seqno, schema="shop", table="orders", name="shop.orders")


def started(seqno: int) -> Progress:
    return Progress(
        seqno,
        "shop",
        "orders",
        Status=PULLING,
        UmsId="95",
        Topic="demo.shop.orders.result",
        Namespace=NS,
        Columns=COLUMNS,
    )


def headers_of(record: tuple[str, bytes, list[tuple[str, bytes]]]) -> dict[str, bytes]:
    return dict(record[2])


def test_a_pull_failing_after_its_start_writes_an_abort_marker_with_the_error() -> None:
    p, sent, finished = puller(started(7), RuntimeError("shard 2: connection lost"))
    p.handle(request(7))
    (record,) = sent.records
    h = headers_of(record)
    assert record[0] == "demo.shop.orders.result"
    assert (h["dbus_fullpull"], h["dbus_fullpull_id"], h["dbus_fullpull_ums_id"]) == (b"abort", b"7", b"95")
    assert h["dbus_fullpull_error"].startswith(b"FULLPULL_FAILED: shard 2: connection lost")
    assert finished[0].Status == "abort" and finished[0].ErrorCode == "FULLPULL_FAILED"


def test_a_rejection_after_the_start_names_its_code() -> None:
    p, sent, _ = puller(started(8), PullRejected("FULLPULL_BAD_REQUEST", "request 8: bad", 8))
    p.handle(request(8))
    assert headers_of(sent.records[0])["dbus_fullpull_error"] == b"FULLPULL_BAD_REQUEST: request 8: bad"


def test_no_abort_marker_before_the_start_marker() -> None:
    p, sent, finished = puller(replace(started(9), Status=SPLITTING), RuntimeError("x"))
    p.handle(request(9))  # stopped while splitting: accepted again, and this time it fails in the pull
    assert sent.records == [] or all(headers_of(r)["dbus_fullpull"] != b"abort" for r in sent.records)
