"""The console hardened (issue 29) on the real stack, over HTTP to ``dbus console`` started by the module:

- acceptance 2: a viewer's sample and preview of a log source with masking rules hold no clear value of a
  masked column (the answers searched for each value), while the raw topic holds them (an operator's sample
  shows them: the test can fail);
- acceptance 0b, the console's half: a viewer's preview of a crafted line on the backtracking rule
  ``(.*a){12}$`` answers with the reason within the preview's budget, and so do fifty such lines (the
  preview's process killed at the budget), while another user's ``GET /login`` and an API answer within 1 s
  each;
- acceptance 3 on the real server: bodies 100,000 levels deep, a list for the alerts' object, groups with
  ``rules: 5``, invalid UTF-8 and a 3 MB body get 400/413 naming the problem, no 500, and the console's log
  holds no traceback.

The module has a log source of its own (``pytest_ch_<hex>``, log_rsyslog, no files: no rsyslog) whose table
``app_orders`` has the demo's rules (version 1) and masking rules for ``req_id`` (md5, salted) and
``order_id`` (truncated), and a raw topic of its own that the test writes shipper records to. No log
processor: the sample and the preview read the raw topic and run the rules in the console.
"""

from __future__ import annotations

import http.cookiejar
import json
import re
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from console_env import ConsoleServer
from helpers import wait_until

from console.rules import PREVIEW_BUDGET_S
from dbuslib import kafka
from dbuslib.config import DbusConfig, load_config, raw_config
from dbuslib.logstore import LogStore
from logprocessor import rules, rules_jvm

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]
RULES = REPO / "conf" / "demo" / "logrules" / "app_orders.json"
TABLE = "app_orders"
ORDER = "2026-11-25 10:15:30.100 | [WARN] | OrderService order={order} amount=45.50 req={req}"
CRAFTED = "a" * 47 + "b"  # (.*a){12}$ backtracks on it for longer than anyone waits
SLACK_S = 5.0  # the 2-core machine, shared


def record(message: str, host: str) -> str:
    return json.dumps(
        {
            "host": host,
            "path": "/srv/app/demo.log",
            "timestamp": "2026-11-25T10:15:30.100Z",
            "message": message,
        },
        separators=(",", ":"),
    )


class Client:
    """One browser's worth of HTTP: its cookies, its CSRF token, JSON in and out."""

    def __init__(self, base: str) -> None:
        self.base = base
        self.opener = urllib.request.build_opener(
            urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar())
        )
        self.token = ""

    def send(
        self,
        path: str,
        data: bytes | None = None,
        content_type: str = "application/json",
        timeout: float = 60,
    ) -> tuple[int, str]:
        headers = {"Accept": "application/json", "X-CSRFToken": self.token}
        if data is not None:
            headers["Content-Type"] = content_type
        req = urllib.request.Request(f"{self.base}{path}", data=data, headers=headers)
        try:
            with self.opener.open(req, timeout=timeout) as r:
                return r.status, r.read().decode("utf-8", "replace")
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode("utf-8", "replace")

    def post(self, path: str, doc: Any) -> tuple[int, str]:
        return self.send(path, json.dumps(doc).encode())

    def log_in(self, name: str, password: str) -> Client:
        _, page = self.send("/login")
        token = re.search(r'name="csrf-token" content="([^"]+)"', page)
        assert token, page[:500]
        form = urllib.parse.urlencode({"username": name, "password": password, "csrf_token": token.group(1)})
        status, _ = self.send("/login", form.encode(), "application/x-www-form-urlencoded")
        assert status == 200, status  # the redirect followed to the overview
        _, page = self.send("/rules/")
        token = re.search(r'name="csrf-token" content="([^"]+)"', page)
        assert token, page[:500]
        self.token = token.group(1)
        return self


@dataclass
class Env:
    cfg: DbusConfig
    ds: str
    host: str  # the records' host: not masked, what the test finds them by
    secrets: tuple[str, ...]
    records: list[str]
    server: ConsoleServer

    @property
    def api(self) -> str:
        return f"/rules/api/{self.ds}/{TABLE}"

    def client(self, role: str) -> Client:
        return Client(self.server.url).log_in(role, self.server.passwords[role])


