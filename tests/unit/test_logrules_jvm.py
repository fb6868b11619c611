"""The log rules in the JVM (logprocessor/jvm ``dbus.jvm.LogRulesUdf`` and ``LogRulesGroupUdf``,
logprocessor/rules_jvm.py) give what the Python reference (logprocessor/operators.py) gives.

Every golden case of tests/golden/logrules (format: logrules_golden.py) runs through the group UDF, all in one
query: a case with ``out`` must give those rows (a DOUBLE cell after saveAs is Java's text of the number),
one with ``error`` a line error whose message contains the text (``refused`` cases never run: publishing
refuses them). Then random lines and parameters (hypothesis): the UDFs never fail the query, every line gives
rows or an error, and the rows and the error's group, rule and operator are those of ``operators.run_group``;
the table level (``dbus_log_rules``) agrees with ``operators`` table by table.
"""

from __future__ import annotations

import math
import re

import jvm_jar
import pytest
from hypothesis import HealthCheck, Phase, assume, given, settings
from hypothesis import strategies as st
from logrules_golden import load_cases

from logprocessor import operators
from logprocessor.grammar import Entry, Group, Rule, RuleError, TableRules, check_rule, with_save_as
from logprocessor.javatext import java_split
from logprocessor.rules_jvm import GROUP_FUNCTION, group_json, lines_results, register, ruleset_json

pytestmark = pytest.mark.jvm  # needs a JDK and the pyspark jars: `pytest -m "not jvm"` leaves it out

CASES = [c for c in load_cases() if c.refused is None]


@pytest.fixture(scope="module")
def spark():
    session = jvm_jar.spark_session("test_logrules_jvm", "dbus.jvm.LogRulesUdf")
    register(session)
    return session


def run_groups(
    spark, items: list[tuple[str, list[list[str | None]]]]
) -> list[tuple[list[list[str | None]], str | None]]:
    """(group JSON, rows) -> (rows, error) through ``dbus_log_group``, in one query, in order."""
    from pyspark.sql import functions as F

    df = spark.createDataFrame(
        [(i, g, rows) for i, (g, rows) in enumerate(items)], "i int, g string, rows array<array<string>>"
    )
    out = df.select("i", F.call_function(GROUP_FUNCTION, F.col("g"), F.col("rows")).alias("r")).collect()
    got = sorted((r["i"], r["r"]) for r in out)
    return [([list(x) for x in r["rows"]], r["err"]) for _, r in got]


def _same_cell(expected, got) -> bool:
    if isinstance(expected, float):
        return got is not None and math.isclose(float(got), expected, rel_tol=0, abs_tol=0)
    return expected == got


def test_every_golden_case_through_the_jvm(spark):
    results = run_groups(spark, [(group_json(c.name, c.rules), c.rows) for c in CASES])
    wrong = []
    for case, (rows, err) in zip(CASES, results, strict=True):
        if case.error is not None:
            if err is None or case.error not in err:
                wrong.append(f"{case.id}: expected an error with {case.error!r}, got {rows!r} / {err!r}")
        elif (
            err is not None
            or len(rows) != len(case.out or [])
            or not all(
                len(a) == len(b) and all(_same_cell(x, y) for x, y in zip(a, b, strict=True))
                for a, b in zip(case.out or [], rows, strict=True)
            )
        ):
            wrong.append(f"{case.id}: expected {case.out!r}, got {rows!r} / {err!r}")
    assert not wrong, f"{len(wrong)} of {len(CASES)} golden cases differ:\n" + "\n".join(wrong)
    assert len(CASES) > 200


# ---------------------------------------------------------------- the JVM against operators.py

NOT_JSON = re.compile(r"not JSON: .*")  # after this the parsers' own words (Python's json, Jackson) differ


def _reason(message: str) -> str:
    return NOT_JSON.sub("not JSON: ...", message)


def python_result(group: Group, line: str | None) -> tuple[list[list[str | None]], str | None]:
    """operators.run_group's rows as the processor's text (a DOUBLE as Java writes it), or its error."""
    res = operators.run_group(group, line)  # type: ignore[arg-type]
    if res.failure is not None:
        return [], res.failure.message
    return [[_java_text(v) for v in row] for row in res.rows], None


