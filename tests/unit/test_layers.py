"""The floors (CONTRIBUTING.md): a package imports only the floors below it, and no stage imports
another.

    7  cli/                                   the `dbus` command, status screen, demo, stage launcher
    6  console/                               the web console
    5  status/                                what `dbus status` and the console read (status/readers.py)
    4  extractor/ dispatcher/ appender/ fullpuller/ heartbeat/ logprocessor/    the stages
    3  binlog/                                the raw-event contract and what reads it
    3  dbusclient/                            the consumer client (imports ums and dbuslib only)
    2  dbuslib/                               config, errors, edges, shared stage runtime
    1  ums/                                   the message format

Read from the source with `ast`, so every import counts: top-level, inside functions, `from x import y`.
`bench/` sits beside `cli/` on the top floor (it drives stages to measure them); `console/` is below them
(`dbus console` starts it), over the readers it shares with `dbus status`.
"""

from __future__ import annotations

import ast
import re
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
    "status": 5,
    "console": 6,
    "cli": 7,
    "bench": 7,
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


# ---------------------------------------------------------------- the Java floors (CONTRIBUTING.md)

JAVA_SHARED = "binlog"  # binlog/jvm/src: the rows decoder, the sidecar protocol, planned stops
JAVA_STAGES = ("appender", "dispatcher", "logprocessor")  # each with its own <stage>/jvm/src
JVM_NAME = re.compile(r"dbus\.jvm\.((?:logrules\.)?[A-Z]\w*)")


def java_classes(root: Path, floor: str) -> dict[str, Path]:
    """Top-level class name (``logrules.Engine`` for a subpackage's) -> its file, of one floor's Java."""
    src = root / floor / "jvm" / "src" / "dbus" / "jvm"
    return {".".join(p.relative_to(src).with_suffix("").parts): p for p in sorted(src.rglob("*.java"))}


def java_violations(root: Path = ROOT) -> list[str]:
    """A stage's Java naming a class of another stage, the shared floor's naming a stage's, and a package's
    Python naming (``dbus.jvm.X``, through py4j or a UDF's class name) a class of a stage it is not: as
    ``file: a -> b (Class)``."""
    owner = {name: floor for floor in (JAVA_SHARED, *JAVA_STAGES) for name in java_classes(root, floor)}
    bad = []
    for floor in (JAVA_SHARED, *JAVA_STAGES):
        for name, path in java_classes(root, floor).items():
            code = re.sub(r"//[^\n]*|/\*.*?\*/", "", path.read_text(), flags=re.S)  # comments may name any
            for other, home in owner.items():
                if home in (floor, JAVA_SHARED) or other == name:
                    continue
                if re.search(rf"\b{re.escape(other.rsplit('.', 1)[-1])}\b", code):
                    bad.append(f"{path.relative_to(root)}: {floor} -> {home} ({other})")
    for package, floor in FLOOR.items():
        if floor > 4:
            continue  # cli, bench and console may name any class
        for path in sorted((root / package).rglob("*.py")):
            for name in sorted(set(JVM_NAME.findall(path.read_text()))):
                home = owner.get(name)
                if home is not None and home not in (package, JAVA_SHARED):
                    bad.append(f"{path.relative_to(root)}: {package} -> {home} ({name})")
    return bad


def test_no_java_class_is_used_across_stages_or_up_a_floor() -> None:
    assert java_violations() == []


