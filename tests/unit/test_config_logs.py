"""``log_sources``: the log data sources' keys, defaults and refusals (docs/configuration.md)."""

from pathlib import Path

import pytest
import yaml

from dbuslib.config import DEFAULT_CONFIG, load_config
from dbuslib.errors import ConfigError


def _load(tmp_path: Path, log_sources: dict):
    raw = yaml.safe_load(DEFAULT_CONFIG.read_text())
    raw["log_sources"] = log_sources
    path = tmp_path / "dbus.yaml"
    path.write_text(yaml.safe_dump(raw))
    return load_config(path)


def test_defaults_follow_the_original(tmp_path):
    src = _load(tmp_path, {"applog": {}}).log_source("applog")
    assert (src.type, src.schema_name("applog"), src.processor.multi_table) == (
        "log_rsyslog",
        "applog_schema",
        True,
    )
    assert src.processor.heartbeat_type == "dbus-heartbeat"
    assert src.topics.name("raw", "applog") == "applog"
    assert src.topics.name("result", "applog", "applog_schema") == "applog.applog_schema.result"
    assert src.topics.name("unknown", "applog") == "applog._unknown_table_"
    assert src.topics.name("ctrl", "applog") == "applog_ctrl"


def test_a_per_table_result_topic_is_escaped(tmp_path):
    cfg = _load(tmp_path, {"applog": {"topics": {"result": "{ds}.{schema}.{table}"}}})
    assert cfg.log_source("applog").topics.name("result", "applog", "s", "tö") == "applog.s.t_x00f6"


@pytest.mark.parametrize(
    ("log_sources", "expected"),
    [
        ({"demo": {}}, "log_sources: ['demo'] already name(s) a source under 'sources'"),
        ({"a b": {}}, "log source names may hold letters, digits"),
        ({"j": {"type": "log_json"}}, "log_sources.j: Value error, host: a log_json source needs the host"),
        ({"x": {"type": "log_syslog"}}, "log_sources.x.type"),
        ({"x": {"topics": {"unknown": "{ds}.{table}"}}}, "unknown: unknown placeholder(s) ['table']"),
        ({"x": {"processor": {"max_line_bytes": 10}}}, "log_sources.x.processor.max_line_bytes"),
        ({"x": {"mysql": {}}}, "log_sources.x.mysql: Extra inputs are not permitted"),
    ],
)
def test_bad_log_sources_name_the_key(tmp_path, log_sources, expected):
    with pytest.raises(ConfigError) as e:
        _load(tmp_path, log_sources)
    assert expected in str(e.value)


def test_unknown_log_source_names_the_known_ones(tmp_path):
    cfg = _load(tmp_path, {"applog": {}})
    with pytest.raises(ConfigError, match=r"no log source 'nope' under 'log_sources' \(known: applog\)"):
        cfg.log_source("nope")
