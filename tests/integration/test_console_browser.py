"""The web console in Debian's Chromium, on the real stack (Playwright; the fixtures browser, page,
console_server, logged_in and screenshot are in conftest.py, the console's process in console_env.py).

Each test logs in anew (a fresh browser context); the console runs once for the module. The screenshots go
to docs/console/<page>.png."""

from __future__ import annotations

import json
import re

import pytest

pytestmark = pytest.mark.integration

# The POSTs a viewer may send: every other POST of the console is an operator's (operator_required).
VIEWER_POSTS = {"auth.login", "auth.logout", "rules.api_preview", "rules.api_check"}
PLACEHOLDERS = {"ds": "applog", "table": "app_orders"}  # the role is checked before the names are read


def operator_posts(cfg) -> list[str]:
    """Every POST path of the console but a viewer's, its placeholders filled (from the app's own routes:
    an operator endpoint added later is checked too)."""
    from console.app import create_app

    rules = create_app(cfg, testing=True).url_map.iter_rules()
    posts = [r for r in rules if "POST" in (r.methods or ()) and r.endpoint not in VIEWER_POSTS]
    return sorted(re.sub(r"<(?:\w+:)?(\w+)>", lambda m: PLACEHOLDERS[m.group(1)], r.rule) for r in posts)


def test_operator_logs_in_and_sees_the_demo_sources_stages(page, console_server, logged_in, screenshot):
    page.goto(f"{console_server.url}/")
    page.wait_for_url("**/login**")  # not logged in: the login page
    screenshot(page, "login")
    logged_in(page, "operator")
    assert page.url.rstrip("/") == console_server.url
    assert "operator" in page.inner_text("#who")
    stages = page.locator("section[data-source='demo'] tr[data-stage]")
    stages.first.wait_for()  # the page's first poll of /api/overview
    shown = [stages.nth(i).get_attribute("data-stage") for i in range(stages.count())]
    pipeline = [s for s in shown if s in ("extractor", "dispatcher", "appender")]
    assert pipeline == ["extractor", "dispatcher", "appender"], shown
    # docs/console/overview.png: test_console_overview_live.py takes it, with a stage running


def test_a_wrong_password_is_refused(page, console_server):
    page.goto(f"{console_server.url}/login")
    page.fill("#username", "operator")
    page.fill("#password", console_server.passwords["viewer"])
    with page.expect_response(lambda r: r.request.method == "POST") as answer:
        page.click("#login")
    assert answer.value.status == 401
    assert "Wrong name or password" in page.inner_text("main")
    assert page.locator("#who").count() == 0


def test_a_post_without_the_csrf_token_is_refused(page, console_server, logged_in):
    logged_in(page, "viewer")
    refused = page.request.post(f"{console_server.url}/logout", headers={"Accept": "application/json"})
    assert refused.status == 400, refused.text()
    assert "CSRF" in json.loads(refused.text())["error"]
    page.goto(f"{console_server.url}/")
    assert "viewer" in page.inner_text("#who")  # still logged in: the POST did nothing


def test_a_viewer_is_refused_every_operator_action(page, console_server, logged_in, cfg):
    paths = operator_posts(cfg)
    assert "/pulls/api/request" in paths and "/alerts/api/ack" in paths
    logged_in(page, "viewer")
    token = page.get_attribute("meta[name='csrf-token']", "content")
    headers = {"X-CSRFToken": token, "Accept": "application/json"}  # a valid token: only the role is wrong
    for path in paths:
        refused = page.request.post(f"{console_server.url}{path}", data={}, headers=headers)
        assert refused.status == 403, (path, refused.status, refused.text())
        assert "viewer" in json.loads(refused.text())["error"]
    page.goto(f"{console_server.url}/pulls/")
    assert page.locator("#pull-form").count() == 0  # and the page offers no form


def test_no_password_or_hash_reaches_a_page(page, console_server, logged_in):
    logged_in(page, "operator")
    secrets = [*console_server.passwords.values(), *console_server.hashes.values(), "scrypt:"]
    seen = [page.content(), page.request.get(f"{console_server.url}/api/overview").text()]
    for path in ("/tables/", "/pulls/", "/dead-letters/", "/alerts/", "/rules/"):
        page.goto(f"{console_server.url}{path}")
        seen.append(page.content())
    for text in seen:
        assert not [s for s in secrets if s in text]
