"""Who may do what in the console: logins from ``console.users`` (dbuslib.config.ConsoleUser), roles
viewer and operator, and the audit log of every operator action.

Every page needs a login (``viewer_required``); what changes the bus needs the operator role
(``operator_required``: 403 otherwise, and the pages hide those controls from a viewer). Each operator
action calls ``audit(action, **details)``: one JSON line with who, when, from where and what, in
``console.audit_log``, and the same line in the console's log.

A login is kept on the server (console/sessions.py: the cookie carries a session id only), so a logout,
the end of its lifetime or a changed password hash refuses a copied cookie too; failed logins are
throttled per name and per address (console/throttle.py: slowed, then refused with 429 and
``Retry-After``, each refusal audited as ``login-refused``); after a login, ``next`` is followed only when
it is a path of this site whatever a browser makes of it (``local_path``)."""

from __future__ import annotations

import json
import logging
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import wraps
from pathlib import Path
from typing import Any, TypeVar, cast
from urllib.parse import unquote, urlsplit

from flask import (
    Blueprint,
    Flask,
    abort,
    current_app,
    flash,
    redirect,
    render_template,
    request,
    session,
    url_for,
)
from flask_login import LoginManager, UserMixin, current_user, login_required, login_user, logout_user
from werkzeug.security import check_password_hash, generate_password_hash

from console.sessions import SessionStore, fingerprint
from console.throttle import LoginThrottle, Verdict
from dbuslib.config import DbusConfig

log = logging.getLogger("dbus.console")
bp = Blueprint("auth", __name__)
F = TypeVar("F", bound=Callable[..., Any])
OPERATOR, VIEWER = "operator", "viewer"


@dataclass(frozen=True)
class User(UserMixin):
    """A logged-in user: the name, role and the login's session id (the hash stays in the configuration;
    Flask-Login keeps ``get_id()``, the session id, in the cookie)."""

    name: str
    role: str
    sid: str = ""

    def get_id(self) -> str:
        return self.sid

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


@dataclass(frozen=True)
class Guards:
    """The app's logins and failed-login counts (``app.extensions["dbus_auth"]``)."""

    sessions: SessionStore
    throttle: LoginThrottle


def guards() -> Guards:
    return cast(Guards, current_app.extensions["dbus_auth"])


def user_fingerprint(name: str) -> str | None:
    """The fingerprint of ``name``'s hash in the configuration now (None: no such user, or no hash)."""
    for u in config().console.users:
        if u.name == name:
            return fingerprint(u.password_hash.get_secret_value())
    return None


def init(app: Flask) -> None:
    """The login manager of ``app``, its session store and its login throttle."""
    settings = cast(DbusConfig, app.config["DBUS_CONFIG"]).console
    app.extensions["dbus_auth"] = Guards(
        SessionStore(lifetime_s=settings.session_hours * 3600, idle_s=settings.session_idle_minutes * 60),
        LoginThrottle(
            window_s=settings.login_window_s,
            slow_after=settings.login_slow_after,
            delay_s=settings.login_delay_s,
            user_failures=settings.login_user_failures,
            address_failures=settings.login_address_failures,
        ),
    )
    manager = LoginManager()
    manager.login_view = "auth.login"
    manager.login_message = "Log in to see the console."
    manager.init_app(app)

    @manager.user_loader
    def load(sid: str) -> User | None:
        name = guards().sessions.find(sid, user_fingerprint)
        for u in config().console.users:
            if name is not None and u.name == name:
                return User(u.name, u.role, sid)
        return None  # ended, revoked, a changed hash or a user removed from the configuration

    @manager.unauthorized_handler
    def unauthorized() -> Any:
        if is_api(request.path):
            return {"error": "not logged in"}, 401
        return redirect(url_for("auth.login", next=request.full_path))


def is_api(path: str) -> bool:
    """A JSON endpoint: ``/api/...`` or a page's ``/<page>/api/...``; refusals there are JSON, not pages."""
    return path.startswith("/api/") or "/api/" in path