@pytest.fixture(scope="module")
def env(cfg, tmp_path_factory) -> Iterator[Env]:
    tmp = tmp_path_factory.mktemp("console_hardening")
    hexa = uuid.uuid4().hex[:8]
    ds = f"pytest_ch_{hexa}"
    schema = f"{ds}_schema"
    raw = raw_config(cfg.path)
    raw["log_sources"] = {
        ds: {
            "type": cfg.log_source("applog").type,
            "schema": schema,
            "masking": {
                f"{schema}.{TABLE}": {
                    "req_id": {"type": "md5", "salt": f"pepper-{hexa}"},
                    "order_id": {"type": "truncate", "length": 2},
                }
            },
        }
    }
    raw["spark"]["jars_file"] = str(cfg.resolve(cfg.spark.jars_file))
    raw["console"]["audit_log"] = str(tmp / "audit.log")
    path = tmp / "dbus.yaml"
    path.write_text(yaml.safe_dump(raw))
    mine = load_config(path)
    src = mine.log_source(ds)
    store = LogStore(mine.endpoints.meta_store.url.get_secret_value())
    store.create_schema()
    t, _ = store.add_table(ds, src.schema_name(ds), TABLE)
    rules.import_groups(store, t, RULES.read_text(), str(RULES), replace=True, active=True)
    assert rules.publish(store, t, rules_jvm.engine(mine)).version == 1
    topic = src.topics.name("raw", ds)
    kafka.ensure_topics(mine.endpoints.kafka, [topic], partitions=1)
    host = f"app-{hexa}.prod"
    secrets = (f"zq{hexa}SECRET", f"77{int(hexa, 16) % 10**9:09d}1", f"rq{hexa[::-1]}X", "88123456789")
    records = [
        record(ORDER.format(order=secrets[1], req=secrets[0]), host),
        record(ORDER.format(order=secrets[3], req=secrets[2]), host),
    ]
    producer = kafka.producer(mine.endpoints.kafka)
    for r in records:
        producer.send(topic, key=b"/srv/app/demo.log", value=r.encode())
    producer.flush()
    producer.close()
    server = ConsoleServer(path, tmp / "console")
    try:
        yield Env(mine, ds, host, secrets, records, server.start())
    finally:
        server.stop()
        kafka.delete_topics(mine.endpoints.kafka, [topic])
        try:
            store.drop_source(ds)
        finally:
            store.dispose()


def demo_groups() -> list[dict[str, Any]]:
    from console.rules import editor_groups

    return editor_groups(json.loads(RULES.read_text()))


def test_a_viewer_never_gets_a_masked_columns_clear_value(env: Env) -> None:
    operator, viewer = env.client("operator"), env.client("viewer")

    def sample(client: Client) -> tuple[str, dict[str, Any]] | None:
        status, text = client.send(f"{env.api}/sample?n=20")
        assert status == 200, text
        got = json.loads(text)
        return (text, got) if sum(env.host in r for r in got["records"]) == 2 else None

    text, _ = wait_until(lambda: sample(operator), 30, "the raw topic's records in an operator's sample")
    assert all(s in text for s in env.secrets)  # the raw topic holds them in clear: this test can fail

    text, got = wait_until(lambda: sample(viewer), 30, "the raw topic's records in a viewer's sample")
    assert [s for s in env.secrets if s in text] == []
    assert "masks columns" in got["masked"]

    for records in (got["records"], env.records):  # the viewer's sample, and the lines pasted in clear
        status, text = viewer.post(f"{env.api}/preview", {"groups": demo_groups(), "records": records})
        assert status == 200, text
        assert [s for s in env.secrets if s in text] == []
        assert json.loads(text)["summary"]["accepted"] == 2

    status, text = operator.post(f"{env.api}/preview", {"groups": demo_groups(), "records": env.records})
    assert status == 200, text
    save = next(
        s for s in json.loads(text)["records"][0]["lines"][0]["groups"][0]["steps"] if s["op"] == "saveAs"
    )
    assert save["masked"] == ["order_id", "req_id"]  # the saved row as the processor publishes it
    row = dict(zip(save["columns"], save["rows"][0], strict=True))
    assert row["order_id"] == env.secrets[1][:2] and env.secrets[0] not in json.dumps(row)


