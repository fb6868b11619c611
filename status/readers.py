"""What ``dbus status`` and the web console read about one source, never writing: the readers and the
snapshot they make (``collect``), shared by cli/status.py (the screen and ``--json``) and console/ (its
overview, tables and dead-letter pages), a floor below both (tests/unit/test_layers.py).

It reads, and never writes: the extractor's leader, epoch and committed position from ZooKeeper
(extractor/commands.py), the latest points of ``dbus_extractor``, ``dbus_stage``, ``dbus_heartbeat`` and
``dbus_client`` (the consumer clients of the source, dbusclient/metrics.py) from the time-series server,
the dead letters of the last hour (``dbus_dead_letter``, counted by the heartbeat
monitor), the running full pulls (``<root>/FullPuller/<ds>``), the heartbeat monitor's open alerts
(``<root>/HeartBeat/<ds>/alerts``) and the stage processes that announce themselves
(``<root>/Live/<ds>``, dbuslib/liveness.py: a stage with none running is down). ``--json`` prints the
:class:`Snapshot`, e.g.::

    {"source": "demo", "taken_at": 1714557600.0, "window_s": 600,
     "extractor": {"leader": "db1:4242", "epoch": 7, "committed_file": "mariadb-bin.000003",
                   "committed_pos": 1234, "committed_gtid": "0-1-42", "behind_bytes": 0,
                   "position_lag_s": 0.8, "lag_s": 1.2, "metrics_age_s": 4.0},
     "stages": [{"stage": "extractor", "rows_per_s": 812.0, "lag_records": null, "batch_ms": null,
                 "age_s": 4.0}, ...],
     "clients": [{"client": "orders-replica", "rows_per_s": 6000.0, "applied_per_s": 5987.0,
                  "lag_records": 1200, "mode": "BOOTSTRAP_SNAPSHOT", "pulls": 2, "pulls_ended": 1,
                  "bootstrap_rows": 420001, "age_s": 3.0}],
     "heartbeats": [{"schema": "shop", "table": "orders", "latency_ms": 1234.5, "rows": 120,
                     "age_s": 32.0}],
     "dead_letters": [{"stage": "appender", "code": "RAW_UNDECODABLE", "count": 3, "origin": "shop.orders",
                       "topic": "demo.shop", "partition": 0, "offset": 42, "dlq_topic": "demo.dlq",
                       "dlq_partition": 0, "dlq_offset": 17, "age_s": 95.0}],
     "fullpulls": [...], "alerts": [...],
     "processes": [{"stage": "extractor", "state": "running", "processes": ["db1:4242"]}, ...],
     "errors": []}

A part whose server cannot be reached is reported in ``errors`` and the rest is still shown; the exit
code is then 1 (0 otherwise). Rates are those of the newest point within ``--window`` minutes; older
than that a stage reads "no data in the last N minutes". Heartbeats are looked up over the last
a day (``binlog.heartbeat.LOOKBACK_S``) so that a table that went quiet still shows how old its last
heartbeat is. The newest points are read with the heartbeat monitor's InfluxQL
(``dbuslib.seriesread.last_points_query``) and the open alerts with its ``AlertStore.read`` (a node that
holds no alert is shown as "unreadable alert node").
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from heartbeat.incidents import Alert

from binlog import heartbeat as hbt
from dbusclient import metrics as client_metrics
from dbuslib import seriesread

KAFKA_WAIT_S = 10.0  # how long the screen waits for Kafka before it says it cannot be reached
STAGES = ("extractor", "dispatcher", "appender")
STAGE_FIELDS = ("lag_records", "batch_ms", "waiting", "checkpoint_ms")  # read beside each stage's rows_per_s
DEAD_LETTER_WINDOW_S = 3600
ALERT_FIELDS = ("schema", "table", "kind", "since_ms", "age_s", "latency_s", "message")  # in --json


@dataclass(frozen=True)
class ExtractorStatus:
    """From ZooKeeper (leader, epoch, committed position) and the newest ``dbus_extractor`` point (lag).

    ``behind_bytes``: binlog bytes between the committed position and the server's end (None when they
    are in different files); ``position_lag_s``: now minus the committed transaction's time (seconds);
    ``lag_s``: the extractor's own lag from its newest metrics point, ``metrics_age_s`` old."""

    leader: str | None = None
    epoch: int = 0
    committed_file: str | None = None
    committed_pos: int | None = None
    committed_gtid: str = ""
    behind_bytes: int | None = None
    position_lag_s: float | None = None
    lag_s: float | None = None
    metrics_age_s: float | None = None


