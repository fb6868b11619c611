"""The console's Tables page (docs/console.md)."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, render_template

from console.auth import viewer_required

TITLE = "Tables"
bp = Blueprint("tables", __name__, url_prefix="/tables")


@bp.route("/")
@viewer_required
def index() -> Any:
    return render_template("tables.html")
