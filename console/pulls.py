"""The console's Full pulls page (docs/console.md)."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, render_template

from console.auth import viewer_required

TITLE = "Full pulls"
bp = Blueprint("pulls", __name__, url_prefix="/pulls")


@bp.route("/")
@viewer_required
def index() -> Any:
    return render_template("pulls.html")
