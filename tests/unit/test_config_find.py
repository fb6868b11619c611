"""Which configuration file is read: --config, else $DBUS_CONFIG, else ./conf/dbus.yaml, else the source
checkout's conf/dbus.yaml; the error names every place searched. The sample a wheel ships is conf/dbus.yaml.
"""

from pathlib import Path

import pytest

from cli import main as dbus
from dbuslib import config
from dbuslib.config import DEFAULT_CONFIG, SAMPLE_CONFIG, find_config, load_config
from dbuslib.errors import ConfigError


@pytest.fixture
def places(tmp_path, monkeypatch):
    """An empty working directory, $DBUS_CONFIG unset; returns a function writing a file under it."""
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    monkeypatch.delenv("DBUS_CONFIG", raising=False)

    def put(relative: str) -> Path:
        path = tmp_path / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(DEFAULT_CONFIG.read_text())
        return path

    return put


def test_the_order(places, monkeypatch):
    explicit, env, local = places("given.yaml"), places("env.yaml"), places("work/conf/dbus.yaml")
    monkeypatch.setenv("DBUS_CONFIG", str(env))
    assert find_config(str(explicit)) == explicit
    assert find_config(None) == env
    monkeypatch.setenv("DBUS_CONFIG", "")  # set but empty: as if unset
    assert find_config(None) == local
    local.unlink()
    assert find_config(None) == DEFAULT_CONFIG  # this test runs in a source checkout


@pytest.mark.parametrize("given", ["missing.yaml", None])
def test_given_and_env_are_taken_as_given_missing_or_not(places, monkeypatch, given):
    places("work/conf/dbus.yaml")  # not looked at: the first two are never passed over
    monkeypatch.setenv("DBUS_CONFIG", "/nowhere/dbus.yaml")
    with pytest.raises(ConfigError) as e:
        load_config(given)
    expected = "missing.yaml: no such configuration file" if given else "/nowhere/dbus.yaml: no such "
    assert expected in str(e.value)
    assert ("from $DBUS_CONFIG" in str(e.value)) == (given is None)


def test_load_config_uses_the_search(places):
    local = places("work/conf/dbus.yaml")
    assert load_config().path == local.resolve()


def test_installed_from_a_package_and_nothing_found_names_every_place(places, tmp_path, monkeypatch):
    monkeypatch.setattr(config, "CHECKOUT", tmp_path / "site-packages")  # no pyproject.toml there
    with pytest.raises(ConfigError) as e:
        find_config(None)
    text = str(e.value)
    for place in (
        "--config FILE (not given)",
        "$DBUS_CONFIG (not set)",
        f"{tmp_path / 'work' / 'conf' / 'dbus.yaml'} (no such file)",
        "the source checkout's conf/dbus.yaml (dbus is installed from a package)",
        "dbus config sample",
    ):
        assert place in text


def test_a_checkout_without_its_config_names_it(places, tmp_path, monkeypatch):
    checkout = tmp_path / "checkout"
    (checkout / "pyproject.toml").parent.mkdir()
    (checkout / "pyproject.toml").write_text("")
    monkeypatch.setattr(config, "CHECKOUT", checkout)
    monkeypatch.setattr(config, "DEFAULT_CONFIG", checkout / "conf" / "dbus.yaml")
    with pytest.raises(ConfigError, match=f"not {checkout / 'conf' / 'dbus.yaml'} \\(no such file\\)"):
        find_config(None)


def test_the_sample_is_the_checkout_config():
    assert SAMPLE_CONFIG.read_text() == DEFAULT_CONFIG.read_text(), (
        "dbuslib/conf/dbus.example.yaml (the sample a wheel ships) differs from conf/dbus.yaml: "
        "cp conf/dbus.yaml dbuslib/conf/dbus.example.yaml"
    )


def test_dbus_config_check_prints_the_file_found(places, monkeypatch, capsys):
    env = places("env.yaml")
    monkeypatch.setenv("DBUS_CONFIG", str(env))
    assert dbus.main(["config", "check"]) == 0
    assert capsys.readouterr().out.startswith(f"{env.resolve()}: valid\n")


def test_dbus_without_a_configuration_exits_2_naming_the_places(places, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(config, "CHECKOUT", tmp_path / "site-packages")
    assert dbus.main(["config", "check"]) == 2
    assert capsys.readouterr().err.startswith("dbus: CONFIG_INVALID: no configuration file: not --config")


def test_dbus_config_sample_needs_no_configuration(places, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(config, "CHECKOUT", tmp_path / "site-packages")
    assert dbus.main(["config", "sample"]) == 0
    assert capsys.readouterr().out == DEFAULT_CONFIG.read_text()


def test_dbus_stack_outside_a_checkout_says_so(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(dbus, "STACK_SH", tmp_path / "site-packages" / "stack" / "stack.sh")
    assert dbus.main(["stack", "status"]) == 1
    assert "dbus: STACK_DOWN: dbus stack needs a source checkout" in capsys.readouterr().err
