"""The Prometheus names of DBus's measurements, shared by the exporter (dbuslib/promexport.py) that serves
them and the reader (dbuslib/promread.py) that queries them. Pure, and without prometheus_client (the
server extra's): ``dbus status`` and the console read through promread."""

from __future__ import annotations

import re

_UNSAFE = re.compile(r"[^a-zA-Z0-9_]")

POINT_TIME = "dbus_point_timestamp_seconds"
# (measurement, field) whose values are counts since the writer's previous point (heartbeat/deadletters.py,
# logprocessor/metrics.py) -> the counter they are added up into (served as ``<name>_total``)
TALLIES = {
    ("dbus_dead_letter", "count"): "dbus_dead_letters",
    ("dbus_log", "count"): "dbus_log_lines",
    ("dbus_heartbeat", "rows"): "dbus_heartbeat_rows",  # rows of the table since its previous heartbeat
}


def _safe(text: str) -> str:
    """``text`` as a Prometheus name: every character it does not take made ``_``, no leading digit."""
    name = _UNSAFE.sub("_", text)
    return name if not name[:1].isdigit() else f"_{name}"


def metric_name(measurement: str, field: str) -> str:
    """``<measurement>_<field>``, made Prometheus-safe."""
    return _safe(f"{measurement}_{field}")


def label_name(tag: str) -> str:
    name = _safe(tag)
    return name if not name.startswith("__") else f"tag{name}"  # "__" is Prometheus's own
