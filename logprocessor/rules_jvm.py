"""Log rules run by the JVM: the rule set as JSON for ``dbus.jvm.LogRulesUdf`` (logprocessor/jvm, logrules/).

The log processor's rules step is one call of a Java UDF per record, over the record's lines
(docs/logs.md, How rules run on Spark): ``dbus_log_rules(ruleset, lines)`` gives, per line, what
(``LINE_TYPE``) the rows each table took (``index``: the row's position among that table's rows for the
line), the line errors naming table, group, rule position and operator as ``logprocessor.operators`` words
them, and whether no group took the line. The Java engine is the only one the processor runs; the Python
engine (``logprocessor.operators``) is its reference, the tests' oracle: tests/unit/test_logrules_jvm.py runs
every golden case through the JVM and compares it with the reference on random lines and parameters.

The engine also judges a rule set before it runs (``dbus.jvm.LogRulesCheck``): publishing (``problems``
through a ``Checker``, a JVM of its own that answers many questions for one start) and the processor's start
(``problems_in``, its Spark JVM) refuse a regex Java does not compile, naming group, rule and operator.

The rule set travels as a JSON literal of the query, parsed once per JVM (cached by its text)::

    {"multi": true, "regex_budget_ms": 100,
     "groups": [{"table": "t", "group": "g", "rules": [{"op": "split", "grammar": [{..}]}]}]}

with the active groups of every table in order, each as the processor runs it (``grammar.with_save_as``),
grammar entries in the original's keys (``Entry.to_json``). ``regex_budget_ms`` is the source's
``processor.regex_budget_ms``: each regex's run on a cell within it, or the line fails with the code
``LOG_RULE_BUDGET`` (``dbus.jvm.logrules.Budget``; logprocessor/regexbudget.py is the Python engine's).
"""

from __future__ import annotations

import atexit
import hashlib
import json
import os
import shutil
import subprocess
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dbuslib.errors import StackError
from logprocessor.grammar import Group, Rule, RuleError, TableRules, with_save_as
from logprocessor.regexbudget import DEFAULT_MS

if TYPE_CHECKING:
    from pyspark.sql import Column, SparkSession

    from dbuslib.config import DbusConfig
    from logprocessor.rules import Engine

FUNCTION, CLASS = "dbus_log_rules", "dbus.jvm.LogRulesUdf"
GROUP_FUNCTION, GROUP_CLASS = "dbus_log_group", "dbus.jvm.LogRulesGroupUdf"

ROW_TYPE = "struct<table:string,index:int,row:array<string>>"
ERROR_TYPE = "struct<table:string,error:string>"
LINE_TYPE = f"struct<rows:array<{ROW_TYPE}>,errors:array<{ERROR_TYPE}>,unmatched:boolean>"
GROUP_TYPE = "struct<rows:array<array<string>>,err:string>"


def _rules(rules: Sequence[Rule]) -> list[dict[str, object]]:
    return [{"op": r.op, "grammar": [e.to_json() for e in r.grammar]} for r in rules]


def ruleset_json(tables: Sequence[TableRules], multi_table: bool = True, budget_ms: int | None = None) -> str:
    """The rule set as ``LogRulesUdf`` reads it: every table's active groups, in order; each regex's run
    within ``budget_ms`` (None: the default, 100)."""
    groups = [
        {"table": t.table, "group": g.name, "rules": _rules(with_save_as(g).rules)}
        for t in tables
        for g in t.groups
        if g.active
    ]
    doc = {"multi": multi_table, "regex_budget_ms": budget_ms or DEFAULT_MS, "groups": groups}
    return json.dumps(doc, ensure_ascii=False, separators=(",", ":"))


def group_json(name: str, rules: Sequence[Rule], budget_ms: int | None = None) -> str:
    """One group as ``LogRulesGroupUdf`` reads it, its rules as given (no saveAs appended)."""
    doc = {"group": name, "rules": _rules(rules), "regex_budget_ms": budget_ms or DEFAULT_MS}
    return json.dumps(doc, ensure_ascii=False, separators=(",", ":"))


def register(spark: SparkSession) -> None:
    """Register ``dbus_log_rules`` and ``dbus_log_group``; the jar (``dbus-jvm.jar``) must be on the classpath
    (the stack lists it in ``spark.jars``): a missing class fails here, before the query starts."""
    spark.udf.registerJavaFunction(FUNCTION, CLASS, f"array<{LINE_TYPE}>")
    spark.udf.registerJavaFunction(GROUP_FUNCTION, GROUP_CLASS, GROUP_TYPE)


