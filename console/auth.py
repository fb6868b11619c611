"""Who may do what in the console: logins from ``console.users`` (dbuslib.config.ConsoleUser), roles
viewer and operator, and the audit log of every operator action.

Every page needs a login (``viewer_required``); what changes the bus needs the operator role
(``operator_required``: 403 otherwise, and the pages hide those controls from a viewer). Each operator
action calls ``audit(action, **details)``: one JSON line with who, when, from where and what, in
``console.audit_log``, and the same line in the console's log."""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import wraps
from pathlib import Path
from typing import Any, TypeVar, cast

from flask import (
    Blueprint,
    Flask,
    abort,
    current_app,
    flash,
    redirect,
    render_template,
    request,
    url_for,
)
from flask_login import LoginManager, UserMixin, current_user, login_required, login_user, logout_user
from werkzeug.security import check_password_hash, generate_password_hash

from dbuslib.config import DbusConfig

log = logging.getLogger("dbus.console")
bp = Blueprint("auth", __name__)
F = TypeVar("F", bound=Callable[..., Any])
OPERATOR, VIEWER = "operator", "viewer"


@dataclass(frozen=True)
class User(UserMixin):
    """A logged-in user: the name and role only (the hash stays in the configuration)."""

    name: str
    role: str

    def get_id(self) -> str:
        return self.name

    @property
    def is_operator(self) -> bool:
        return self.role == OPERATOR


def hash_password(password: str) -> str:
    """The ``password_hash`` of a ``console.users`` entry (werkzeug's scrypt)."""
    return generate_password_hash(password, method="scrypt")


def check(cfg: DbusConfig, name: str, password: str) -> User | None:
    """The user ``name`` when ``password`` is theirs; None otherwise (also for an unknown name or an
    empty hash: the same answer, and a hash is checked either way so the time does not tell them apart)."""
    known = {u.name: u for u in cfg.console.users}
    entry = known.get(name)
    stored = entry.password_hash.get_secret_value() if entry is not None else ""
    ok = check_password_hash(stored or _DUMMY_HASH, password) and bool(stored)
    return User(entry.name, entry.role) if ok and entry is not None else None


_DUMMY_HASH = generate_password_hash("dbus-console-no-such-user", method="scrypt")


def config() -> DbusConfig:
    """The configuration the console was started with."""
    return cast(DbusConfig, current_app.config["DBUS_CONFIG"])


def viewer_required(view: F) -> F:
    """Any logged-in user (the login page otherwise; 401 for the JSON endpoints)."""
    return cast(F, login_required(view))


def operator_required(view: F) -> F:
    """A logged-in operator; 403 for a viewer."""

    @wraps(view)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        if not current_user.is_authenticated:
            return current_app.login_manager.unauthorized()  # type: ignore[attr-defined]
        if not current_user.is_operator:
            abort(403, description=f"{current_user.name} is a viewer: only an operator may do this")
        return view(*args, **kwargs)

    return cast(F, wrapped)


_audit_lock = threading.Lock()


def audit(action: str, **details: Any) -> dict[str, Any]:
    """Record an operator action: ``{"at", "user", "role", "remote", "action", ...details}`` as one JSON
    line in ``console.audit_log`` and in the log. Returns the record."""
    record = {
        "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "user": current_user.name if current_user.is_authenticated else None,
        "role": current_user.role if current_user.is_authenticated else None,
        "remote": request.remote_addr,
        "action": action,
        **details,
    }
    line = json.dumps(record, default=str, sort_keys=False)
    path = Path(current_app.config["DBUS_AUDIT_LOG"])
    with _audit_lock:
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a", encoding="utf-8") as f:
            f.write(line + "\n")
    log.info("audit %s", line)
    return record


def audit_records(limit: int = 200) -> list[dict[str, Any]]:
    """The newest ``limit`` audit records, newest first (a missing file: none)."""
    path = Path(current_app.config["DBUS_AUDIT_LOG"])
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return []
    out = []
    for line in reversed(lines[-limit:]):
        try:
            out.append(json.loads(line))
        except ValueError:
            continue  # a line cut by a crash: the others still count
    return out


def init(app: Flask) -> None:
    """The login manager of ``app``."""
    manager = LoginManager()
    manager.login_view = "auth.login"
    manager.login_message = "Log in to see the console."
    manager.init_app(app)

    @manager.user_loader
    def load(name: str) -> User | None:
        for u in config().console.users:
            if u.name == name and u.password_hash.get_secret_value():
                return User(u.name, u.role)
        return None  # a user removed from the configuration is logged out

    @manager.unauthorized_handler
    def unauthorized() -> Any:
        if is_api(request.path):
            return {"error": "not logged in"}, 401
        return redirect(url_for("auth.login", next=request.full_path))


def is_api(path: str) -> bool:
    """A JSON endpoint: ``/api/...`` or a page's ``/<page>/api/...``; refusals there are JSON, not pages."""
    return path.startswith("/api/") or "/api/" in path


def _safe_next(target: str | None) -> str:
    """Only a path of this site (``/...``, not ``//host``) is followed after the login."""
    if target and target.startswith("/") and not target.startswith("//"):
        return target
    return url_for("overview.index")


@bp.route("/login", methods=["GET", "POST"])
def login() -> Any:
    if request.method == "POST":
        name = request.form.get("username", "")
        user = check(config(), name, request.form.get("password", ""))
        if user is None:
            log.warning("console: failed login for %r from %s", name, request.remote_addr)
            flash("Wrong name or password.", "error")
            return render_template("login.html", username=name), 401
        login_user(user)
        log.info("console: %s (%s) logged in from %s", user.name, user.role, request.remote_addr)
        return redirect(_safe_next(request.args.get("next")))
    return render_template("login.html", username="")


@bp.route("/logout", methods=["POST"])
def logout() -> Any:
    logout_user()
    return redirect(url_for("auth.login"))
