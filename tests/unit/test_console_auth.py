"""The console's logins, roles and CSRF protection, through Flask's test client (no server, no stack)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from flask import Flask
from pydantic import SecretStr

from console import auth
from console.app import create_app
from dbuslib.config import ConsoleUser, DbusConfig, load_config

ROOT = Path(__file__).resolve().parents[2]
PASSWORDS = {"op": "operator-secret-1", "vi": "viewer-secret-2"}


@pytest.fixture(scope="module")
def cfg() -> DbusConfig:
    base = load_config(ROOT / "conf" / "dbus.yaml")
    users = (
        ConsoleUser(name="op", role="operator", password_hash=SecretStr(auth.hash_password(PASSWORDS["op"]))),
        ConsoleUser(name="vi", role="viewer", password_hash=SecretStr(auth.hash_password(PASSWORDS["vi"]))),
        ConsoleUser(name="nohash", role="operator"),
    )
    return base.model_copy(update={"console": base.console.model_copy(update={"users": users})})


@pytest.fixture
def app(cfg: DbusConfig, tmp_path: Path) -> Flask:
    app = create_app(cfg, audit_path=tmp_path / "audit.log", testing=True)

    @app.route("/api/test-action", methods=["POST"])
    @auth.operator_required
    def action() -> Any:
        return auth.audit("test-action", what="x")

    return app


def token(client: Any, path: str = "/login") -> str:
    page = client.get(path).get_data(as_text=True)
    found = re.search(r'name="csrf-token" content="([^"]+)"', page)
    assert found, page
    return found.group(1)


def log_in(client: Any, name: str, password: str) -> Any:
    return client.post("/login", data={"username": name, "password": password, "csrf_token": token(client)})


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
    assert log_in(client, "op", PASSWORDS["op"]).status_code == 302
    r = client.post("/api/test-action", headers={"X-CSRFToken": token(client, "/")})
    assert r.status_code == 200
    lines = Path(app.config["DBUS_AUDIT_LOG"]).read_text().splitlines()
    record = json.loads(lines[-1])
    assert record["user"] == "op" and record["role"] == "operator" and record["action"] == "test-action"
    assert record["what"] == "x" and record["at"].endswith("Z")


def test_an_action_without_the_csrf_header_is_refused(app: Flask) -> None:
    client = app.test_client()
    log_in(client, "op", PASSWORDS["op"])
    r = client.post("/api/test-action")
    assert r.status_code == 400 and "CSRF" in r.get_json()["error"]
    assert not Path(app.config["DBUS_AUDIT_LOG"]).exists()


def test_a_viewer_is_refused_an_operator_action(app: Flask) -> None:
    client = app.test_client()
    log_in(client, "vi", PASSWORDS["vi"])
    r = client.post("/api/test-action", headers={"X-CSRFToken": token(client, "/")})
    assert r.status_code == 403 and "viewer" in r.get_json()["error"]


def test_no_page_carries_a_hash_or_password(app: Flask, cfg: DbusConfig) -> None:
    client = app.test_client()
    log_in(client, "op", PASSWORDS["op"])
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
    tok = token(client)
    for target, expect in [
        ("/alerts/", "/alerts/"),
        ("//evil.example/x", "/"),
        ("https://evil.example", "/"),
    ]:
        r = client.post(
            f"/login?next={target}", data={"username": "vi", "password": PASSWORDS["vi"], "csrf_token": tok}
        )
        assert r.headers["Location"] == expect
        client.post("/logout", data={"csrf_token": token(client, "/")})


def test_logout_ends_the_session(app: Flask) -> None:
    client = app.test_client()
    log_in(client, "vi", PASSWORDS["vi"])
    assert client.get("/tables/").status_code == 200
    client.post("/logout", data={"csrf_token": token(client, "/")})
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
