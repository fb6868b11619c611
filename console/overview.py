"""The console's overview: every source (database and log) as its topology, each stage with its state,
rows/s and Kafka lag, refreshed by the page every ``console.refresh_s``.

A database source: MariaDB (host:port) -> extractor (leader, epoch, committed position, lag) -> raw topic
-> dispatcher -> schema topics -> appender -> result topics, beside them the full puller and the heartbeat.
A log source: shipper -> raw topic -> log processor -> result topic, beside it the heartbeat.

Where it reads (``Collector``, one per application, on background threads; a request only reads the
newest figures, so many browsers cost the bus nothing more):

- every ``refresh_s``: ``status.readers.collect`` of each source (what ``dbus status`` shows: the extractor's
  leader, epoch and position, the newest ``dbus_stage`` points, heartbeats, running full pulls);
- every ``LIVE_S``: the stage processes announced in ZooKeeper (dbuslib/liveness.py) and the heartbeat
  monitor's open alerts and history (console/alerts.py shows them). A stage with no running process is
  **down** (a process of this machine whose pid is gone is dead at once, without waiting for its
  ZooKeeper session to time out); a running stage whose newest point says it waits for the cluster is
  **waiting** for resources; otherwise **running**. When ZooKeeper cannot be read, the state falls back to
  the metrics (a stage with a point within the window runs) and says so.

A stage the collector saw running that is down now opens a ``stage_down`` incident (console/alerts.py).
The JSON is built by pure functions (``source_view``, ``overview``) from the snapshots and the announced
processes: tests/unit/test_console_overview.py.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import Any, cast

from flask import Blueprint, current_app, render_template

from console.auth import config, viewer_required
from dbuslib import liveness, topics
from dbuslib.config import DbusConfig
from dbuslib.liveness import Process
from status import readers as status

log = logging.getLogger("dbus.console")
TITLE = "Overview"
bp = Blueprint("overview", __name__)

DB_STAGES = ("extractor", "dispatcher", "appender", "fullpuller", "heartbeat")
LOG_STAGES = ("logprocessor", "heartbeat")
LIVE_S = 1.0  # how often the announced processes and the monitor's alerts are read
WINDOW_S = 600  # rates older than this read as no data (dbus status's default)
HISTORY_MAX = 200  # closed stage_down incidents kept (in memory: a restart of the console forgets them)
STAGE_DOWN = "stage_down"

RUNNING, WAITING, DOWN, UNKNOWN = "running", "waiting", "down", "unknown"


# ------------------------------------------------------------------------------------------- pure


def _rate(snap: Any, stage: str) -> status.StageRate | None:
    return next((s for s in getattr(snap, "stages", ()) if s.stage == stage), None)


def stage_state(
    rate: status.StageRate | None,
    processes: list[Process] | None,
    host: str,
    is_alive: Callable[[int], bool] = liveness.pid_alive,
) -> tuple[str, str]:
    """(state, why) of one stage: from its announced processes (``processes`` None: ZooKeeper could not
    be read, then from its metrics), ``waiting`` when it runs but its newest point waits for resources."""
    if processes is not None:
        if not liveness.alive(processes, host, is_alive):
            dead = [p for p in processes if p.host == host and not is_alive(p.pid)]
            if dead:
                return DOWN, f"process {dead[0].pid} on {host} is gone"
            return DOWN, "no process announced"
        if rate is not None and rate.waiting:
            return WAITING, "waits for the cluster's resources"
        return RUNNING, "announced"
    if rate is None:
        return UNKNOWN, "ZooKeeper not read; no metrics for this stage"
    if rate.age_s is None:
        return DOWN, "ZooKeeper not read; no metrics point within the window"
    return (WAITING if rate.waiting else RUNNING), "ZooKeeper not read; from its metrics"


def _stage(
    name: str,
    snap: Any,
    announced: Mapping[str, list[Process]] | None,
    host: str,
    is_alive: Callable[[int], bool],
    **detail: Any,
) -> dict[str, Any]:
    rate = _rate(snap, name)
    procs = None if announced is None else announced.get(name, [])
    state, why = stage_state(rate, procs, host, is_alive)
    return {
        "type": "stage",
        "stage": name,
        "state": state,
        "why": why,
        "rows_per_s": None if rate is None else rate.rows_per_s,
        "lag_records": None if rate is None else rate.lag_records,
        "batch_ms": None if rate is None else rate.batch_ms,
        "age_s": None if rate is None else rate.age_s,
        "processes": [{**p.as_dict(), "alive": p.host != host or is_alive(p.pid)} for p in (procs or [])],
        "detail": {k: v for k, v in detail.items() if v is not None},
    }


def _topic_pattern(template: str, ds: str, schema: str) -> str:
    """A result topic template filled in but for ``{table}`` (one topic per table)."""
    return template.replace("{ds}", ds).replace("{schema}", topics.escape(schema))


def database_topics(cfg: DbusConfig, ds: str) -> tuple[str, list[str], list[str]]:
    """(raw topic, schema topics, result topics) of a database source, from its configuration."""
    src = cfg.source(ds)
    t = src.topics
    schemas = topics.literal_schemas(src)
    template = topics.result_template(src)  # output.topic: topics.result, or topics.table per table
    results = [
        topics.result_topic(ds, src, s, "") if "{table}" not in template else _topic_pattern(template, ds, s)
        for s in schemas
    ]
    return t.name("raw", ds), [t.name("schema", ds, s) for s in schemas], results


def log_topics(cfg: DbusConfig, ds: str) -> tuple[str, list[str]]:
    """(raw topic, result topics) of a log source."""
    src = cfg.log_source(ds)
    t, schema = src.topics, src.schema_name(ds)
    result = (
        t.name("result", ds, schema) if "{table}" not in t.result else _topic_pattern(t.result, ds, schema)
    )
    return t.name("raw", ds), [result]


def source_view(
    cfg: DbusConfig,
    ds: str,
    snap: Any,
    announced: Mapping[str, list[Process]] | None,
    host: str,
    is_alive: Callable[[int], bool] = liveness.pid_alive,
) -> dict[str, Any]:
    """One source's topology as the page draws it: ``pipeline`` (servers, topics and stages in the order
    the data flows) and ``side`` (stages beside the flow), each stage with its state. ``snap`` is its
    ``status.readers`` snapshot (None: not read yet), ``announced`` its processes by stage (None: ZooKeeper
    not read)."""
    is_log = ds in cfg.log_sources and ds not in cfg.sources
    errors = list(getattr(snap, "errors", ()) or ())
    if announced is None:
        errors.append("stage processes (ZooKeeper): not read")
    alerts = list(getattr(snap, "alerts", ()) or ())
    out: dict[str, Any] = {
        "source": ds,
        "kind": "log" if is_log else "database",
        "taken_at": getattr(snap, "taken_at", None),
        "errors": errors,
        "alerts_open": len(alerts),
    }
    if is_log:
        src = cfg.log_source(ds)
        raw, results = log_topics(cfg, ds)
        tables = getattr(snap, "tables", ()) or ()
        out["pipeline"] = [
            {"type": "server", "name": "shipper", "detail": f"{src.type}: " + ", ".join(src.shipper.files)},
            {"type": "topic", "names": [raw]},
            _stage("logprocessor", snap, announced, host, is_alive, tables=len({t.table for t in tables})),
            {"type": "topic", "names": results},
        ]
        out["side"] = [_stage("heartbeat", snap, announced, host, is_alive, **_beat_detail(snap))]
        return out
    src_cfg = cfg.source(ds)
    raw, schema_topics, results = database_topics(cfg, ds)
    e = getattr(snap, "extractor", None) or status.ExtractorStatus()
    committed = f"{e.committed_file}:{e.committed_pos}" if e.committed_file else None
    pulls = getattr(snap, "fullpulls", ()) or ()
    out["pipeline"] = [
        {"type": "server", "name": "MariaDB", "detail": f"{src_cfg.mysql.host}:{src_cfg.mysql.port}"},
        _stage(
            "extractor",
            snap,
            announced,
            host,
            is_alive,
            leader=e.leader,
            epoch=e.epoch,
            committed=committed,
            gtid=e.committed_gtid or None,
            lag_s=e.lag_s if e.lag_s is not None else e.position_lag_s,
            behind_bytes=e.behind_bytes,
        ),
        {"type": "topic", "names": [raw]},
        _stage("dispatcher", snap, announced, host, is_alive),
        {"type": "topic", "names": schema_topics},
        _stage("appender", snap, announced, host, is_alive),
        {"type": "topic", "names": results},
    ]
    out["side"] = [
        _stage("fullpuller", snap, announced, host, is_alive, pulls_running=len(pulls)),
        _stage("heartbeat", snap, announced, host, is_alive, **_beat_detail(snap)),
    ]
    return out


def _beat_detail(snap: Any) -> dict[str, Any]:
    ages = [b.age_s for b in getattr(snap, "heartbeats", ()) or ()]
    ages += [t.heartbeat_age_s for t in getattr(snap, "tables", ()) or () if t.heartbeat_age_s is not None]
    return {"newest_heartbeat_s": min(ages) if ages else None}


def sources_of(cfg: DbusConfig) -> list[str]:
    """Database sources first, then log sources, each sorted."""
    return [*sorted(cfg.sources), *sorted(s for s in cfg.log_sources if s not in cfg.sources)]


def stages_of(cfg: DbusConfig, ds: str) -> tuple[str, ...]:
    return LOG_STAGES if ds in cfg.log_sources and ds not in cfg.sources else DB_STAGES


def overview(
    cfg: DbusConfig,
    snapshots: Mapping[str, Any],
    announced: Mapping[str, Mapping[str, list[Process]] | None],
    host: str,
    is_alive: Callable[[int], bool] = liveness.pid_alive,
    updated_at: float | None = None,
) -> dict[str, Any]:
    """The page's JSON: ``{"updated_at", "sources": [source_view, ...]}``."""
    return {
        "updated_at": updated_at,
        "sources": [
            source_view(cfg, ds, snapshots.get(ds), announced.get(ds), host, is_alive)
            for ds in sources_of(cfg)
        ],
    }


