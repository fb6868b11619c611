"""dbuslib.errors: one exit-code map for every stage and the dbus command, and the table in docs/errors.md."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from cli.extras import MissingExtraError
from dbuslib.errors import (
    EXIT_CODES,
    ConfigError,
    DbusError,
    EndpointError,
    StackError,
    error_line,
    exit_code,
)
from dbuslib.kafka import MessageLimitError
from dbuslib.retry import RetriesExhausted
from extractor.errors import DeposedError, NotLeaderError
from extractor.reader import BinlogPurgedError, ServerSettingsError
from fullpuller.reconcile import NoDataError, NoPrimaryKeyError
from fullpuller.split import SplitError
from fullpuller.verify import VerifyError
from ums.errors import BadNamespaceError
from ums.masking import MaskError

DOCS = Path(__file__).resolve().parents[2] / "docs" / "errors.md"


@pytest.mark.parametrize(
    ("err", "code"),
    [
        (ConfigError("conf/dbus.yaml: sources.demo: missing"), 2),
        (MessageLimitError("too big"), 2),
        (BinlogPurgedError("mysql-bin.000001 is gone"), 2),
        (ServerSettingsError("binlog_format is STATEMENT"), 2),
        (NoPrimaryKeyError("no key"), 2),
        (VerifyError("cannot compare"), 2),
        (BadNamespaceError("a.b"), 2),
        (MaskError("columns.x: unknown"), 2),
        (EndpointError("kafka 127.0.0.1:1"), 3),
        (RetriesExhausted("gave up"), 3),
        (DeposedError("epoch 4 > 3"), 4),
        (MissingExtraError("dbus submit needs the server extra"), 7),
        (DbusError("odd"), 1),
        (StackError("mariadb is down"), 1),
        (NotLeaderError("another leads"), 1),
        (NoDataError("empty"), 1),
        (SplitError("FULLPULL_BAD_SPLIT_COL", "no such column"), 1),
        (ValueError("not ours"), 1),
        (KeyboardInterrupt(), 1),
    ],
)
def test_exit_code_of_each_error(err, code):
    assert exit_code(err) == code


def test_exit_code_attribute_agrees_with_the_map():
    for err in (ConfigError("x"), RetriesExhausted("x"), VerifyError("x"), NoPrimaryKeyError("x")):
        assert err.exit_code == exit_code(err)


def test_error_line_names_the_code_once():
    assert error_line("dbus", ConfigError("f.yaml: k: bad")) == "dbus: CONFIG_INVALID: f.yaml: k: bad"
    assert error_line("dbus", BadNamespaceError("x")) == "dbus: UMS_BAD_NAMESPACE: x"
    assert error_line("fullpuller", SplitError("FULLPULL_BAD_REQUEST", "why")) == (
        "fullpuller: FULLPULL_BAD_REQUEST: why"
    )


def _documented() -> dict[int, str]:
    text = DOCS.read_text()
    section = text[text.index("## Exit codes of `dbus` and the stages") :]
    section = section[: section.index("\n\n", section.index("| code | meaning |"))]
    rows = re.findall(r"^\| (\d) \| (.*) \|$", section, re.MULTILINE)
    return {int(n): meaning for n, meaning in rows}


def test_docs_table_lists_each_exit_code_once_and_agrees_with_the_map():
    documented = _documented()
    assert sorted(documented) == list(range(8))
    for code, number in EXIT_CODES.items():
        holders = [n for n, meaning in documented.items() if f"`{code}`" in meaning]
        assert holders == [number], (
            f"docs/errors.md: `{code}` listed under {holders}, exit_code says {number}"
        )
