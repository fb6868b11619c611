"""The full-puller service's step for one ``<ds>_ctrl`` record: what to serve, what to answer, what to commit.

fullpuller/main.py polls ``<ds>_ctrl`` and hands each record to ``on_record``, which never raises (only
``KeyboardInterrupt`` and ``SystemExit``, the service's stop, pass through): no record can stop the service.

- a record whose key does not start with ``FULL_DATA_`` is another stage's: committed past, untouched;
- a record ``request.parse`` refuses (null, oversized, not UTF-8, not JSON, not an object, huge numbers,
  an unknown type, a bad field) is answered ``abort`` with the code and the reason, and committed past;
- a request is served by ``serve`` (``Puller.handle``, which answers it itself); if ``serve`` raises (a
  bug, a server gone), the request is answered ``abort`` with ``FULLPULL_FAILED`` and committed past.

The abort replies built here name the record's coordinates, in ``ERROR_MSG`` and as fields::

    {"SEQNO": "", "DBUS_DATASOURCE_ID": "demo", "TABLE": "", "STATUS": "abort",
     "ERROR_CODE": "FULLPULL_BAD_REQUEST", "ERROR_MSG": "demo_ctrl[0]@17: not a control message: ...",
     "TOPIC": "demo_ctrl", "PARTITION": "0", "OFFSET": "17"}
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from fullpuller.request import PullRejected, PullRequest, is_request, parse, reply
from ums.control import ControlMessage

log = logging.getLogger("dbus.fullpuller")
ABORT = "abort"


@dataclass(frozen=True)
class ControlRecord:
    """One record of ``<ds>_ctrl`` and where it was read."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None

    @classmethod
    def of(cls, record: Any) -> ControlRecord:
        """From a kafka-python ``ConsumerRecord``."""
        return cls(record.topic, record.partition, record.offset, record.key, record.value)

    @property
    def where(self) -> str:
        return f"{self.topic}[{self.partition}]@{self.offset}"


@dataclass(frozen=True)
class Outcome:
    """What the service does after one record: commit ``commit`` (always the next offset) on the record's
    partition, after sending ``reply`` (if any) to ``<ds>_callback``. ``request`` is the request served."""

    commit: int
    request: PullRequest | None = None
    reply: ControlMessage | None = None


def on_record(rec: ControlRecord, ds: str, serve: Callable[[PullRequest], object]) -> Outcome:
    """Handle one ``<ds>_ctrl`` record (see the module doc); never raises ``Exception``."""
    after = rec.offset + 1
    try:
        if not is_request(rec.key):
            return Outcome(after)
        req = parse(rec.value, ds)
    except PullRejected as e:
        return Outcome(after, reply=refusal(rec, ds, e.code, str(e), e.seqno))
    except Exception as e:
        log.exception("%s: %s: the record could not be read", ds, rec.where)
        return Outcome(after, reply=refusal(rec, ds, "FULLPULL_FAILED", f"{type(e).__name__}: {e}", None))
    log.info("%s: request %s: %s (%s)", ds, req.seqno, req.name, rec.where)
    try:
        serve(req)
    except Exception as e:
        log.exception("%s: request %s (%s) failed outside the pull", ds, req.seqno, req.name)
        text = f"request {req.seqno} ({req.name}): {type(e).__name__}: {e}"
        return Outcome(after, req, refusal(rec, ds, "FULLPULL_FAILED", text, req.seqno, req.name))
    return Outcome(after, req)


def refusal(
    rec: ControlRecord, ds: str, code: str, reason: str, seqno: int | None, table: str = ""
) -> ControlMessage:
    """The ``abort`` reply to a record, naming its coordinates."""
    log.warning("%s: %s: %s: %s", ds, rec.where, code, reason[:2000])
    return reply(
        seqno,
        ABORT,
        ds=ds,
        table=table,
        code=code,
        error=f"{rec.where}: {reason}",
        TOPIC=rec.topic,
        PARTITION=rec.partition,
        OFFSET=rec.offset,
    )
