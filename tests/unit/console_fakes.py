"""What the console's unit tests (test_console_*) share: an operator and a viewer with their passwords, a
config that has them, the CSRF token of a page and a login, all through Flask's test client (no server, no
stack). What one page's tests add (a fake collector, a meta store on SQLite, monkeypatched readers) stays in
its test module."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path
from typing import Any

from flask import Flask
from pydantic import SecretStr

from console import auth
from console.app import create_app
from dbuslib.config import ConsoleUser, DbusConfig

CONF = Path(__file__).resolve().parents[2] / "conf" / "dbus.yaml"
PASSWORDS = {"op": "operator-secret-1", "vi": "viewer-secret-2"}
ROLES = {"op": "operator", "vi": "viewer"}


@cache
def _users() -> tuple[ConsoleUser, ...]:
    """The users of PASSWORDS, hashed once per run (a scrypt hash takes a while)."""
    return tuple(
        ConsoleUser(name=name, role=ROLES[name], password_hash=SecretStr(auth.hash_password(password)))
        for name, password in PASSWORDS.items()
    )


def with_users(cfg: DbusConfig, *extra: ConsoleUser) -> DbusConfig:
    """``cfg`` whose console has the operator ``op`` and the viewer ``vi`` of PASSWORDS, then ``extra``."""
    users = (*_users(), *extra)
    return cfg.model_copy(update={"console": cfg.console.model_copy(update={"users": users})})


def console_app(cfg: DbusConfig, tmp_path: Path) -> Flask:
    """The console for Flask's test client, its audit log in the test's folder."""
    return create_app(cfg, audit_path=tmp_path / "audit.log", testing=True)


def csrf_token(client: Any, path: str = "/login") -> str:
    """The CSRF token of the page at ``path``, from its ``<meta name="csrf-token">``."""
    page = client.get(path).get_data(as_text=True)
    found = re.search(r'name="csrf-token" content="([^"]+)"', page)
    assert found, page
    return found.group(1)


def log_in(client: Any, name: str, password: str | None = None) -> Any:
    """The response to logging in as ``name``, with its password from PASSWORDS unless one is given."""
    password = PASSWORDS[name] if password is None else password
    return client.post(
        "/login", data={"username": name, "password": password, "csrf_token": csrf_token(client)}
    )
