import json
import socket

import pytest

from dbuslib.config import HeartbeatSettings
from heartbeat.channels import ChannelError, LogChannel, SmtpChannel, WebhookChannel, body, channels, email
from heartbeat.incidents import Alert, Notification

ALERT = Alert(
    ds="demo",
    schema="shop",
    table="orders",
    kind="stale",
    since_ms=1714564800000,
    notified_ms=None,
    age_s=610.0,
    latency_s=1.2,
    message="demo: shop.orders: no heartbeat for 610 s (timeout 600 s)",
)
SMTP = {
    "host": "127.0.0.1",
    "port": 2525,
    "from_addr": "dbus@example.org",
    "to_addrs": ["ops@example.org", "dba@example.org"],
}


def test_webhook_body():
    assert body(Notification("alert", ALERT, 1714565410000)) == {
        "event": "alert",
        "ds": "demo",
        "schema": "shop",
        "table": "orders",
        "kind": "stale",
        "since": "2024-05-01T12:00:00+00:00",
        "age_s": 610.0,
        "latency_s": 1.2,
        "message": "demo: shop.orders: no heartbeat for 610 s (timeout 600 s)",
    }


def test_email_names_event_table_and_kind():
    msg = email(Notification("recovery", ALERT, 1), HeartbeatSettings.Smtp(**SMTP))
    assert msg["Subject"] == "[DBus RECOVERED] demo shop.orders stale"
    assert msg["To"] == "ops@example.org, dba@example.org"
    text = msg.get_content()
    assert text.startswith(ALERT.message)
    assert json.loads(text[len(ALERT.message) :])["event"] == "recovery"


@pytest.mark.parametrize(
    ("settings", "names"),
    [
        ({}, ["log"]),
        ({"webhook_url": "http://127.0.0.1:9/x"}, ["log", "webhook"]),
        ({"webhook_url": "https://h/x", "smtp": SMTP}, ["log", "webhook", "email"]),
    ],
)
def test_configured_channels(settings, names):
    assert [c.name for c in channels(HeartbeatSettings(**settings))] == names


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_unreachable_webhook_raises_channel_error():
    with pytest.raises(ChannelError, match="webhook .*: alert shop.orders.stale not delivered") as e:
        WebhookChannel(f"http://127.0.0.1:{_closed_port()}/hook", 2).send(Notification("alert", ALERT, 1))
    assert e.value.retriable


def test_unreachable_smtp_raises_channel_error():
    smtp = HeartbeatSettings.Smtp(**{**SMTP, "port": _closed_port(), "timeout_s": 2})
    with pytest.raises(ChannelError, match="SMTP 127.0.0.1:.*: recovery shop.orders.stale not delivered"):
        SmtpChannel(smtp).send(Notification("recovery", ALERT, 1))


def test_log_channel_logs_alert_as_warning(caplog):
    LogChannel().send(Notification("alert", ALERT, 1))
    assert [(r.levelname, r.getMessage()) for r in caplog.records] == [("WARNING", f"ALERT: {ALERT.message}")]
