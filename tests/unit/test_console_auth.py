"""The console's logins, roles and CSRF protection, through Flask's test client (no server, no stack)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from console_fakes import CONF, PASSWORDS, console_app, csrf_token, log_in, with_users
from flask import Flask

from console import auth
from dbuslib.config import ConsoleUser, DbusConfig, load_config


@pytest.fixture(scope="module")
def cfg() -> DbusConfig:
    return with_users(load_config(CONF), ConsoleUser(name="nohash", role="operator"))


@pytest.fixture
def app(cfg: DbusConfig, tmp_path: Path) -> Flask:
    app = console_app(cfg, tmp_path)

    @app.route("/api/test-action", methods=["POST"])
    @auth.operator_required
    def action() -> Any:
        return auth.audit("test-action", what="x")

    return app


def test_every_page_needs_a_login(app: Flask) -> None:
    client = app.test_client()
    for path in ["/", "/tables/", "/pulls/", "/dead-letters/", "/alerts/", "/rules/"]:
        r = client.get(path)
        assert r.status_code == 302 and r.headers["Location"].startswith("/login"), path
    r = client.get("/api/overview")
    assert r.status_code == 401 and r.get_json() == {"error": "not logged in"}


@pytest.mark.parametrize(
    ("name", "password"), [("op", "wrong"), ("nobody", "x"), ("nohash", ""), ("nohash", "anything")]
)
def test_a_wrong_login_gets_401_and_no_session(app: Flask, name: str, password: str) -> None:
    client = app.test_client()
    r = log_in(client, name, password)
    assert r.status_code == 401
    assert "Wrong name or password." in r.get_data(as_text=True)
    assert client.get("/").status_code == 302


def test_a_login_without_the_csrf_token_is_refused(app: Flask) -> None:
    client = app.test_client()
    r = client.post("/login", data={"username": "op", "password": PASSWORDS["op"]})
    assert r.status_code == 400
    assert "CSRF token is missing" in r.get_data(as_text=True)


def test_an_operator_acts_and_the_action_is_audited(app: Flask) -> None:
    client = app.test_client()
    assert log_in(client, "op").status_code == 302
    r = client.post("/api/test-action", headers={"X-CSRFToken": csrf_token(client, "/")})
    assert r.status_code == 200
    lines = Path(app.config["DBUS_AUDIT_LOG"]).read_text().splitlines()
    record = json.loads(lines[-1])
    assert record["user"] == "op" and record["role"] == "operator" and record["action"] == "test-action"
    assert record["what"] == "x" and record["at"].endswith("Z")


def test_an_action_without_the_csrf_header_is_refused(app: Flask) -> None:
    client = app.test_client()
    log_in(client, "op")
    r = client.post("/api/test-action")
    assert r.status_code == 400 and "CSRF" in r.get_json()["error"]
    assert not Path(app.config["DBUS_AUDIT_LOG"]).exists()


def test_a_viewer_is_refused_an_operator_action(app: Flask) -> None:
    client = app.test_client()
    log_in(client, "vi")
    r = client.post("/api/test-action", headers={"X-CSRFToken": csrf_token(client, "/")})
    assert r.status_code == 403 and "viewer" in r.get_json()["error"]


def test_no_page_carries_a_hash_or_password(app: Flask, cfg: DbusConfig) -> None:
    client = app.test_client()
    log_in(client, "op")
    secrets = [
        *PASSWORDS.values(),
        *(
            u.password_hash.get_secret_value()
            for u in cfg.console.users
            if u.password_hash.get_secret_value()
        ),
    ]
    for path in ["/login", "/tables/", "/pulls/", "/dead-letters/", "/alerts/", "/rules/"]:
        text = client.get(path).get_data(as_text=True)
        assert not [s for s in secrets if s in text], path


def test_the_login_follows_only_a_local_next(app: Flask) -> None:
    client = app.test_client()
    for target, expect in [
        ("/alerts/", "/alerts/"),
        ("//evil.example/x", "/"),
        ("https://evil.example", "/"),
    ]:
        tok = csrf_token(client)  # a login starts a new session: the token of the one before is gone
        r = client.post(
            f"/login?next={target}", data={"username": "vi", "password": PASSWORDS["vi"], "csrf_token": tok}
        )
        assert r.headers["Location"] == expect
        client.post("/logout", data={"csrf_token": csrf_token(client, "/")})


def test_logout_ends_the_session(app: Flask) -> None:
    client = app.test_client()
    log_in(client, "vi")
    assert client.get("/tables/").status_code == 200
    client.post("/logout", data={"csrf_token": csrf_token(client, "/")})
    assert client.get("/tables/").status_code == 302


def test_security_headers(app: Flask) -> None:
    r = app.test_client().get("/login")
    assert r.headers["X-Frame-Options"] == "DENY"
    assert "script-src 'self'" in r.headers["Content-Security-Policy"]


def test_hash_password_prints_a_hash_that_checks(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import io

    from werkzeug.security import check_password_hash

    from cli.main import main

    monkeypatch.setattr("sys.stdin", io.StringIO("s3cret pass\n"))
    monkeypatch.delenv("DBUS_CONFIG", raising=False)
    assert main(["console", "hash-password", "--password-stdin"]) == 0
    printed = capsys.readouterr().out.strip()
    assert printed.startswith("scrypt:") and check_password_hash(printed, "s3cret pass")
