"""cli/logtest.py: how ``dbus logrules test`` prints a group's steps on one line (spec §5.7's example), a
line that no group accepts, a line that breaks a rule (the rule named), ``--upto``, rows after saveAs, and
``--raw`` lines wrapped as records the adapters read back."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli.logtest import show_rows, show_steps
from dbuslib.errors import ConfigError
from logprocessor.adapters import Adapted, AdapterSettings, KafkaRecord, adapt
from logprocessor.adapters import as_record as wrap
from logprocessor.grammar import Entry, Group, Rule, groups_from_json

REPO = Path(__file__).resolve().parents[2]
(ORDER_EVENTS,) = groups_from_json((REPO / "conf" / "demo" / "logrules" / "order_events.json").read_text())
RECORD = json.dumps(
    {
        "@timestamp": "2024-03-05T02:15:30.123Z",
        "host": "app-01.prod",
        "type": "app_log",
        "message": "2024-03-05 10:15:30.100 | [WARN] | OrderService order=98123 amount=45.50",
    }
)


def test_the_spec_example_prints_every_step_then_the_named_columns():
    printed, outcome = show_steps(ORDER_EVENTS, RECORD, None)
    assert outcome == "accepted"
    assert printed[0] == f"step 1 keyFilter: [{json.dumps(RECORD)}]"
    assert printed[1:] == [
        'step 2 toIndex: ["app-01.prod", "2024-03-05 10:15:30.100 | [WARN] | OrderService order=98123 '
        'amount=45.50"]',
        'step 3 filter: ["app-01.prod", "2024-03-05 10:15:30.100 | [WARN] | OrderService order=98123 '
        'amount=45.50"]',
        'step 4 split: ["app-01.prod", "2024-03-05 10:15:30.100", "[WARN]", "OrderService order=98123 '
        'amount=45.50"]',
        'step 5 regexExtract: ["app-01.prod", "2024-03-05 10:15:30.100", "[WARN]", "98123", "45.50"]',
        'step 6 trim: ["app-01.prod", "2024-03-05 10:15:30.100", "WARN", "98123", "45.50"]',
        'step 7 select: ["2024-03-05 10:15:30.100", "WARN", "98123", "45.50", "app-01.prod"]',
        'step 8 saveAs: {"log_time": "2024-03-05 10:15:30.100", "level": "WARN", "order_id": "98123", '
        '"amount": 45.5, "src_host": "app-01.prod"}',
        "accepted: 1 row(s)",
    ]


def test_upto_stops_after_that_step():
    printed, outcome = show_steps(ORDER_EVENTS, RECORD, 4)
    assert outcome == "stopped"
    assert [p.split(":")[0] for p in printed] == [
        "step 1 keyFilter",
        "step 2 toIndex",
        "step 3 filter",
        "step 4 split",
        "stopped after step 4 of 8",
    ]


def test_a_line_the_group_does_not_accept_ends_at_the_rule_that_left_no_rows():
    other = RECORD.replace("OrderService", "PaymentService")
    printed, outcome = show_steps(ORDER_EVENTS, other, None)
    assert outcome == "missed"
    assert printed[-1] == "step 3 filter: no rows: the group does not accept the line"


def test_a_line_that_breaks_a_rule_names_group_rule_and_operator():
    group = Group(
        "g",
        (
            Rule("split", (Entry(scope="0", rule_type="string", param=" "),)),
            Rule("keyFilter", (Entry(filter_key="k", operate="==", rule_type="string", param="x"),)),
        ),
    )
    printed, outcome = show_steps(group, "not json", None)
    assert outcome == "broken"
    assert printed[0] == 'step 1 split: ["not", "json"]'
    assert printed[1].startswith("step 2 keyFilter: error: group 'g' rule 2 (keyFilter): ")


def test_rows_print_as_json_arrays_and_named_after_save_as():
    assert show_rows([["a", None], ["b", "c"]], None) == ['["a", null]', '["b", "c"]']
    assert show_rows([["ü", 1.5]], ("name", "x")) == ['{"name": "ü", "x": 1.5}']
    assert show_rows([["a"]], ("name", "x")) == ['["a"]']  # names that do not fit: as an array


@pytest.mark.parametrize(
    "log_type", ["log_rsyslog", "log_logstash", "log_logstash_json", "log_filebeat", "log_flume", "log_json"]
)
def test_a_raw_line_is_wrapped_as_a_record_the_adapter_reads_back(log_type):
    settings = AdapterSettings(log_type, json_host="h")
    text = 'a "quoted" line ü'
    got = adapt(KafkaRecord(wrap(log_type, text, "s.log").encode(), None, 0, 0, 0), settings)
    assert isinstance(got, Adapted) and not got.heartbeat
    (line,) = got.lines
    assert json.loads(line)["message"] == text


def test_raw_refuses_log_ums():
    with pytest.raises(ConfigError, match="a log_ums record is a UMS message"):
        wrap("log_ums", "x", "s.log")