@dataclass(frozen=True)
class StageRate:
    """The newest point of one stage: rows/s (records/s for the extractor), Kafka lag, batch time (ms).
    All None when the stage wrote nothing within the window."""

    stage: str
    rows_per_s: float | None = None
    lag_records: int | None = None
    batch_ms: float | None = None
    age_s: float | None = None
    waiting: bool = False  # the query waits for the cluster's resources (no executor, too few task slots)
    # a real-time query's checkpoint interval (0: micro-batch); its batch_ms is then the pause between batches
    checkpoint_ms: float = 0.0


@dataclass(frozen=True)
class ClientStatus:
    """The newest ``dbus_client`` point of one consumer client of the source within the window
    (dbusclient/metrics.py): rows read and applied per second, records behind the result topics (None:
    not known), its checkpoint's mode with its pulls (ended of all) and snapshot rows, and its age (s)."""

    client: str
    rows_per_s: float
    applied_per_s: float | None
    lag_records: int | None
    mode: str
    pulls: int
    pulls_ended: int
    bootstrap_rows: int
    age_s: float


@dataclass(frozen=True)
class TableHeartbeat:
    """The newest ``dbus_heartbeat`` point of one table: latency (ms), data rows since the previous
    heartbeat, and how long ago it was written (s)."""

    schema: str
    table: str
    latency_ms: float | None
    rows: int | None
    age_s: float


@dataclass(frozen=True)
class DeadLetterCount:
    """The dead letters of one stage and code within ``DEAD_LETTER_WINDOW_S`` (``dbus_dead_letter`` points
    of the heartbeat monitor) and where the newest is: its original record (``topic`` "" and ``partition``/
    ``offset`` -1 when the letter did not say; ``origin`` its ``schema.table``, "" when unknown), its place
    in the dead-letter topic, and how long ago the stage wrote it (s)."""

    stage: str
    code: str
    count: int
    origin: str
    topic: str
    partition: int
    offset: int
    dlq_topic: str
    dlq_partition: int
    dlq_offset: int
    age_s: float | None


@dataclass(frozen=True)
class FullPullStatus:
    """One pull that has not ended (``fullpuller.progress.Progress``), with its progress bar."""

    id: int
    schema: str
    table: str
    status: str
    rows: int
    total_rows: int
    shards_done: int
    shards_total: int
    rows_per_s: float
    bar: str


@dataclass(frozen=True)
class StageLive:
    """One stage's processes as announced in ZooKeeper (dbuslib/liveness.py): ``running`` when one of
    them runs, ``down`` otherwise; ``processes`` the running ones as ``host:pid``."""

    stage: str
    state: str
    processes: tuple[str, ...] = ()
    started_at: float | None = None  # when the newest running process started (epoch s)


LIVE_STAGES = (*STAGES, "fullpuller", "heartbeat")
LOG_LIVE_STAGES = ("logprocessor", "heartbeat")


def stage_lives(
    announced: dict[str, list[Any]], stages: tuple[str, ...], host: str, is_alive: Any
) -> tuple[StageLive, ...]:
    """``StageLive`` of each of ``stages`` from ``dbuslib.liveness.read``'s answer (pure but for
    ``is_alive``, a pid check of this machine ``host``)."""
    from dbuslib import liveness

    out = []
    for stage in stages:
        running = liveness.alive(announced.get(stage, []), host, is_alive)
        out.append(
            StageLive(
                stage,
                liveness.RUNNING if running else liveness.DOWN,
                tuple(f"{p.host}:{p.pid}" for p in running),
                max((p.started_at for p in running), default=None),
            )
        )
    return tuple(out)


