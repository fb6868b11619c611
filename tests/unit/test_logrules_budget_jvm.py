"""The JVM rule engine's regex budget and JSON depth (logprocessor/jvm ``dbus.jvm.logrules.Budget``,
``Json``), by the Python engine's (logprocessor/regexbudget.py, jsontext.py;
tests/unit/test_logprocessor_regexbudget.py):

- the engine gives up on the crafted line ``(.*a){12}$`` within its budget, for every operator that takes a
  regex, with the Python engine's words; a normal line still matches;
- the processor's projection (``dbus.jvm.LogBatch``, what ``job.process`` runs) makes that line a dead letter
  ``LOG_RULE_BUDGET`` with its reason and coordinates, and the lines after it land in their table;
- both engines decide alike on JSON nested around the limit (``MAX_DEPTH``) and around 985-988 levels, where
  they used to disagree: through the rules alone (``dbus_log_group``) and through the whole projection, a
  shipper record read by the adapter then the rules, against ``dbus logrules test``'s path (adapters.adapt,
  operators.run_group): a row, or a dead letter with the same code.
"""

from __future__ import annotations

import json
import re
import time

import jvm_jar
import pytest
from py4j.java_gateway import get_field

from dbuslib.config import DbusConfig, LogProcessorSettings, LogSource, load_config
from logprocessor import operators
from logprocessor.adapters import Adapted, AdapterSettings, KafkaRecord, adapt
from logprocessor.grammar import Entry, Group, Rule, TableRules, save_as_columns, with_save_as
from logprocessor.jsontext import MAX_DEPTH
from logprocessor.metrics import parse_metric
from logprocessor.rules import RuleSet
from logprocessor.rules_jvm import GROUP_FUNCTION, group_json, register

pytestmark = pytest.mark.jvm  # needs a JDK and the pyspark jars: `pytest -m "not jvm"` leaves it out

EVIL = r"(.*a){12}$"
CRAFTED = "a" * 47 + "b"  # 48 characters: years of backtracking in java.util.regex
GOOD = "xa" * 12
DS = "budget"
SAVE = Rule("saveAs", (Entry(scope="0", name="c", type="STRING"),))
NOT_JSON = re.compile(r"not JSON: .*")  # after this the parsers' own words (Python's json, Jackson) differ


@pytest.fixture(scope="module")
def spark():
    session = jvm_jar.spark_session("test_logrules_budget_jvm", "dbus.jvm.logrules.Budget")
    register(session)
    return session


def _run_jvm(spark, group: Group, line: str, budget_ms: int) -> tuple[list, str | None, str | None, float]:
    """``Engine.runGroup`` called directly (py4j): rows, error, code, seconds taken."""
    engine = spark._jvm.dbus.jvm.logrules.Engine
    g = engine.group(group_json(group.name, with_save_as(group).rules, budget_ms))
    start = time.monotonic()
    r = engine.runGroup(g, line)
    took = time.monotonic() - start
    rows = [list(row) for row in get_field(r, "rows")]
    return rows, get_field(r, "error"), get_field(r, "code"), took


@pytest.mark.parametrize(
    "rule",
    [
        Rule("filter", (Entry(scope="0", rule_type="regex", operate="==", param=EVIL),)),
        Rule("keyFilter", (Entry(filter_key="m", rule_type="regex", operate="==", param=EVIL),)),
        Rule("replace", (Entry(scope="0", rule_type="regex", param=EVIL, operate="x"),)),
        Rule("split", (Entry(scope="0", param=EVIL),)),
        Rule("regexExtract", (Entry(scope="0", param=EVIL),)),
    ],
    ids=lambda r: r.op,
)
def test_the_engine_gives_up_on_the_crafted_line_within_the_budget(spark, rule):
    group = Group("g", (rule, SAVE))
    line = f'{{"m": "{CRAFTED}"}}' if rule.op == "keyFilter" else CRAFTED
    rows, error, code, took = _run_jvm(spark, group, line, 100)
    assert rows == [] and code == "LOG_RULE_BUDGET", (rows, error, code)
    python = operators.run_group(group, line, 100).failure
    assert python is not None and python.code == code and error == python.message, (error, python)
    assert error == (
        f"group 'g' rule 1 ({rule.op}): regex '(.*a){{12}}$' ran over its budget of 100 ms on a "
        f"{len(CRAFTED)}-character text"
    )
    assert took < 5.0, took  # the budget is 0.1 s; generous for a loaded machine and py4j


def test_a_normal_line_still_matches_and_a_small_budget_is_kept(spark):
    group = Group(
        "g", (Rule("filter", (Entry(scope="0", rule_type="regex", operate="==", param=EVIL),)), SAVE)
    )
    rows, error, code, _ = _run_jvm(spark, group, GOOD, 100)
    assert (rows, error, code) == ([[GOOD]], None, None)
    rows, error, code, _ = _run_jvm(spark, group, "b" * 48, 100)
    assert (rows, error, code) == ([], None, None)
    _, error, code, took = _run_jvm(spark, group, CRAFTED, 20)
    assert code == "LOG_RULE_BUDGET" and "budget of 20 ms" in error and took < 5.0


