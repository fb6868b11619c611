"""The console's Flask application: one blueprint per page (console/<page>.py), the login and roles
(console/auth.py), CSRF protection on every POST (Flask-WTF), and the same answer shape for every refusal."""

from __future__ import annotations

import logging
import os
from datetime import timedelta
from pathlib import Path
from typing import Any

from flask import Flask, jsonify, render_template, request
from flask_wtf.csrf import CSRFError, CSRFProtect
from werkzeug.exceptions import HTTPException

from console import alerts, auth, deadletters, overview, pulls, rules, tables
from dbuslib.config import DbusConfig

log = logging.getLogger("dbus.console")
PAGES = (overview, tables, pulls, deadletters, alerts, rules)  # the nav, in this order


def create_app(cfg: DbusConfig, *, audit_path: Path | None = None, testing: bool = False) -> Flask:
    """The console over ``cfg`` (its ``console`` section: users, secret key, audit log, refresh)."""
    app = Flask(__name__)
    secret = cfg.console.secret_key.get_secret_value() if cfg.console.secret_key else os.urandom(32).hex()
    app.config.update(
        SECRET_KEY=secret,
        TESTING=testing,
        DBUS_CONFIG=cfg,
        DBUS_AUDIT_LOG=str(audit_path or cfg.resolve(cfg.console.audit_log)),
        SESSION_COOKIE_HTTPONLY=True,
        SESSION_COOKIE_SAMESITE="Lax",
        SESSION_COOKIE_SECURE=cfg.console.secure_cookies,  # over https only (a TLS proxy in front)
        REMEMBER_COOKIE_HTTPONLY=True,
        REMEMBER_COOKIE_SAMESITE="Lax",
        REMEMBER_COOKIE_SECURE=cfg.console.secure_cookies,
        PERMANENT_SESSION_LIFETIME=timedelta(hours=cfg.console.session_hours),
        WTF_CSRF_TIME_LIMIT=None,  # the token lives as long as the session
        MAX_CONTENT_LENGTH=2 * 1024 * 1024,  # a pasted sample of log lines, at most
    )
    CSRFProtect(app)
    auth.init(app)
    app.register_blueprint(auth.bp)
    for page in PAGES:
        app.register_blueprint(page.bp)

    @app.context_processor
    def common() -> dict[str, Any]:
        return {
            "nav": [(p.bp.name, p.TITLE) for p in PAGES],
            "refresh_s": cfg.console.refresh_s,
            "sources": sorted(cfg.sources),
            "log_sources": sorted(cfg.log_sources),
        }

    @app.after_request
    def headers(response: Any) -> Any:
        response.headers["X-Content-Type-Options"] = "nosniff"
        response.headers["X-Frame-Options"] = "DENY"
        response.headers["Referrer-Policy"] = "same-origin"
        response.headers["Content-Security-Policy"] = (
            "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; "
            "frame-ancestors 'none'"
        )
        return response

    @app.errorhandler(CSRFError)
    def csrf_refused(e: CSRFError) -> Any:
        return _refusal(400, f"refused: {e.description} (reload the page and try again)")

    @app.errorhandler(HTTPException)
    def http_error(e: HTTPException) -> Any:
        return _refusal(e.code or 500, e.description or e.name)

    @app.errorhandler(Exception)
    def unexpected(e: Exception) -> Any:
        """Anything else: logged with its traceback, answered 500 with the request's id only (no traceback,
        no message: it may hold what a page must not show)."""
        if isinstance(e, HTTPException):
            return http_error(e)
        ref = os.urandom(4).hex()
        log.error("%s %s failed (ref %s)", request.method, request.path, ref, exc_info=e)
        return _refusal(500, f"internal error (ref {ref} in the console's log)")

    return app


def _refusal(status: int, reason: str) -> Any:
    """JSON for the API (``/api/...``) and fetch calls, a page otherwise; the reason either way."""
    wants_json = auth.is_api(request.path) or request.accept_mimetypes.best == "application/json"
    if wants_json:
        return jsonify({"error": reason, "status": status}), status
    return render_template("error.html", status=status, reason=reason), status
