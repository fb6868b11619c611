"""The console's Full pulls and Dead letters pages in Debian's Chromium, on the real stack.

A throwaway source (fullpull_env.make_fullpull_env: ``pytest_<hex>``, its own database and topics) with
a table of ``ROWS`` rows; its full puller runs as deployed (``cli.stages``), and the console runs over that
source's configuration (this module's ``console_server``, which conftest's ``logged_in`` logs in to).
An operator requests a pull of the table from the page and sees it end with its rows and shards; a request
for a table that does not exist is shown rejected with the full puller's reason; a viewer has no request
button and the server refuses a viewer's POST (403), and any POST without the CSRF token (400). Dead letters
written to the source's ``<ds>.dlq`` as the stages write them (``dbuslib.deadletter.DeadLetter``), and
their ``dbus_dead_letter`` points as the heartbeat monitor writes them, appear on the Dead letters page
with their reasons, filtered by code. Screenshots: docs/console/pulls.png, docs/console/dead-letters.png.
"""

from __future__ import annotations

import json
import time

import pytest
from console_env import ConsoleServer
from dashboards import influxql
from fullpull_env import cleanup_fullpull, make_fullpull_env
from helpers import wait_until

from dbuslib import influx, kafka
from dbuslib.deadletter import DeadLetter
from heartbeat.deadletters import dead_letter_topic, fold, parse, points

pytestmark = pytest.mark.integration
ROWS = 3000
SHARD = 1000
LETTERS = [  # stage, code, key, reason
    ("appender", "RAW_UNDECODABLE", "items", "items at mariadb-bin.000007:4242: checksum mismatch"),
    ("dispatcher", "DISPATCH_BAD_TOPIC", "items", "schema name too long once escaped (260 characters)"),
    ("appender", "APPENDER_RECORD_FAILED", "items", "KeyError: 'amount' converting row 3 (column amount)"),
]


@pytest.fixture(scope="module")
def fp(hold_stack, tmp_path_factory, source):  # hold_stack: the full puller runs between the tests
    env = make_fullpull_env(tmp_path_factory.mktemp("console-pulls"), source)
    try:
        env.sql(
            "CREATE TABLE items (id INT PRIMARY KEY, name VARCHAR(40), amount DECIMAL(10,2))",
            "INSERT INTO items SELECT seq, CONCAT('item ', seq), seq / 100 FROM seq_1_to_" + str(ROWS),
        )
        env.start()
        yield env
    finally:
        cleanup_fullpull(env)


@pytest.fixture(scope="module")
def console_server(fp, tmp_path_factory):
    """``dbus console`` over the throwaway source's configuration (overrides conftest's: ``logged_in``
    logs in to this one)."""
    server = ConsoleServer(fp.env.cfg_path, tmp_path_factory.mktemp("console"))
    try:
        yield server.start()
    finally:
        server.stop()