_PATH = re.compile(r"/(?![/\\])[\x21-\x5b\x5d-\x7e]*\Z")  # printable ASCII, no space or backslash
_DECODED = re.compile(r"/(?![/\\])[^\x00-\x1f\x7f-\x9f\\]*\Z")  # decoded: no control or backslash
_DECODINGS = 3  # a target still encoded after this many rounds is refused


def local_path(target: str | None) -> str | None:
    """``target`` when it can only lead to this site: a path (``/...``) of printable ASCII with no space
    or backslash, no scheme or host, that stays so each time it is percent-decoded (tabs, newlines and
    control characters, which a browser drops, and ``\\``, which it reads as ``/``, are refused, encoded
    or not: ``/%09/evil.example/``, ``/%5Cevil.example``, ``/%2F%2Fevil.example``). None otherwise."""
    if not target or not _PATH.match(target):
        return None
    seen = target
    try:
        for _ in range(_DECODINGS + 1):
            parts = urlsplit(seen)
            if not _DECODED.match(seen) or parts.scheme or parts.netloc:
                return None
            decoded = unquote(seen, errors="strict")
            if decoded == seen:
                return target
            seen = decoded
    except (UnicodeDecodeError, ValueError):  # not UTF-8 once decoded, or not a URL at all
        return None
    return None


def _after_login(target: str | None) -> str:
    return local_path(target) or url_for("overview.index")


def _too_many(name: str, verdict: Verdict) -> Any:
    """429 with ``Retry-After``, audited (the name tried, never a password); nothing was checked."""
    if verdict.audit:
        audit(
            "login-refused",
            name=name[:64],
            by=verdict.by,
            failures=verdict.failures,
            retry_after_s=verdict.retry_after,
        )
    log.warning(
        "console: login for %r from %s refused (%s, retry after %d s)",
        name[:64],
        request.remote_addr,
        f"{verdict.failures} failures of the {verdict.by}" if verdict.by else "too many attempts waiting",
        verdict.retry_after,
    )
    flash(f"Too many failed logins: try again in {verdict.retry_after} s.", "error")
    page = render_template("login.html", username=name)
    return page, 429, {"Retry-After": str(verdict.retry_after)}


@bp.route("/login", methods=["GET", "POST"])
def login() -> Any:
    if request.method == "POST":
        return _log_in(request.form.get("username", ""), request.form.get("password", ""))
    return render_template("login.html", username="")


def _log_in(name: str, password: str) -> Any:
    throttle, address = guards().throttle, request.remote_addr or "unknown"
    verdict = throttle.verdict(name, address)
    if verdict.refused:
        return _too_many(name, verdict)
    if not throttle.wait(verdict.wait_s):
        return _too_many(name, throttle.busy(verdict.wait_s))
    user = check(config(), name, password)
    if user is None:
        throttle.failed(name, address)
        log.warning("console: failed login for %r from %s", name[:64], address)
        flash("Wrong name or password.", "error")
        return render_template("login.html", username=name), 401
    throttle.succeeded(name)
    if current_user.is_authenticated:  # a login over another one ends it
        guards().sessions.revoke(current_user.sid)
    session.clear()  # nothing of the session before the login carries over
    sid = guards().sessions.open(user.name, user_fingerprint(user.name) or "")
    login_user(User(user.name, user.role, sid))
    session.permanent = True  # the cookie lasts console.session_hours; the server ends the login anyway
    log.info("console: %s (%s) logged in from %s", user.name, user.role, address)
    return redirect(_after_login(request.args.get("next")))


@bp.route("/logout", methods=["POST"])
def logout() -> Any:
    if current_user.is_authenticated:
        guards().sessions.revoke(current_user.sid)  # a copy of the cookie is refused from now on
    logout_user()
    session.clear()
    return redirect(url_for("auth.login"))