def test_a_stage_naming_another_stage_s_class_is_found(tmp_path: Path) -> None:
    for floor, cls, body in (
        ("binlog", "Sidecar", ""),
        ("appender", "AppendUdf", "static int pairs() { return 0; }"),
        ("dispatcher", "DispatchUdf", "int x = AppendUdf.pairs(); // Sidecar is shared"),
    ):
        src = tmp_path / floor / "jvm" / "src" / "dbus" / "jvm"
        src.mkdir(parents=True)
        (src / f"{cls}.java").write_text(f"package dbus.jvm;\nclass {cls} {{ {body} }}\n")
    (tmp_path / "logprocessor" / "jvm" / "src" / "dbus" / "jvm").mkdir(parents=True)
    (tmp_path / "dbuslib").mkdir()
    (tmp_path / "dbuslib" / "m.py").write_text('A = "dbus.jvm.AppendUdf"\nS = "dbus.jvm.Sidecar"\n')
    assert java_violations(tmp_path) == [
        "dispatcher/jvm/src/dbus/jvm/DispatchUdf.java: dispatcher -> appender (AppendUdf)",
        "dbuslib/m.py: dbuslib -> appender (AppendUdf)",
    ]


# ---------------------------------------------------------------- the drawn import graph (docs/imports.md)

IMPORTS_DOC = ROOT / "docs" / "imports.md"


def package_edges(root: Path = ROOT) -> dict[tuple[str, str], int]:
    """(importer, imported) -> how many import statements, between the packages of FLOOR."""
    edges: dict[tuple[str, str], int] = {}
    for package in FLOOR:
        for path in sorted((root / package).rglob("*.py")):
            for _, target in imports_of(path):
                if target in FLOOR and target != package:
                    edges[(package, target)] = edges.get((package, target), 0) + 1
    return edges


def cycles(edges: dict[tuple[str, str], int]) -> list[list[str]]:
    """The cycles of the graph, each as the packages on it (depth-first search: each edge back to a package
    on the current path closes one)."""
    out: list[list[str]] = []
    done: set[str] = set()

    def visit(node: str, path: list[str]) -> None:
        path = [*path, node]
        for a, b in sorted(edges):
            if a != node:
                continue
            if b in path:
                out.append([*path[path.index(b) :], b])
            elif b not in done:
                visit(b, path)
        done.add(node)

    for node in sorted({p for edge in edges for p in edge}):
        if node not in done:
            visit(node, [])
    return out


def graph_mermaid(edges: dict[tuple[str, str], int]) -> str:
    """The graph as Mermaid: one box per floor, bottom to top, an arrow per importing package pair
    labelled with its number of import statements."""
    lines = ["flowchart BT"]
    for floor in sorted(set(FLOOR.values())):
        members = [p for p, f in FLOOR.items() if f == floor]
        lines.append(f"  subgraph floor{floor} [floor {floor}]")
        lines += [f"    {p}" for p in members]
        lines.append("  end")
    lines += [f"  {a} -->|{n}| {b}" for (a, b), n in sorted(edges.items())]
    return "\n".join(lines) + "\n"


def test_the_drawn_import_graph_is_the_code_s_and_has_no_arrow_up_and_no_cycle() -> None:
    """docs/imports.md draws the graph the code has (``DBUS_GOLDEN_WRITE=1`` rewrites it; then read the
    diff): no arrow runs up a floor or between two stages, and no packages import each other in a cycle."""
    import os

    edges = package_edges()
    assert [(a, b) for a, b in edges if FLOOR[b] > FLOOR[a] or (a in STAGES and b in STAGES)] == []
    assert cycles(edges) == []
    drawn = graph_mermaid(edges)
    text = IMPORTS_DOC.read_text()
    start, end = (
        text.index("```mermaid\n") + len("```mermaid\n"),
        text.index("```", text.index("```mermaid\n") + 3),
    )
    if os.environ.get("DBUS_GOLDEN_WRITE") == "1":
        IMPORTS_DOC.write_text(text[:start] + drawn + text[end:])
        text = IMPORTS_DOC.read_text()
    assert text[start : start + len(drawn)] == drawn and text[start + len(drawn) :].startswith("```"), (
        f"{IMPORTS_DOC} differs from the code's import graph; DBUS_GOLDEN_WRITE=1 rewrites it"
    )


def test_a_cycle_is_found() -> None:
    assert cycles({("a", "b"): 1, ("b", "c"): 1, ("c", "a"): 1}) != []
    assert cycles({("a", "b"): 1, ("b", "c"): 1}) == []
