"""${env:NAME}, ${env:NAME:-default} and ${file:PATH} in configuration values: filled in before validation,
errors naming the key and the variable or file, never the value; any other `$` left as written."""

from pathlib import Path

import pytest
import yaml

from dbuslib.config import DEFAULT_CONFIG, load_config, resolve_refs
from dbuslib.errors import ConfigError

ENV = {"DBUS_TEST_A": "a-value", "DBUS_TEST_EMPTY": ""}


@pytest.fixture
def env(monkeypatch):
    for name, value in ENV.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("DBUS_TEST_UNSET", raising=False)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("${env:DBUS_TEST_A}", "a-value"),
        ("mysql+pymysql://dbus:${env:DBUS_TEST_A}@db/dbus", "mysql+pymysql://dbus:a-value@db/dbus"),
        ("${env:DBUS_TEST_A}${env:DBUS_TEST_A}", "a-valuea-value"),
        ("${env:DBUS_TEST_EMPTY}", ""),
        ("${env:DBUS_TEST_UNSET:-fallback}", "fallback"),
        ("${env:DBUS_TEST_EMPTY:-fallback}", "fallback"),
        ("${env:DBUS_TEST_A:-fallback}", "a-value"),
        ("${env:DBUS_TEST_UNSET:-}", ""),
        ("${env:DBUS_TEST_UNSET:-a:b-c}", "a:b-c"),
        ("${file:secret}", "s3cret"),  # relative to the configuration file's folder
        ("${file:two-lines}", "s3cret\n"),  # one trailing newline stripped, not two
        ("${file:crlf}", "s3cret"),
        ("${file:bare}", "s3cret"),
        ("$${env:DBUS_TEST_A}", "${env:DBUS_TEST_A}"),  # escaped: the literal text
        # any other `$` is left as written
        (r"^(\+?\d{2}-?)?(\d{3})\d{4}(\d{4})$", r"^(\+?\d{2}-?)?(\d{3})\d{4}(\d{4})$"),
        (r"\1$\2", r"\1$\2"),
        ("${x}", "${x}"),
        ("$HOME and ${HOME}", "$HOME and ${HOME}"),
        ("${ENV:DBUS_TEST_A}", "${ENV:DBUS_TEST_A}"),
        ("costs 5$", "costs 5$"),
    ],
)
def test_a_value(env, tmp_path, value, expected):
    (tmp_path / "secret").write_text("s3cret\n")
    (tmp_path / "two-lines").write_text("s3cret\n\n")
    (tmp_path / "crlf").write_text("s3cret\r\n", newline="")
    (tmp_path / "bare").write_text("s3cret")
    assert resolve_refs({"k": value}, tmp_path) == {"k": expected}


def test_nested_in_mappings_and_lists_keys_and_other_types_untouched(env, tmp_path):
    node = {
        "${env:DBUS_TEST_A}": 1,
        "capture": {"include": ["shop.*", "${env:DBUS_TEST_A}.t"]},
        "n": [1, 2.5, None, True, [{"deep": "${env:DBUS_TEST_A}"}]],
    }
    assert resolve_refs(node, tmp_path) == {
        "${env:DBUS_TEST_A}": 1,
        "capture": {"include": ["shop.*", "a-value.t"]},
        "n": [1, 2.5, None, True, [{"deep": "a-value"}]],
    }


@pytest.mark.parametrize(
    ("value", "key", "message"),
    [
        (
            "${env:DBUS_TEST_UNSET}",
            "a.b[1].c",
            "${env:DBUS_TEST_UNSET}: environment variable DBUS_TEST_UNSET is not set",
        ),
        ("x${file:nope}", "a.b[1].c", "${file:nope}: cannot read {tmp}/nope: No such file or directory"),
        ("${file:/}", "a.b[1].c", "${file:/}: cannot read /: Is a directory"),
        ("${env:1BAD}", "a.b[1].c", "${env:1BAD}: '1BAD' is not an environment variable name"),
        ("${env:DBUS_TEST_A", "a.b[1].c", "'${env:DBUS_TEST_A' is missing its closing '}'"),
    ],
)
def test_errors_name_the_key_and_the_variable_or_file(env, tmp_path, value, key, message):
    with pytest.raises(ConfigError) as e:
        resolve_refs({"a": {"b": ["ok", {"c": value}]}}, tmp_path)
    assert str(e.value) == f"{key}: {message.replace('{tmp}', str(tmp_path))}"


def _config(tmp_path: Path, mutate) -> Path:
    raw = yaml.safe_load(DEFAULT_CONFIG.read_text())
    mutate(raw)
    path = tmp_path / "dbus.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def _secrets(raw):
    raw["endpoints"]["meta_store"]["url"] = "mysql+pymysql://dbus:${file:meta-password}@db:3306/dbus"
    raw["endpoints"]["influxdb"]["token"] = "${env:DBUS_TEST_TOKEN}"
    mysql = raw["sources"]["demo"]["mysql"]
    mysql["password"] = "${env:DBUS_TEST_REPL}"
    mysql["port"] = "${env:DBUS_TEST_PORT}"  # a number from the environment, converted as if written


def test_load_config_fills_secrets_in_and_masks_them(tmp_path, monkeypatch):
    monkeypatch.setenv("DBUS_TEST_TOKEN", "tok-SECRET-1")
    monkeypatch.setenv("DBUS_TEST_REPL", "repl-SECRET-2")
    monkeypatch.setenv("DBUS_TEST_PORT", "23306")
    (tmp_path / "meta-password").write_text("meta-SECRET-3\n")
    cfg = load_config(_config(tmp_path, _secrets))
    demo = cfg.source("demo").mysql
    assert demo.password.get_secret_value() == "repl-SECRET-2"
    assert demo.port == 23306
    assert cfg.endpoints.influxdb.token.get_secret_value() == "tok-SECRET-1"
    assert (
        cfg.endpoints.meta_store.url.get_secret_value() == "mysql+pymysql://dbus:meta-SECRET-3@db:3306/dbus"
    )
    assert "SECRET" not in repr(cfg) and "SECRET" not in str(cfg)


def test_load_config_error_names_file_key_and_variable_not_a_value(tmp_path, monkeypatch):
    monkeypatch.setenv("DBUS_TEST_TOKEN", "tok-SECRET-1")
    monkeypatch.setenv("DBUS_TEST_REPL", "repl-SECRET-2")
    monkeypatch.delenv("DBUS_TEST_PORT", raising=False)
    (tmp_path / "meta-password").write_text("meta-SECRET-3\n")
    path = _config(tmp_path, _secrets)
    with pytest.raises(ConfigError) as e:
        load_config(path)
    assert str(e.value) == (
        f"{path}: sources.demo.mysql.port: ${{env:DBUS_TEST_PORT}}: "
        "environment variable DBUS_TEST_PORT is not set"
    )


def test_the_shipped_masking_regex_with_dollar_loads_unchanged():
    cfg = load_config(DEFAULT_CONFIG)
    phone = cfg.source("demo").masking["shop.customers"]["phone"]
    assert phone.pattern == r"^(\+?\d{2}-?)?(\d{3})\d{4}(\d{4})$"
