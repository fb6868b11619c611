from dbuslib.config import load_config
from dbuslib.topics import literal_schemas, source_topics


def test_literal_schemas_skip_globs_and_heartbeat_schema():
    src = load_config().source("demo")
    assert literal_schemas(src) == ["shop"]


def test_source_topics_follow_the_original_names():
    src = load_config().source("demo")
    assert source_topics("demo", src) == [
        "demo", "demo_ctrl", "demo.dlq", "demo_data_shards", "demo_callback", "global_ctrl_topic", "demo.shop",
        "demo.shop.result",
    ]


def test_per_table_result_topics_are_not_created_ahead():
    src = load_config().source("demo")
    per_table = src.model_copy(update={"topics": src.topics.model_copy(update={"result": "{ds}.{schema}.{table}"})})
    names = source_topics("demo", per_table)
    assert "demo.shop" in names and not any("None" in n or n.startswith("demo.shop.") for n in names)
    assert per_table.topics.name("result", "demo", "shop", "orders") == "demo.shop.orders"
