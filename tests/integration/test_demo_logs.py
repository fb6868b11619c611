"""The demo's log step (cli/demolog.py; `make demo` step 6) on a log source of the test's own: its rules put
in the meta store, its log processor started as the demo starts it, lines written live to a file that a
private rsyslogd (the stack's script, ``RSYSLOG_HOME``: shipped_logs.py) ships, and every line found in its
table or the unknown bucket, as UMS. Run twice, as a second `make demo` would: the rules are left as they are
(nothing published), and only the second run's lines are counted, though the topics hold the first's.
"""

from __future__ import annotations

import json

import pytest
from shipped_logs import shipped_log_source

from cli import demolog
from cli.stages import Stages, processes_naming

pytestmark = pytest.mark.integration


@pytest.fixture
def log_source(tmp_path, cfg, kafka_up):  # kafka_up: fails at once when Kafka is down
    with shipped_log_source(tmp_path, cfg, "dl") as shipped:
        yield shipped.cfg, shipped.ds


def test_the_demo_log_step_twice(log_source, tmp_path, capsys):
    cfg, ds = log_source
    said = demolog.ensure_rules(cfg, ds)
    assert [s.split(":")[0] for s in said] == [f"{ds}.{ds}_schema.{t}" for t in demolog.TABLES]
    assert all("created, version 1 published" in s for s in said), said
    stages = Stages(cfg, ds, tmp_path / "stage-logs")
    stages.start("logprocessor")
    try:
        first = demolog.run(cfg, ds, stages, seconds=2, per_s=100, timeout=600)
        assert first.ok, first.summary(ds)
        assert demolog.ensure_rules(cfg, ds) == [
            s.replace("created, ", "").replace("published", "in force") for s in said
        ]
        second = demolog.run(cfg, ds, stages, seconds=2, per_s=100, timeout=120)
    finally:
        stages.stop_all()
    assert processes_naming(str(cfg.path)) == {}
    out = capsys.readouterr().out

    for outcome in (first, second):
        w, got = outcome.written, outcome.got
        assert w.path == tmp_path / "logs" / "demo.log"
        assert min(len(ids) for ids in w.ids.values()) > 20  # of every kind of line
        assert {k: got.ids[k] for k in w.ids} == w.ids  # every line in its place, this run's only
        assert got.shipped == w.lines and got.dead_letters == 0
    assert second.written.run != first.written.run
    assert second.summary(ds) == (
        f"demo: OK, {ds}: {second.written.lines} log lines written live, shipped by rsyslog, structured: "
        f"{len(second.written.ids['app_orders'])} in app_orders, {len(second.written.ids['http_access'])} in "
        f"http_access, {len(second.written.ids['unknown'])} in the unknown bucket, 0 dead letters"
    )

    # the UMS of each table: namespace, typed fields, the values of a line the writer wrote
    orders = json.loads(second.got.first["app_orders"])
    assert orders["protocol"]["type"] == "data_increment_data"
    assert orders["schema"]["namespace"].startswith(f"log_rsyslog.{ds}.{ds}_schema.app_orders.1.")
    fields = {f["name"]: f["type"] for f in orders["schema"]["fields"]}
    assert {k: fields[k] for k in ("log_time", "level", "order_id", "amount", "req_id")} == {
        "log_time": "datetime",
        "level": "string",
        "order_id": "long",
        "amount": "double",
        "req_id": "string",
    }
    access = json.loads(second.got.first["http_access"])
    row = dict(
        zip([f["name"] for f in access["schema"]["fields"]], access["payload"][0]["tuple"], strict=True)
    )
    assert row["method"] in ("GET", "POST") and row["path"].startswith("/api/orders/")
    assert row["req_id"].startswith(f"{second.written.run}-")
    assert (
        f"logprocessor -> {ds}.{ds}_schema.result: {len(second.written.ids['app_orders'])} rows of app_orders"
        in out
    )
    assert "data_increment_data log_rsyslog." in out