@dataclass(frozen=True)
class KafkaStatus:
    """The source's topics on its Kafka (``dbuslib.topics.source_topics``): how many, and which are missing;
    ``servers`` is ``endpoints.kafka.bootstrap_servers``, "" when Kafka was not read (an error says why)."""

    servers: str = ""
    expected: int = 0
    missing: tuple[str, ...] = ()


@dataclass(frozen=True)
class Snapshot:
    source: str
    taken_at: float  # epoch seconds
    window_s: int
    extractor: ExtractorStatus = field(default_factory=ExtractorStatus)
    stages: tuple[StageRate, ...] = ()
    clients: tuple[ClientStatus, ...] = ()
    heartbeats: tuple[TableHeartbeat, ...] = ()
    dead_letters: tuple[DeadLetterCount, ...] = ()
    fullpulls: tuple[FullPullStatus, ...] = ()
    alerts: tuple[Alert, ...] = ()
    errors: tuple[str, ...] = ()
    processes: tuple[StageLive, ...] = ()
    kafka: KafkaStatus = field(default_factory=KafkaStatus)

    def to_json(self) -> str:
        obj = asdict(self)
        obj["alerts"] = [{k: a[k] for k in ALERT_FIELDS} for a in obj["alerts"]]
        return json.dumps(obj, indent=2)


# ---------------------------------------------------------------------------------------------- render


def _age(record: dict[str, Any], now: float) -> float:
    return round(max(0.0, now - record["_time"] / 1000), 3)


def last_points(
    series: list[dict[str, Any]], field: str, keys: tuple[str, ...]
) -> dict[tuple, dict[str, Any]]:
    """The series of a ``dbuslib.seriesread.last_points_query`` folded into one dict per tag tuple ``keys``,
    its ``last`` column named ``field`` and its time in epoch ms:
    ``{("shop", "orders"): {"_time": 1714557568000, "latency_ms": 12.5, "rows": 3}}``; the newest point
    wins when several series share a key (e.g. an extra tag)."""
    out: dict[tuple, dict[str, Any]] = {}
    for s in series:
        tags = s.get("tags") or {}
        key = tuple(tags.get(k) for k in keys)
        for row in s.get("values") or []:
            r = dict(zip(s["columns"], row, strict=False))
            t, value = r.pop("time"), r.pop("last")
            if key in out and out[key]["_time"] >= t:
                continue
            out[key] = {**r, field: value, "_time": t}
    return out


def stage_rates(
    extractor: dict[str, Any] | None,
    stages: dict[tuple, dict[str, Any]],
    now: float,
    names: tuple[str, ...] = STAGES,
) -> tuple[StageRate, ...]:
    """One StageRate per stage of ``names`` (default STAGES), in pipeline order."""
    out = []
    for name in names:
        p = extractor if name == "extractor" else stages.get((name,))
        if p is None:
            out.append(StageRate(name))
            continue
        rate = p.get("records_per_s") if name == "extractor" else p.get("rows_per_s")
        lag = p.get("lag_records")
        out.append(
            StageRate(
                name,
                rows_per_s=None if rate is None else float(rate),
                lag_records=None if lag is None else int(lag),
                batch_ms=None if p.get("batch_ms") is None else float(p["batch_ms"]),
                age_s=_age(p, now),
                waiting=bool(p.get("waiting")),
                checkpoint_ms=float(p.get("checkpoint_ms") or 0.0),
            )
        )
    return tuple(out)


def _extractor_status(
    info: dict[str, Any] | None, metrics: dict[str, Any] | None, now: float
) -> ExtractorStatus:
    pos = (info or {}).get("zookeeper") or (info or {}).get("local_file")
    lag = None if metrics is None or metrics.get("lag_s") is None else float(metrics["lag_s"])
    return ExtractorStatus(
        leader=(info or {}).get("leader"),
        epoch=(info or {}).get("epoch", 0),
        committed_file=pos["file"] if pos else None,
        committed_pos=pos["pos"] if pos else None,
        committed_gtid=pos.get("gtid", "") if pos else "",
        behind_bytes=(info or {}).get("behind_bytes"),
        position_lag_s=(info or {}).get("lag_s"),
        lag_s=lag,
        metrics_age_s=None if metrics is None else _age(metrics, now),
    )


