import argparse

import pytest

from heartbeat import cli


def parser():
    p = argparse.ArgumentParser(prog="dbus")
    p.add_argument("--config", default="conf/dbus.yaml")
    cli.add_parsers(p.add_subparsers(dest="command", required=True))
    return p


@pytest.mark.parametrize(
    ("argv", "handler", "config", "no_monitor"),
    [
        (["heartbeat", "run", "--source", "demo"], cli.run_cli, "conf/dbus.yaml", False),
        (["heartbeat", "run", "--source", "demo", "--no-monitor"], cli.run_cli, "conf/dbus.yaml", True),
        (["--config", "a.yaml", "heartbeat", "run", "--source", "demo"], cli.run_cli, "a.yaml", False),
        (["heartbeat", "monitor", "--source", "demo", "--config", "b.yaml"], cli.monitor_cli, "b.yaml", None),
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
