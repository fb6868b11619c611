"""The console's Log rules page in Debian's Chromium, on the real stack, with the log processor running
(issue 18, acceptance 1's "a log rule edited on the page shows each step's output and, once published,
changes the rows that arrive"; acceptance 2 for rules).

The module has a log source of its own shaped as conf/dbus.yaml's ``applog`` (``pytest_cr_<hex>``, type
log_rsyslog; topics, checkpoints and rules of its own, so the demo's ``applog`` and its processor are left
alone), whose table ``app_orders`` has the demo's rules (conf/demo/logrules/app_orders.json), set up as
cli/demolog.py sets them up (``add_table``, ``import_groups --replace --active``, ``publish``: version 1).
Its log processor starts with the module (``cli.stages.Stages``, as the log tests start it) while the browser
works; shipper records are produced straight to the raw topic as rsyslog writes them. The console runs over
that configuration (``console_server`` is overridden here; ``logged_in`` and ``screenshot`` are conftest's).

- an operator opens the table from the rules page, renames saveAs's ``level`` to ``severity`` in the
  operator's form, runs the preview on pasted lines and sees each step's row (``severity`` after saveAs, the
  payment line rejected by rule 2, filter), publishes (version 2; the page follows the reload until the
  processor applied it), and a line written after that arrives in the result topic with ``severity``;
- a viewer sees the same editor read-only, without save or publish, takes the newest lines of the raw
  topic as the sample and previews them; the server refuses a viewer's publish (403) and a POST without the
  CSRF token (400).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from console_env import ConsoleServer
from helpers import delete_zk_tree, wait_until

from cli.stages import Stages
from dbuslib import kafka
from dbuslib.config import DbusConfig, load_config, raw_config
from dbuslib.logstore import LogStore
from logprocessor import rules, rules_jvm

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]
RULES = REPO / "conf" / "demo" / "logrules" / "app_orders.json"
TABLE = "app_orders"
ORDER = "2026-11-25 10:15:30.100 | [WARN] | OrderService order={n} amount=45.50 req={req}"
PAYMENT = "2026-11-25 10:15:31.002 | [INFO] | PaymentService paid={n} req={req}"


def record(message: str) -> bytes:
    """A shipper record as the stack's rsyslog writes it (tests/integration/test_rsyslog_ship.py)."""
    return json.dumps(
        {
            "host": "app-01.prod",
            "path": "/srv/app/demo.log",
            "timestamp": "2026-11-25T10:15:30.100Z",
            "message": message,
        },
        separators=(",", ":"),
    ).encode()


@dataclass
class RulesEnv:
    cfg: DbusConfig
    ds: str
    tmp: Path
    stages: Stages
    producer: Any

    @property
    def src(self) -> Any:
        return self.cfg.log_source(self.ds)

    def topic(self, kind: str) -> str:
        if kind == "result":
            return self.src.topics.name("result", self.ds, self.src.schema_name(self.ds), TABLE)
        return self.src.topics.name(kind, self.ds)

    def produce(self, *values: bytes) -> None:
        for v in values:
            self.producer.send(self.topic("raw"), key=b"/srv/app/demo.log", value=v)
        self.producer.flush()

    def rows(self) -> list[dict[str, Any]]:
        """Every data tuple of the table in its result topic as {field: value}."""
        consumer = kafka.consumer(
            self.cfg.endpoints.kafka,
            self.topic("result"),
            auto_offset_reset="earliest",
            enable_auto_commit=False,
        )
        out = []
        try:
            while batch := consumer.poll(timeout_ms=1000):
                for r in (r for rs in batch.values() for r in rs):
                    m = json.loads(r.value)
                    if m["protocol"]["type"] != "data_increment_data":
                        continue
                    names = [f["name"] for f in m["schema"]["fields"]]
                    out += [dict(zip(names, p["tuple"], strict=True)) for p in m["payload"]]
        finally:
            consumer.close()
        return out


