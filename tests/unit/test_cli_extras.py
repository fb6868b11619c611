"""cli/extras.py: a ``dbus`` command that needs the server extra (pyproject.toml) stops at once without it,
with one line naming the install and exit 7; ``dbus --help`` and the commands of the base install (the
consumer client's) run without it.

The base install is played here by a fresh interpreter in which every module of the server extra's
libraries (and of what only they require) fails to import; tests/integration/test_pip_install.py installs
the real one.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path

import pytest

from cli import extras
from cli import main as dbus

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "conf" / "dbus.yaml"


@pytest.mark.parametrize(
    ("requires", "extra", "names"),
    [
        (['pyspark==4.2.0; extra == "server"', "pyyaml==6.0.3"], "server", ["pyspark"]),
        (['pyspark==4.2.0; extra == "server"', 'pytest==9.2.0; extra == "test"'], "test", ["pytest"]),
        (["confluent-kafka[schemaregistry]==2.16.1", "kazoo==2.11.0"], "server", []),
        (["Flask-Login==0.6.3 ; extra=='server'"], "server", ["Flask-Login"]),
        (['regex==2026.11.15; python_version >= "3.11" and extra == "server"'], "server", ["regex"]),
        (['serverless==1; extra == "server2"', 'x==1; extra == "client"'], "server", []),
        ([], "server", []),
    ],
)
def test_the_requirements_only_an_extra_brings(requires, extra, names):
    assert extras.extra_requirements(requires, extra) == names


def test_nothing_is_missing_where_dbus_is_no_installed_distribution():
    assert extras.missing(dist="no-such-distribution-of-dbus") == []


def test_what_is_missing_is_read_from_the_distribution_s_own_metadata():
    # psycopg's own extras (pinned in pyproject.toml): "binary" brings psycopg-binary, installed here
    assert extras.missing("binary", dist="psycopg") == []
    assert extras.missing("binary", is_installed=lambda name: False, dist="psycopg") == ["psycopg-binary"]


def test_the_error_names_the_command_the_libraries_and_the_install():
    err = extras.error("submit", ["pyspark", "flask"])
    assert err.code == "MISSING_EXTRA" and err.exit_code == 7
    assert str(err) == (
        "dbus submit needs the server extra of dbus-cdc (not installed: pyspark, flask): "
        "pip install 'dbus-cdc[server]'"
    )
    assert "no module 'pyspark.sql'" in str(extras.error("replicate", ["pyspark"], "pyspark.sql"))


@pytest.fixture
def without_server(monkeypatch):
    """The server extra's pyspark and flask not installed, as cli/extras.py reads it."""
    monkeypatch.setattr(extras, "missing", lambda *a, **k: ["pyspark", "flask"])


@pytest.mark.parametrize(
    "argv",
    [
        ["submit", "dispatcher", "--source", "demo"],
        ["console"],
        ["extractor", "run", "--source", "demo"],
        ["status", "--source", "demo"],
        ["spark", "jars"],
        ["demo"],
    ],
)
def test_a_command_of_the_server_stops_before_it_runs(argv, without_server, monkeypatch, capsys):
    monkeypatch.setattr(dbus, "find_config", lambda given: pytest.fail("looked for a configuration first"))
    assert dbus.main(["--config", str(CONFIG), *argv]) == 7
    err = capsys.readouterr().err
    assert err == (
        f"dbus: MISSING_EXTRA: dbus {argv[0]} needs the server extra of dbus-cdc (not installed: pyspark, "
        "flask): pip install 'dbus-cdc[server]'\n"
    )


def test_the_client_s_commands_run_without_it(without_server, capsys):
    assert dbus.main(["--config", str(CONFIG), "config", "check"]) == 0
    assert capsys.readouterr().out.startswith(f"{CONFIG}: valid\n")
    assert dbus.main(["config", "sample"]) == 0
    assert capsys.readouterr().out == CONFIG.read_text()


def commands(parser: argparse.ArgumentParser, words: tuple[str, ...] = ()):
    """(words, handler) of each command ``parser`` runs."""
    handler = parser.get_default("handler")
    if handler is not None:
        yield words, handler
        return
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from commands(sub, (*words, name))