def crafted_group() -> dict[str, Any]:
    return {
        "groupName": "crafted",
        "rules": [
            {
                "ruleTypeName": "regexExtract",
                "ruleGrammar": [{"ruleScope": "0", "ruleParamter": "(.*a){12}$"}],
            },
            {"ruleTypeName": "saveAs", "ruleGrammar": [{"ruleScope": "0", "name": "x", "type": "STRING"}]},
        ],
    }


def test_a_backtracking_preview_answers_within_its_budget_and_freezes_no_one(env: Env) -> None:
    viewer, other = env.client("viewer"), env.client("operator")
    assert other.send(f"{env.api}")[0] == 200  # warm: the meta store's connection made
    waits: list[tuple[str, float, int]] = []
    running = threading.Event()

    def others() -> None:
        while running.is_set():
            for path in ("/login", env.api):
                began = time.monotonic()
                status, _ = other.send(path, timeout=30)
                waits.append((path, time.monotonic() - began, status))

    def preview(records: list[str]) -> tuple[int, dict[str, Any], float]:
        began = time.monotonic()
        status, text = viewer.post(
            f"{env.api}/preview", {"groups": [crafted_group()], "records": records, "raw": True}
        )
        return status, json.loads(text), time.monotonic() - began

    running.set()
    background = threading.Thread(target=others, daemon=True)
    background.start()
    try:
        one = preview([CRAFTED])
        fifty = preview([CRAFTED] * 50)
    finally:
        running.clear()
        background.join(60)

    status, answer, took = one
    assert took < PREVIEW_BUDGET_S + SLACK_S, took
    if status == 200:  # the rule engine's own regex budget (logprocessor) gave up on the line first: its
        # record is withheld from a viewer of this masking source (the processor's dead letter), with why
        assert "breaks on a line: group 'crafted' rule 1 (regexExtract)" in answer["records"][0]["withheld"]
        assert "LOG_RULE_BUDGET" in answer["records"][0]["withheld"], answer
    else:
        assert status == 422 and answer["error"].startswith("over budget: record 1, group 'crafted'"), answer
    status, answer, took = fifty
    assert status == 422, answer
    assert re.match(r"over budget: record \d+, group 'crafted' did not finish within", answer["error"]), (
        answer
    )
    assert took < PREVIEW_BUDGET_S + SLACK_S, took

    assert len(waits) >= 4 and {p for p, _, _ in waits} == {"/login", env.api}
    assert [w for w in waits if w[2] != 200] == []
    assert max(t for _, t, _ in waits) < 1.0, sorted(waits, key=lambda w: -w[1])[:5]


def test_malformed_bodies_are_refused_naming_the_problem_and_nothing_is_a_500(env: Env) -> None:
    operator = env.client("operator")
    log_before = env.server.log.read_text(errors="replace")
    cases: list[tuple[str, bytes, str, int, str]] = [
        (f"{env.api}/check", b"[" * 100_000 + b"]" * 100_000, "application/json", 400, "nests 100000 levels"),
        (
            "/alerts/api/ack",
            b'[{"source": "x", "key": "y"}]',
            "application/json",
            400,
            "must be a JSON object",
        ),
        (
            f"{env.api}/check",
            b'{"groups": [{"groupName": "g1", "rules": 5}]}',
            "application/json",
            200,
            "rules must be a list of rules, not a number",
        ),
        (f"{env.api}/preview", b'{"groups": 5}', "application/json", 400, "groups: must be a list"),
        (f"{env.api}/preview", b"\xff\xfe{}", "application/json", 400, "not UTF-8"),
        (f"{env.api}/draft", b"groups=1", "text/plain", 400, "must be JSON"),
        (
            "/pulls/api/request",
            b'{"where": "' + b"x" * (3 * 1024 * 1024) + b'"}',
            "application/json",
            413,
            "",
        ),
    ]
    for path, data, content_type, want, words in cases:
        status, text = operator.send(path, data, content_type)
        assert (status, words in text) == (want, True), (path, data[:60], status, text[:300])
    log_after = env.server.log.read_text(errors="replace")[len(log_before) :]
    assert "Traceback" not in log_after, log_after[-3000:]