# --------------------------------------------------------------------------- stage_down incidents


@dataclass(frozen=True)
class StageDown:
    """A stage the console saw running that is down now: an incident of the alerts page."""

    ds: str
    stage: str
    since_ms: int
    message: str
    acked_by: str | None = None
    acked_ms: int | None = None
    closed_ms: int | None = None

    @property
    def key(self) -> str:
        return f"{self.stage}.{STAGE_DOWN}"

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "key": self.key, "kind": STAGE_DOWN}


def track(
    open_: Mapping[tuple[str, str], StageDown],
    seen: set[tuple[str, str]],
    states: Mapping[tuple[str, str], tuple[str, str]],
    now_ms: int,
) -> tuple[dict[tuple[str, str], StageDown], list[StageDown]]:
    """The open stage_down incidents after one look at the stages' ``states`` ((ds, stage) -> (state,
    why)), and those that closed (with ``closed_ms``). ``seen`` (updated here) holds the stages seen
    running or waiting: only those open an incident when down. An unknown state changes nothing."""
    current = dict(open_)
    closed = []
    for (ds, stage), (state, why) in sorted(states.items()):
        key = (ds, stage)
        if state in (RUNNING, WAITING):
            seen.add(key)
            if key in current:
                closed.append(replace(current.pop(key), closed_ms=now_ms))
        elif state == DOWN and key in seen and key not in current:
            current[key] = StageDown(ds, stage, now_ms, f"{ds}: {stage} is down ({why})")
    return current, closed