def clients(points: dict[tuple, dict[str, Any]], now: float) -> tuple[ClientStatus, ...]:
    """One ClientStatus per client of the newest ``dbus_client`` points (``last_points`` by client),
    sorted by name."""
    out = []
    for (name,), p in sorted((k, v) for k, v in points.items() if None not in k):
        applied, lag = p.get("applied_per_s"), p.get("lag_records")
        out.append(
            ClientStatus(
                name,
                float(p.get(client_metrics.RATE_FIELD) or 0.0),
                None if applied is None else float(applied),
                None if lag is None else int(lag),
                str(p.get("mode") or "ONLINE"),
                int(p.get("pulls") or 0),
                int(p.get("pulls_ended") or 0),
                int(p.get("bootstrap_rows") or 0),
                _age(p, now),
            )
        )
    return tuple(out)


def heartbeats(points: dict[tuple, dict[str, Any]], now: float) -> tuple[TableHeartbeat, ...]:
    out = []
    for (schema, table), p in sorted((k, v) for k, v in points.items() if None not in k):
        latency, rows = p.get("latency_ms"), p.get("rows")
        out.append(
            TableHeartbeat(
                schema,
                table,
                None if latency is None else float(latency),
                None if rows is None else int(rows),
                _age(p, now),
            )
        )
    return tuple(out)


DEAD_LETTERS = seriesread.Tally(
    "dbus_dead_letter",
    ("stage", "code", "schema", "table"),
    newest=("topic", "partition", "offset", "dlq_partition", "dlq_offset"),
    largest=("newest_ms",),
)


def dead_letter_query(ds: str, seconds: int) -> str:
    """InfluxQL: per (stage, code, schema, table) of ``ds`` within ``seconds``, the letters counted and the
    newest one's coordinates (every point carries them all, so the ``last()`` are of one point)."""
    return seriesread.tallies_query(ds, seconds, DEAD_LETTERS)


def dead_letter_series(cfg: Any, ds: str, seconds: int) -> list[dict[str, Any]]:
    """``dead_letter_query``'s answer, from InfluxDB or Prometheus (dbuslib/seriesread.py)."""
    return seriesread.tallies(cfg, ds, seconds, DEAD_LETTERS)


def dead_letters(series: list[dict[str, Any]], now: float, dlq_topic: str) -> tuple[DeadLetterCount, ...]:
    """The query's series folded per (stage, code), sorted: counts summed over tables, the newest letter's
    coordinates kept."""
    out: dict[tuple[str, str], DeadLetterCount] = {}
    for s in series:
        tags = s.get("tags") or {}
        for row in s.get("values") or []:
            r = dict(zip(s["columns"], row, strict=False))
            if not r.get("count"):
                continue
            newest_ms = r.get("newest_ms")
            schema, table = tags.get("schema") or "", tags.get("table") or ""
            d = DeadLetterCount(
                stage=tags.get("stage") or "",
                code=tags.get("code") or "",
                count=int(r["count"]),
                origin=f"{schema}.{table}" if schema else "",
                topic=r.get("topic") or "",
                partition=_int(r.get("partition")),
                offset=_int(r.get("offset")),
                dlq_topic=dlq_topic,
                dlq_partition=_int(r.get("dlq_partition")),
                dlq_offset=_int(r.get("dlq_offset")),
                age_s=None if newest_ms is None else round(max(0.0, now - newest_ms / 1000), 3),
            )
            key = (d.stage, d.code)
            prev = out.get(key)
            if prev is None:
                out[key] = d
            elif _older(prev, d):
                out[key] = DeadLetterCount(**{**asdict(d), "count": prev.count + d.count})
            else:
                out[key] = DeadLetterCount(**{**asdict(prev), "count": prev.count + d.count})
    return tuple(out[k] for k in sorted(out))


def _int(v: Any) -> int:
    return -1 if v is None else int(v)


def _older(a: DeadLetterCount, b: DeadLetterCount) -> bool:
    """``a``'s newest letter is older than ``b``'s (unknown ages count as oldest). Letters of the same
    millisecond are ordered by their place in the dead-letter topic, as the monitor orders them when it
    keeps a tally's newest (heartbeat/deadletters.py, ``_newer``)."""
    return _recency(a) < _recency(b)


