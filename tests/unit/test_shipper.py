"""logprocessor/shipper.py: the rsyslog configuration made from the DBus configuration (docs/logs.md, The
shipper). The golden file tests/golden/shipper/rsyslog.conf is the whole output for tests/golden/shipper/
dbus.yaml, read as a user would; `rsyslogd -N1` checks that it loads when rsyslogd is installed."""

import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from cli import main as dbus
from dbuslib.config import DEFAULT_CONFIG, DbusConfig, load_config
from dbuslib.errors import ConfigError
from logprocessor import shipper

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "shipper"
WORK = Path("/var/spool/rsyslog/dbus")


def _golden_cfg(**log_sources: dict) -> DbusConfig:
    """The golden configuration as /etc/dbus/dbus.yaml: its YAML validated with that path (load_config
    would make its relative globs absolute against the checkout's folder, dbuslib.config.raw_config)."""
    raw = yaml.safe_load((GOLDEN / "dbus.yaml").read_text())
    if log_sources:
        raw["log_sources"] = log_sources
    return DbusConfig.model_validate({**raw, "path": Path("/etc/dbus/dbus.yaml")})


def _check(name: str, text: str) -> None:
    path = GOLDEN / name
    if os.environ.get("DBUS_GOLDEN_WRITE"):
        path.write_text(text)
    assert text == path.read_text(), f"{path} differs; DBUS_GOLDEN_WRITE=1 rewrites it (then read the diff)"


def test_the_golden_configuration():
    _check("rsyslog.conf", shipper.rsyslog_conf(_golden_cfg(), WORK))


def test_no_log_source_gives_the_globals_only():
    text = shipper.rsyslog_conf(_golden_cfg(beats={"type": "log_filebeat"}), WORK)
    _check("no_sources.conf", text)
    assert "module(load=" not in text and "input(" not in text


@pytest.mark.parametrize("name", ["rsyslog.conf", "no_sources.conf"])
def test_rsyslogd_loads_the_golden_files(name, tmp_path):
    assert shutil.which("rsyslogd"), (
        "rsyslogd is not installed: `make stack-up` installs it (fails, never skips)"
    )
    work = tmp_path / "work"
    work.mkdir()
    conf = tmp_path / name
    conf.write_text((GOLDEN / name).read_text().replace(str(WORK), str(work)))
    done = subprocess.run(["rsyslogd", "-N1", "-f", str(conf)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize(
    ("kafka_max", "max_line", "expected"),
    [
        # (16 MiB - 64 KiB - 8 KiB) / 6: a line of control characters only still fits in one record
        (16_777_216, 1_000_000, (2_783_914, 16_711_680)),
        # a source taking longer lines: a cut line must stay longer than it, so it is refused, not taken
        (16_777_216, 5_000_000, (5_000_001, 16_711_680)),
        # ... but never so long that a plain line's record would not fit
        (16_777_216, 16_750_000, (16_703_488, 16_711_680)),
        (4_194_304, 1_000_000, (1_000_001, 4_128_768)),
    ],
)
def test_sizes(kafka_max, max_line, expected):
    raw = yaml.safe_load((GOLDEN / "dbus.yaml").read_text())
    raw["endpoints"]["kafka"]["max_message_bytes"] = kafka_max
    raw["log_sources"] = {"a": {"shipper": {"files": ["/x"]}, "processor": {"max_line_bytes": max_line}}}
    assert shipper.sizes(DbusConfig.model_validate(raw)) == expected


def test_globs_are_resolved_against_the_configuration_folder():
    cfg = _golden_cfg()
    assert shipper.globs(cfg, cfg.log_source("applog")) == [
        "/srv/app/logs/*.log",
        "/var/log/app/access-*.log",
    ]


def test_quotes_and_backslashes_in_a_path_are_escaped():
    cfg = _golden_cfg(odd={"shipper": {"files": ['/var/log/a "b"\\c.log']}})
    assert 'file="/var/log/a \\"b\\"\\\\c.log"' in shipper.rsyslog_conf(cfg, WORK)


@pytest.mark.parametrize(
    ("log_sources", "expected"),
    [
        (
            {"fb": {"type": "log_filebeat", "shipper": {"files": ["/x.log"]}}},
            "log_sources.fb.shipper.files: the local stack's rsyslog writes log_rsyslog records, but fb is "
            "log_filebeat",
        ),
        ({"nl": {"shipper": {"files": ["/x\n.log"]}}}, "cannot hold a line break"),
    ],
)
def test_refusals_name_the_key(log_sources, expected):
    with pytest.raises(ConfigError) as e:
        shipper.rsyslog_conf(_golden_cfg(**log_sources), WORK)
    assert expected in str(e.value)


def test_dbus_logs_shipper_conf_prints_it(tmp_path, capsys):
    args = ["logs", "shipper-conf", "--config", str(DEFAULT_CONFIG), "--work-dir", str(tmp_path)]
    assert dbus.main(args) == 0
    out = capsys.readouterr().out
    assert out == shipper.rsyslog_conf(load_config(DEFAULT_CONFIG), tmp_path)
    assert f'workDirectory="{tmp_path}"' in out and 'topic="applog"' in out


def _secured_cfg() -> DbusConfig:
    raw = yaml.safe_load((GOLDEN / "dbus.yaml").read_text())
    raw["endpoints"]["kafka"]["security"] = {
        "protocol": "SASL_SSL",
        "sasl": {"mechanism": "SCRAM-SHA-512", "username": "dbus", "password": 'pa"ss\\word'},
        "tls": {
            "ca": "/etc/dbus/tls/ca.pem",
            "cert": "/etc/dbus/tls/client.pem",
            "key": "/etc/dbus/tls/client.key",
        },
    }
    return DbusConfig.model_validate(raw).model_copy(update={"path": Path("/etc/dbus/dbus.yaml")})


def test_a_secured_kafka_reaches_omkafka_in_librdkafkas_spelling(tmp_path):
    """endpoints.kafka.security in omkafka's confParam (tests/golden/shipper/rsyslog_sasl_ssl.conf), the
    password escaped as a RainerScript string; rsyslogd loads the file."""
    text = shipper.rsyslog_conf(_secured_cfg(), WORK)
    _check("rsyslog_sasl_ssl.conf", text)
    assert '"sasl.password=pa\\"ss\\\\word"' in text
    work = tmp_path / "work"
    work.mkdir()
    conf = tmp_path / "rsyslog.conf"
    conf.write_text(text.replace(str(WORK), str(work)))
    done = subprocess.run(["rsyslogd", "-N1", "-f", str(conf)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
