"""dbuslib/stagemain.py: the command line, logging, configuration and error report every stage's ``main``
shares (one home: a stage's main.py keeps only its own arguments and body)."""

from __future__ import annotations

import importlib

import pytest

from dbuslib import stagemain
from dbuslib.errors import EXIT_CONFIG, EXIT_UNREACHABLE, EndpointError

STAGES = ("extractor", "dispatcher", "appender", "fullpuller", "heartbeat", "logprocessor")


@pytest.mark.parametrize("stage", STAGES)
def test_every_stage_main_builds_its_parser_here(stage, monkeypatch):
    made: list[str] = []
    real = stagemain.parser
    monkeypatch.setattr(stagemain, "parser", lambda prog, *a, **kw: made.append(prog) or real(prog, *a, **kw))
    main = importlib.import_module(f"{stage}.main")
    with pytest.raises(SystemExit) as done:
        main.main(["--help"])
    assert done.value.code == 0
    assert made == [stage]


@pytest.mark.parametrize("stage", ["dispatcher", "logprocessor"])
@pytest.mark.parametrize("value", ["0", "-3", "many"])
def test_a_max_offsets_that_is_not_a_positive_integer_is_refused_naming_the_option(stage, value, capsys):
    main = importlib.import_module(f"{stage}.main")
    with pytest.raises(SystemExit) as done:
        main.main(["--source", "demo", "--max-offsets-per-trigger", value])
    assert done.value.code == EXIT_CONFIG
    assert "--max-offsets-per-trigger" in capsys.readouterr().err


def test_the_body_gets_the_loaded_configuration_and_its_code_is_the_exit_code(tmp_path, monkeypatch):
    monkeypatch.setattr(stagemain, "load_config", lambda path: {"loaded": path})
    seen = []
    p = stagemain.parser("thing", "a stage")
    code = stagemain.run(
        "thing", p, ["--config", "c.yaml", "--source", "s"], lambda c, a: seen.append((c, a.source)) or 7
    )
    assert code == 7
    assert seen == [({"loaded": "c.yaml"}, "s")]


def test_an_error_becomes_the_stages_last_line_and_its_exit_code(monkeypatch, capsys):
    monkeypatch.setattr(stagemain, "load_config", lambda path: None)

    def body(cfg, args):
        raise EndpointError("Kafka at k:9092 is not reachable")

    assert (
        stagemain.run("thing", stagemain.parser("thing", "a stage"), ["--source", "s"], body)
        == EXIT_UNREACHABLE
    )
    assert capsys.readouterr().err.startswith("thing: ")


def test_an_error_not_named_is_not_swallowed(monkeypatch):
    monkeypatch.setattr(stagemain, "load_config", lambda path: None)

    def body(cfg, args):
        raise ValueError("a bug")

    with pytest.raises(ValueError, match="a bug"):
        stagemain.run("thing", stagemain.parser("thing", "a stage"), ["--source", "s"], body)