def _java_text(v) -> str | None:
    """A DOUBLE cell (a float from operators.py) as text; Java writes it as Double.toString, so cells that
    are both numbers are compared by value (``same``)."""
    return repr(v) if isinstance(v, float) else v


def same(python: tuple, java: tuple) -> bool:
    (prows, perr), (jrows, jerr) = python, java
    if (perr is None) != (jerr is None):
        return False
    if perr is not None:
        return _reason(perr) == _reason(jerr)
    if len(prows) != len(jrows):
        return False
    for a, b in zip(prows, jrows, strict=True):
        if len(a) != len(b):
            return False
        for x, y in zip(a, b, strict=True):
            if x != y and not (x is not None and y is not None and _both_numbers(x, y)):
                return False
    return True


def _both_numbers(x: str, y: str) -> bool:
    try:
        return float(x) == float(y)
    except ValueError:
        return False


TEXT = st.text(
    alphabet=st.sampled_from(list('ab |:,.=[]{}"\\-0129 \t\nxé😀\x00$') + ["\u2028", "\x1c"]), max_size=12
)
SCOPES = st.sampled_from(
    ["0", "1", "2", "-1", "-3", "*", "0:", "1:", "0:2", "-2:", "1:1", "0,2", "2,0", "5", "1:9"]
)
NAMED = st.sampled_from(["host", "message", "type", "n", "a", "missing", "namespace", "items", "a.b"])
REGEX = st.sampled_from(["a", "[0-9]+", "(a)(b)?", "x*", "\\s", "(\\w+)=(\\d+)", "^", "$", "\\|", "é"])
PATHS = st.sampled_from(
    ["$.a", "$.a.b", "$.items[0]", "$.items[-1]", "$.items[*]", "$.*", "$..a", "$['a.b']", "a", "$"]
)


@st.composite
def entries(draw, op: str) -> Entry:
    kinds = ("string", "regex", None, "other")
    rule_type = draw(st.sampled_from(kinds))
    regexy = rule_type == "regex" or (op in ("split", "replace", "regexExtract") and rule_type != "string")
    param: str | None
    if op == "jsonPath":
        param = draw(PATHS)
    elif op == "toIndex":
        param = draw(NAMED)
    elif op == "flattenJsonArray":
        param = draw(st.sampled_from(["", "items", "a.b", "o.items"]))
    elif regexy:
        param = draw(REGEX)
    else:
        param = draw(st.one_of(st.none(), TEXT))
    fields = {
        "scope": draw(SCOPES),
        "param": param,
        "rule_type": rule_type,
        "operate": draw(
            st.sampled_from(["==", "!=", "left", "right", "both", "all", "before", "after", "$1", None])
        ),
    }
    if op == "subString":
        kinds2 = ["index", "string", "other"]
        fields |= {
            "sub_start_type": draw(st.sampled_from(kinds2)),
            "sub_end_type": draw(st.sampled_from(kinds2)),
            "sub_start": draw(st.one_of(st.sampled_from(["0", "1", "-2", "x", "99"]), TEXT)),
            "sub_end": draw(st.one_of(st.none(), st.sampled_from(["0", "3", "-1", "b"]), TEXT)),
        }
    if op == "keyFilter":
        fields["filter_key"] = draw(NAMED)
    if op == "saveAs":
        fields |= {
            "scope": draw(st.sampled_from(["0", "1", "2", "7"])),
            "name": draw(st.sampled_from(["c1", "c2", "it's"])),
            "type": draw(st.sampled_from(["STRING", "LONG", "DOUBLE", "DATETIME", "timestamp"])),
        }
    if op == "replace" and regexy:
        fields["operate"] = draw(st.sampled_from(["$1", "x", "\\$", "[$0]", None]))
    return Entry(**fields)


OPS = [op for op in operators.OPERATIONS]


@st.composite
def groups(draw) -> Group:
    rules = []
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(OPS))
        grammar = tuple(draw(st.lists(entries(op), min_size=0 if op != "saveAs" else 1, max_size=3)))
        rules.append(Rule(op, grammar))
    if rules[-1].op != "saveAs":  # the processor appends an empty one: keep the columns to compare them
        rules.append(
            Rule("saveAs", tuple(Entry(scope=str(k), name=f"c{k}", type="STRING") for k in range(8)))
        )
    return Group("g'1", tuple(rules))


