"""The console's logins hardened (issue #29, acceptance 1), on the real console in Debian's Chromium
(Playwright; the fixtures browser, page, console_server and logged_in are in conftest.py):

- throttling: the 20th wrong password in a minute is refused with 429 and ``Retry-After`` even when that
  attempt's password is right, the refusals audited without the password;
- a session cookie copied before a logout is refused after it (401 for JSON, the login page for a page),
  in another browser and from a plain HTTP client;
- ``/login?next=`` payloads that escaped before (a tab, ``\\``, ``//``, their percent-encoded forms) lead to
  the console's overview, and the browser requests nothing of any other host.

The console runs once for the module with conf/dbus.yaml's limits (10 failures of a name, 30 of an address,
in 60 s): the throttled user is ``operator``, every other test logs in as ``viewer``; the throttling test
comes last (after it, every login from 127.0.0.1 waits 1 s for a minute).
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import urlsplit

import pytest

pytestmark = pytest.mark.integration

# as a browser's address bar sends them (the query string of /login)
ESCAPES = [
    "/%09/evil.example/",  # the tab the adversarial run used: /<tab>/evil.example/ -> //evil.example/
    "/%0A/evil.example/",
    "/%0D%0A/evil.example/",
    "%09//evil.example/",
    "//evil.example/",
    "/%5Cevil.example/",
    "%5C%5Cevil.example/",
    "%5C/evil.example/",
    "/\\evil.example/",
    "%2F%2Fevil.example/",
    "/%252F%252Fevil.example/",
    "/%252F%5Cevil.example/",
    "/%2509/evil.example/",
    "/%25255C/evil.example/",
    "https://evil.example/",
    "https:%2F%2Fevil.example/",
    "%20//evil.example/",
    "/%00/evil.example/",
]


def login_form(page, url: str, role: str, password: str):
    """Submit the login form at ``url`` as ``role``; the POST's response."""
    page.goto(url)
    page.fill("#username", role)
    page.fill("#password", password)
    with page.expect_response(lambda r: r.request.method == "POST" and "/login" in r.url) as answer:
        page.click("#login")
    page.wait_for_load_state()
    return answer.value


def audit_since(path: Path, offset: int) -> list[dict]:
    """The audit lines appended to ``path`` after ``offset`` (other consoles of the stack share the file)."""
    with path.open("rb") as f:
        f.seek(offset)
        return [json.loads(line) for line in f.read().decode().splitlines() if line.strip()]


def test_a_cookie_copied_before_logout_is_refused_after_it(page, browser, console_server, logged_in):
    logged_in(page, "viewer")
    copied = page.context.cookies()
    session = next(c for c in copied if c["name"] == "session")
    assert (
        session["httpOnly"] and session["sameSite"] == "Lax" and not session["secure"]
    )  # secure_cookies off
    assert session["expires"] > time.time() + 11 * 3600  # console.session_hours (12), not a browser session's
    other = browser.new_context()
    try:
        other.add_cookies(copied)
        replay = other.new_page()
        assert replay.request.get(f"{console_server.url}/api/overview").status == 200  # the copy works now
        assert plain_get(console_server.url, session["value"]) == 200
        with page.expect_navigation():
            page.click("form.who button")  # Log out
        assert "/login" in page.url
        answer = replay.request.get(f"{console_server.url}/api/overview")
        assert answer.status == 401 and json.loads(answer.text()) == {"error": "not logged in"}
        assert plain_get(console_server.url, session["value"]) == 401
        replay.goto(f"{console_server.url}/alerts/")
        assert urlsplit(replay.url).path == "/login" and replay.locator("#who").count() == 0
    finally:
        other.close()


def plain_get(url: str, cookie: str) -> int:
    """``GET /api/overview`` with the session cookie, outside any browser: its status."""
    request = urllib.request.Request(f"{url}/api/overview", headers={"Cookie": f"session={cookie}"})
    try:
        with urllib.request.urlopen(request, timeout=30) as r:
            return int(r.status)
    except urllib.error.HTTPError as e:
        return int(e.code)


def test_no_next_payload_leads_off_the_site(page, console_server):
    origin = urlsplit(console_server.url).netloc
    elsewhere: list[str] = []  # every request of the browser to another host, redirects' hops included
    page.on("request", lambda r: elsewhere.append(r.url) if urlsplit(r.url).netloc != origin else None)
    landed = {}
    for payload in ESCAPES:
        password = console_server.passwords["viewer"]
        answer = login_form(page, f"{console_server.url}/login?next={payload}", "viewer", password)
        where = urlsplit(page.url)
        landed[payload] = (answer.status, answer.headers.get("location"), where.netloc, where.path)
    assert elsewhere == []
    wrong = {p: seen for p, seen in landed.items() if seen != (302, "/", origin, "/")}
    assert wrong == {}
    # and a path of the site is followed
    login_form(
        page, f"{console_server.url}/login?next=/alerts/", "viewer", console_server.passwords["viewer"]
    )
    assert urlsplit(page.url).path == "/alerts/"


def test_the_20th_wrong_password_in_a_minute_is_refused_even_when_it_is_right(page, console_server, cfg):
    """19 wrong passwords posted from the browser's context (the login page's CSRF token; the first 10
    checked, the 6th to 10th after a wait), then the 20th, the right one, through the form."""
    audit_log = cfg.resolve(cfg.console.audit_log)
    start = audit_log.stat().st_size if audit_log.exists() else 0
    wrong = f"not-{console_server.passwords['operator']}"
    began = time.monotonic()
    page.goto(f"{console_server.url}/login")
    form = {
        "username": "operator",
        "password": wrong,
        "csrf_token": page.input_value("input[name=csrf_token]"),
    }
    statuses = [page.request.post(f"{console_server.url}/login", form=form).status for _ in range(19)]
    assert statuses == [401] * 10 + [429] * 9, statuses
    right = login_form(page, f"{console_server.url}/login", "operator", console_server.passwords["operator"])
    assert time.monotonic() - began < 60, "the 20 attempts took over a minute: not what is measured"
    assert right.status == 429
    assert 1 <= int(right.headers["retry-after"]) <= 60
    assert "Too many failed logins" in page.inner_text("main")
    assert page.locator("#who").count() == 0  # not logged in
    assert "/login" in page.url
    refused = [r for r in audit_since(audit_log, start) if r["action"] == "login-refused"]
    assert [r["name"] for r in refused] == ["operator"] * 4  # the 1st, 2nd, 4th and 8th of the 10 refusals
    assert all(r["by"] == "user" and r["failures"] == 10 and r["remote"] == "127.0.0.1" for r in refused)
    appended = audit_log.read_bytes()[start:].decode()
    assert wrong not in appended and console_server.passwords["operator"] not in appended
    # another user from the same address still logs in (10 failures of the address, under its 30)
    assert (
        login_form(page, f"{console_server.url}/login", "viewer", console_server.passwords["viewer"]).status
        == 302
    )
