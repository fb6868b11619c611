"""The configuration: loaded once, validated with file and key named, frozen, secrets masked."""

from pathlib import Path

import pytest
import yaml
from pydantic import ValidationError

from dbuslib.config import DEFAULT_CONFIG, load_config
from dbuslib.errors import ConfigError


def _write(tmp_path: Path, mutate) -> Path:
    raw = yaml.safe_load(DEFAULT_CONFIG.read_text())
    mutate(raw)
    path = tmp_path / "dbus.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def test_shipped_config_is_valid():
    cfg = load_config()
    assert cfg.source("demo").mysql.port == 13306
    assert cfg.source("demo").topics.name("result", "demo", "shop") == "demo.shop.result"


def test_config_is_frozen():
    cfg = load_config()
    with pytest.raises(ValidationError):
        cfg.source("demo").mysql.port = 1


def test_secrets_are_masked_in_repr():
    cfg = load_config()
    text = repr(cfg)
    assert "password=SecretStr('**********')" in text
    assert "demo-salt" not in text
    assert "dbus:dbus@" not in text


def _set(*keys_and_value):
    *keys, value = keys_and_value

    def mutate(raw):
        node = raw
        for k in keys[:-1]:
            node = node[k]
        node[keys[-1]] = value

    return mutate


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (_set("sources", "demo", "mysql", "port", 70000), "sources.demo.mysql.port"),
        (
            _set("sources", "demo", "mysql", "prot", 1),
            "sources.demo.mysql.prot: Extra inputs are not permitted",
        ),
        (_set("sources", "demo", "capture", "include", ["shop"]), "sources.demo.capture.include"),
        (_set("sources", "demo", "topics", "raw", "{ds}.{tabel}"), "unknown placeholder(s) ['tabel']"),
        (_set("sources", "demo", "masking", "shop.customers", "phone", {"type": "regex"}), "needs pattern"),
        (
            _set(
                "sources",
                "demo",
                "masking",
                "shop.customers",
                "phone",
                {"type": "regex", "pattern": "(", "replacement": ""},
            ),
            "not a valid regex",
        ),
        (_set("sources", "demo", "masking", "shop.customers", "phone", {"type": "rot13"}), "phone.type"),
        (_set("sources", "demo", "heartbeat", "interval_s", 0.5), "sources.demo.heartbeat.interval_s"),
        (_set("endpoints", "zookeeper", "root", "DBus/"), "endpoints.zookeeper.root"),
        (_set("sources", {}), "at least one source"),
        (_set("spark", "mastr", "local"), "spark.mastr"),
    ],
)
def test_bad_values_name_the_file_and_key(tmp_path, mutate, expected):
    path = _write(tmp_path, mutate)
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert str(path) in str(err.value)
    assert expected in str(err.value)


def test_unknown_source_names_the_known_ones():
    with pytest.raises(ConfigError, match="no source 'nope'.*known: demo"):
        load_config().source("nope")


@pytest.mark.parametrize(("text", "expected"), [("a: [", "not valid YAML"), ("- 1\n", "must be a mapping")])
def test_unreadable_files(tmp_path, text, expected):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=expected):
        load_config(path)


def test_missing_file():
    with pytest.raises(ConfigError, match="no such configuration file"):
        load_config("/nonexistent/dbus.yaml")


def test_relative_paths_resolve_against_the_config_folder():
    cfg = load_config()
    assert cfg.resolve(cfg.spark.jars_file) == DEFAULT_CONFIG.parent.parent / ".stack" / "jars" / "spark.jars"


def test_real_time_batches_last_300_s_but_30_for_an_appender_following_a_schema_glob(tmp_path):
    demo = load_config().source("demo")  # literal schemas: shop, dbus
    assert (demo.dispatcher.realtime_checkpoint_s, demo.appender.realtime_checkpoint_s) == (300, 300)

    def globbed(raw, batch=None):
        src = raw["sources"]["demo"]
        src["capture"]["include"] = ["db_*.*", "shop.orders"]
        if batch:
            src.setdefault("appender", {})["realtime_checkpoint_s"] = batch

    src = load_config(_write(tmp_path, globbed)).source("demo")
    assert (src.dispatcher.realtime_checkpoint_s, src.appender.realtime_checkpoint_s) == (300, 30)
    src = load_config(_write(tmp_path, lambda raw: globbed(raw, 600))).source("demo")
    assert src.appender.realtime_checkpoint_s == 600, "said in the file: kept"


def test_stages_run_in_real_time_mode_unless_an_avro_appender_or_a_setting_says_otherwise(tmp_path):
    demo = load_config().source("demo")
    assert (demo.dispatcher.trigger, demo.appender.trigger) == ("realtime", "realtime")

    def avro(raw, trigger=None):
        src = raw["sources"]["demo"]
        src.setdefault("ums", {})["format"] = "avro"
        if trigger:
            src.setdefault("appender", {})["trigger"] = trigger

    src = load_config(_write(tmp_path, avro)).source("demo")
    assert (src.dispatcher.trigger, src.appender.trigger) == ("realtime", "microbatch")
    src = load_config(_write(tmp_path, lambda raw: avro(raw, "realtime"))).source("demo")
    assert src.appender.trigger == "realtime", "said in the file: kept"
    with pytest.raises(ConfigError, match="realtime_checkpoint_s"):
        load_config(_write(tmp_path, _set("sources", "demo", "appender", "realtime_checkpoint_s", 2)))
