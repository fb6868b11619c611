"""Rules reload in the log processor's driver: LOG_PROCESSOR_RELOAD_CONFIG on ``<ds>_ctrl`` -> new rules
from the next batch, whole, or none.

``dbus logrules publish`` stores a new version and sends the message. This thread (reading the control
topic from its end: a reload is for the running driver only) loads the source's published rule set and
compiles it. A set that does not compile is *rejected*: the answer names the rule, and the running set
stays. A good set is handed to the driver (``take``), after ``switch`` has asked the running query to stop
between two batches. The driver starts the next query on the new set from the checkpoint, so every line is
processed by one whole rule set: the lines before the *switch offsets* (the end of the last batch the old
query finished or planned) by the old one, even when the next query reads them again, the rest by the new
(logprocessor/switch.py).

The answer to each request is one ZooKeeper node, ``/DBus/LogProcessor/<ds>/reload``, by example::

    {"request_id": 1732460000000, "source": "applog", "status": "applied",
     "versions": {"order_events": 4, "access": 2}, "switch": {"0": 18250, "1": 17993}}
    {"request_id": 1732460001000, "source": "applog", "status": "rejected", "versions": {...},
     "code": "LOG_RULE_INVALID", "reason": "applog_schema.order_events version 5: group 'g1' rule 3 ..."}

The sending side is here too, so the request and its answer have one home: ``send`` (what ``dbus logrules
publish`` and ``reload`` and the console's Log rules page send), ``wait`` and ``describe`` (what ``--wait``
prints and the console shows).

No record stops the thread: a record that is not a control message is logged (and answered ``rejected``
when it says LOG_PROCESSOR_RELOAD_CONFIG); a failed poll is retried with backoff.
"""

from __future__ import annotations

import json
import logging
import queue
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from dbuslib import control, zk, zkpaths
from dbuslib.config import DbusConfig
from dbuslib.errors import DbusError
from logprocessor.rules import RuleSet
from ums.control import ControlMessage, ControlType, peek
from ums.errors import BadControlError

log = logging.getLogger(__name__)

RELOAD_FAILED = "LOG_RELOAD_FAILED"  # an unexpected error while loading or compiling the published rules
RELOAD_KEY = ControlType.LOG_PROCESSOR_RELOAD_CONFIG.value.encode()


def reply_path(cfg: DbusConfig, ds: str) -> str:
    return zkpaths.logprocessor_reload(cfg.endpoints.zookeeper.root, ds)


def versions(rules: RuleSet) -> dict[str, int]:
    """``{table: version}`` of the tables a rule set processes."""
    return {t.table: t.version for t in rules.tables}


def read_reply(client: Any, cfg: DbusConfig, ds: str) -> dict[str, Any] | None:
    """The answer to the last reload request (None: none yet, or unreadable)."""
    try:
        data, _ = client.get(reply_path(cfg, ds))
        reply = json.loads(data)
    except Exception:
        return None
    return reply if isinstance(reply, dict) else None


@dataclass(frozen=True)
class Request:
    """A reload the driver must apply: the request's id and the checked rule set."""

    request_id: int | None
    rules: RuleSet


