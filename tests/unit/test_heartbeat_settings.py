import pytest
from pydantic import ValidationError

from dbuslib.config import HeartbeatSettings


def test_defaults():
    hb = HeartbeatSettings()
    assert (hb.interval_s, hb.check_interval_s, hb.timeout_s, hb.latency_alert_s) == (60, 30, 600, 300)
    assert (hb.schema_, hb.table, hb.webhook_url, hb.smtp) == ("dbus", "db_heartbeat_monitor", None, None)


@pytest.mark.parametrize(
    ("settings", "key"),
    [
        ({"interval_s": 0.5}, "interval_s"),
        ({"check_interval_s": 0}, "check_interval_s"),
        ({"webhook_url": "alerts.example/x"}, "webhook_url"),
        ({"smtp": {"host": "h", "from_addr": "a@b", "to_addrs": []}}, "smtp.to_addrs"),
        ({"smtp": {"host": "h", "from_addr": "a@b", "to_addrs": ["c@d"], "tls": True}}, "smtp.tls"),
        ({"smtp": {"host": "h", "from_addr": "a@b", "to_addrs": ["c@d"], "port": 0}}, "smtp.port"),
    ],
)
def test_bad_values_name_the_key(settings, key):
    with pytest.raises(ValidationError) as e:
        HeartbeatSettings(**settings)
    assert [".".join(map(str, err["loc"])) for err in e.value.errors()] == [key]


def test_smtp_password_is_secret():
    hb = HeartbeatSettings(
        smtp={
            "host": "h",
            "from_addr": "a@b",
            "to_addrs": ["c@d"],
            "user": "u",
            "password": "hunter2",
            "starttls": True,
        }
    )
    assert "hunter2" not in repr(hb) and hb.smtp.password.get_secret_value() == "hunter2"
