"""The full-puller service: the control loop on ``<ds>_ctrl`` and its step for one record (what to serve,
what to answer, what to commit).

``run`` reads ``<ds>_ctrl`` with the consumer group ``dbus-fullpuller-<ds>`` (``dbuslib.control.assign``:
the committed offset, or the topic's end at the very first start) one record at a time, hands each to
``on_record`` and commits past it once it is served and answered, so a service killed mid-pull serves that
request again when it restarts. ``on_record`` never raises (only ``KeyboardInterrupt`` and ``SystemExit``,
the service's stop, pass through): no record can stop the service. It is a ``dbuslib.control.Dispatcher``:

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

import functools
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from dbuslib import control
from dbuslib.control import ControlRecord, Dispatcher
from fullpuller.request import (
    TYPE,
    PullRejected,
    PullRequest,
    check,
    is_request,
    not_a_request,
    reply,
    to_record,
)
from ums.control import ControlMessage
from ums.errors import BadControlError

if TYPE_CHECKING:
    from dbuslib.config import DbusConfig
    from dbuslib.lifecycle import Lifecycle
    from fullpuller.job import Puller

__all__ = ["ABORT", "ControlRecord", "Outcome", "on_record", "refusal", "run"]

log = logging.getLogger("dbus.fullpuller")
ABORT = "abort"


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
        req = _dispatcher(ds).dispatch(rec)
    except PullRejected as e:
        return Outcome(after, reply=refusal(rec, ds, e.code, str(e), e.seqno))
    except Exception as e:
        log.exception("%s: %s: the record could not be read", ds, rec.where)
        return Outcome(after, reply=refusal(rec, ds, "FULLPULL_FAILED", f"{type(e).__name__}: {e}", None))
    if req is None:
        return Outcome(after)
    log.info("%s: request %s: %s (%s)", ds, req.seqno, req.name, rec.where)
    try:
        serve(req)
    except Exception as e:
        log.exception("%s: request %s (%s) failed outside the pull", ds, req.seqno, req.name)
        text = f"request {req.seqno} ({req.name}): {type(e).__name__}: {e}"
        return Outcome(after, req, refusal(rec, ds, "FULLPULL_FAILED", text, req.seqno, req.name))
    return Outcome(after, req)


@functools.cache
def _dispatcher(ds: str) -> Dispatcher[PullRequest]:
    """``FULL_DATA_*`` records only; a request is checked by ``request.check``, which also refuses every
    other type (the original's blocking ``FULL_DATA_PULL_REQ``...) with FULLPULL_BAD_REQUEST."""

    def bad(rec: ControlRecord, e: BadControlError) -> PullRequest:
        raise not_a_request(rec.value, e)

    def take(message: ControlMessage, rec: ControlRecord) -> PullRequest:
        return check(message, ds)

    return Dispatcher(
        f"fullpuller {ds}", {TYPE: take}, bad=bad, accepts=lambda r: is_request(r.key), other=take
    )


def run(cfg: DbusConfig, ds: str, puller: Puller, life: Lifecycle) -> None:
    """Serve ``<ds>_ctrl`` until ``life`` stops; a request under way at the stop is not committed, so it
    is served again at the next start."""
    from dbuslib import kafka

    ctrl = cfg.source(ds).topics.name("ctrl", ds)
    consumer = kafka.consumer(
        cfg.endpoints.kafka,
        group_id=f"dbus-fullpuller-{ds}",
        enable_auto_commit=False,
        auto_offset_reset="latest",
    )
    try:
        start = control.assign(consumer, ctrl, ds, resume=True)
        log.info("%s: listening on %s from offsets %s", ds, ctrl, start)
        while not life.stopping.is_set():
            for rec in control.poll(consumer, 1000, max_records=1):
                out = on_record(rec, ds, puller.handle)
                if out.request is not None and life.stopping.is_set():
                    break  # stopped mid-request: not committed, so served again at the next start
                if out.reply is not None:
                    key, value = to_record(out.reply)
                    puller.producer.send(puller.callback, key=key, value=value).get(60)
                control.commit_after(consumer, rec)
    finally:
        consumer.close()


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
