"""The console's login flow hardened (issue #29): throttled logins (429 with Retry-After, audited), logins
kept on the server (a copied cookie is refused after a logout, a changed hash, the lifetime), the cookies'
flags, and ``next`` followed only within the site. Flask's test client, a fake clock (no server)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote, urljoin, urlsplit

import pytest
from console_fakes import CONF, PASSWORDS, console_app, csrf_token, log_in, with_users
from flask import Flask
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import SecretStr

from console import auth
from console.sessions import SessionStore
from console.throttle import LoginThrottle
from dbuslib.config import DbusConfig, load_config

ORIGIN = "http://console.test"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, s: float) -> None:
        self.slept.append(s)


@pytest.fixture(scope="module")
def cfg() -> DbusConfig:
    return with_users(load_config(CONF))


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def app(cfg: DbusConfig, tmp_path: Path, clock: Clock) -> Flask:
    """The console, its logins and throttle on ``clock`` (the configuration's limits: 60 s, 5, 1 s, 10,
    30), and a JSON endpoint and a page any logged-in user reaches."""
    app = console_app(cfg, tmp_path)
    on_clock(app, clock)

    @app.route("/api/test-whoami")
    @auth.viewer_required
    def whoami() -> Any:
        return {"user": auth.current_user.name}

    @app.route("/test-page")
    @auth.viewer_required
    def page() -> Any:
        return "a page"

    return app


def on_clock(app: Flask, clock: Clock, **limits: int) -> None:
    """``app``'s logins and throttle on ``clock``, with the configuration's limits but ``limits``."""
    c = app.config["DBUS_CONFIG"].console
    app.extensions["dbus_auth"] = auth.Guards(
        SessionStore(lifetime_s=c.session_hours * 3600, idle_s=c.session_idle_minutes * 60, clock=clock),
        LoginThrottle(
            window_s=c.login_window_s,
            slow_after=c.login_slow_after,
            delay_s=c.login_delay_s,
            user_failures=limits.get("user_failures", c.login_user_failures),
            address_failures=limits.get("address_failures", c.login_address_failures),
            clock=clock,
            sleep=clock.sleep,
        ),
    )


def audit_lines(app: Flask) -> list[dict[str, Any]]:
    path = Path(app.config["DBUS_AUDIT_LOG"])
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


# ---------------------------------------------------------------- throttling


def test_the_20th_wrong_password_in_a_minute_is_refused_even_when_it_is_right(app: Flask, clock: Clock):
    client = app.test_client()
    statuses = []
    for _ in range(19):
        statuses.append(log_in(client, "op", "wrong").status_code)
        clock.now += 2  # 19 attempts in 38 s
    right = log_in(client, "op")
    assert statuses == [401] * 10 + [429] * 9
    assert clock.slept == [1.0] * 5  # the 6th to the 10th waited before their check
    assert right.status_code == 429
    assert int(right.headers["Retry-After"]) == 60 - 38  # when the first failure leaves the window
    assert "Too many failed logins" in right.get_data(as_text=True)
    assert client.get("/api/test-whoami").status_code == 401


def test_refusals_are_audited_without_the_password(app: Flask, clock: Clock):
    client = app.test_client()
    for _ in range(10):
        log_in(client, "op", "wrong-guess-7")
    for _ in range(3):
        log_in(client, "op")
    lines = audit_lines(app)
    assert [line["action"] for line in lines] == ["login-refused"] * 2  # the 1st and 2nd of the lock
    first = lines[0]
    assert first["name"] == "op" and first["by"] == "user" and first["failures"] == 10
    assert first["remote"] == "127.0.0.1" and first["retry_after_s"] == 60 and first["user"] is None
    text = Path(app.config["DBUS_AUDIT_LOG"]).read_text()
    assert "wrong-guess-7" not in text and PASSWORDS["op"] not in text


def test_after_the_window_the_right_password_logs_in(app: Flask, clock: Clock):
    client = app.test_client()
    for _ in range(10):
        log_in(client, "op", "wrong")
    assert log_in(client, "op").status_code == 429
    clock.now += 60
    assert log_in(client, "op").status_code == 302
    assert client.get("/api/test-whoami").get_json() == {"user": "op"}
    client.post("/logout", data={"csrf_token": csrf_token(client)})
    assert log_in(client, "op", "wrong").status_code == 401  # the success cleared the name's count


def test_an_address_is_refused_whatever_name_it_tries(app: Flask, clock: Clock):
    on_clock(app, clock, address_failures=7)  # fewer checks than the default 30 (each hashes)
    attacker, other = app.test_client(), app.test_client()
    attacker.environ_base["REMOTE_ADDR"] = "10.9.9.9"
    other.environ_base["REMOTE_ADDR"] = "10.1.1.1"
    for i in range(7):
        assert log_in(attacker, f"guess{i}", "x").status_code == 401
    refused = log_in(attacker, "vi")
    assert refused.status_code == 429 and int(refused.headers["Retry-After"]) == 60
    assert audit_lines(app)[-1]["by"] == "address" and audit_lines(app)[-1]["remote"] == "10.9.9.9"
    assert log_in(other, "vi").status_code == 302  # the viewer still logs in from elsewhere


def test_a_locked_name_is_locked_from_every_address(app: Flask, clock: Clock):
    for i in range(10):
        c = app.test_client()
        c.environ_base["REMOTE_ADDR"] = f"10.0.0.{i}"
        log_in(c, "op", "wrong")
    c = app.test_client()
    c.environ_base["REMOTE_ADDR"] = "10.0.1.1"
    assert log_in(c, "op").status_code == 429
    assert log_in(c, "vi").status_code == 302


def test_an_unknown_name_is_throttled_as_a_known_one(app: Flask, clock: Clock):
    on_clock(app, clock, user_failures=4)
    client = app.test_client()
    known = [log_in(client, "op", "wrong").status_code for _ in range(5)]
    clock.now += 61
    unknown = [log_in(client, "nobody", "wrong").status_code for _ in range(5)]
    assert known == unknown == [401] * 4 + [429]


# ---------------------------------------------------------------- sessions


def copied_session(app: Flask, name: str) -> tuple[Any, Any]:
    """A logged-in client and another one holding a copy of its session cookie."""
    client = app.test_client()
    assert log_in(client, name).status_code == 302
    cookie = client.get_cookie("session")
    assert cookie is not None
    thief = app.test_client()
    thief.set_cookie("session", cookie.value)
    return client, thief


def test_a_copied_cookie_is_refused_after_logout(app: Flask):
    client, thief = copied_session(app, "op")
    assert thief.get("/api/test-whoami").get_json() == {"user": "op"}  # the copy works while logged in
    client.post("/logout", data={"csrf_token": csrf_token(client)})
    r = thief.get("/api/test-whoami")
    assert r.status_code == 401 and r.get_json() == {"error": "not logged in"}
    page = thief.get("/test-page")
    assert page.status_code == 302 and page.headers["Location"].startswith("/login?next=")


def test_logout_ends_only_that_login(app: Flask):
    first, _ = copied_session(app, "vi")
    second, _ = copied_session(app, "vi")
    first.post("/logout", data={"csrf_token": csrf_token(first)})
    assert second.get("/api/test-whoami").status_code == 200


def test_a_login_over_another_ends_the_first(app: Flask):
    client, thief = copied_session(app, "op")
    assert log_in(client, "vi").status_code == 302
    assert client.get("/api/test-whoami").get_json() == {"user": "vi"}
    assert thief.get("/api/test-whoami").status_code == 401


def test_a_changed_password_hash_ends_the_users_logins(app: Flask, cfg: DbusConfig):
    client, _ = copied_session(app, "op")
    viewer, _ = copied_session(app, "vi")
    users = tuple(
        u.model_copy(update={"password_hash": SecretStr(auth.hash_password("new-one-9"))})
        if u.name == "op"
        else u
        for u in cfg.console.users
    )
    app.config["DBUS_CONFIG"] = cfg.model_copy(
        update={"console": cfg.console.model_copy(update={"users": users})}
    )
    assert client.get("/api/test-whoami").status_code == 401
    assert viewer.get("/api/test-whoami").status_code == 200
    assert log_in(client, "op", "new-one-9").status_code == 302


def test_a_login_ends_after_its_lifetime_however_busy(app: Flask, clock: Clock, cfg: DbusConfig):
    client, _ = copied_session(app, "vi")
    lifetime = cfg.console.session_hours * 3600
    while clock.now + 600 < 1000 + lifetime:
        clock.now += 600
        assert client.get("/api/test-whoami").status_code == 200
    clock.now = 1000 + lifetime
    assert client.get("/api/test-whoami").status_code == 401


def test_an_idle_login_ends(app: Flask, clock: Clock, cfg: DbusConfig):
    client, _ = copied_session(app, "vi")
    clock.now += cfg.console.session_idle_minutes * 60 - 1
    assert client.get("/api/test-whoami").status_code == 200
    clock.now += cfg.console.session_idle_minutes * 60
    assert client.get("/api/test-whoami").status_code == 401


def test_a_cookie_made_before_the_login_does_not_carry_over(app: Flask):
    client = app.test_client()
    before = csrf_token(client)  # the anonymous session's token
    log_in(client, "op")
    assert csrf_token(client) != before


@pytest.mark.parametrize("secure", [False, True])
def test_the_session_cookie_flags(cfg: DbusConfig, tmp_path: Path, secure: bool):
    made = cfg.model_copy(update={"console": cfg.console.model_copy(update={"secure_cookies": secure})})
    app = console_app(made, tmp_path)
    client = app.test_client()
    r = log_in(client, "op")
    cookie = next(v for v in r.headers.getlist("Set-Cookie") if v.startswith("session="))
    flags = {f.strip().split("=")[0].lower() for f in cookie.split(";")[1:]}
    assert {"httponly", "expires", "path"} <= flags
    assert "samesite=lax" in cookie.lower()
    assert ("secure" in flags) is secure
    assert app.config["REMEMBER_COOKIE_SECURE"] is secure


# ---------------------------------------------------------------- next=

ESCAPES = [
    "//evil.example/",
    "/%09/evil.example/",
    "/\t/evil.example/",
    "/\n/evil.example/",
    "\t//evil.example/",
    " //evil.example/",
    "/\\evil.example/",
    "\\\\evil.example/",
    "\\/evil.example/",
    "/%5Cevil.example/",
    "/%5cevil.example/",
    "%2F%2Fevil.example/",
    "/%2F/evil.example/",
    "/%2fevil.example/",
    "/%252F%252Fevil.example/",
    "/%25252F%25252Fevil.example/",
    "/%0A/evil.example/",
    "/%0d/evil.example/",
    "/%00/evil.example/",
    "/%2509/evil.example/",
    "https://evil.example/",
    "https:evil.example",
    "javascript:alert(1)",
    "/%C0%AF/evil.example/",
    "evil.example",
    "",
]


@pytest.mark.parametrize("target", ESCAPES)
def test_a_next_that_could_leave_the_site_leads_to_the_overview(app: Flask, target: str):
    client = app.test_client()
    r = client.post(
        f"/login?next={quote(target, safe='/%:')}",
        data={"username": "vi", "password": PASSWORDS["vi"], "csrf_token": csrf_token(client)},
    )
    assert r.status_code == 302 and r.headers["Location"] == "/"


@pytest.mark.parametrize(
    "target",
    [
        "/alerts/",
        "/tables/demo/shop.orders",
        "/rules/applog/app_orders",
        "/dead-letters/?code=RAW_UNDECODABLE",
        "/x?a=%20b&c=d",
    ],
)
def test_a_path_of_the_site_is_followed(app: Flask, target: str):
    client = app.test_client()
    r = client.post(
        f"/login?next={quote(target, safe='')}",
        data={"username": "vi", "password": PASSWORDS["vi"], "csrf_token": csrf_token(client)},
    )
    assert r.headers["Location"] == target


def browser_join(base: str, ref: str) -> str:
    """Where a browser goes from ``base`` by ``ref`` (the WHATWG URL parser's rules that matter here: C0
    controls and spaces around it dropped, tabs and newlines anywhere dropped, ``\\`` read as ``/``)."""
    ref = ref.strip("".join(chr(c) for c in range(0x21)))
    ref = re.sub("[\t\n\r]", "", ref).replace("\\", "/")
    return urljoin(base, ref)


def stays(ref: str) -> bool:
    """``ref`` leads to the console's origin, by urllib's reading and by a browser's."""
    base = f"{ORIGIN}/login"
    return all(
        (urlsplit(u).scheme, urlsplit(u).netloc) == ("http", "console.test")
        for u in (urljoin(base, ref), browser_join(base, ref))
    )