# ------------------------------------------------------------------------------------ the collector


@dataclass
class Readings:
    """What the collector last read: per source its snapshot, its announced processes (None: not read),
    the monitor's open alerts and closed incidents (heartbeat.monitor), and when."""

    snapshots: dict[str, Any] = field(default_factory=dict)
    announced: dict[str, dict[str, list[Process]] | None] = field(default_factory=dict)
    alerts: dict[str, list[Any]] = field(default_factory=dict)
    history: dict[str, list[Any]] = field(default_factory=dict)
    alert_errors: dict[str, str] = field(default_factory=dict)
    snapshots_at: float | None = None
    live_at: float | None = None


class Collector:
    """Reads the bus on two daemon threads (see the module docstring) and keeps the newest readings;
    ``view()`` builds the overview from them. ``snapshot_fn``, ``zk_fn`` and ``clock`` are seams for the
    tests (defaults: ``status.readers.collect`` and a kazoo client of ``endpoints.zookeeper``)."""

    def __init__(
        self,
        cfg: DbusConfig,
        *,
        snapshot_fn: Callable[[DbusConfig, str, int], Any] | None = None,
        zk_fn: Callable[[], Any] | None = None,
        clock: Callable[[], float] = time.time,
        is_alive: Callable[[int], bool] = liveness.pid_alive,
        host: str | None = None,
    ) -> None:
        self.cfg = cfg
        self.refresh_s = cfg.console.refresh_s
        self.live_s = min(LIVE_S, self.refresh_s)
        self._snapshot_fn = snapshot_fn or (lambda c, ds, w: status.collect(c, ds, w))
        self._zk_fn = zk_fn
        self._client: Any = None
        self._zk_lock = threading.Lock()
        self.clock, self.is_alive = clock, is_alive
        self.host = host or liveness.this_host()
        self.readings = Readings()
        self.lock = threading.Lock()
        self.stop_event = threading.Event()
        self.poke_event = threading.Event()
        self.ready = threading.Event()  # the first look at the processes is done
        self.seen: set[tuple[str, str]] = set()
        self.down: dict[tuple[str, str], StageDown] = {}
        self.down_history: deque[StageDown] = deque(maxlen=HISTORY_MAX)
        self._threads: list[threading.Thread] = []

    # ------------------------------------------------------------------ threads

    def start(self) -> Collector:
        if self._threads:
            return self
        for name, target in (("snapshots", self._snapshots_loop), ("live", self._live_loop)):
            t = threading.Thread(target=target, name=f"dbus-console-{name}", daemon=True)
            t.start()
            self._threads.append(t)
        return self

    def stop(self) -> None:
        self.stop_event.set()
        self.poke_event.set()
        self._drop_client()

    def poke(self) -> None:
        """Read the processes and alerts again now (after an acknowledgement)."""
        self.poke_event.set()

    def _snapshots_loop(self) -> None:
        while not self.stop_event.is_set():
            began = time.monotonic()
            self.refresh_snapshots()
            self.stop_event.wait(max(0.0, self.refresh_s - (time.monotonic() - began)))

    def _live_loop(self) -> None:
        while not self.stop_event.is_set():
            self.refresh_live()
            self.ready.set()
            self.poke_event.wait(self.live_s)
            self.poke_event.clear()

    # ------------------------------------------------------------------ one round

    def refresh_snapshots(self) -> None:
        """``status.readers.collect`` of every source (one that fails keeps its error in the snapshot)."""
        snaps = {}
        for ds in sources_of(self.cfg):
            try:
                snaps[ds] = self._snapshot_fn(self.cfg, ds, WINDOW_S)
            except Exception as e:
                log.warning("console: status of %s not read: %r", ds, e)
                snaps[ds] = status.Snapshot(ds, self.clock(), WINDOW_S, errors=(f"status: {e}",))
        with self.lock:
            self.readings.snapshots = snaps
            self.readings.snapshots_at = self.clock()

    def zk(self) -> Any:
        """The collector's ZooKeeper client (connected on first use, again after a failure); one for its
        thread and the requests that acknowledge (kazoo's client is thread-safe)."""
        with self._zk_lock:
            if self._client is None:
                if self._zk_fn is not None:
                    self._client = self._zk_fn()
                else:
                    from dbuslib import zk

                    self._client = zk.client(self.cfg.endpoints.zookeeper)
            return self._client

    def refresh_live(self) -> None:
        """The announced processes and the monitor's alerts of every source, then the stage_down
        incidents."""
        from heartbeat.monitor import AlertStore, alerts_path

        root = self.cfg.endpoints.zookeeper.root
        announced: dict[str, dict[str, list[Process]] | None] = {}
        alerts: dict[str, list[Any]] = {}
        history: dict[str, list[Any]] = {}
        errors: dict[str, str] = {}
        for ds in sources_of(self.cfg):
            try:
                client = self.zk()
                announced[ds] = liveness.read(client, root, ds)
                store = AlertStore(client, alerts_path(root, ds))
                alerts[ds], history[ds] = store.read(), store.history()
            except Exception as e:
                log.warning("console: ZooKeeper of %s not read: %r", ds, e)
                announced[ds] = None
                errors[ds] = f"ZooKeeper: {e!r}"
                self._drop_client()
        now = self.clock()
        with self.lock:
            r = self.readings
            r.announced, r.alerts, r.history, r.alert_errors, r.live_at = (
                announced,
                alerts,
                history,
                errors,
                now,
            )
            snaps = dict(r.snapshots)
        states = {}
        for ds in sources_of(self.cfg):
            procs = announced.get(ds)
            for stage in stages_of(self.cfg, ds):
                rate = _rate(snaps.get(ds), stage)
                states[(ds, stage)] = stage_state(
                    rate, None if procs is None else procs.get(stage, []), self.host, self.is_alive
                )
        with self.lock:
            self.down, closed = track(self.down, self.seen, states, int(now * 1000))
            for c in closed:
                self.down_history.append(c)

    def _drop_client(self) -> None:
        with self._zk_lock:
            client, self._client = self._client, None
        if client is not None:
            try:
                client.stop()
                client.close()
            except Exception as e:
                log.debug("console: closing ZooKeeper: %r", e)

    # ------------------------------------------------------------------ reading

    def view(self) -> dict[str, Any]:
        """The overview JSON from the newest readings."""
        with self.lock:
            r = self.readings
            snaps, announced = dict(r.snapshots), dict(r.announced)
            updated = max((t for t in (r.snapshots_at, r.live_at) if t is not None), default=None)
        return overview(self.cfg, snaps, announced, self.host, self.is_alive, updated)

    def ack_stage_down(self, ds: str, stage: str, by: str, at_ms: int) -> StageDown | None:
        """Acknowledge an open stage_down incident (in memory: the console's own); None when none is open."""
        with self.lock:
            inc = self.down.get((ds, stage))
            if inc is None:
                return None
            if inc.acked_by is None:
                inc = self.down[(ds, stage)] = replace(inc, acked_by=by, acked_ms=at_ms)
            return inc


def collector() -> Collector:
    """The application's collector, started on first use."""
    app = current_app
    with _start_lock:
        c = cast("Collector | None", app.extensions.get("dbus_collector"))
        if c is None:
            c = app.extensions["dbus_collector"] = Collector(config())
            c.start()
    c.ready.wait(5)  # the first page after a start shows the states, not "not read"
    return c


_start_lock = threading.Lock()


@bp.route("/")
@viewer_required
def index() -> Any:
    return render_template("overview.html")


@bp.route("/api/overview")
@viewer_required
def api() -> Any:
    return collector().view()