def lines_results(
    spark: SparkSession,
    lines: Column,
    tables: Sequence[TableRules],
    multi_table: bool = True,
    budget_ms: int | None = None,
) -> Column:
    """``array<LINE_TYPE>``: every line of the array column ``lines`` through the rule set, in the JVM.

    What ``dbus_log_rules(ruleset, lines)`` gives, by ``dbus.jvm.LogRulesLinesUdf``, which holds the rule set
    itself (registered as ``dbus_log_rules_<hash of the set>``): no row converts and hashes the set's text
    (measured: about 20% more lines/s). A jar without the class fails here, before the query starts."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import ArrayType, _parse_datatype_string

    from dbuslib.spark import jvm_class

    ruleset = ruleset_json(tables, multi_table, budget_ms)
    name = f"{FUNCTION}_{hashlib.sha256(ruleset.encode()).hexdigest()[:16]}"
    jvm = spark._jvm  # py4j's view of the JVM, untyped
    if jvm is None:  # pyspark sets it as the session starts
        msg = "logprocessor: the Spark session has no JVM"
        raise StackError(msg)
    cls = jvm_class(jvm, "dbus.jvm.LogRulesLinesUdf", "logprocessor")
    returns = ArrayType(_parse_datatype_string(LINE_TYPE))
    jtype = jvm.org.apache.spark.sql.types.DataType.fromJson(returns.json())
    spark._jsparkSession.udf().register(name, cls(ruleset), jtype)  # py4j
    return F.call_function(name, lines)


# ---------------------------------------------------------------- judging a rule set before it runs

CHECK_CLASS = "dbus.jvm.LogRulesCheck"


def groups_json(groups: Sequence[Group]) -> str:
    """``groups`` as one table's rule set (``ruleset_json``), each as the processor runs it."""
    return ruleset_json([TableRules("", 0, tuple(groups))])


def refuse(problems: Sequence[str]) -> None:
    """RuleError naming every problem the engine found (none: nothing)."""
    if problems:
        raise RuleError("; ".join(problems))


def problems_in(jvm: Any, ruleset: str) -> list[str]:
    """The engine's problems with ``ruleset`` in a JVM at hand (py4j's view, ``spark.sparkContext._jvm``)."""
    from dbuslib.spark import jvm_class

    return list(jvm_class(jvm, CHECK_CLASS, "logprocessor").problems(ruleset))


class Checker:
    """``dbus.jvm.LogRulesCheck`` in a JVM of its own (no Spark): a rule set per line in, its problems per
    line out. One per classpath and process (``checker``), started on first use, stopped at exit; a lock
    keeps a question and its answer together (the console serves requests on threads)."""

    def __init__(self, classpath: str) -> None:
        java = shutil.which("java") or (
            str(Path(os.environ["JAVA_HOME"], "bin", "java")) if os.environ.get("JAVA_HOME") else None
        )
        if java is None:
            msg = "the log rule engine: no java on PATH or in JAVA_HOME (a JDK 17 runs it)"
            raise StackError(msg)
        self.classpath = classpath
        self._proc = subprocess.Popen(  # java and a classpath DBus built, no shell
            [java, "-Xss8m", "-XX:TieredStopAtLevel=1", "-cp", classpath, CHECK_CLASS],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            encoding="utf-8",
        )
        self._lock = threading.Lock()

    def problems(self, ruleset: str) -> list[str]:
        with self._lock:
            proc = self._proc
            assert proc.stdin is not None and proc.stdout is not None  # PIPEs above
            try:
                proc.stdin.write(ruleset.replace("\n", " ") + "\n")
                proc.stdin.flush()
                line = proc.stdout.readline()
            except (BrokenPipeError, OSError):
                line = ""
            if not line:
                err = (proc.stderr.read() if proc.stderr and proc.poll() is not None else "").strip()
                msg = f"the log rule engine ({CHECK_CLASS}, classpath {self.classpath}) ended: {err[-1000:]}"
                raise StackError(msg)
        answer = json.loads(line)
        if "error" in answer:
            msg = f"the log rule engine cannot read the rules: {answer['error']}"
            raise RuleError(msg)
        return list(answer["problems"])

    def close(self) -> None:
        with self._lock:
            if self._proc.poll() is None:
                if self._proc.stdin:
                    self._proc.stdin.close()
                try:
                    self._proc.wait(5)
                except subprocess.TimeoutExpired:
                    self._proc.kill()


_checkers: dict[str, Checker] = {}
_checkers_lock = threading.Lock()


def classpath(cfg: DbusConfig) -> str:
    """``dbus-jvm.jar`` as the stages' jar list names it (``dbuslib.spark.jars``: StackError naming the
    fix when it is missing) and pyspark's jars (Jackson)."""
    from dbuslib import connectors
    from dbuslib.spark import JVM_JAR, jars

    mine = [j.removeprefix("file:") for j in jars(cfg) if os.path.basename(j) == JVM_JAR]
    if not mine:
        msg = f"the stages' jar list names no {JVM_JAR} (the log rule engine): run `make stack-up`"
        raise StackError(msg)
    return os.pathsep.join([mine[0], str(connectors.pyspark_jars() / "*")])


def checker(classpath: str) -> Checker:
    """The process's ``Checker`` for ``classpath`` (``classpath(cfg)``), started again if it ended."""
    with _checkers_lock:
        found = _checkers.get(classpath)
        if found is None or found._proc.poll() is not None:
            found = _checkers[classpath] = Checker(classpath)
        return found


@atexit.register
def _close_checkers() -> None:
    for c in list(_checkers.values()):
        c.close()


def engine_of(classpath: str) -> Engine:
    """What ``logprocessor.rules.check`` and ``publish`` take as ``engine``: the problems the JVM engine on
    ``classpath`` finds in a table's groups."""

    def problems(groups: Sequence[Group]) -> list[str]:
        return checker(classpath).problems(groups_json(groups))

    return problems


def engine(cfg: DbusConfig) -> Engine:
    """``engine_of`` the configured jars (``classpath``), resolved when first asked, then kept: a command
    that never publishes needs no JVM and reads no jar list."""
    resolved: list[Engine] = []

    def problems(groups: Sequence[Group]) -> list[str]:
        if not resolved:
            resolved.append(engine_of(classpath(cfg)))
        return resolved[0](groups)

    return problems