@pytest.fixture(scope="module")
def env(hold_stack, cfg, tmp_path_factory) -> Iterator[RulesEnv]:
    tmp = tmp_path_factory.mktemp("console_rules")
    ds = f"pytest_cr_{uuid.uuid4().hex[:8]}"
    raw = raw_config(cfg.path)
    raw["log_sources"] = {ds: {"type": cfg.log_source("applog").type}}  # applog's type; no files: no rsyslog
    raw["spark"]["jars_file"] = str(cfg.resolve(cfg.spark.jars_file))
    raw["spark"]["checkpoint_root"] = str(tmp / "checkpoints")
    raw["console"]["audit_log"] = str(tmp / "audit.log")
    path = tmp / "dbus.yaml"
    path.write_text(yaml.safe_dump(raw))
    mine = load_config(path)
    src = mine.log_source(ds)
    store = LogStore(mine.endpoints.meta_store.url.get_secret_value())
    store.create_schema()
    t, _ = store.add_table(ds, src.schema_name(ds), TABLE)  # as cli/demolog.py's ensure_rules
    rules.import_groups(store, t, RULES.read_text(), str(RULES), replace=True, active=True)
    assert rules.publish(store, t, rules_jvm.engine(mine)).version == 1
    kafka.ensure_topics(mine.endpoints.kafka, [src.topics.name("raw", ds)], partitions=1)
    e = RulesEnv(mine, ds, tmp, Stages(mine, ds, tmp / "logs"), kafka.producer(mine.endpoints.kafka))
    e.stages.start("logprocessor")  # its start (a Spark session) overlaps the browser's work
    try:
        yield e
    finally:
        e.stages.stop_all()
        e.producer.close()
        topics = [e.topic(k) for k in ("raw", "ctrl", "unknown", "dead_letter", "result")]
        kafka.delete_topics(mine.endpoints.kafka, sorted(set(topics)))
        try:
            store.drop_source(ds)
        finally:
            store.dispose()
        delete_zk_tree(mine.endpoints.zookeeper, "LogProcessor", ds)


@pytest.fixture(scope="module")
def console_server(env) -> Iterator[ConsoleServer]:
    """conftest's console_server over this module's configuration (its log source)."""
    server = ConsoleServer(env.cfg.path, env.tmp / "console")
    try:
        yield server.start()
    finally:
        server.stop()


def open_editor(page, console_server, env) -> Any:
    page.goto(f"{console_server.url}/rules/")
    page.click(f"section[data-source='{env.ds}'] tr[data-table='{TABLE}'] a")
    page.wait_for_url(f"**/rules/{env.ds}/{TABLE}")
    group = page.locator(f"#groups .group[data-group='{TABLE}']")
    group.locator("li.rule[data-op='saveAs']").wait_for()
    return group


