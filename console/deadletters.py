"""The console's Dead letters page (docs/console.md)."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, render_template

from console.auth import viewer_required

TITLE = "Dead letters"
bp = Blueprint("deadletters", __name__, url_prefix="/dead-letters")


@bp.route("/")
@viewer_required
def index() -> Any:
    return render_template("deadletters.html")
