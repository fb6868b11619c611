"""No test module imports another test module.

What two tests share lives in a module that is not a test: tests/integration/helpers.py (wait_until,
receivers, the heartbeat source), a named workload (tests/integration/every_type.py, dashboards.py), or a
golden file under tests/golden/. Deleting or renaming a test file then breaks no other test.
"""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]

# Unit tests that still share fixtures through another test module; each is to move into a module that is
# not a test. The list may only shrink: a new import of a test module fails below.
PENDING: set[tuple[str, str]] = set()


def imported_modules(path: Path) -> set[str]:
    """Top-level names of every module ``path`` imports, at any depth (imports inside functions too)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


def imports_of_test_modules() -> list[tuple[str, str]]:
    return sorted(
        (str(path.relative_to(TESTS)), name)
        for path in TESTS.rglob("test_*.py")
        for name in imported_modules(path)
        if name.startswith("test_")
    )


def test_no_test_module_imports_another():
    found = set(imports_of_test_modules())
    assert found - PENDING == set(), "import what tests share from a module that is not a test"


def test_the_check_sees_an_import_inside_a_function(tmp_path):
    sample = tmp_path / "test_sample.py"
    sample.write_text("def test_x():\n    from test_other import thing\n    import test_more.sub\n")
    assert imported_modules(sample) == {"test_other", "test_more"}


def test_test_modules_have_names_of_their_own():
    """tests/ has no __init__.py: pytest imports each test module by its file name, and two files of one
    name in two folders stop the run with an import file mismatch (it did: the unit and the integration
    test_client_consumer.py)."""
    seen: dict[str, Path] = {}
    for path in sorted(TESTS.rglob("*.py")):
        other = seen.setdefault(path.name, path)
        assert other == path or path.name in ("conftest.py", "__init__.py"), (
            f"{path.relative_to(TESTS)} and {other.relative_to(TESTS)}: one module name, two files"
        )
