"""The five floors (CONTRIBUTING.md): a package imports only the floors below it, and no stage imports
another.

    5  cli/                                   the `dbus` command, status, demo, stage launcher
    4  extractor/ dispatcher/ appender/ fullpuller/ heartbeat/ logprocessor/    the stages
    3  binlog/                                the raw-event contract and what reads it
    3  dbusclient/                            the consumer client (imports ums and dbuslib only)
    2  dbuslib/                               config, errors, edges, shared stage runtime
    1  ums/                                   the message format

Read from the source with `ast`, so every import counts: top-level, inside functions, `from x import y`.
`bench/` sits beside `cli/` on the top floor (it drives stages to measure them), and so does `console/`
(the web console, over the readers of `dbus status`).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
STAGES = ("extractor", "dispatcher", "appender", "fullpuller", "heartbeat", "logprocessor")
FLOOR = {
    "ums": 1,
    "dbuslib": 2,
    "binlog": 3,
    "dbusclient": 3,
    **dict.fromkeys(STAGES, 4),
    "cli": 5,
    "bench": 5,
    "console": 5,
}


def imports_of(path: Path) -> list[tuple[int, str]]:
    """(line, top-level package) of every absolute import in one file."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name.split(".")[0]) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module.split(".")[0]))
    return found


def violations(root: Path = ROOT) -> list[str]:
    """Every import that runs up a floor, or from one stage into another, as `file:line: a -> b`."""
    bad = []
    for package, floor in FLOOR.items():
        for path in sorted((root / package).rglob("*.py")):
            for line, target in imports_of(path):
                if target not in FLOOR or target == package:
                    continue
                up = FLOOR[target] > floor
                sideways = package in STAGES and target in STAGES
                if up or sideways:
                    bad.append(f"{path.relative_to(root)}:{line}: {package} -> {target}")
    return bad


def test_no_import_runs_up_a_floor_or_across_stages() -> None:
    assert violations() == []


def test_the_client_imports_only_ums_and_dbuslib() -> None:
    found = {
        f"{path.relative_to(ROOT)}:{line}: dbusclient -> {target}"
        for path in sorted((ROOT / "dbusclient").rglob("*.py"))
        for line, target in imports_of(path)
        if target in FLOOR and target not in ("ums", "dbuslib", "dbusclient")
    }
    assert found == set()


@pytest.mark.parametrize(
    ("package", "module", "expect"),
    [
        ("dbuslib", "from appender import rules", "dbuslib -> appender"),
        ("ums", "import dbuslib.config", "ums -> dbuslib"),
        ("binlog", "from cli import main", "binlog -> cli"),
        ("heartbeat", "from extractor.leader import x", "heartbeat -> extractor"),
    ],
)
def test_a_forbidden_import_is_found(tmp_path: Path, package: str, module: str, expect: str) -> None:
    (tmp_path / package).mkdir()
    (tmp_path / package / "m.py").write_text(f"def f():\n    {module}\n")
    assert violations(tmp_path) == [f"{package}/m.py:2: {expect}"]
