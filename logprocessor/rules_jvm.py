"""Log rules run by the JVM: the rule set as JSON for ``dbus.jvm.LogRulesUdf`` (logprocessor/jvm, logrules/).

The log processor's rules step is one call of a Java UDF per record, over the record's lines
(docs/logs.md, How rules run on Spark): ``dbus_log_rules(ruleset, lines)`` gives, per line, what
``logprocessor.compile.tables_sql`` gives for it (``LINE_TYPE``): the rows each table took (``index``: the
row's position among that table's rows for the line), the line errors naming table, group, rule position and
operator as ``logprocessor.operators`` words them, and whether no group took the line. The Java engine is a
port of ``logprocessor.operators`` (the reference); tests/unit/test_logrules_jvm.py runs every golden case
through it and compares it with the reference on random lines and parameters.

The rule set travels as a JSON literal of the query, parsed once per JVM (cached by its text)::

    {"multi": true, "regex_budget_ms": 100,
     "groups": [{"table": "t", "group": "g", "rules": [{"op": "split", "grammar": [{..}]}]}]}

with the active groups of every table in order, each as the processor runs it (``grammar.with_save_as``),
grammar entries in the original's keys (``Entry.to_json``). ``regex_budget_ms`` is the source's
``processor.regex_budget_ms``: each regex's run on a cell within it, or the line fails with the code
``LOG_RULE_BUDGET`` (``dbus.jvm.logrules.Budget``; logprocessor/regexbudget.py is the Python engine's).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import TYPE_CHECKING

from logprocessor.grammar import Rule, TableRules, with_save_as
from logprocessor.regexbudget import DEFAULT_MS

if TYPE_CHECKING:
    from pyspark.sql import Column, SparkSession

FUNCTION, CLASS = "dbus_log_rules", "dbus.jvm.LogRulesUdf"
GROUP_FUNCTION, GROUP_CLASS = "dbus_log_group", "dbus.jvm.LogRulesGroupUdf"

ROW_TYPE = "struct<table:string,index:int,row:array<string>>"
ERROR_TYPE = "struct<table:string,error:string>"
# compile.LINE_TYPE and compile.GROUP_TYPE
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
    jvm = spark._jvm  # type: ignore[attr-defined]  # py4j's view of the JVM, untyped
    cls = jvm_class(jvm, "dbus.jvm.LogRulesLinesUdf", "logprocessor")
    returns = ArrayType(_parse_datatype_string(LINE_TYPE))
    jtype = jvm.org.apache.spark.sql.types.DataType.fromJson(returns.json())
    spark._jsparkSession.udf().register(name, cls(ruleset), jtype)  # type: ignore[attr-defined]  # py4j
    return F.call_function(name, lines)