def _recency(d: DeadLetterCount) -> tuple[bool, float, int, int]:
    return (d.age_s is not None, -(d.age_s or 0.0), d.dlq_offset, d.dlq_partition)


class _Collector:
    """Gathers a Snapshot; each part that fails adds to ``errors`` instead of ending the command."""

    def __init__(self, cfg: Any, ds: str, window_s: int, now: float) -> None:
        self.cfg, self.ds, self.window_s, self.now = cfg, ds, window_s, now
        self.errors: list[str] = []

    def attempt(self, what: str, fn: Any, default: Any) -> Any:
        try:
            return fn()
        except Exception as e:
            code = getattr(e, "code", type(e).__name__)
            self.errors.append(f"{what}: {code}: {e}")
            return default

    def newest(
        self, measurement: str, field: str, keys: tuple[str, ...], seconds: int, also: tuple[str, ...]
    ) -> dict[tuple, dict[str, Any]]:
        """The newest point of each series (``keys``) with a ``field``, and its ``also`` fields: the
        heartbeat monitor's InfluxQL (``seriesread.last_points_query``) or its Prometheus twin."""
        series = seriesread.last(
            self.cfg, self.ds, seconds, seriesread.Newest(measurement, field, keys, also)
        )
        return last_points(series, field, keys)

    def _dead_letters(self) -> tuple[DeadLetterCount, ...]:
        from heartbeat.deadletters import dead_letter_topic

        series = dead_letter_series(self.cfg, self.ds, DEAD_LETTER_WINDOW_S)
        return dead_letters(series, self.now, dead_letter_topic(self.cfg, self.ds))

    def zk_parts(self) -> tuple[tuple[FullPullStatus, ...], tuple[Alert, ...], tuple[StageLive, ...]]:
        from dbuslib import zk

        client = zk.client(self.cfg.endpoints.zookeeper)
        try:
            pulls = self.attempt("full pulls (ZooKeeper)", lambda: self._fullpulls(client), ())
            alerts = self.attempt("open alerts (ZooKeeper)", lambda: self._alerts(client), ())
            lives = self.attempt("processes (ZooKeeper)", lambda: self._lives(client, LIVE_STAGES), ())
        finally:
            client.stop()
            client.close()
        return pulls, alerts, lives

    def _lives(self, client: Any, stages: tuple[str, ...]) -> tuple[StageLive, ...]:
        from dbuslib import liveness

        announced = liveness.read(client, self.cfg.endpoints.zookeeper.root, self.ds)
        return stage_lives(announced, stages, liveness.this_host(), liveness.pid_alive)

    def _fullpulls(self, client: Any) -> tuple[FullPullStatus, ...]:
        from dbuslib import zkpaths
        from fullpuller.progress import ProgressStore, bar, rate_and_eta

        store = ProgressStore(client, zkpaths.fullpuller(self.cfg.endpoints.zookeeper.root, self.ds))
        return tuple(
            FullPullStatus(
                p.SeqNo,
                p.Schema,
                p.Table,
                p.Status,
                p.FinishedRows,
                p.TotalRows,
                p.FinishedCount,
                p.TotalCount,
                round(rate_and_eta(p)[0], 1),
                bar(p),
            )
            for p in store.all()
            if not p.finished
        )

    def _alerts(self, client: Any) -> tuple[Alert, ...]:
        from heartbeat.monitor import AlertStore, alerts_path

        return tuple(AlertStore(client, alerts_path(self.cfg.endpoints.zookeeper.root, self.ds)).read())

    def snapshot(self) -> Snapshot:
        from extractor import commands as admin

        info = self.attempt("extractor (ZooKeeper, MySQL)", lambda: admin.status(self.cfg, self.ds), None)
        window = self.window_s
        ext = self.attempt(
            "dbus_extractor",
            lambda: self.newest("dbus_extractor", "records_per_s", (), window, ("lag_s",)),
            {},
        )
        stages = self.attempt(
            "dbus_stage",
            lambda: self.newest("dbus_stage", "rows_per_s", ("stage",), window, STAGE_FIELDS),
            {},
        )
        consumers = self.attempt(
            client_metrics.MEASUREMENT,
            lambda: self.newest(
                client_metrics.MEASUREMENT,
                client_metrics.RATE_FIELD,
                (client_metrics.TAG_CLIENT,),
                window,
                client_metrics.STATUS_FIELDS,
            ),
            {},
        )
        lookback = max(hbt.LOOKBACK_S, self.window_s)
        beats = self.attempt(
            "dbus_heartbeat",
            lambda: self.newest(hbt.MEASUREMENT, "latency_ms", ("schema", "table"), lookback, ("rows",)),
            {},
        )
        letters = self.attempt("dbus_dead_letter", self._dead_letters, ())
        pulls, alerts, lives = self.attempt("ZooKeeper", self.zk_parts, ((), (), ()))
        topics = self.attempt("Kafka", self._kafka, KafkaStatus())
        return Snapshot(
            self.ds,
            self.now,
            self.window_s,
            extractor=_extractor_status(info, ext.get(()), self.now),
            stages=stage_rates(ext.get(()), stages, self.now),
            clients=clients(consumers, self.now),
            heartbeats=heartbeats(beats, self.now),
            dead_letters=letters,
            fullpulls=pulls,
            alerts=alerts,
            errors=tuple(self.errors),
            processes=lives,
            kafka=topics,
        )

    def _kafka(self) -> KafkaStatus:
        from dbuslib import kafka
        from dbuslib.topics import source_topics

        endpoint = self.cfg.endpoints.kafka
        expected = source_topics(self.ds, self.cfg.source(self.ds))
        admin = kafka.admin(endpoint, bootstrap_timeout_s=KAFKA_WAIT_S)
        try:
            there = set(admin.list_topics())
        finally:
            admin.close()
        missing = tuple(t for t in expected if t not in there)
        return KafkaStatus(endpoint.bootstrap_servers, len(expected), missing)


