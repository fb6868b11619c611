"""The console's overview: every source (database and log) with its stages, their rows/s, Kafka lag and
state, read as ``dbus status`` reads them (cli.status.collect), refreshed by the page every ``refresh_s``."""

from __future__ import annotations

import json
from typing import Any

from flask import Blueprint, render_template

from cli import status
from console.auth import config, viewer_required

TITLE = "Overview"
bp = Blueprint("overview", __name__)


def snapshot_dict(snap: Any) -> dict[str, Any]:
    """A status snapshot as the page's JSON (alerts as ``to_json`` gives them: no secrets, no internals)."""
    data: dict[str, Any] = json.loads(snap.to_json())
    return data


def overview(cfg: Any, window_s: int = 600) -> dict[str, Any]:
    """Every source's snapshot, database sources first, each as ``{"source", "kind", ...}``."""
    out = []
    for ds in [*sorted(cfg.sources), *sorted(cfg.log_sources)]:
        snap = status.collect(cfg, ds, window_s)
        kind = "log" if ds in cfg.log_sources else "database"
        out.append({"source": ds, "kind": kind, **snapshot_dict(snap)})
    return {"sources": out}


@bp.route("/")
@viewer_required
def index() -> Any:
    return render_template("overview.html")


@bp.route("/api/overview")
@viewer_required
def api() -> Any:
    return overview(config())
