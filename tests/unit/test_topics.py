"""dbuslib.topics: a source's topics, the one escaping of schema and table names, Kafka's rule."""

import fnmatch
import re

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from dbuslib.config import DEFAULT_CONFIG, DbusConfig, Source, load_config
from dbuslib.errors import ConfigError
from dbuslib.filters import TableFilter
from dbuslib.topics import (
    Subscription,
    appender_subscription,
    describe_subscription,
    escape,
    glob_regex,
    include_problems,
    literal_schemas,
    render,
    schema_topic_pattern,
    source_topics,
    topic_problem,
    unescape,
)


def test_literal_schemas_skip_globs_and_heartbeat_schema():
    src = load_config().source("demo")
    assert literal_schemas(src) == ["shop"]


def test_source_topics_follow_the_original_names():
    src = load_config().source("demo")
    assert source_topics("demo", src) == [
        "demo",
        "demo_ctrl",
        "demo.dlq",
        "demo_data_shards",
        "demo_callback",
        "global_ctrl_topic",
        "demo.shop",
        "demo.shop.result",
    ]


def test_per_table_result_topics_are_not_created_ahead():
    src = load_config().source("demo")
    per_table = src.model_copy(
        update={"topics": src.topics.model_copy(update={"result": "{ds}.{schema}.{table}"})}
    )
    names = source_topics("demo", per_table)
    assert "demo.shop" in names and not any("None" in n or n.startswith("demo.shop.") for n in names)
    assert per_table.topics.name("result", "demo", "shop", "orders") == "demo.shop.orders"


# ---------------------------------------------------------------- escaping and Kafka's rule

LEGAL = st.text(alphabet="abcXYZ019._-", max_size=60)
SPELLS_ESCAPE = re.compile(r"_x[0-9a-f]{4}|_X[0-9a-f]{6}")


@pytest.mark.parametrize(
    ("name", "escaped"),
    [
        ("shop", "shop"),
        ("shöp_12", "sh_x00f6p_12"),
        ("my shop$", "my_x0020shop_x0024"),
        ("t😀", "t_X01f600"),
        ("t.dot", "t.dot"),
        ("", ""),
        ("数据", "_x6570_x636e"),
    ],
)
def test_escape_by_example(name, escaped):
    assert escape(name) == escaped and unescape(escaped) == name


@given(LEGAL)
def test_legal_names_are_unchanged(name):
    assert escape(name) == name


@given(st.text(max_size=60))
def test_escaped_names_are_legal_and_reversible(name):
    out = escape(name)
    assert re.fullmatch(r"[A-Za-z0-9._-]*", out)
    if not SPELLS_ESCAPE.search(name):
        assert unescape(out) == name


@settings(deadline=None)  # loads the configuration per example: slow on a loaded machine
@given(st.text(max_size=60), st.text(max_size=60))
def test_every_topic_name_goes_through_the_escaping(schema, table):
    src = load_config().source("demo")
    per_table = src.topics.model_copy(update={"result": "{ds}.{schema}.{table}"})
    assert (
        src.topics.name("schema", "demo", schema)
        == render("{ds}.{schema}", "demo", schema)
        == ("demo." + escape(schema))
    )
    assert per_table.name("result", "demo", schema, table) == f"demo.{escape(schema)}.{escape(table)}"


@pytest.mark.parametrize(
    ("topic", "problem"),
    [
        ("demo.shop", None),
        ("", "empty"),
        (".", "reserved"),
        ("..", "reserved"),
        ("a" * 249, None),
        ("a" * 250, "250 characters, more than 249"),
        ("demo.shöp", "not in [A-Za-z0-9._-]"),
    ],
)
def test_topic_problem_follows_kafkas_rule(topic, problem):
    got = topic_problem(topic)
    assert (got is None) if problem is None else (problem in got)


def _src(**extra) -> Source:
    mysql = {"host": "h", "user": "u", "password": "p", "server_id": 1}
    return Source.model_validate({"mysql": mysql, **extra})


def test_include_problems_name_the_key_of_a_schema_whose_topic_kafka_refuses():
    long = "ü" * 41  # 41 * 6 escaped characters: 5 + 246 = 251 > 249
    src = _src(capture={"include": ["shop.*", f"{long}.*", "shöp.orders", "s*.x"]})
    schema_topic, result_topic = include_problems("demo", src)
    assert schema_topic.startswith("sources.demo.capture.include[1]: schema ")
    assert "more than 249" in schema_topic
    assert "(topics.schema)" in schema_topic and "(topics.result)" in result_topic
    assert include_problems("demo", _src(capture={"include": ["shöp.*"]})) == []


def test_include_problems_check_per_table_result_topics_of_literal_tables():
    src = _src(capture={"include": ["shop." + "t" * 240]}, topics={"result": "{ds}.{schema}.{table}"})
    (problem,) = include_problems("demo", src)
    assert "capture.include[0]" in problem and "topics.result" in problem


