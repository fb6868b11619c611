"""The golden log-rule cases, tests/golden/logrules/*.yaml: one file per operator, plus group_example.yaml.

Shared by the Python reference's tests (test_logrules_golden.py, through ``logprocessor.operators``) and the
JVM engine's (test_logrules_jvm.py, the engine the processor runs): both must give every case's ``out``. A
file is a YAML list of cases, each read as documentation, input row -> parameters -> output row::

    - name: keeps the rows whose column 1 contains ERROR     # unique in its file
      spec: "§3.4 example 1"       # where it comes from: a § of dbus_log_spec.md, or "edge"
      rules:                       # applied in order; each {operator: [grammar objects, the original's keys]}
        - filter: [{ruleScope: "1", ruleOperate: "==", ruleType: string, ruleParamter: ERROR}]
      in: [["a", "ERROR x"], ["b", "INFO y"], ["c"]]
      out: [["a", "ERROR x"]]      # the rows after the rules; a rule that leaves none ends the run: []

Instead of ``out``, a case has ``error:`` (a substring of the line error's reason: the rules run and break on
this input) or ``refused:`` (a substring of the ``RuleError`` that publishing these rules gives,
``grammar.check_rule``/``check_group``; they never run). Optional keys: ``differs:`` (only for a
documented fix: what the original did instead, docs/logs.md), ``steps:`` (the rows after each rule,
``operators.steps``) and ``columns:`` (the saveAs output columns as ``[name, UMS type]`` pairs). After
saveAs a DOUBLE value is a YAML float.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from logprocessor.grammar import Column, Entry, Rule, entry_from_json

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "logrules"
_KEYS = {"name", "spec", "rules", "in", "out", "error", "refused", "differs", "steps", "columns"}
_OUTCOMES = ("out", "error", "refused")


@dataclass(frozen=True)
class Case:
    """One golden case; ``file`` is the file's stem (the operator, or group_example)."""

    file: str
    name: str
    spec: str
    rules: tuple[Rule, ...]
    rows: list[list[Any]]
    out: list[list[Any]] | None = None
    error: str | None = None
    refused: str | None = None
    differs: str | None = None
    steps: list[list[list[Any]]] | None = None
    columns: tuple[Column, ...] | None = None

    @property
    def id(self) -> str:
        return f"{self.file}: {self.name}"


def case_files() -> list[Path]:
    return sorted(GOLDEN.glob("*.yaml"))


def _rule(obj: Any, where: str) -> Rule:
    if not isinstance(obj, dict) or len(obj) != 1:
        raise ValueError(f"{where}: a rule is {{operator: [grammar objects]}}, got {obj!r}")
    ((op, grammar),) = obj.items()
    if not isinstance(grammar, list):
        raise ValueError(f"{where}: {op}'s grammar must be a list")
    return Rule(op, tuple(Entry() if g is None else entry_from_json(g) for g in grammar))


def _case(file: str, raw: Any) -> Case:
    where = f"{file}.yaml: {raw.get('name') if isinstance(raw, dict) else raw!r}"
    if not isinstance(raw, dict) or not {"name", "spec", "rules", "in"} <= raw.keys() or raw.keys() - _KEYS:
        raise ValueError(f"{where}: a case has name, spec, rules, in, one of {_OUTCOMES}, and only {_KEYS}")
    if sum(k in raw for k in _OUTCOMES) != 1:
        raise ValueError(f"{where}: exactly one of {_OUTCOMES}")
    columns = raw.get("columns")
    return Case(
        file=file,
        name=str(raw["name"]),
        spec=str(raw["spec"]),
        rules=tuple(_rule(r, where) for r in raw["rules"]),
        rows=raw["in"],
        out=raw.get("out"),
        error=raw.get("error"),
        refused=raw.get("refused"),
        differs=raw.get("differs"),
        steps=raw.get("steps"),
        columns=None if columns is None else tuple(Column(n, t) for n, t in columns),
    )


def load_file(path: Path) -> list[Case]:
    cases = [_case(path.stem, raw) for raw in yaml.safe_load(path.read_text(encoding="utf-8")) or []]
    names = [c.name for c in cases]
    dupes = {n for n in names if names.count(n) > 1}
    if dupes:
        raise ValueError(f"{path.name}: case names repeat: {sorted(dupes)}")
    return cases


def load_cases() -> list[Case]:
    """Every case of every file, file by file in name order."""
    return [case for path in case_files() for case in load_file(path)]
