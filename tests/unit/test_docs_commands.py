"""Every ``dbus ...`` command written in README.md, CONTRIBUTING.md and docs/*.md parses as written: the
command assembled by cli/main.py from the stages' commands.py accepts it (``dbus extractor ...`` through
extractor/main.py's own parser). A command on a line of its own (a code block) must parse whole; one named
in running text (```dbus reconcile```) must name a command that exists (its ``--help`` works). A command
read by bash's process substitution (``mapfile -t args < <(dbus spark args ...)``) counts as a line of its
own; arguments after ``--`` are spark-submit's, for ``dbus submit`` only (as cli/main.py splits them).
Lines with placeholders (``<ds>``, ``[--force]``, ``a|b``, ``...``) are templates, not commands, and are
left out."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from cli import main as dbus

REPO = Path(__file__).resolve().parents[2]
DOCS = [REPO / "README.md", REPO / "CONTRIBUTING.md", *sorted((REPO / "docs").glob("*.md"))]
TEMPLATE = re.compile(r"[<>\[\]|]|\.\.\.|\$\(")


def documented() -> list[tuple[str, str, bool]]:
    """(file, command, whole): ``whole`` for a command on a line of its own."""
    found = []
    for doc in DOCS:
        if not doc.exists():
            continue
        text = doc.read_text()
        lines = [ln.strip().removeprefix("$ ") for ln in text.splitlines()]
        lines += [inner for ln in lines for inner in re.findall(r"<\((dbus [^()]+)\)", ln)]
        inline = re.findall(r"`(dbus [^`]+)`", text)
        for line, whole in [*((ln, True) for ln in lines), *((ln, False) for ln in inline)]:
            line = line.split("  #")[0].split(" # ")[0].strip()
            if line.startswith("dbus ") and not TEMPLATE.search(line):
                found.append((doc.name, line, whole))
    return sorted(set(found))


def test_the_docs_have_commands():
    assert len(documented()) > 20


@pytest.mark.parametrize(("doc", "line", "whole"), documented())
def test_documented_command_parses(doc, line, whole):
    argv = shlex.split(line)[1:]
    if not whole:  # the command's words, then --help: exit 0 when the command exists
        words = argv[: next((i for i, w in enumerate(argv) if w.startswith("-")), len(argv))]
        argv = [*words, "--help"]
        with pytest.raises(SystemExit) as e:
            _parse(argv)
        assert e.value.code == 0, f"{doc}: {line}"
        return
    _parse(argv)


def _parse(argv: list[str]) -> None:
    passed: list[str] = []  # after "--": spark-submit's (cli/main.py main)
    if "--" in argv:
        argv, passed = argv[: argv.index("--")], argv[argv.index("--") + 1 :]
    args = dbus._parser().parse_args(argv)
    assert not passed or args.command == "submit", f"arguments after -- for {args.command}: {passed}"
    assert callable(args.handler)


@pytest.mark.parametrize(
    "argv",
    [
        ["extractor", "--help"],
        ["extractor", "run", "--help"],
        ["extractor", "status", "--help"],
        ["extractor", "reset", "--help"],
    ],
)
def test_every_level_of_dbus_extractor_answers_help_without_a_configuration(argv, monkeypatch, capsys):
    """``dbus extractor --help`` failed ("unrecognized arguments") and ``extractor run --help`` looked for a
    configuration first: a pip user without one got an error instead of the help."""
    from cli.main import main

    monkeypatch.setenv("DBUS_CONFIG", "/nonexistent/dbus.yaml")
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 0
    assert capsys.readouterr().out.startswith(f"usage: dbus {' '.join(argv[:-1])}")


def test_the_verify_after_the_demo_names_the_demos_replica_database():
    """The README's `dbus verify --replica` after `make demo` reads the database the demo replicated into
    (cli/demoreplica.py), which a reader copied as written once missed (issue 32: `/replica`)."""
    from cli import demoreplica

    text = (REPO / "README.md").read_text()
    after_demo = text.split("keeps a replica of `shop.orders`", 1)[1].split("\n8. ", 1)[0]
    urls = re.findall(r"--replica (\S+?)`", after_demo)
    assert urls and all(u.rsplit("/", 1)[1] == demoreplica.DATABASE for u in urls), urls