def test_the_commands_of_the_base_install_are_the_client_s_and_the_configuration_s():
    """docs/errors.md (MISSING_EXTRA) names them; a new command needs the server extra unless marked."""
    found = dict(commands(dbus._parser()))
    assert len(found) > 30
    assert {" ".join(words) for words, handler in found.items() if dbus.without_server(handler)} == {
        "stack",
        "config check",
        "config sample",
        "topics create",
        "topics list",
        "replicate",
    }


def needs_a_library(args):
    """A command's handler marked ``without_server`` that imports what is not installed."""
    import module_of_no_install  # noqa: F401

    return 0


needs_a_library.without_server = True  # type: ignore[attr-defined]


def test_a_client_command_that_imports_the_extra_names_the_module(without_server, monkeypatch, capsys):
    monkeypatch.setattr(dbus, "_config_sample", needs_a_library)  # what `dbus config sample` runs
    assert dbus.main(["config", "sample"]) == 7
    assert capsys.readouterr().err == (
        "dbus: MISSING_EXTRA: dbus config needs the server extra of dbus-cdc (not installed: pyspark, flask; "
        "no module 'module_of_no_install'): pip install 'dbus-cdc[server]'\n"
    )


def test_a_missing_module_is_raised_as_it_is_when_the_server_extra_is_whole(monkeypatch):
    monkeypatch.setattr(extras, "missing", lambda *a, **k: [])
    monkeypatch.setattr(dbus, "_config_sample", needs_a_library)
    with pytest.raises(ModuleNotFoundError):
        dbus.main(["config", "sample"])


# ---------------------------------------------------------------- the base install, played


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _closure(requirements: list[str]) -> set[str]:
    """The distributions named and every one they require (with the extras asked for), as installed."""
    found: set[str] = set()
    todo = list(requirements)
    while todo:
        m = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[([^\]]*)\])?", todo.pop())
        assert m
        name, asked = _norm(m.group(1)), {_norm(e) for e in (m.group(2) or "").split(",") if e.strip()}
        if name in found:
            continue
        found.add(name)
        try:
            lines = metadata.requires(name) or []
        except metadata.PackageNotFoundError:
            continue
        for line in lines:
            extra = re.search(r"""extra\s*==\s*['"]([^'"]+)['"]""", line)
            if extra is None or _norm(extra.group(1)) in asked:
                todo.append(line)
    return found


def server_only_modules() -> list[str]:
    """The top-level modules of the server extra's libraries and of what only they require."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    only = _closure(project["optional-dependencies"]["server"]) - _closure(project["dependencies"])
    owners = metadata.packages_distributions()
    return sorted(m for m, dists in owners.items() if {_norm(d) for d in dists} & only)


BASE_INSTALL = """
import importlib.abc, json, sys
BLOCKED = set(json.loads(sys.argv[1]))

class NotInstalled(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, NotInstalled())
from cli.main import main
try:
    code = main(sys.argv[2:])
except SystemExit as e:
    code = e.code
print(json.dumps({"code": code, "loaded": sorted(m for m in BLOCKED if m in sys.modules)}))
"""


def on_the_base_install(*argv: str) -> tuple[int, str, str]:
    done = subprocess.run(
        [sys.executable, "-c", BASE_INSTALL, json.dumps(server_only_modules()), *argv],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr
    *out, last = done.stdout.splitlines()
    result = json.loads(last)
    assert result["loaded"] == []
    return result["code"], "\n".join(out), done.stderr


def test_the_played_base_install_lacks_spark_flask_and_the_binlog_reader():
    blocked = set(server_only_modules())
    assert {"pyspark", "py4j", "flask", "werkzeug", "waitress", "pandas", "pymysqlreplication"} <= blocked
    assert not blocked & {"kafka", "pydantic", "sqlalchemy", "kazoo", "yaml", "orjson", "confluent_kafka"}


@pytest.mark.parametrize(
    "argv",
    [
        ["--help"],
        ["submit", "--help"],
        ["extractor", "run", "--help"],
        ["console", "--help"],
        ["replicate", "--help"],
    ],
)
def test_help_of_every_level_without_the_server_extra(argv):
    code, out, err = on_the_base_install(*argv)
    assert code == 0, err
    assert out.startswith("usage: dbus"), out


def test_the_client_s_commands_run_on_the_base_install():
    code, out, err = on_the_base_install("--config", str(CONFIG), "config", "check")
    assert code == 0, err
    assert out.startswith(f"{CONFIG}: valid\n"), out
    code, out, err = on_the_base_install("config", "sample")
    assert code == 0 and out == CONFIG.read_text().rstrip("\n"), err