def test_include_problems_check_the_fixed_templates():
    (problem,) = include_problems("demo", _src(topics={"dead_letter": "{ds}/dlq"}))
    assert problem.startswith("sources.demo.topics.dead_letter: ") and "'/'" in problem


def _config(tmp_path, include: list[str]) -> str:
    raw = yaml.safe_load(DEFAULT_CONFIG.read_text())
    raw["sources"]["demo"]["capture"]["include"] = include
    path = tmp_path / "dbus.yaml"
    path.write_text(yaml.safe_dump(raw, allow_unicode=True), encoding="utf-8")
    return str(path)


def test_config_check_passes_a_non_ascii_schema_and_refuses_a_too_long_topic_naming_the_key(tmp_path):
    assert load_config(_config(tmp_path, ["shöp.*"])).source("demo").capture.include == ("shöp.*",)
    with pytest.raises(ConfigError, match=r"sources\.demo\.capture\.include\[1\]: schema .* than 249"):
        load_config(_config(tmp_path, ["shop.*", "ß" * 50 + ".*"]))


# ---------------------------------------------------------------- the appender's pattern for glob schemas

# schema names: legal characters, characters that need escaping (one above U+FFFF), no '.' (an include's
# glob is matched against the schema part of "schema.table")
NAME_CHARS = "abcdX09_-öé $😀"
NAMES = st.text(alphabet=NAME_CHARS, min_size=1, max_size=8).filter(lambda n: not SPELLS_ESCAPE.search(n))
GLOB_PIECES = st.one_of(
    st.sampled_from(list(NAME_CHARS)),
    st.just("*"),
    st.just("?"),
    st.sampled_from(["[a-d]", "[!a-d]", "[öé]", "[!ö]", "[_$-]", "[]a]", "[!]]", "[ä-ü]", "[", "[!$ 😀]"]),
)
GLOBS = st.lists(GLOB_PIECES, min_size=1, max_size=5).map("".join).filter(lambda g: "." not in g)


def _pattern(include: list[str], exclude: list[str] = (), **extra) -> str:
    src = _src(capture={"include": include, "exclude": list(exclude)}, **extra)
    pattern = schema_topic_pattern("demo", src)
    assert pattern is not None
    re.compile(pattern)
    return pattern


def _readings(escaped: str) -> set[str]:
    """Every name whose escape is ``escaped``: an escape also reads as its six legal characters."""
    if not escaped:
        return {""}
    out = {escaped[0] + rest for rest in _readings(escaped[1:])}
    if m := SPELLS_ESCAPE.match(escaped):
        out |= {unescape(m.group()) + rest for rest in _readings(escaped[m.end() :])}
    return out


@settings(max_examples=300, deadline=None)
@given(GLOBS, st.one_of(st.none(), GLOBS), st.lists(NAMES, min_size=1, max_size=6))
def test_the_pattern_matches_the_topics_of_exactly_the_captured_schemas(include, exclude, names):
    """The schema topic of a name is followed iff the dispatcher can write it: some table of the schema is
    captured (dbuslib.filters.TableFilter, the extractor's filter), escaped names included. A topic whose
    name has characters to escape is also the topic of the legal name its escapes spell (``$`` and
    ``_x0024``): followed when one of its names is captured, not when an exclude drops one of them."""
    excludes = [f"{exclude}.*"] if exclude else []
    src = _src(capture={"include": [f"{include}.*"], "exclude": excludes})
    sub = _subscription(src)
    allowed = TableFilter(src.capture)

    def captured(name: str) -> bool:
        return allowed.allows(name, "orders") and name != src.heartbeat.schema_

    def dropped(name: str) -> bool:
        return name == src.heartbeat.schema_ or (exclude is not None and fnmatch.fnmatchcase(name, exclude))

    for name in [*names, "dbus"]:
        topic = src.topics.name("schema", "demo", name)
        readings = _readings(escape(name))
        if sub.pattern is None:  # a literal include: its topic is read even when an exclude drops it all
            assert sub.follows(topic) == (name == include != "dbus")
        elif readings == {name}:
            assert sub.follows(topic) == captured(name), (include, exclude, name, topic, sub)
        elif sub.follows(topic):
            assert any(captured(n) for n in readings), (include, exclude, name, topic, sub)
        else:
            assert not captured(name) or any(dropped(n) for n in readings), (include, exclude, name, sub)


def _subscription(src: Source) -> Subscription:
    """What appender_subscription gives for a one-source configuration."""
    named = tuple(src.topics.name("schema", "demo", s) for s in literal_schemas(src))
    return Subscription(named, schema_topic_pattern("demo", src))


@settings(deadline=None)  # a loaded machine: no time limit on an example
@given(GLOBS, NAMES)
def test_a_table_exclude_keeps_the_schema_topic(include, name):
    src = _src(capture={"include": [f"{include}.*"], "exclude": [f"{name}.secret"]})
    sub = _subscription(src)
    if sub.pattern is None:
        expected = name == include != "dbus"
    else:  # the topic of a name to escape is also that of the legal name its escapes spell
        expected = any(fnmatch.fnmatchcase(n, include) and n != "dbus" for n in _readings(escape(name)))
    assert sub.follows(f"demo.{escape(name)}") == expected