def collect(cfg: Any, ds: str, window_s: int = 600, now: float | None = None) -> Snapshot | LogSnapshot:
    """Read everything ``dbus status`` shows for source ``ds`` (a database source, or a log source: a
    LogSnapshot); ``window_s`` bounds the stage rates (and a log source's counts)."""
    at = time.time() if now is None else now
    if ds in cfg.log_sources:
        return _LogCollector(cfg, ds, window_s, at).snapshot()
    cfg.source(ds)  # ConfigError for an unknown source before anything is contacted
    return _Collector(cfg, ds, window_s, at).snapshot()


# ----------------------------------------------------------------------------------------- log sources


@dataclass(frozen=True)
class LogTableStatus:
    """One table of a log source as one host feeds it: the rows it accepted within the window (``dbus_log``
    points of the log processor), and its newest heartbeat within the last day (``dbus_heartbeat``):
    latency (ms), rows since the previous heartbeat, how long ago (s); None when there is none."""

    host: str
    table: str
    rows: int
    latency_ms: float | None = None
    rows_since_heartbeat: int | None = None
    heartbeat_age_s: float | None = None


@dataclass(frozen=True)
class LogCount:
    """Lines of one host within the window that went to the unknown topic (``kind`` "unknown", ``code``
    "") or became dead letters (``kind`` "error", ``code`` the dead-letter code); ``host`` "" when the
    record could not be read."""

    host: str
    kind: str
    code: str
    count: int


@dataclass(frozen=True)
class LogSnapshot:
    """What ``dbus status`` shows for a log source (docs/monitoring.md, ``dbus status``)."""

    source: str
    taken_at: float  # epoch seconds
    window_s: int
    stages: tuple[StageRate, ...] = ()
    tables: tuple[LogTableStatus, ...] = ()
    counts: tuple[LogCount, ...] = ()
    dead_letters: tuple[DeadLetterCount, ...] = ()
    alerts: tuple[Alert, ...] = ()
    errors: tuple[str, ...] = ()
    processes: tuple[StageLive, ...] = ()

    def to_json(self) -> str:
        obj = asdict(self)
        obj["alerts"] = [{k: a[k] for k in (*ALERT_FIELDS, "host")} for a in obj["alerts"]]
        return json.dumps(obj, indent=2)