# ---------------------------------------------------------------- the processor's projection


def _record(message: str, **extra) -> bytes:
    doc = {"host": "app-01.prod", "path": "/srv/app/a.log", "timestamp": "2024-03-05T02:15:30.123Z"}
    return json.dumps({**doc, "message": message, **extra}, separators=(",", ":")).encode()


def _source(budget_ms: int = 100) -> LogSource:
    return LogSource(type="log_rsyslog", processor=LogProcessorSettings(regex_budget_ms=budget_ms))


def _config(source: LogSource) -> DbusConfig:
    cfg = load_config()
    return cfg.model_copy(update={"log_sources": {**cfg.log_sources, DS: source}})


def _rules(*groups: Group) -> RuleSet:
    return RuleSet(DS, f"{DS}_schema", (TableRules("t", 1, groups, save_as_columns(groups[0])),))


def _outputs(spark, src: LogSource, rules: RuleSet, values: list[bytes]) -> list:
    """``dbus.jvm.LogBatch`` (record_jvm.batch_outputs, the stage's projection) over the records, one
    partition, offsets 0..n-1."""
    from pyspark.sql import functions as F

    from logprocessor.record_jvm import batch_outputs

    rows = [(v, b"/srv/app/a.log", 0, i, 1709604930123) for i, v in enumerate(values)]
    raw = (
        spark.createDataFrame(rows, "value binary, key binary, partition int, offset bigint, ms bigint")
        .withColumn("timestamp", F.timestamp_millis("ms"))
        .withColumn("topic", F.lit(f"{DS}.raw"))
        .coalesce(1)
    )
    return batch_outputs(raw, src, DS, rules).collect()


def _decisions(src: LogSource, rows: list) -> dict[int, tuple]:
    """Per record offset: ("row", values...) for each row of table t, ("dead", code), ("unknown",)."""
    out: dict[int, list] = {}
    dead, unknown = src.topics.name("dead_letter", DS), src.topics.name("unknown", DS)
    for r in rows:
        if r.topic == dead:
            letter = json.loads(r.value)
            out.setdefault(letter["offset"], []).append(("dead", letter["code"]))
        elif r.topic == unknown:
            n = re.search(r'"n":(\d+)', r.value)
            out.setdefault(int(n.group(1)) if n else -1, []).append(("unknown",))
        elif bytes(r.key).startswith(b"data_increment_data."):
            for p in json.loads(r.value)["payload"]:
                ums_id = int(p["tuple"][0])
                offset = (ums_id >> 12) & ((1 << 43) - 1)  # logums: partition, offset, row index
                out.setdefault(offset, []).append(("row", *p["tuple"][4:]))
    return {k: tuple(v) for k, v in out.items()}


def test_the_processor_dead_letters_the_crafted_line_and_the_lines_after_it_arrive(spark):
    group = Group(
        "g",
        (
            Rule("toIndex", (Entry(scope="0", param="message"),)),
            Rule("filter", (Entry(scope="0", rule_type="regex", operate="==", param=EVIL),)),
            SAVE,
        ),
    )
    src = _source(50)
    values = [_record(str(n) + GOOD) if n != 3 else _record(CRAFTED) for n in range(8)]
    rows = _outputs(spark, src, _rules(group), values)
    letters = [json.loads(r.value) for r in rows if r.topic == src.topics.name("dead_letter", DS)]
    assert [(d["code"], d["offset"], d["partition"]) for d in letters] == [("LOG_RULE_BUDGET", 3, 0)]
    assert letters[0]["error"] == (
        "table t: group 'g' rule 2 (filter): regex '(.*a){12}$' ran over its budget of 50 ms on a "
        "48-character text"
    )
    assert letters[0]["stage"] == "logprocessor" and letters[0]["topic"] == f"{DS}.raw"
    assert [parse_metric(r.metric).name for r in rows if r.topic == src.topics.name("dead_letter", DS)] == [
        "LOG_RULE_BUDGET"
    ]
    tuples = [
        p["tuple"][-1]
        for r in rows
        if r.topic != src.topics.name("dead_letter", DS)
        for p in json.loads(r.value)["payload"]
    ]
    assert tuples == [str(n) + GOOD for n in range(8) if n != 3]  # every later line, in order


# ---------------------------------------------------------------- JSON depth: both engines decide alike


def _nested(levels: int) -> str:
    text = '"v"'
    for k in range(levels):
        text = f'{{"k":{text}}}' if k % 2 == 0 else f"[{text}]"
    return text