class ReloadListener(control.DriverListener):
    """See the module docstring. ``load()`` reads the published rule set; ``check(rules)`` asks the engine
    about it (raising ``DbusError`` naming the rule); ``switch()`` asks the running query to stop between
    batches. ``start()`` returns once the consumer sits at the end of the control topic: a later request is
    never missed (``control.DriverListener``)."""

    def __init__(
        self,
        cfg: DbusConfig,
        ds: str,
        load: Callable[[], RuleSet],
        check: Callable[[RuleSet], object],
        switch: Callable[[], None],
        running: RuleSet,
        poll_ms: int = 500,
    ) -> None:
        super().__init__(cfg, ds, cfg.log_source(ds).topics.name("ctrl", ds), "logprocessor", poll_ms)
        self._load, self._check, self._switch = load, check, switch
        self.running = running
        self._requests: queue.Queue[Request] = queue.Queue()
        self._dispatcher = control.Dispatcher(
            f"logprocessor {ds}", {ControlType.LOG_PROCESSOR_RELOAD_CONFIG: self._reload}, bad=self._bad
        )

    # ------------------------------------------------------------ the driver's side

    def start(self, timeout: float = 60.0) -> ReloadListener:  # type: ignore[override]  # returns itself
        super().start(timeout)
        return self

    def take(self) -> Request | None:
        """The latest reload waiting to be applied (older ones it supersedes are dropped), or None."""
        got = None
        while True:
            try:
                got = self._requests.get_nowait()
            except queue.Empty:
                return got

    def applied(self, request: Request, switch: Mapping[int, int]) -> dict[str, Any]:
        """The driver started its query on ``request``'s rules: answer ``applied`` with the switch offsets."""
        self.running = request.rules
        reply = {
            "request_id": request.request_id,
            "source": self.ds,
            "status": "applied",
            "versions": versions(request.rules),
            "switch": {str(p): o for p, o in sorted(switch.items())},
        }
        log.info("logprocessor %s: reload %s applied: %s", self.ds, request.request_id, reply)
        return self._answer(reply)

    # ------------------------------------------------------------ the thread

    def on_record(self, rec: control.ControlRecord) -> Any:
        return self.handle(rec)

    def handle(self, rec: control.ControlRecord) -> dict[str, Any] | None:
        """One control record; the reply written (applied later by the driver, or rejected now), else None.
        Never raises."""
        try:
            return self._dispatcher.dispatch(rec)
        except Exception:
            log.exception("logprocessor %s: %s: the control record could not be handled", self.ds, rec.where)
            return None

    def _reload(self, message: ControlMessage, rec: control.ControlRecord) -> dict[str, Any] | None:
        target = message.payload.get("dsName")
        if target not in (None, self.ds):
            return None
        try:
            rules = self._load()
            self._check(rules)
        except Exception as e:
            code = e.code if isinstance(e, DbusError) else RELOAD_FAILED
            reason = str(e) if isinstance(e, DbusError) else f"{type(e).__name__}: {e}"
            log.error(
                "logprocessor %s: %s: reload %s rejected, the running rules stay: %s: %s",
                self.ds,
                rec.where,
                message.id,
                code,
                reason,
            )
            return self._answer(self._rejected(message.id, code, reason))
        log.info(
            "logprocessor %s: %s: reload %s: new rules %s", self.ds, rec.where, message.id, versions(rules)
        )
        self._requests.put(Request(message.id, rules))
        self._switch()
        return None

    def _bad(self, rec: control.ControlRecord, e: BadControlError) -> dict[str, Any] | None:
        request_id, kind = peek(rec.value)
        if rec.key != RELOAD_KEY and kind != ControlType.LOG_PROCESSOR_RELOAD_CONFIG.value:
            log.warning("logprocessor %s: %s: ignoring a bad control message: %s", self.ds, rec.where, e)
            return None
        log.error("logprocessor %s: %s: reload %s rejected: %s", self.ds, rec.where, request_id, e)
        return self._answer(self._rejected(request_id, e.code, f"{rec.where}: {e}"))

    def _rejected(self, request_id: int | None, code: str, reason: str) -> dict[str, Any]:
        return {
            "request_id": request_id,
            "source": self.ds,
            "status": "rejected",
            "versions": versions(self.running),
            "code": code,
            "reason": reason,
        }

    def _answer(self, reply: dict[str, Any]) -> dict[str, Any]:
        try:
            path, data = reply_path(self.cfg, self.ds), json.dumps(reply, sort_keys=True).encode()
            self._zk.ensure_path(path)
            self._zk.set(path, data)
        except Exception as e:
            log.warning("logprocessor %s: could not write the reload reply: %s", self.ds, e)
        return reply


# ------------------------------------------------------ the request, sent by dbus logrules and the console

SENDER = "dbus-cli-logrules"  # ``from`` of the messages sent


def send(cfg: Any, ds: str, **extra: Any) -> int:
    """LOG_PROCESSOR_RELOAD_CONFIG on the source's control topic: the original's payload (spec §7), plus
    the table and version published when a publish sends it."""
    from dbuslib import kafka
    from ums.control import ControlType, new_control_message

    src = cfg.log_source(ds)
    topic = src.topics.name("ctrl", ds)
    message = new_control_message(
        ControlType.LOG_PROCESSOR_RELOAD_CONFIG, SENDER, {"dsName": ds, "dsType": src.type, **extra}
    )
    # made when missing (the broker creates none): a processor that starts later loads the published rules
    kafka.ensure_topics(cfg.endpoints.kafka, [topic])
    kafka.send_control(cfg.endpoints.kafka, topic, message)
    print(f"{message.id}\tLOG_PROCESSOR_RELOAD_CONFIG sent to {topic}")
    return message.id


def wait(cfg: Any, ds: str, request_id: int, wait_s: float) -> int:
    """With ``--wait``: the processor's answer decides (``read_reply``): 0 applied, 2 rejected (the
    rules in force stay), 1 no answer within ``wait_s``."""
    import time

    if wait_s <= 0:
        return 0
    client = zk.client(cfg.endpoints.zookeeper)
    try:
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            reply = read_reply(client, cfg, ds)
            if reply is not None and reply.get("request_id") == request_id:
                return answer(reply)
            time.sleep(0.5)
    finally:
        client.stop()
        client.close()
    topic = cfg.log_source(ds).topics.name("ctrl", ds)
    print(
        f"dbus: no answer from the log processor of {ds} within {wait_s:g}s (is it running? it reads "
        f"{topic})",
        file=sys.stderr,
    )
    return 1


def answer(reply: dict[str, Any]) -> int:
    state, text = describe(reply)
    if state == "applied":
        print(f"{reply['request_id']}\t{text}")
        return 0
    print(f"dbus: {text}", file=sys.stderr)
    return 2


def describe(reply: dict[str, Any]) -> tuple[str, str]:
    """The processor's answer as ``(state, text)``: ``applied`` and the versions and where the new rules
    start, or ``rejected`` and why (what ``--wait`` prints, and the console's Log rules page shows)."""
    versions = ", ".join(f"{t} {v}" for t, v in sorted((reply.get("versions") or {}).items())) or "none"
    if reply.get("status") == "applied":
        switch = reply.get("switch") or {}
        at = ", ".join(f"partition {p} offset {o}" for p, o in sorted(switch.items())) or "the next line"
        return "applied", f"applied: table versions {versions}; new rules from {at}"
    return "rejected", (
        f"{reply.get('code')}: the log processor rejected the reload, table versions {versions} stay: "
        f"{reply.get('reason')}"
    )
