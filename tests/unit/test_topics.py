"""dbuslib.topics: a source's topics, the one escaping of schema and table names, Kafka's rule."""

import re

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from dbuslib.config import DEFAULT_CONFIG, Source, load_config
from dbuslib.errors import ConfigError
from dbuslib.topics import (
    escape,
    include_problems,
    literal_schemas,
    render,
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