TRICKY = st.lists(
    st.sampled_from(
        [
            "/",
            "\\",
            "\t",
            "\n",
            "\r",
            " ",
            "\x00",
            "\x1f",
            "\x7f",
            "%",
            "2F",
            "2f",
            "5C",
            "09",
            "0A",
            "25",
            "evil.example",
            "http",
            "https",
            ":",
            "@",
            ".",
            "..",
            "?",
            "#",
            "a",
            "\u3000",
            "\u0085",
            "%E2%80%A8",
        ]
    ),
    max_size=12,
).map("".join)


def forms(text: str) -> list[str]:
    """``text`` and each of its percent-decodings, until one changes nothing."""
    out = [text]
    while len(out) < 6 and unquote(out[-1]) != out[-1]:
        out.append(unquote(out[-1]))
    return out


@settings(max_examples=600, deadline=None)
@given(st.one_of(TRICKY, TRICKY.map(lambda t: "/" + t), st.text(max_size=30)))
def test_no_accepted_next_leaves_the_origin(target: str) -> None:
    accepted = auth.local_path(target)
    if accepted is None:
        return
    assert accepted == target and accepted.startswith("/") and not accepted.startswith("//")
    assert all(stays(form) for form in forms(accepted)), forms(accepted)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.one_of(TRICKY, TRICKY.map(lambda t: "/" + t)))
def test_no_login_redirect_leaves_the_origin(app: Flask, target: str) -> None:
    """Through the login itself: the query string as a browser would send it, the Location it answers."""
    client = app.test_client()
    token = csrf_token(client)
    r = client.post(
        f"/login?next={quote(target, safe='/%:?@')}",
        data={"username": "vi", "password": PASSWORDS["vi"], "csrf_token": token},
    )
    assert r.status_code == 302
    assert all(stays(form) for form in forms(r.headers["Location"])), r.headers["Location"]
