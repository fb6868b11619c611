"""``logging.format``: DBus's lines as JSON in Spark's structured form (dbuslib/logs.py), the last line of a
failing stage included, and the Spark stages told to write theirs so."""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path

import pytest
import yaml

from dbuslib import logs
from dbuslib import spark as dspark
from dbuslib.config import DEFAULT_CONFIG, load_config
from dbuslib.errors import EndpointError, report

# SparkLayout.json's ts: yyyy-MM-dd'T'HH:mm:ss.SSS'Z', UTC
SPARK_TS = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z")
SPARK_FIELDS = {"ts", "level", "msg", "context", "logger"}  # and exception, when there is one


def config_with(tmp_path: Path, fmt: str | None):
    raw = yaml.safe_load(DEFAULT_CONFIG.read_text())
    if fmt is not None:
        raw["logging"] = {"format": fmt}
    path = tmp_path / f"dbus-{fmt}.yaml"
    path.write_text(yaml.safe_dump(raw))
    return load_config(path)


@pytest.fixture
def root_stream():
    """The root logger with one stream handler of its own, and the text format again afterwards."""
    import io

    root = logging.getLogger()
    saved, level = root.handlers[:], root.level
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter(logs.FORMAT))
    root.handlers[:] = [handler]
    root.setLevel(logging.INFO)
    yield stream
    logs._format = "text"
    root.handlers[:] = saved
    root.setLevel(level)


def test_json_lines_have_sparks_fields_and_timestamp(tmp_path, root_stream):
    config_with(tmp_path, "json")  # load_config follows the file's format
    logging.getLogger("extractor.loop").info("demo: leading (epoch %s)", 3)
    try:
        raise ValueError("bad row")
    except ValueError:
        logging.getLogger("appender.rules").exception("a rule failed")
    first, second = (json.loads(line) for line in root_stream.getvalue().splitlines())
    assert set(first) == SPARK_FIELDS and SPARK_TS.fullmatch(first["ts"])
    assert (first["level"], first["logger"], first["msg"]) == (
        "INFO",
        "extractor.loop",
        "demo: leading (epoch 3)",
    )
    assert second["exception"]["class"] == "ValueError" and second["exception"]["msg"] == "bad row"


def test_text_is_the_default_and_a_text_file_switches_back(tmp_path, root_stream):
    config_with(tmp_path, None)
    logging.getLogger("x").info("plain")
    config_with(tmp_path, "json")
    config_with(tmp_path, "text")
    logging.getLogger("x").info("plain again")
    lines = root_stream.getvalue().splitlines()
    assert [line.split(" x: ")[1] for line in lines] == ["plain", "plain again"]


def test_a_failing_stages_last_line_is_json_too(tmp_path, root_stream, capsys):
    config_with(tmp_path, "json")
    assert report("extractor", EndpointError("Kafka at k:9092 is not reachable")) == 3
    line = json.loads(capsys.readouterr().err)
    assert line["msg"] == "extractor: ENDPOINT_UNREACHABLE: Kafka at k:9092 is not reachable"
    assert line["level"] == "ERROR" and line["context"] == {
        "stage": "extractor",
        "code": "ENDPOINT_UNREACHABLE",
    }
    config_with(tmp_path, "text")
    report("extractor", EndpointError("gone"))
    assert capsys.readouterr().err == "extractor: ENDPOINT_UNREACHABLE: gone\n"


def test_spark_writes_json_lines_only_when_asked(tmp_path, root_stream):
    assert dspark.settings(config_with(tmp_path, "json"))["spark.log.structuredLogging.enabled"] == "true"
    assert "spark.log.structuredLogging.enabled" not in dspark.settings(config_with(tmp_path, "text"))


def test_an_unknown_format_names_the_key(tmp_path):
    from dbuslib.errors import ConfigError

    with pytest.raises(ConfigError, match=r"logging.format"):
        config_with(tmp_path, "xml")