DEPTHS = sorted(
    {
        1,
        2,
        MAX_DEPTH - 2,
        MAX_DEPTH - 1,
        MAX_DEPTH,
        MAX_DEPTH + 1,
        MAX_DEPTH + 2,
        985,
        986,
        987,
        988,
        989,
        999,
        1000,
        1001,
    }
)
DEEP_GROUPS = {
    "toIndex": Group(
        "g",
        (
            Rule("toIndex", (Entry(scope="0", param="host"), Entry(scope="1", param="deep"))),
            Rule(
                "saveAs",
                (Entry(scope="0", name="h", type="STRING"), Entry(scope="1", name="d", type="STRING")),
            ),
        ),
    ),
    "jsonPath": Group(
        "g", (Rule("jsonPath", (Entry(scope="0", param="$..k"),)), Rule("select", (Entry(scope="-1"),)), SAVE)
    ),
    "flattenJsonArray": Group(
        "g",
        (
            Rule("toIndex", (Entry(scope="0", param="deep"),)),
            Rule("flattenJsonArray", (Entry(scope="0", param=""),)),
            SAVE,
        ),
    ),
}


def _reason(message: str | None) -> str | None:
    return None if message is None else NOT_JSON.sub("not JSON: ...", message)


def test_both_engines_agree_on_deep_json_through_the_rules(spark):
    from pyspark.sql import functions as F

    cases = []
    for name, group in DEEP_GROUPS.items():
        for d in DEPTHS:
            deep = _nested(d) if name != "flattenJsonArray" else f"[{_nested(d - 1)}]"
            cases.append((name, d, group, '{"host":"h","deep":' + deep + "}"))
            cases.append((name, d, group, deep))
    items = [
        (i, group_json(g.name, with_save_as(g).rules), [[line]]) for i, (_, _, g, line) in enumerate(cases)
    ]
    df = spark.createDataFrame(items, "i int, g string, rows array<array<string>>")
    got = dict(
        sorted(
            (r["i"], r["r"])
            for r in df.select("i", F.call_function(GROUP_FUNCTION, "g", "rows").alias("r")).collect()
        )
    )
    wrong, decided = [], set()
    for i, (name, d, group, line) in enumerate(cases):
        py = operators.run_group(group, line)
        java_rows, java_err = [list(x) for x in got[i]["rows"]], got[i]["err"]
        py_err = py.failure.message if py.failure else None
        decided.add((name, d <= MAX_DEPTH, py_err is None))
        if _reason(py_err) != _reason(java_err) or (py_err is None and py.rows != java_rows):
            wrong.append(
                f"{name} depth {d}: python {py.rows!r} / {py_err!r}; java {java_rows!r} / {java_err!r}"
            )
    assert not wrong, f"{len(wrong)} of {len(cases)} differ:\n" + "\n".join(wrong[:5])
    # at or under the limit a row, over it a line error ("nested too deeply"), for toIndex and jsonPath
    assert ("toIndex", True, True) in decided and ("toIndex", False, False) in decided
    assert ("jsonPath", True, True) in decided and ("jsonPath", False, False) in decided


def _python_decisions(src: LogSource, rules: RuleSet, values: list[bytes]) -> dict[int, tuple]:
    """What ``dbus logrules test`` says of each record (adapters.adapt, then operators.run_group)."""
    settings = AdapterSettings.of(src)
    out = {}
    for offset, value in enumerate(values):
        got = adapt(KafkaRecord(value, b"/srv/app/a.log", 0, offset, 1709604930123), settings)
        if not isinstance(got, Adapted):
            out[offset] = (("dead", got.code),)
            continue
        found = []
        for line in got.lines:
            for table in rules.tables:
                for g in table.groups:
                    res = operators.run_group(g, line, src.processor.regex_budget_ms)
                    if res.failure is not None:
                        found.append(("dead", res.failure.code))
                    found += [("row", *(str(v) for v in row)) for row in res.rows]
        out[offset] = tuple(found) if found else (("unknown",),)
    return out


def test_both_engines_agree_on_deep_json_through_the_processor(spark):
    """The issue's case: a shipper record nested 985-987 levels deep made a row in the processor and a dead
    letter in ``dbus logrules test``. Now the same decision at every depth around both limits (the rules'
    MAX_DEPTH, the adapter's 1000)."""
    group = DEEP_GROUPS["toIndex"]
    src = _source()
    rules = _rules(group)
    values = [
        _record("m", n=n, deep=json.loads(_nested(d)) if d < 900 else None) for n, d in enumerate(DEPTHS)
    ]
    # json.dumps cannot write the deepest ones: splice the text in
    values = [
        v if d < 900 else v.replace(b'"deep":null', b'"deep":' + _nested(d).encode())
        for v, d in zip(values, DEPTHS, strict=True)
    ]
    java = _decisions(src, _outputs(spark, src, rules, values))
    python = _python_decisions(src, rules, values)
    for offset, d in enumerate(DEPTHS):
        assert java.get(offset) == python[offset], (d, java.get(offset), python[offset])
    kinds = {python[o][0][0] if python[o][0][0] != "dead" else python[o][0] for o in python}
    assert "row" in kinds and ("dead", "LOG_LINE_RULE_ERROR") in kinds, kinds
