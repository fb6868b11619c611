import argparse

import pytest

from heartbeat import commands as hb
from heartbeat import main as heartbeat_main


def parser():
    p = argparse.ArgumentParser(prog="dbus")
    p.add_argument("--config", default="conf/dbus.yaml")
    hb.add_parsers(p.add_subparsers(dest="command", required=True))
    return p


@pytest.mark.parametrize(
    ("argv", "handler", "config", "no_monitor"),
    [
        (["heartbeat", "run", "--source", "demo"], hb.run_cli, "conf/dbus.yaml", False),
        (["heartbeat", "run", "--source", "demo", "--no-monitor"], hb.run_cli, "conf/dbus.yaml", True),
        (["--config", "a.yaml", "heartbeat", "run", "--source", "demo"], hb.run_cli, "a.yaml", False),
        (
            ["heartbeat", "monitor", "--source", "demo", "--config", "b.yaml"],
            hb.monitor_cli,
            "b.yaml",
            None,
        ),
    ],
)
def test_commands(argv, handler, config, no_monitor):
    args = parser().parse_args(argv)
    assert (args.handler, args.config, args.source) == (handler, config, "demo")
    assert getattr(args, "no_monitor", None) == no_monitor


@pytest.mark.parametrize(
    "argv", [["heartbeat"], ["heartbeat", "run"], ["heartbeat", "monitor", "--no-monitor"]]
)
def test_bad_usage_exits_2(argv):
    with pytest.raises(SystemExit) as e:
        parser().parse_args(argv)
    assert e.value.code == 2


@pytest.mark.parametrize(
    ("argv", "action", "config", "no_monitor"),
    [
        (["run", "--source", "demo"], "run", None, False),
        (["--config", "a.yaml", "run", "--source", "demo", "--no-monitor"], "run", "a.yaml", True),
        (["monitor", "--source", "demo", "--config", "b.yaml"], "monitor", "b.yaml", None),
    ],
)
def test_python_m_heartbeat_takes_the_same_commands(argv, action, config, no_monitor):
    args = heartbeat_main._parser().parse_args(argv)
    assert (args.action, args.config, args.source) == (action, config, "demo")
    assert getattr(args, "no_monitor", None) == no_monitor


def test_python_m_heartbeat_with_a_bad_configuration_exits_2(tmp_path, capsys):
    assert heartbeat_main.main(["--config", str(tmp_path / "missing.yaml"), "run", "--source", "demo"]) == 2
    assert capsys.readouterr().err.startswith("heartbeat: CONFIG_INVALID: ")