LOG_COUNTS = seriesread.Tally("dbus_log", ("kind", "host", "table", "code"))


def log_counts_query(ds: str, seconds: int) -> str:
    """InfluxQL: the log processor's counts of ``ds`` within ``seconds``, per kind, host, table and code."""
    return seriesread.tallies_query(ds, seconds, LOG_COUNTS)


def log_status(
    count_series: list[dict[str, Any]], beats: dict[tuple, dict[str, Any]], now: float
) -> tuple[tuple[LogTableStatus, ...], tuple[LogCount, ...]]:
    """The tables (per host and table: rows within the window, newest heartbeat) and the unknown lines and
    errors per host and code, from ``log_counts_query``'s series and the newest ``dbus_heartbeat`` points
    keyed by (table, host); sorted."""
    rows: dict[tuple[str, str], int] = {}
    counts: dict[tuple[str, str, str], int] = {}
    for series in count_series:
        tags = series.get("tags") or {}
        kind, host = tags.get("kind") or "", tags.get("host") or ""
        total = sum(int(r[1] or 0) for r in series.get("values") or [] if len(r) > 1)
        if kind == "rows":
            key = (host, tags.get("table") or "")
            rows[key] = rows.get(key, 0) + total
        elif kind in ("unknown", "error", "invalid"):
            ckey = (host, kind, tags.get("code") or "")
            counts[ckey] = counts.get(ckey, 0) + total
    pairs = set(rows) | {(h or "", t) for t, h in beats if t is not None}
    tables = []
    for host, table in sorted(pairs):
        p = beats.get((table, host)) or beats.get((table, host or None))
        latency = None if p is None or p.get("latency_ms") is None else float(p["latency_ms"])
        since = None if p is None or p.get("rows") is None else int(p["rows"])
        age = None if p is None else _age(p, now)
        tables.append(LogTableStatus(host, table, rows.get((host, table), 0), latency, since, age))
    out_counts = tuple(LogCount(h, k, c, n) for (h, k, c), n in sorted(counts.items()) if n)
    return tuple(tables), out_counts


class _LogCollector(_Collector):
    """Gathers a LogSnapshot: the log processor's stage point, its counts and heartbeats, the dead letters
    the heartbeat monitor counted, the monitor's open alerts."""

    def _counts(self) -> list[dict[str, Any]]:
        return seriesread.tallies(self.cfg, self.ds, self.window_s, LOG_COUNTS)

    def snapshot(self) -> LogSnapshot:  # type: ignore[override]
        window = self.window_s
        stages = self.attempt(
            "dbus_stage",
            lambda: self.newest("dbus_stage", "rows_per_s", ("stage",), window, STAGE_FIELDS),
            {},
        )
        counts = self.attempt("dbus_log", self._counts, [])
        lookback = max(hbt.LOOKBACK_S, window)
        beats = self.attempt(
            "dbus_heartbeat",
            lambda: self.newest(hbt.MEASUREMENT, "latency_ms", ("table", "host"), lookback, ("rows",)),
            {},
        )
        tables, log_counts = log_status(counts, beats, self.now)
        letters = self.attempt("dbus_dead_letter", self._dead_letters, ())
        alerts, lives = self.attempt("ZooKeeper", self._zk_alerts, ((), ()))
        return LogSnapshot(
            self.ds,
            self.now,
            window,
            stages=stage_rates(None, stages, self.now, ("logprocessor",)),
            tables=tables,
            counts=log_counts,
            dead_letters=letters,
            alerts=alerts,
            errors=tuple(self.errors),
            processes=lives,
        )

    def _zk_alerts(self) -> tuple[tuple[Alert, ...], tuple[StageLive, ...]]:
        from dbuslib import zk

        client = zk.client(self.cfg.endpoints.zookeeper)
        try:
            alerts = self._alerts(client)
            lives = self.attempt("processes (ZooKeeper)", lambda: self._lives(client, LOG_LIVE_STAGES), ())
            return alerts, lives
        finally:
            client.stop()
            client.close()


# ----------------------------------------------------------------------------------------------- CLI