JSON_LINES = st.sampled_from(
    [
        '{"host":"h1","message":"a | b:c | x=12","type":"app_log","n":12.50,"namespace":"ns.a","a":"aa"}',
        '{"items":[1,"x",{"a":null},[2]],"a":{"b":[{"c":1},2]},"o":{"items":[true]},"host":"h"}',
        '{"a.b":[1,2],"a":"0123456789","n":-0,"message":"x","@version":"1"}',
        '{"a": {"a": "deep"}, "n": 1E5, "s": "say \\"hi\\"\\u0001"}',
        "[1,2,3]",
        "not json at all",
        "   { broken",
        "",
        "12.50",
    ]
)
LINES = st.one_of(JSON_LINES, TEXT)


def _regex_params(group: Group) -> list[str]:
    """The parameters the operators read as a regex (what the processor has Java compile when it loads rules,
    refusing what only Java refuses: ``{`` is a literal to Python's ``re``, an error to Java)."""
    return [
        e.param
        for rule in group.rules
        for e in rule.grammar
        if e.param is not None
        and (
            rule.op == "regexExtract"
            or (e.rule_type == "regex" and rule.op in ("filter", "keyFilter"))
            or (rule.op in ("split", "replace") and e.rule_type != "string")
        )
    ]


def publishable(spark, group: Group) -> bool:
    try:
        for i, rule in enumerate(group.rules, 1):
            check_rule(rule, f"rule {i}")
        for pattern in _regex_params(group):
            spark.sparkContext._jvm.java.util.regex.Pattern.compile(pattern)
    except (RuleError, Exception):
        return False
    return True


def _compare(spark, cases: list[tuple[Group, str]]) -> None:
    items = [(group_json(g.name, with_save_as(g).rules), [[line]]) for g, line in cases]
    java = run_groups(spark, items)
    wrong = []
    for (group, line), got in zip(cases, java, strict=True):
        expected = python_result(group, line)
        if not same(expected, got):
            wrong.append(f"{group!r}\nline {line!r}\npython {expected!r}\njava   {got!r}")
    assert not wrong, f"{len(wrong)} of {len(cases)} differ; the first:\n{wrong[0]}"


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck), phases=[Phase.generate])
@given(st.lists(st.tuples(groups(), LINES), min_size=25, max_size=25))
def test_random_groups_agree_with_operators(spark, cases):
    """Not shrunk (each example is a Spark query): a failure shows the first case that differs."""
    cases = [(g, line) for g, line in cases if publishable(spark, g)]
    assume(cases)
    _compare(spark, cases)


def test_table_level_agrees_with_operators(spark):
    """``dbus_log_rules`` on the spec's §5.7 group beside others: rows per table, errors, unmatched."""
    from pyspark.sql import functions as F

    from logprocessor.rules_jvm import FUNCTION

    cases = [c for c in CASES if c.file == "group_example" and c.error is None]
    main = Group("order_events", cases[0].rules)
    broken = Group("broken", (Rule("toIndex", (Entry(scope="0", param="host"),)),))
    other = Group(
        "other", (Rule("filter", (Entry(scope="0", rule_type="string", operate="==", param="WARN"),)),)
    )
    tables = [TableRules("orders", 1, (main, broken)), TableRules("raw", 1, (other,))]
    lines = [c.rows[0][0] for c in load_cases() if c.file == "group_example"] + ["plain WARN", "plain"]
    for multi in (True, False):
        df = spark.createDataFrame([(lines,)], "lines array<string>")
        literal = F.call_function(FUNCTION, F.lit(ruleset_json(tables, multi)), "lines")
        held = lines_results(spark, F.col("lines"), tables, multi)  # what the processor runs
        (row,) = df.select(literal.alias("r"), held.alias("h")).collect()
        assert row["r"] == row["h"]
        for line, got in zip(lines, row["r"], strict=True):
            rows, errors, took = [], [], False
            for t in tables:
                index = 0
                for g in t.groups:
                    if took and not multi:
                        break
                    res = operators.run_group(g, line)
                    if res.failure:
                        errors.append((t.table, res.failure.message))
                    for r in res.rows:
                        rows.append((t.table, index, [_java_text(v) for v in r]))
                        index += 1
                    took = took or bool(res.rows)
            if multi:
                assert [(r["table"], r["index"], list(r["row"])) for r in got["rows"]] == rows
            else:
                assert [(r["table"], r["index"]) for r in got["rows"]] == [(t, i) for t, i, _ in rows]
            got_errors = [(e["table"], _reason(e["error"])) for e in got["errors"]]
            assert got_errors == [(t, _reason(m)) for t, m in errors], line
            assert got["unmatched"] == (not rows)


