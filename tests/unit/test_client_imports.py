"""The consumer client (``dbusclient``) is a library an application imports: none of its modules loads
Spark, the console's web stack or the extractor's binlog reader, so a client-only installation (issue 32:
without pyspark and Flask) needs none of them.

The base requirements of pyproject.toml are the client's (``pip install 'dbus-cdc[client]'``; the bus is
the ``server`` extra): every library a DBus module the client reaches imports, at its top or inside a
function, comes with them, and each of them is one the client imports (or is named below with what needs
it). What the client reaches is what importing every dbusclient module loads, and what the modules its
functions import load (``from dbuslib import kafka`` in ``Consumer.connect``), run in a fresh interpreter.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path

from cli.extras import marker_extra

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("pyspark", "py4j", "flask", "waitress", "pandas", "pyarrow", "pymysqlreplication")
# base requirements no DBus module imports: a library of theirs loads them
LOADED_BY_LIBRARIES = {
    "lz4": "kafka-python, to read the result topics the appender compresses with lz4",
    "crc32c": "kafka-python, to check record batches' CRC32C in C",
    "psycopg": "SQLAlchemy, for the SQL sink's postgresql+psycopg:// URLs",
}

PROBE = f"""
import importlib, pkgutil, sys
import dbusclient
for m in pkgutil.iter_modules(dbusclient.__path__):
    importlib.import_module("dbusclient." + m.name)
print(",".join(m for m in {HEAVY!r} if m in sys.modules))
"""

# Every DBus module the client reaches and the third-party top-level modules they import (JSON).
REACH = """
import ast, importlib, json, pkgutil, sys
import dbusclient
OURS = ("ums", "dbuslib", "dbusclient")

def named(path):
    tree = ast.parse(open(path).read())
    typing_only = {id(n) for node in ast.walk(tree) if isinstance(node, ast.If)
                   and "TYPE_CHECKING" in ast.unparse(node.test) for n in ast.walk(node)}
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.Import):
            yield from (a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.module
            yield from (f"{node.module}.{a.name}" for a in node.names)  # a submodule, or a name in it

def ours():
    return {m: sys.modules[m].__file__ for m in list(sys.modules)
            if m.split(".")[0] in OURS and getattr(sys.modules[m], "__file__", None)}

clients = ["dbusclient." + m.name for m in pkgutil.iter_modules(dbusclient.__path__)]
for name in clients:
    importlib.import_module(name)
for name in clients:  # what the client's functions import
    for target in named(sys.modules[name].__file__):
        if target.split(".")[0] in OURS and importlib.util.find_spec(target.rpartition(".")[0] or target):
            try:
                importlib.import_module(target)
            except ModuleNotFoundError:  # a name in a module, not a submodule
                pass
third = {}
for module, path in ours().items():
    for target in named(path):
        top = target.split(".")[0]
        if top not in OURS and top not in sys.stdlib_module_names:
            third.setdefault(top, set()).add(module)
print(json.dumps({"modules": sorted(ours()), "third": {k: sorted(v) for k, v in third.items()}}))
"""


def test_importing_every_client_module_loads_no_spark_web_or_binlog_reader():
    done = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=120, check=True, cwd=ROOT
    )
    assert done.stdout.strip() == "", f"dbusclient imports {done.stdout.strip()}"


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _requirement(text: str) -> tuple[str, set[str]]:
    """``confluent-kafka[schemaregistry]==2.16.1; python_version > "3"`` -> (its name, its extras)."""
    m = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[([^\]]*)\])?", text)
    assert m, text
    return _norm(m.group(1)), {_norm(e) for e in (m.group(2) or "").split(",") if e.strip()}


def with_their_requirements(requirements: list[str]) -> set[str]:
    """The distributions ``requirements`` name and every one they require (as installed here), normalised."""
    found: set[str] = set()
    todo = [_requirement(r) for r in requirements]
    while todo:
        name, extras = todo.pop()
        if name in found:
            continue
        found.add(name)
        try:
            lines = metadata.requires(name) or []
        except metadata.PackageNotFoundError:  # not installed here: its environment marker said so
            continue
        for line in lines:
            extra = marker_extra(line)
            if extra is None or _norm(extra) in extras:
                todo.append(_requirement(line))
    return found


def client_reach() -> dict:
    done = subprocess.run(
        [sys.executable, "-c", REACH], capture_output=True, text=True, timeout=120, check=True, cwd=ROOT
    )
    return json.loads(done.stdout)


def test_every_library_the_client_imports_comes_with_the_base_requirements():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    base = with_their_requirements(project["dependencies"])
    reach = client_reach()
    assert "dbuslib.kafka" in reach["modules"] and "dbuslib.registry" in reach["modules"], reach["modules"]
    owners = metadata.packages_distributions()
    outside = {
        top: sorted(importers)
        for top, importers in reach["third"].items()
        if not {_norm(d) for d in owners.get(top, [])} & base
    }
    assert outside == {}, f"imported by the client's modules, not in pyproject's base requirements: {outside}"


def test_each_base_requirement_is_one_the_client_imports():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    base = {_requirement(r)[0] for r in project["dependencies"]}
    owners = metadata.packages_distributions()
    imported = {_norm(d) for top in client_reach()["third"] for d in owners.get(top, [])}
    unused = base - imported - set(LOADED_BY_LIBRARIES)
    assert unused == set(), f"base requirements the client does not import (the server extra's?): {unused}"


def test_the_client_extra_adds_nothing_and_the_server_extra_repeats_no_base_requirement():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    assert extras["client"] == []
    base = {_requirement(r)[0] for r in project["dependencies"]}
    assert base & {_requirement(r)[0] for r in extras["server"]} == set()
