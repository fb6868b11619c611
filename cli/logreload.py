"""``LOG_PROCESSOR_RELOAD_CONFIG`` from ``dbus logrules publish`` and ``reload``: sent on the log source's
control topic as ``dbus reload`` sends the appender's, and with ``--wait`` the processor's answer
(logprocessor/reload.py: the ZooKeeper node ``<root>/LogProcessor/<ds>/reload``) decides the exit code."""

from __future__ import annotations

import sys
from typing import Any

from dbuslib.errors import EndpointError

SENDER = "dbus-cli-logrules"  # ``from`` of the messages sent


def send(cfg: Any, ds: str, **extra: Any) -> int:
    """LOG_PROCESSOR_RELOAD_CONFIG on the source's control topic: the original's payload (spec §7), plus
    the table and version published when a publish sends it."""
    from dbuslib import kafka
    from ums.control import ControlType, control_key, new_control_message, to_json

    src = cfg.log_source(ds)
    topic = src.topics.name("ctrl", ds)
    message = new_control_message(
        ControlType.LOG_PROCESSOR_RELOAD_CONFIG, SENDER, {"dsName": ds, "dsType": src.type, **extra}
    )
    # made when missing (the broker creates none): a processor that starts later loads the published rules
    kafka.ensure_topics(cfg.endpoints.kafka, [topic])
    producer = kafka.producer(cfg.endpoints.kafka, max_block_ms=15_000)
    try:
        producer.send(topic, key=control_key(message).encode(), value=to_json(message).encode()).get(30)
    except Exception as e:
        servers = cfg.endpoints.kafka.bootstrap_servers
        msg = f"could not send LOG_PROCESSOR_RELOAD_CONFIG to {topic} on {servers}: {e}"
        raise EndpointError(msg) from e
    finally:
        producer.close()
    print(f"{message.id}\tLOG_PROCESSOR_RELOAD_CONFIG sent to {topic}")
    return message.id


def wait(cfg: Any, ds: str, request_id: int, wait_s: float) -> int:
    """With ``--wait``: the processor's answer decides (logprocessor/reload.py): 0 applied, 2 rejected (the
    rules in force stay), 1 no answer within ``wait_s``."""
    import time

    from dbuslib import zk
    from logprocessor import reload

    if wait_s <= 0:
        return 0
    client = zk.client(cfg.endpoints.zookeeper)
    try:
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            reply = reload.read_reply(client, cfg, ds)
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