def _rule(op: str, **fields: str) -> Rule:
    return Rule(op, (Entry(**fields),))


_REGEX_FILTER = {"scope": "0", "rule_type": "regex", "operate": "=="}
# Where the JVM and operators.py differ, the JVM right: (group's rules, line, the JVM's rows or error).
# operators.py reads regexes with Python's re, whose line terminator is \n alone: Java's `.`, `$` and `\Z`
# also treat \r, \r\n, \u0085, \u2028 and \u2029 as one (docs/logs.md names `.` only). The last case
# is where both agree now (javatext.double_value let float.fromhex's OverflowError out of run_group).
JAVA_RIGHT = [
    ((_rule("filter", param="^.$", **_REGEX_FILTER),), "\r", []),
    ((_rule("filter", param="a$", **_REGEX_FILTER),), "a\r", [[]]),
    ((_rule("filter", param="a$", **_REGEX_FILTER),), "a\u2028", [[]]),
    ((_rule("filter", param="a\\Z", **_REGEX_FILTER),), "a\r\n", [[]]),
    (
        (
            _rule("split", scope="0", rule_type="string", param="|"),
            _rule("saveAs", scope="0", name="d", type="DOUBLE"),
        ),
        "0x1p99999|x",
        "rule 2 (saveAs): saveAs column 'd' (DOUBLE): '0x1p99999' is not a number",
    ),
]


@pytest.mark.parametrize(("rules", "line", "expected"), JAVA_RIGHT)
def test_where_operators_py_differs_the_jvm_is_java(spark, rules, line, expected):
    group = Group("g", rules)
    ((rows, err),) = run_groups(spark, [(group_json("g", with_save_as(group).rules), [[line]])])
    if isinstance(expected, str):
        assert err is not None and expected in err
    else:
        assert (rows, err) == (expected, None)


def test_a_zero_width_split_never_cuts_a_surrogate_pair(spark):
    """``split`` by ``x*`` (a zero-width match at every index): the pieces are code points in both engines;
    java.util.regex alone cut an emoji into two lone UTF-16 halves (found by the random groups above)."""
    save = Rule("saveAs", tuple(Entry(scope=str(i), name=f"c{i}", type="STRING") for i in range(4)))
    group = Group("g", (_rule("split", scope="0", rule_type="other", param="x*"), save))
    _compare(spark, [(group, "a\U0001f600b"), (group, "\n,\U0001f6000\tb"), (group, "\U0001f600\U0001f601")])
    assert java_split(re.compile("x*"), "a\U0001f600b") == ["a", "\U0001f600", "b"]  # the Python engine's


def test_the_processor_start_asks_its_own_jvm_and_refuses_what_the_engine_refuses(spark):
    """``logprocessor.main.check_rules``: the rule set as the query would run it, judged in the query's JVM
    (a rule set published before publishing asked the engine, or written by hand, stops the start here)."""
    from logprocessor.main import check_rules
    from logprocessor.rules import RuleSet

    bad = Rule("split", (Entry(scope="0", rule_type="regex", param="(?P<x>;)"),))
    fine = Rule("split", (Entry(scope="0", rule_type="string", param="(?P<x>;)"),))
    tables = (TableRules("t", 1, (Group("ok", (fine,)),)), TableRules("u", 2, (Group("g", (fine, bad)),)))
    with pytest.raises(
        RuleError, match=r"^group 'g' rule 2 \(split\): ruleParamter '\(\?P<x>;\)' is not a valid Java"
    ):
        check_rules(RuleSet("ds", "ds_schema", tables), spark._jvm)
    check_rules(RuleSet("ds", "ds_schema", tables[:1]), spark._jvm)
