"""The console's Log rules page (docs/console.md)."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, render_template

from console.auth import viewer_required

TITLE = "Log rules"
bp = Blueprint("rules", __name__, url_prefix="/rules")


@bp.route("/")
@viewer_required
def index() -> Any:
    return render_template("rules.html")