def test_an_operator_requests_a_full_pull_and_follows_it_to_the_end(
    fp, page, console_server, logged_in, screenshot
):
    logged_in(page, "operator")
    page.goto(f"{console_server.url}/pulls/")
    assert page.locator("#pull-source").input_value() == fp.ds

    page.fill("#pull-table", "items")  # no schema, and a shard size of 0: refused on the page, nothing sent
    page.fill("#pull-shard-size", "0")
    page.click("#pull-request")
    page.locator(".field-error[data-field='table']").filter(has_text="schema.table").wait_for()
    assert "or -1" in page.inner_text(".field-error[data-field='shard_size']")

    page.fill("#pull-table", f"{fp.database}.nope")  # sent; the full puller rejects it
    page.fill("#pull-shard-size", "")
    page.click("#pull-request")
    page.locator("#pull-result").filter(has_text="sent to").wait_for()
    rejected = page.locator("#pulls-ended [data-status='rejected']")
    rejected.wait_for(timeout=60_000)
    assert "FULLPULL_UNKNOWN_TABLE" in rejected.inner_text()

    page.fill("#pull-table", f"{fp.database}.items")
    page.fill("#pull-shard-size", str(SHARD))
    page.click("#pull-request")
    page.locator("#pull-result").filter(has_text=f"{fp.database}.items sent to").wait_for()
    ident = page.inner_text("#pull-result").split()[1]
    done = page.locator(f"#pulls-ended [data-pull='{ident}'][data-status='ending']")
    done.wait_for(timeout=90_000)
    assert done.locator(".rows").inner_text() == f"{ROWS:,}"
    assert done.locator(".shards-done").inner_text() == f"{ROWS // SHARD}/{ROWS // SHARD}"
    done.locator("summary").click()
    done.locator("table.shards").wait_for()  # opened, and kept open by the page's refreshes
    states = done.locator("table.shards tbody tr .state").all_text_contents()
    assert states == ["done"] * (ROWS // SHARD)
    assert float(done.locator(".rate").inner_text().replace(",", "")) > 0
    assert page.inner_text("#problems") == ""
    screenshot(page, "pulls")

    audit = [json.loads(line) for line in fp.cfg.resolve(fp.cfg.console.audit_log).read_text().splitlines()]
    asked = [a for a in audit if a["action"] == "fullpull-request" and str(a.get("id")) == ident]
    assert [(a["user"], a["table"], a["shard_size"]) for a in asked] == [
        ("operator", f"{fp.database}.items", SHARD)
    ]


def test_a_viewer_cannot_request_a_pull(fp, page, console_server, logged_in):
    logged_in(page, "viewer")
    page.goto(f"{console_server.url}/pulls/")
    page.locator("#viewer-note").wait_for()
    assert page.locator("#pull-request").count() == 0 and page.locator("#pull-form").count() == 0
    csrf = page.get_attribute("meta[name='csrf-token']", "content")
    body = {"source": fp.ds, "table": f"{fp.database}.items"}
    headers = {"Accept": "application/json", "X-CSRFToken": csrf}
    r = page.request.post(f"{console_server.url}/pulls/api/request", data=body, headers=headers)
    assert r.status == 403 and "viewer" in r.json()["error"]
    r = page.request.post(
        f"{console_server.url}/pulls/api/request", data=body, headers={"Accept": "application/json"}
    )
    assert r.status == 400 and "CSRF" in r.json()["error"]


@pytest.fixture
def letters(fp):
    """The LETTERS in ``<ds>.dlq`` (key ``<database>.<table>``, the stages' JSON) and their
    ``dbus_dead_letter`` points over the last hours; the points are dropped afterwards."""
    cfg, topic = fp.cfg, dead_letter_topic(fp.cfg, fp.ds)
    producer = kafka.producer(cfg.endpoints.kafka)
    now_ms = int(time.time() * 1000)
    try:
        for i, (stage, code, table, reason) in enumerate(LETTERS):
            key = f"{fp.database}.{table}".encode()
            letter = DeadLetter(code, reason, fp.ds, 0, 100 + i, key, f"row {i}".encode(), stage)
            producer.send(topic, key=key, value=letter.to_json().encode()).get(30)
            counted = fold(
                [parse(letter.to_json().encode(), key, dlq_partition=0, dlq_offset=i, at_ms=now_ms)]
            )
            for hours_ago in range(i, 6, 2):  # a few points an hour apart: the chart has a shape
                influx.write(cfg.endpoints.influxdb, points(fp.ds, counted, now_ms - hours_ago * 3_600_000))
        yield topic
    finally:
        producer.close()
        influxql(cfg, f'DROP SERIES FROM "dbus_dead_letter" WHERE "ds" = \'{fp.ds}\'')


def test_dead_letters_appear_with_their_reasons(fp, page, console_server, logged_in, screenshot, letters):
    logged_in(page, "viewer")
    page.goto(f"{console_server.url}/dead-letters/")
    for _, code, _, reason in LETTERS:
        card = page.locator(f"#dl-letters .letter[data-code='{code}']")
        card.wait_for()
        assert reason in card.inner_text() and f"{fp.database}.items" in card.inner_text()
    newest = page.locator("#dl-letters .letter").first
    assert newest.get_attribute("data-code") == LETTERS[-1][1]  # newest first
    assert f"in {letters} partition 0 offset 2" in newest.inner_text()
    assert "row 2" in newest.locator("pre.value").inner_text()  # no masking in this source
    page.locator("#dl-counts tr[data-code='RAW_UNDECODABLE']").wait_for()
    page.locator("#dl-chart svg rect").first.wait_for()
    assert page.inner_text("#problems") == ""
    screenshot(page, "dead-letters")

    page.select_option("#dl-code", "DISPATCH_BAD_TOPIC")
    wait_until(
        lambda: (
            page.locator("#dl-letters .letter").count() == 1
            and page.locator("#dl-letters .letter").first.get_attribute("data-code") == "DISPATCH_BAD_TOPIC"
        ),
        30,
        "only the DISPATCH_BAD_TOPIC letter",
    )
