"""Where alerts go: the log (always), an HTTP webhook and email over SMTP (when configured).

A channel's ``send(note)`` returns when the notice was delivered and raises ChannelError otherwise; the
monitor logs the failure and tries that channel again at its next check. The webhook gets a JSON POST::

    {"event": "alert", "ds": "demo", "schema": "shop", "table": "orders", "kind": "stale",
     "since": "2024-05-01T12:00:00+00:00", "age_s": 610.0, "latency_s": 1.2,
     "message": "demo: shop.orders: no heartbeat for 610 s (timeout 600 s)"}

(``event`` is "alert" or "recovery"; ``since`` is ``since_ms`` as an ISO 8601 UTC time; a log table's alert
adds ``host``, the host whose lines it is about). A dead-letter
incident (``kind`` "dead_letter") adds ``stage``, ``code``, ``count`` (letters since it opened) and the
newest letter's original record: ``topic``, ``partition``, ``offset``, ``origin`` (``schema.table``).
"""

from __future__ import annotations

import json
import logging
import smtplib
import urllib.error
import urllib.request
from datetime import datetime, timezone
from email.message import EmailMessage
from typing import Any, Protocol

from dbuslib.config import MonitorSettings
from dbuslib.errors import DbusError
from heartbeat.incidents import Notification

log = logging.getLogger(__name__)


class ChannelError(DbusError):
    """An alert or recovery notice could not be delivered; it is sent again at the next check."""

    code = "HEARTBEAT_NOTIFY_FAILED"
    retriable = True


class Channel(Protocol):
    name: str

    def send(self, note: Notification) -> None: ...


def iso_utc(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc).isoformat(timespec="seconds")


def body(note: Notification) -> dict[str, Any]:
    """The webhook's JSON body (see the module docstring)."""
    a = note.alert
    out = {
        "event": note.event,
        "ds": a.ds,
        "schema": a.schema,
        "table": a.table,
        "kind": a.kind,
        "since": iso_utc(a.since_ms),
        "age_s": a.age_s,
        "latency_s": a.latency_s,
        "message": a.message,
    }
    if a.host is not None:  # a log table's alert: per host (heartbeat.logmonitor)
        out["host"] = a.host
    if a.kind == "dead_letter":  # schema and table hold the stage and the code (heartbeat.deadletters)
        out.update(
            {
                "stage": a.schema,
                "code": a.table,
                "count": a.count,
                "topic": a.topic,
                "partition": a.partition,
                "offset": a.offset,
                "origin": a.origin,
            }
        )
    return out


def subject(note: Notification) -> str:
    a = note.alert
    what = "ALERT" if note.event == "alert" else "RECOVERED"
    host = f" from {a.host}" if a.host is not None else ""
    return f"[DBus {what}] {a.ds} {a.schema}.{a.table}{host} {a.kind}"


def email(note: Notification, smtp: MonitorSettings.Smtp) -> EmailMessage:
    msg = EmailMessage()
    msg["Subject"] = subject(note)
    msg["From"] = smtp.from_addr
    msg["To"] = ", ".join(smtp.to_addrs)
    msg.set_content(f"{note.alert.message}\n\n{json.dumps(body(note), indent=2)}\n")
    return msg


class LogChannel:
    name = "log"

    def send(self, note: Notification) -> None:
        level = logging.WARNING if note.event == "alert" else logging.INFO
        log.log(level, "%s: %s", note.event.upper(), note.alert.message)


class WebhookChannel:
    name = "webhook"

    def __init__(self, url: str, timeout_s: float) -> None:
        self.url, self.timeout_s = url, timeout_s

    def send(self, note: Notification) -> None:
        data = json.dumps(body(note)).encode()
        request = urllib.request.Request(
            self.url, data=data, method="POST", headers={"Content-Type": "application/json"}
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                response.read()
        except (urllib.error.URLError, OSError, ValueError) as e:  # HTTPError is a URLError
            msg = f"webhook {self.url}: {note.event} {note.alert.key} not delivered: {e}"
            raise ChannelError(msg) from e


class SmtpChannel:
    name = "email"

    def __init__(self, smtp: MonitorSettings.Smtp) -> None:
        self.smtp = smtp

    def send(self, note: Notification) -> None:
        s = self.smtp
        try:
            with smtplib.SMTP(s.host, s.port, timeout=s.timeout_s) as server:
                if s.starttls:
                    server.starttls()
                if s.user:
                    server.login(s.user, s.password.get_secret_value() if s.password else "")
                server.send_message(email(note, s))
        except (smtplib.SMTPException, OSError) as e:
            msg = f"SMTP {s.host}:{s.port}: {note.event} {note.alert.key} not delivered: {e}"
            raise ChannelError(msg) from e


def channels(hb: MonitorSettings) -> list[Channel]:
    """The configured channels, the log first."""
    out: list[Channel] = [LogChannel()]
    if hb.webhook_url:
        out.append(WebhookChannel(hb.webhook_url, hb.webhook_timeout_s))
    if hb.smtp is not None:
        out.append(SmtpChannel(hb.smtp))
    return out