def test_an_operator_edits_previews_and_publishes_a_rule_that_changes_the_rows(
    page, console_server, logged_in, screenshot, env
):
    logged_in(page, "operator")
    group = open_editor(page, console_server, env)
    assert [
        group.locator("li.rule").nth(i).get_attribute("data-op")
        for i in range(group.locator("li.rule").count())
    ] == ["toIndex", "filter", "split", "regexExtract", "trim", "select", "saveAs"]

    # the operator's form: saveAs's second entry (level) renamed
    name = group.locator("li.rule[data-op='saveAs'] tr.entry[data-entry='2'] input[data-key='name']")
    assert name.input_value() == "level"
    name.fill("severity")

    run = uuid.uuid4().hex[:8]
    page.fill("#sample", "\n".join([ORDER.format(n=1, req=f"{run}-1"), PAYMENT.format(n=1, req=f"{run}-2")]))
    page.check("#sample-raw")
    page.click("#run-preview")
    first = page.locator(".record[data-record='1'] .group-result[data-group='app_orders']")
    first.locator("tr.step[data-position='7']").wait_for()
    rows = first.locator("tr.step")
    steps = {
        int(rows.nth(i).get_attribute("data-position")): rows.nth(i).inner_text() for i in range(rows.count())
    }
    assert sorted(steps) == [1, 2, 3, 4, 5, 6, 7]
    assert '"2026-11-25 10:15:30.100", "[WARN]", "OrderService order=1' in steps[3], steps[3]
    assert '"severity": "WARN"' in steps[7] and '"amount": 45.5' in steps[7], steps[7]
    assert "accepted by 'app_orders'" in page.inner_text(".record[data-record='1'] .verdict")
    second = page.locator(".record[data-record='2'] .group-result[data-group='app_orders']")
    assert "rule 2 (filter) leaves no rows" in second.inner_text()
    assert second.locator("tr.step").count() == 2
    assert "1 accepted, 1 accepted by no group" in page.inner_text("#preview-summary")
    screenshot(page, "rules")

    # publish to a running processor: the page follows the reload until the processor applied it
    env.stages.wait_ready("logprocessor", timeout=180)
    page.click("#publish")
    result = page.locator("#action-result")
    result.filter(has_text="version 2 published").wait_for()
    assert "new columns" in result.inner_text() and "severity string" in result.inner_text()
    page.locator("#reload-state[data-state='applied']").wait_for(timeout=90_000)
    assert "table versions app_orders 2" in page.inner_text("#reload-state")

    # the acceptance: a line written after the publish arrives shaped by the new rule
    env.produce(record(ORDER.format(n=2, req=f"{run}-after")))

    def arrived() -> list[dict[str, Any]]:
        return [r for r in env.rows() if r.get("req_id") == f"{run}-after"]

    try:
        (row,) = wait_until(arrived, 90, "the line written after the publish in the result topic")
    except AssertionError as e:
        raise AssertionError(
            f"{e}; the processor's log ends:\n{env.stages.since_start('logprocessor')[-3000:]}"
        ) from None
    assert row["severity"] == "WARN" and "level" not in row and row["order_id"] == "2", row

    page.select_option("#diff-a", "1")
    page.select_option("#diff-b", "2")
    page.click("#run-diff")
    page.locator("#diff span.add").first.wait_for()
    assert '"name": "severity"' in page.inner_text("#diff span.add")
    audit = [json.loads(ln) for ln in (env.tmp / "audit.log").read_text().splitlines()]
    assert [(a["action"], a["user"], a.get("version")) for a in audit] == [
        ("rules-save-draft", "operator", None),
        ("rules-publish", "operator", 2),
    ]


def test_a_viewer_sees_the_rules_read_only_and_cannot_publish(page, console_server, logged_in, env):
    logged_in(page, "viewer")
    group = open_editor(page, console_server, env)
    assert page.locator("#publish").count() == 0 and page.locator("#save-draft").count() == 0
    assert group.locator("input.param").first.is_disabled()
    assert group.locator("select.op").first.is_disabled()

    # the sample: the newest lines of the raw topic, previewed (a viewer may: it changes nothing)
    req = f"{uuid.uuid4().hex[:8]}-sample"
    env.produce(record(ORDER.format(n=3, req=req)))
    page.click("#take-sample")
    wait_until(lambda: req in page.input_value("#sample"), 15, "the raw topic's newest line in the sample")
    assert json.loads(page.input_value("#sample").splitlines()[-1])["message"].endswith(req)
    page.click("#run-preview")
    last = page.locator(".record").last.locator("tr.step[data-op='saveAs']")
    last.wait_for()
    assert f'"req_id": "{req}"' in last.inner_text()
    api = f"{console_server.url}/rules/api/{env.ds}/{TABLE}"
    token = page.get_attribute("meta[name='csrf-token']", "content")
    headers = {"Content-Type": "application/json", "Accept": "application/json"}  # as dbus.post sends them
    refused = page.request.post(
        f"{api}/publish", data=json.dumps({"groups": []}), headers={**headers, "X-CSRFToken": token}
    )
    assert refused.status == 403 and "viewer" in refused.json()["error"]
    refused = page.request.post(f"{api}/draft", data="{}", headers=headers)
    assert refused.status == 400 and "CSRF" in refused.json()["error"]
