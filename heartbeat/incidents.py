"""When a table's heartbeat opens or clears an alert (pure): previous alerts + observations + now ->
new alerts + notifications.

Two kinds per table (a third, ``dead_letter``, per stage and code, is decided by heartbeat.deadletters):

- ``stale``: the table's last heartbeat point is older than ``timeout_s`` (a table never seen counts from
  the monitor's start). It clears only on evidence: a point no older than ``timeout_s``.
- ``latency``: the last point's end-to-end latency is above ``latency_alert_s``; it clears when a later
  point's latency is within it.

An open alert is what the monitor keeps in ZooKeeper at
``<root>/HeartBeat/<ds>/alerts/<schema>.<table>.<kind>``::

    {"ds": "demo", "schema": "shop", "table": "orders", "kind": "stale", "since_ms": 1714564800000,
     "notified_ms": 1714565410000, "age_s": 610.0, "latency_s": 1.2,
     "message": "demo: shop.orders: no heartbeat for 610 s (timeout 600 s)"}

``since_ms`` is when the table was last known good (its last heartbeat point, or the monitor's start for a
stale table never seen; the point's time for a latency alert); ``notified_ms`` is null until every channel
took the alert. An operator may acknowledge an open alert (the console): ``acked_by`` and ``acked_ms`` are
then added to its node; it stays open until it clears. One alert per incident, one recovery when it
clears, nothing for a table within thresholds.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, replace
from typing import Any, Literal

Kind = Literal["stale", "latency"]
KINDS: tuple[Kind, ...] = ("stale", "latency")


@dataclass(frozen=True)
class Thresholds:
    timeout_s: float
    latency_alert_s: float


@dataclass(frozen=True)
class Observation:
    """What the time-series server holds for one monitored table: its last heartbeat point's time and
    latency (None, None when it has none)."""

    schema: str
    table: str
    last_ms: int | None = None
    latency_s: float | None = None
    host: str | None = None  # a log table's: the host whose heartbeat lines these are (None: a database's)


@dataclass(frozen=True)
class Alert:
    ds: str
    schema: str
    table: str
    kind: str
    since_ms: int
    notified_ms: int | None
    age_s: float | None
    latency_s: float | None
    message: str
    # dead-letter incidents only (heartbeat.deadletters; ``schema`` is the stage, ``table`` the code):
    # letters counted since it opened, when the last came (epoch ms), the newest one's original record
    count: int | None = None
    last_ms: int | None = None
    topic: str | None = None
    partition: int | None = None
    offset: int | None = None
    origin: str | None = None
    host: str | None = None  # a log table's alert: per host (``schema.table@host.kind``)
    # acknowledged by an operator (the console, ``AlertStore.ack``): who and when (epoch ms); None until then
    acked_by: str | None = None
    acked_ms: int | None = None

    @property
    def key(self) -> str:
        return alert_key(self.schema, self.table, self.kind, self.host)

    def to_dict(self) -> dict[str, Any]:
        """The stored JSON (the dead-letter fields and ``host`` only when set)."""
        return {k: v for k, v in asdict(self).items() if v is not None or k not in _OPTIONAL_FIELDS}

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any]) -> Alert:
        """From the stored JSON; KeyError/TypeError when a field is missing or wrong."""
        return cls(
            ds=str(doc["ds"]),
            schema=str(doc["schema"]),
            table=str(doc["table"]),
            kind=str(doc["kind"]),
            since_ms=int(doc["since_ms"]),
            notified_ms=None if doc.get("notified_ms") is None else int(doc["notified_ms"]),
            age_s=_float_or_none(doc.get("age_s")),
            latency_s=_float_or_none(doc.get("latency_s")),
            message=str(doc.get("message", "")),
            count=_int_or_none(doc.get("count")),
            last_ms=_int_or_none(doc.get("last_ms")),
            topic=_str_or_none(doc.get("topic")),
            partition=_int_or_none(doc.get("partition")),
            offset=_int_or_none(doc.get("offset")),
            origin=_str_or_none(doc.get("origin")),
            host=_str_or_none(doc.get("host")),
            acked_by=_str_or_none(doc.get("acked_by")),
            acked_ms=_int_or_none(doc.get("acked_ms")),
        )


_OPTIONAL_FIELDS = frozenset(
    {"count", "last_ms", "topic", "partition", "offset", "origin", "host", "acked_by", "acked_ms"}
)


@dataclass(frozen=True)
class Notification:
    """``event`` "alert" (an incident opened) or "recovery" (it cleared), at ``at_ms``."""

    event: Literal["alert", "recovery"]
    alert: Alert
    at_ms: int


def _float_or_none(v: Any) -> float | None:
    return None if v is None else float(v)


def _int_or_none(v: Any) -> int | None:
    return None if v is None else int(v)


def _str_or_none(v: Any) -> str | None:
    return None if v is None else str(v)


def alert_key(schema: str, table: str, kind: str, host: str | None = None) -> str:
    """``shop.orders.stale``: the alert's ZooKeeper node name (a log table's, per host:
    ``applog_schema.app_orders@vm.stale``)."""
    return f"{schema}.{table}.{kind}" if host is None else f"{schema}.{table}@{host}.{kind}"


def _name(ds: str, schema: str, table: str, host: str | None) -> str:
    return f"{ds}: {schema}.{table}" + ("" if host is None else f" from {host}")


def _age_s(obs: Observation, now_ms: int, started_ms: int) -> float:
    return (now_ms - (obs.last_ms if obs.last_ms is not None else started_ms)) / 1000


def _is_bad(kind: Kind, obs: Observation, now_ms: int, started_ms: int, th: Thresholds) -> bool:
    if kind == "stale":
        return _age_s(obs, now_ms, started_ms) > th.timeout_s
    return obs.latency_s is not None and obs.latency_s > th.latency_alert_s


def _is_good(kind: Kind, obs: Observation, now_ms: int, th: Thresholds) -> bool:
    """Evidence that an open incident cleared (missing data is no evidence)."""
    if obs.last_ms is None:
        return False
    if kind == "stale":
        return (now_ms - obs.last_ms) / 1000 <= th.timeout_s
    return obs.latency_s is not None and obs.latency_s <= th.latency_alert_s


def _message(ds: str, kind: Kind, obs: Observation, age_s: float, th: Thresholds) -> str:
    name = _name(ds, obs.schema, obs.table, obs.host)
    if kind == "stale":
        seen = "never seen" if obs.last_ms is None else f"no heartbeat for {age_s:.0f} s"
        return f"{name}: {seen} (timeout {th.timeout_s:g} s)"
    return f"{name}: end-to-end latency {obs.latency_s:.1f} s (threshold {th.latency_alert_s:g} s)"


def _open(ds: str, kind: Kind, obs: Observation, now_ms: int, started_ms: int, th: Thresholds) -> Alert:
    age = _age_s(obs, now_ms, started_ms)
    since = obs.last_ms if obs.last_ms is not None else started_ms
    return Alert(
        ds=ds,
        schema=obs.schema,
        table=obs.table,
        kind=kind,
        since_ms=since,
        notified_ms=None,
        age_s=round(age, 3),
        latency_s=obs.latency_s,
        message=_message(ds, kind, obs, age, th),
        host=obs.host,
    )


def _recovered(alert: Alert, obs: Observation | None, now_ms: int) -> Alert:
    """The alert as its recovery notice reports it: the latest age and latency."""
    name = _name(alert.ds, alert.schema, alert.table, alert.host)
    if obs is None:
        return replace(alert, message=f"{name}: no longer monitored")
    age = None if obs.last_ms is None else round((now_ms - obs.last_ms) / 1000, 3)
    what = "heartbeats again" if alert.kind == "stale" else "latency back within the threshold"
    return replace(
        alert,
        age_s=age,
        latency_s=obs.latency_s,
        message=f"{name}: {what} ({alert.kind} since {alert.since_ms} ms)",
    )


def evaluate(
    ds: str,
    alerts: Mapping[str, Alert],
    observations: Iterable[Observation],
    now_ms: int,
    started_ms: int,
    th: Thresholds,
) -> tuple[dict[str, Alert], list[Notification]]:
    """The open alerts after this check, and what to notify: an "alert" for each incident that opens, a
    "recovery" for each that clears (also for an alert of a table no longer monitored)."""
    current = {k: a for k, a in alerts.items() if a.kind in KINDS}  # other kinds have their own evaluation
    notes: list[Notification] = []
    seen: set[str] = set()
    for obs in observations:
        for kind in KINDS:
            key = alert_key(obs.schema, obs.table, kind, obs.host)
            seen.add(key)
            if key in current:
                if _is_good(kind, obs, now_ms, th):
                    notes.append(Notification("recovery", _recovered(current.pop(key), obs, now_ms), now_ms))
            elif _is_bad(kind, obs, now_ms, started_ms, th):
                current[key] = _open(ds, kind, obs, now_ms, started_ms, th)
                notes.append(Notification("alert", current[key], now_ms))
    for key in sorted(set(current) - seen):
        notes.append(Notification("recovery", _recovered(current.pop(key), None, now_ms), now_ms))
    return current, notes
