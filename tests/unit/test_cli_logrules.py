"""``dbus logrules`` end to end on a SQLite meta store (no server): add a table, import the section 5.7 rule
file, publish (without the reload message, which needs Kafka: tests/integration/test_logrules_live.py sends
it), export the published version back equal to the file; and every bad input exits 2 with one line that
names the table, group, rule or file, never a traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import rule_engines
import yaml

from cli import main as dbus
from dbuslib.config import DEFAULT_CONFIG

REPO = Path(__file__).resolve().parents[2]
RULES = REPO / "conf" / "demo" / "logrules" / "order_events.json"
T = ["--source", "applog", "--table", "order_events"]


@pytest.fixture
def config(tmp_path, monkeypatch):
    raw = yaml.safe_load(DEFAULT_CONFIG.read_text())
    raw["log_sources"] = {"applog": {"type": "log_logstash"}}
    raw["endpoints"]["meta_store"]["url"] = f"sqlite:///{tmp_path / 'meta.db'}"
    raw.setdefault("spark", {})["jars_file"] = str(rule_engines.jars_file(tmp_path))  # publish asks the JVM
    path = tmp_path / "dbus.yaml"
    path.write_text(yaml.safe_dump(raw))
    monkeypatch.setenv("DBUS_CONFIG", str(path))
    return path


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = dbus.main(["logrules", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_add_import_publish_export_round_trips_the_file(config, capsys, tmp_path):
    assert (
        run(capsys, "add-table", *T)[1]
        == "applog.applog_schema.order_events: created (status ok, version 0)\n"
    )
    code, out, _ = run(capsys, "import", *T, str(RULES), "--active")
    assert (code, out) == (
        0,
        "applog.applog_schema.order_events: added 1 group(s), active: 'order_events' (8 rules)\n",
    )
    code, out, _ = run(capsys, "publish", *T, "--no-reload")
    assert (code, out) == (
        0,
        "applog.applog_schema.order_events: version 1 published: groups ['order_events']; new columns: "
        "log_time datetime, level string, order_id long, amount double, src_host string\n",
    )
    assert run(capsys, "export", *T, "--published")[1] == RULES.read_text()
    assert run(capsys, "export", *T)[1] == RULES.read_text()  # the draft
    out_file = tmp_path / "v1.json"
    assert run(capsys, "export", *T, "--version", "1", "-o", str(out_file))[0] == 0
    assert out_file.read_text() == RULES.read_text()
    again = run(capsys, "publish", *T, "--no-reload")
    assert again[:2] == (
        0,
        "applog.applog_schema.order_events: the active groups equal version 1: nothing to publish\n",
    )
    code, out, _ = run(capsys, "tables", "--source", "applog")
    assert out.splitlines() == [
        "TABLE         STATUS  VERSION  GROUPS  COLUMNS",
        "order_events  ok      1        1/1     "
        "log_time datetime, level string, order_id long, amount double, src_host string",
    ]


def test_show_prints_each_rule_readably(config, capsys):
    run(capsys, "add-table", *T)
    run(capsys, "import", *T, str(RULES))
    code, out, _ = run(capsys, "show", *T)
    lines = out.splitlines()
    assert lines[:3] == [
        "applog.applog_schema.order_events: status ok, nothing published yet",
        "draft: 1 group(s), 0 active; the active groups differ from the published version",
        "group 'order_events': inactive, 8 rule(s)",
    ]
    assert lines[3] == (
        '   1 keyFilter        {ruleParamter: "app_log", ruleOperate: "==", ruleType: "string", '
        'filterKey: "type"}'
    )
    assert lines[7] == '   5 regexExtract     {ruleScope: "3", ruleParamter: "order=(\\d+) amount=([\\d.]+)"}'
    assert lines[10:12] == [
        '   8 saveAs           {ruleScope: "0", name: "log_time", type: "DATETIME"}',
        '                      {ruleScope: "1", name: "level", type: "STRING"}',
    ]


def test_group_switches_a_draft_group_and_publish_takes_only_active_ones(config, capsys, tmp_path):
    run(capsys, "add-table", *T)
    run(capsys, "import", *T, str(RULES), "--active")
    other = json.loads(RULES.read_text())
    other[0]["groupName"] = "copy"
    copy = tmp_path / "copy.json"
    copy.write_text(json.dumps(other))
    run(capsys, "import", *T, str(copy))
    assert run(capsys, "group", *T, "--group", "copy", "--active")[1] == (
        "applog.applog_schema.order_events: group 'copy' is active in the draft "
        "(dbus logrules publish applies it)\n"
    )
    run(capsys, "group", *T, "--group", "order_events", "--inactive")
    assert "groups ['copy']; new columns" in run(capsys, "publish", *T, "--no-reload")[1]


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["tables", "--source", "nolog"], "CONFIG_INVALID: "),
        (
            ["show", "--source", "applog", "--table", "nope"],
            "LOG_RULES_NOT_FOUND: applog.applog_schema.nope: ",
        ),
        (["add-table", "--source", "applog", "--table", "a.b"], "LOG_RULES_BAD_NAME: log table name 'a.b' "),
        (["import", *T, "/nonexistent/r.json"], "LOG_FILE_UNREADABLE: /nonexistent/r.json: cannot read"),
        (["import", *T, "{bad}"], "LOG_RULE_INVALID: {bad}: not JSON"),
        (
            ["import", *T, "{unknown_op}"],
            "LOG_RULE_INVALID: {unknown_op}: group 'g' rule 2 (splt): unknown operator",
        ),
        (
            ["import", *T, "{dup}"],
            "LOG_RULES_CONFLICT: applog.applog_schema.order_events: the draft has group",
        ),
        (
            ["group", *T, "--group", "x", "--active"],
            "LOG_RULES_NOT_FOUND: applog.applog_schema.order_events: no draft group 'x'",
        ),
        (["publish", *T], "LOG_PUBLISH_REFUSED: applog.applog_schema.order_events: no active draft group"),
        (
            ["export", *T, "--published"],
            "LOG_RULES_NOT_FOUND: applog.applog_schema.order_events has no published version",
        ),
        (
            ["export", *T, "-o", "/nonexistent/out.json"],
            "LOG_FILE_UNREADABLE: /nonexistent/out.json: cannot write",
        ),
    ],
)
def test_bad_input_exits_2_naming_it(config, capsys, tmp_path, argv, expected):
    files = {
        "{bad}": "[{",
        "{unknown_op}": json.dumps(
            [{"groupName": "g", "rules": [{"ruleTypeName": "trim"}, {"ruleTypeName": "splt"}]}]
        ),
        "{dup}": RULES.read_text(),
    }
    for i, a in enumerate(argv):
        if a in files:
            (tmp_path / "f.json").write_text(files[a])
            argv[i] = str(tmp_path / "f.json")
            expected = expected.replace(a, argv[i])
    run(capsys, "add-table", *T)
    run(capsys, "import", *T, str(RULES))
    code, out, err = run(capsys, *argv)
    assert code == 2
    assert err.startswith(f"dbus: {expected}"), err
    assert len(err.splitlines()) == 1 and "Traceback" not in err


def test_argument_errors_exit_2(config, capsys):
    with pytest.raises(SystemExit) as e:
        dbus.main(["logrules", "group", *T, "--group", "g"])  # neither --active nor --inactive
    assert e.value.code == 2


def test_an_unreachable_meta_store_exits_3_naming_it(config, capsys, tmp_path):
    raw = yaml.safe_load(config.read_text())
    raw["endpoints"]["meta_store"]["url"] = "mysql+pymysql://dbus:dbus@127.0.0.1:1/dbus"
    config.write_text(yaml.safe_dump(raw))
    code, _, err = run(capsys, "tables", "--source", "applog")
    assert code == 3
    assert err.startswith("dbus: ENDPOINT_UNREACHABLE: meta store at 127.0.0.1:1: "), err


def test_test_runs_the_sample_and_exits_1_for_a_line_that_broke_a_rule(config, capsys):
    sample = str(REPO / "conf" / "demo" / "logrules" / "order_events.logstash.jsonl")
    run(capsys, "add-table", *T)
    run(capsys, "import", *T, str(RULES))  # inactive: --group runs it all the same
    code, out, _ = run(capsys, "test", *T, "--sample", sample, "--group", "order_events")
    assert code == 1
    assert "    step 8 saveAs: error: group 'order_events' rule 8 (saveAs): saveAs column 'amount'" in out
    assert out.splitlines()[-1] == (
        "5 line(s): 1 accepted ('order_events' 1), 1 accepted by no group, 1 broke a rule, "
        "1 refused by the adapter, 1 heartbeat(s)"
    )
    code, _, err = run(capsys, "test", *T, "--sample", sample)
    assert (code, err) == (
        2,
        "dbus: LOG_RULES_NOT_FOUND: applog.applog_schema.order_events: the draft has no active group "
        "(groups: 'order_events'); test one with --group NAME\n",
    )
    code, _, err = run(capsys, "test", *T, "--sample", sample, "--group", "order_events", "--upto", "9")
    assert (code, err) == (2, "dbus: CONFIG_INVALID: --upto 9: the groups tested have rules 1 to 8\n")
    code, out, _ = run(capsys, "test", *T, "--sample", sample, "--group", "order_events", "--upto", "2")
    assert "stopped after step 2 of 8" in out and code == 1  # line 5 is still refused by the adapter
