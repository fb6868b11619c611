"""The console's Alerts page (docs/console.md#alerts): the open incidents of every source and their
history; an operator acknowledges one.

Two origins, one list:

- **monitor**: the heartbeat monitor's incidents (heartbeat.monitor.AlertStore, as ``dbus status`` reads
  them): a table's heartbeat ``stale`` or its ``latency`` too high, ``dead_letter`` per stage and code.
  Open ones are ZooKeeper nodes; closed ones are in the monitor's bounded history node. An acknowledgement
  is written on the alert's node (``AlertStore.ack``: ``acked_by``, ``acked_ms``), so the monitor, other
  consoles and a restart keep it.
- **console**: ``stage_down``, a stage the console's collector saw running and that is down now (its
  announced process is gone, dbuslib/liveness.py; console/overview.py ``track``). The console raises these
  itself, not the monitor: a killed heartbeat process (the monitor's own) must show too, and the console
  notices within a second. They live in the console's memory (its restart forgets them and their
  acknowledgements) and close when the stage runs again.

The readings come from the overview's collector (read every second in the background); the page polls
``/alerts/api/alerts``. ``alerts_view`` (pure) builds the JSON: tests/unit/test_console_alerts.py.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from typing import Any

from flask import Blueprint, abort, render_template
from flask_login import current_user

from console.auth import audit, config, operator_required, viewer_required
from console.body import TEXT, json_object
from console.overview import STAGE_DOWN, StageDown, collector, sources_of

TITLE = "Alerts"
bp = Blueprint("alerts", __name__, url_prefix="/alerts")
MONITOR, CONSOLE = "monitor", "console"
HISTORY_SHOWN = 100


def _subject(a: Any) -> str:
    """What the incident is about: ``shop.orders`` (``@host`` for a log table's), or a dead-letter
    incident's ``stage appender, code RAW_UNDECODABLE``."""
    if a.kind == "dead_letter":
        return f"stage {a.schema}, code {a.table}"
    return f"{a.schema}.{a.table}" + (f" from {a.host}" if a.host else "")


def monitor_alert(ds: str, a: Any, now_ms: int) -> dict[str, Any]:
    """One of the monitor's alerts (heartbeat.incidents.Alert) as the page shows it."""
    return {
        "origin": MONITOR,
        "source": ds,
        "key": a.key,
        "kind": a.kind,
        "subject": _subject(a),
        "since_ms": a.since_ms or None,
        "open_s": round((now_ms - a.since_ms) / 1000, 1) if a.since_ms else None,
        "message": a.message,
        "count": a.count,
        "notified": a.notified_ms is not None,
        "acked_by": a.acked_by,
        "acked_ms": a.acked_ms,
    }


def stage_down_alert(inc: StageDown, now_ms: int) -> dict[str, Any]:
    return {
        "origin": CONSOLE,
        "source": inc.ds,
        "key": inc.key,
        "kind": STAGE_DOWN,
        "subject": f"stage {inc.stage}",
        "since_ms": inc.since_ms,
        "open_s": round((now_ms - inc.since_ms) / 1000, 1),
        "message": inc.message,
        "count": None,
        "notified": False,
        "acked_by": inc.acked_by,
        "acked_ms": inc.acked_ms,
    }


def alerts_view(
    sources: Iterable[str],
    alerts: Mapping[str, list[Any]],
    history: Mapping[str, list[Any]],
    down_open: Iterable[StageDown],
    down_history: Iterable[StageDown],
    errors: Mapping[str, str],
    now_ms: int,
    limit: int = HISTORY_SHOWN,
) -> dict[str, Any]:
    """The page's JSON: ``open`` (stage_down first, then the monitor's, each newest first), ``history``
    (closed incidents of both origins, newest first, at most ``limit``), ``errors`` per source."""
    order = list(sources)
    open_: list[dict[str, Any]] = [stage_down_alert(i, now_ms) for i in down_open]
    for ds in order:
        open_ += [monitor_alert(ds, a, now_ms) for a in alerts.get(ds, [])]
    open_.sort(key=lambda a: (a["origin"] != CONSOLE, -(a["since_ms"] or 0)))
    closed: list[dict[str, Any]] = []
    for ds in order:
        for c in history.get(ds, []):
            closed.append(
                {
                    **monitor_alert(ds, c.alert, c.closed_ms),
                    "closed_ms": c.closed_ms,
                    "closed": c.closed_message,
                }
            )
    for inc in down_history:
        row = stage_down_alert(inc, inc.closed_ms or now_ms)
        closed.append({**row, "closed_ms": inc.closed_ms, "closed": f"{inc.ds}: {inc.stage} runs again"})
    closed.sort(key=lambda a: -(a["closed_ms"] or 0))
    for row in closed:
        row.pop("open_s", None)
        if row["since_ms"] and row["closed_ms"]:
            row["lasted_s"] = round((row["closed_ms"] - row["since_ms"]) / 1000, 1)
    return {
        "open": open_,
        "history": closed[:limit],
        "errors": [f"{ds}: {e}" for ds, e in sorted(errors.items())],
    }


def acknowledge(source: str, key: str, by: str, now_ms: int) -> dict[str, Any]:
    """Acknowledge the open incident ``key`` of ``source`` (a stage_down of the console's, or the
    monitor's alert in ZooKeeper); 404 when none is open, 400 for an unknown source."""
    from heartbeat.monitor import AlertStore, alerts_path

    cfg = config()
    if source not in sources_of(cfg):
        abort(400, description=f"source: unknown source {source!r}")
    c = collector()
    if key.endswith(f".{STAGE_DOWN}"):
        inc = c.ack_stage_down(source, key[: -len(STAGE_DOWN) - 1], by, now_ms)
        if inc is None:
            abort(404, description=f"{source}: no open incident {key!r}")
        return stage_down_alert(inc, now_ms)
    store = AlertStore(c.zk(), alerts_path(cfg.endpoints.zookeeper.root, source))  # kazoo: thread-safe
    alert = store.ack(key, by, now_ms)
    if alert is None:
        abort(404, description=f"{source}: no open alert {key!r}")
    return monitor_alert(source, alert, now_ms)


@bp.route("/")
@viewer_required
def index() -> Any:
    return render_template("alerts.html")


@bp.route("/api/alerts")
@viewer_required
def api() -> Any:
    c = collector()
    with c.lock:
        r = c.readings
        alerts, history, errors = dict(r.alerts), dict(r.history), dict(r.alert_errors)
        down_open, down_history = list(c.down.values()), list(c.down_history)
    return alerts_view(
        sources_of(config()), alerts, history, down_open, down_history, errors, int(time.time() * 1000)
    )


@bp.route("/api/ack", methods=["POST"])
@operator_required
def ack() -> Any:
    body = json_object(source=TEXT, key=TEXT)
    source, key = body.get("source"), body.get("key")
    if not source or not key:
        abort(400, description="source and key: both needed")
    row = acknowledge(source, key, current_user.name, int(time.time() * 1000))
    audit("alert-ack", source=source, key=key, origin=row["origin"], subject=row["subject"])
    collector().poke()
    return {"ok": True, "alert": row}