@settings(deadline=None)  # a loaded machine: no time limit on an example
@given(NAMES, st.text(alphabet=NAME_CHARS, min_size=1, max_size=8))
def test_the_pattern_never_matches_a_topic_that_is_not_a_schema_topic(schema, table):
    pattern = _pattern(["*.*"])
    per_table = _pattern(["*.*"], topics={"result": "{ds}.{schema}.{table}.r"})
    t = _src().topics
    fixed = ["demo", "demo_ctrl", "demo.dlq", "demo_data_shards", "demo_callback", "global_ctrl_topic"]
    for topic in [*fixed, t.name("result", "demo", schema), "crm.shop", "demo2.shop", "__consumer_offsets"]:
        assert not re.fullmatch(pattern, topic), topic
    assert not re.fullmatch(per_table, f"demo.{escape(schema)}.{escape(table)}.r")
    assert re.fullmatch(pattern, t.name("schema", "demo", schema)) or escape(schema).endswith(".result")


def test_the_pattern_leaves_other_sources_topics_alone(tmp_path):
    raw = yaml.safe_load(DEFAULT_CONFIG.read_text())
    demo = raw["sources"]["demo"]
    demo["capture"] = {"include": ["*.*"]}
    raw["sources"]["other"] = {**demo, "topics": {"schema": "demo.other_{schema}", "raw": "demo.o"}}
    path = tmp_path / "dbus.yaml"
    path.write_text(yaml.safe_dump(raw))
    cfg = load_config(path)
    sub = appender_subscription(cfg, "demo")
    assert sub.topics == () and sub.follows("demo.db_x") and sub.follows("demo.other")
    assert not sub.follows("demo.other_x") and not sub.follows("demo.o")
    assert not sub.follows("applog.dlq")  # the demo's log source


@pytest.mark.parametrize(
    ("include", "schemas", "option", "follows", "not_follows"),
    [
        (["shop.*", "crm.a"], None, ("subscribe", "demo.crm,demo.shop"), ["demo.shop"], ["demo.db_x"]),
        (["shop.*", "db_*.*"], None, "pattern", ["demo.shop", "demo.db_x", "demo.db_"], ["demo.dbx"]),
        (["*.*"], None, "pattern", ["demo.x", "demo.sh_x00f6p"], ["demo.x.result", "demo.dbus"]),
        (["*.*"], ["shop"], ("subscribe", "demo.shop"), ["demo.shop"], ["demo.x"]),
        (["s?op.*"], None, "pattern", ["demo.shop", "demo.s_x00f6op"], ["demo.sop", "demo.s_x00f6_x00f6op"]),
    ],
)
def test_the_appender_subscribes_by_name_or_by_pattern(include, schemas, option, follows, not_follows):
    raw = yaml.safe_load(DEFAULT_CONFIG.read_text())
    raw["sources"]["demo"]["capture"] = {"include": include}
    cfg = DbusConfig.model_validate(raw)
    sub = appender_subscription(cfg, "demo", schemas)
    if option == "pattern":
        assert sub.option() == ("subscribePattern", sub.pattern)
    else:
        assert sub.option() == option and sub.pattern is None
    assert all(sub.follows(t) for t in follows) and not any(sub.follows(t) for t in not_follows)


def test_config_check_words_for_the_pattern():
    raw = yaml.safe_load(DEFAULT_CONFIG.read_text())
    raw["sources"]["demo"]["capture"] = {"include": ["shop.*", "db_*.*"], "exclude": ["db_tmp*.*"]}
    said = describe_subscription(DbusConfig.model_validate(raw), "demo")
    assert said == (
        "reads demo.shop, and every topic demo.<schema> of a schema matching 'db_*' (not 'db_tmp*', nor "
        "the heartbeat schema 'dbus'), also one made after it started, from its first record"
    )
    assert describe_subscription(load_config(), "demo") == "reads demo.shop"


def test_dbus_config_check_says_which_topics_the_appender_follows(tmp_path, capsys):
    from cli import main as dbus

    assert dbus.main(["--config", _config(tmp_path, ["*.*"]), "config", "check"]) == 0
    out = capsys.readouterr().out
    assert "    appender: reads every topic demo.<schema> of a schema matching '*' (not the heartbeat " in out
    assert "schema 'dbus'), also one made after it started, from its first record\n" in out
    assert "    appender's topic pattern: (?!(?:demo|demo_ctrl|demo\\.dlq|" in out


@pytest.mark.parametrize(
    ("glob", "regex"),
    [
        ("db_*", "db_[A-Za-z0-9._-]*"),
        ("**", "[A-Za-z0-9._-]*"),
        ("a.b", r"a\.b"),
        ("[", "_x005b"),
        ("[öé]", "(?:_x00e9|_x00f6)"),
        ("[]a]", "(?:[a]|_x005d)"),
    ],
)
def test_glob_regex_by_example(glob, regex):
    assert glob_regex(glob) == regex
