"""The console's Alerts page (docs/console.md)."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, render_template

from console.auth import viewer_required

TITLE = "Alerts"
bp = Blueprint("alerts", __name__, url_prefix="/alerts")


@bp.route("/")
@viewer_required
def index() -> Any:
    return render_template("alerts.html")
