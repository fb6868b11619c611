"""``dbus status --source DS``: one screen of what an operator checks first (registered by cli/main.py).

    dbus status --source demo [--window MINUTES] [--json]

What it reads (never writing), how old a rate may be, and the ``--json`` shape (the :class:`Snapshot`) are
status/readers.py's, which the web console shares; this module draws the screen and runs the command. A
part whose server cannot be reached is reported in ``errors`` and the rest is still shown; the exit code
is then 1 (0 otherwise).
"""

from __future__ import annotations

import argparse
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

# status.readers (and its InfluxDB client) is imported when the command runs, not for `dbus --help`
if TYPE_CHECKING:
    from heartbeat.incidents import Alert
    from status.readers import (
        ClientStatus,
        DeadLetterCount,
        ExtractorStatus,
        FullPullStatus,
        KafkaStatus,
        LogCount,
        LogSnapshot,
        LogTableStatus,
        Snapshot,
        StageLive,
        StageRate,
        TableHeartbeat,
    )

DESCRIPTION = (
    "Read the extractor's leader, epoch and committed position from ZooKeeper, the newest "
    "dbus_extractor, dbus_stage, dbus_client and dbus_heartbeat points and the last hour's dead letters from "
    "the time-series server, running full pulls and the heartbeat monitor's open alerts; print "
    "one screen (or --json). Exit 1 "
    "when a part could not be read (it is named), 0 otherwise."
)


def _num(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def _ago(age_s: float | None) -> str:
    if age_s is None:
        return "-"
    if age_s < 120:
        return f"{age_s:.0f} s ago"
    if age_s < 7200:
        return f"{age_s / 60:.0f} min ago"
    return f"{age_s / 3600:.1f} h ago"


def _utc(epoch_s: float) -> str:
    return datetime.fromtimestamp(epoch_s, timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def _render_extractor(e: ExtractorStatus) -> list[str]:
    where = (
        f"{e.committed_file}:{e.committed_pos} gtid {e.committed_gtid or '-'}"
        if e.committed_file
        else "none committed yet"
    )
    behind = "" if e.behind_bytes is None else f", {e.behind_bytes:,} bytes behind the server"
    if e.behind_bytes == 0:  # an idle source: its last transaction may be old, nothing is behind
        lag = "0.0 s (caught up: nothing on the server past the committed position)"
    elif e.lag_s is not None:
        lag = f"{e.lag_s:.1f} s (metrics {_ago(e.metrics_age_s)})"
    elif e.position_lag_s is not None:
        lag = f"{e.position_lag_s:.1f} s since the committed transaction (no metrics)"
    else:
        lag = "unknown"
    return [
        "extractor",
        f"  leader     {e.leader or 'none (no extractor runs)'}",
        f"  epoch      {e.epoch}",
        f"  committed  {where}{behind}",
        f"  lag        {lag}",
    ]


def _render_stages(
    stages: tuple[StageRate, ...], window_s: int, lives: tuple[StageLive, ...] = (), now: float = 0.0
) -> list[str]:
    lines = ["stages         rows/s   kafka lag   batch ms   as of"]
    started = {x.stage: x.started_at for x in lives if x.started_at is not None}
    for s in stages:
        name = f"  {s.stage:<11}"
        since = started.get(s.stage)
        # started within the window, and no point of this process yet
        if since is not None and now - since < window_s and (s.age_s is None or now - s.age_s < since):
            running = _ago(max(0.0, now - since)).removesuffix(" ago")
            lines.append(f"{name}starting: running for {running}, no batch ended yet")
            continue
        if s.age_s is None:
            lines.append(f"{name}no data in the last {window_s / 60:g} minutes")
            continue
        if s.waiting:
            lines.append(
                f"{name}waiting for resources: the cluster runs fewer of its tasks than it needs "
                f"(docs/deploy.md, Sizing)   {_ago(s.age_s)}"
            )
            continue
        lag = "-" if s.lag_records is None else f"{s.lag_records:,}"
        unit = "  (records/s)" if s.stage == "extractor" else ""
        if s.checkpoint_ms:
            every = f"{s.checkpoint_ms / 1000:g} s"
            unit = f"  (real-time, a batch every {every}: batch ms is the pause between two)"
        figures = f"{_num(s.rows_per_s):>8} {lag:>11} {_num(s.batch_ms, 0):>10}"
        lines.append(f"{name}{figures}   {_ago(s.age_s)}{unit}")
    return lines


def _render_kafka(k: KafkaStatus) -> list[str]:
    if not k.servers:
        return ["kafka          not read"]
    missing = f"; missing: {', '.join(k.missing)}" if k.missing else ""
    there = k.expected - len(k.missing)
    return [f"kafka          {k.servers}: {there} of {k.expected} topics of the source exist{missing}"]


def _bootstrap(c: ClientStatus) -> str:
    if c.mode == "ONLINE":
        return "online"
    phase = {"BOOTSTRAP_SNAPSHOT": "snapshot", "BOOTSTRAP_CATCHUP": "catch-up"}.get(c.mode, c.mode)
    return f"bootstrap {phase}: {c.pulls_ended}/{c.pulls} pulls ended, {c.bootstrap_rows:,} rows"


def _render_clients(clients: tuple[ClientStatus, ...], window_s: int) -> list[str]:
    if not clients:
        return [f"clients        none in the last {window_s / 60:g} minutes"]
    width = max(len("client"), *(len(c.client) for c in clients))
    lines = [f"clients        {'client':<{width}}  {'rows/s':>9} {'lag records':>12} {'as of':>11}   state"]
    for c in clients:
        lag = "-" if c.lag_records is None else f"{c.lag_records:,}"
        lines.append(
            f"               {c.client:<{width}}  {_num(c.rows_per_s):>9} {lag:>12} {_ago(c.age_s):>11}   "
            f"{_bootstrap(c)}"
        )
    return lines


def _render_heartbeats(beats: tuple[TableHeartbeat, ...]) -> list[str]:
    if not beats:
        return ["heartbeats     none in the last day"]
    width = max(len(f"{b.schema}.{b.table}") for b in beats)
    lines = [f"heartbeats     {'table':<{width}}  {'latency':>9} {'rows':>10}   last heartbeat"]
    for b in beats:
        latency = "-" if b.latency_ms is None else f"{b.latency_ms / 1000:.3f} s"
        rows = "-" if b.rows is None else f"{b.rows:,}"
        name = f"{b.schema}.{b.table}"
        lines.append(f"               {name:<{width}}  {latency:>9} {rows:>10}   {_ago(b.age_s)}")
    return lines


def _render_dead_letters(letters: tuple[DeadLetterCount, ...]) -> list[str]:
    if not letters:
        from status.readers import DEAD_LETTER_WINDOW_S

        return [f"dead letters   none in the last {DEAD_LETTER_WINDOW_S // 60} minutes"]
    sw = max(len("stage"), *(len(d.stage) for d in letters))
    cw = max(len("code"), *(len(d.code) for d in letters))
    lines = [f"dead letters   {'stage':<{sw}}  {'code':<{cw}}  {'count':>7}   newest (last hour)"]
    for d in letters:
        where = f"{d.topic} partition {d.partition} offset {d.offset}" if d.topic else "original unknown"
        table = f" ({d.origin})" if d.origin else ""
        lines.append(
            f"               {d.stage:<{sw}}  {d.code:<{cw}}  {d.count:>7,}   {where}{table}, "
            f"in {d.dlq_topic} partition {d.dlq_partition} offset {d.dlq_offset}, {_ago(d.age_s)}"
        )
    return lines


def _render_fullpulls(pulls: tuple[FullPullStatus, ...]) -> list[str]:
    if not pulls:
        return ["full pulls     none running"]
    lines = ["full pulls"]
    for p in pulls:
        lines += [f"  {p.id}  {p.schema}.{p.table}", f"    {p.bar}"]
    return lines


def _render_alerts(alerts: tuple[Alert, ...]) -> list[str]:
    if not alerts:
        return ["open alerts    none"]
    lines = ["open alerts"]
    for a in alerts:
        since = f" since {_utc(a.since_ms / 1000)}" if a.since_ms else ""
        figures = ", ".join(
            f"{k} {_num(v)} s" for k, v in (("age", a.age_s), ("latency", a.latency_s)) if v is not None
        )
        host = f" from {a.host}" if a.host else ""  # a log table's alert: per host
        lines.append(
            f"  {a.schema}.{a.table}{host} {a.kind}{since}"
            + (f" ({figures})" if figures else "")
            + (f": {a.message}" if a.message else "")
        )
    return lines


def _render_processes(lives: tuple[StageLive, ...]) -> list[str]:
    if not lives:
        return ["processes      not read"]
    width = max(len(x.stage) for x in lives)
    lines = ["processes"]
    for x in lives:
        where = ", ".join(x.processes) if x.processes else "no process announced"
        lines.append(f"  {x.stage:<{width}}  {x.state:<7}  {where}")
    return lines


def render(s: Snapshot) -> str:
    """The screen of ``dbus status`` (pure: every figure comes from the snapshot)."""
    lines = [f"source {s.source} at {_utc(s.taken_at)}", ""]
    lines += _render_processes(s.processes) + [""]
    lines += _render_extractor(s.extractor) + [""]
    lines += _render_kafka(s.kafka) + [""]
    lines += _render_stages(s.stages, s.window_s, s.processes, s.taken_at) + [""]
    lines += _render_clients(s.clients, s.window_s) + [""]
    lines += _render_heartbeats(s.heartbeats) + [""]
    lines += _render_dead_letters(s.dead_letters) + [""]
    lines += _render_fullpulls(s.fullpulls) + [""]
    lines += _render_alerts(s.alerts)
    if s.errors:
        lines += ["", "could not read:"] + [f"  {e}" for e in s.errors]
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------- collect


def _render_log_tables(tables: tuple[LogTableStatus, ...], window_s: int) -> list[str]:
    if not tables:
        return ["tables         no rows and no heartbeat yet"]
    hw = max(len("host"), *(len(t.host or "-") for t in tables))
    tw = max(len("table"), *(len(t.table) for t in tables))
    rows_head = f"rows ({window_s / 60:g} min)"
    lines = [
        f"tables         {'host':<{hw}}  {'table':<{tw}}  {rows_head:>15}  {'latency':>9} "
        f"{'rows':>8}   last heartbeat"
    ]
    for t in tables:
        latency = "-" if t.latency_ms is None else f"{t.latency_ms / 1000:.3f} s"
        since = "-" if t.rows_since_heartbeat is None else f"{t.rows_since_heartbeat:,}"
        last = "none in the last day" if t.heartbeat_age_s is None else _ago(t.heartbeat_age_s)
        lines.append(
            f"               {t.host or '-':<{hw}}  {t.table:<{tw}}  {t.rows:>15,}  {latency:>9} "
            f"{since:>8}   {last}"
        )
    return lines


def _render_log_counts(counts: tuple[LogCount, ...], window_s: int) -> list[str]:
    if not counts:
        return [f"unknown, errors none in the last {window_s / 60:g} minutes"]
    hw = max(len("host"), *(len(c.host or "-") for c in counts))
    lines = [f"unknown, errors {'host':<{hw}}  {'what':<28}  count ({window_s / 60:g} min)"]
    for c in counts:
        what = "unknown lines" if c.kind == "unknown" else (c.code or c.kind)
        lines.append(f"                {c.host or '-':<{hw}}  {what:<28}  {c.count:>7,}")
    return lines


def render_log(s: LogSnapshot) -> str:
    """The screen of ``dbus status`` for a log source (pure)."""
    lines = [f"log source {s.source} at {_utc(s.taken_at)}", ""]
    lines += _render_processes(s.processes) + [""]
    lines += _render_stages(s.stages, s.window_s, s.processes, s.taken_at) + [""]
    lines += _render_log_tables(s.tables, s.window_s) + [""]
    lines += _render_log_counts(s.counts, s.window_s) + [""]
    lines += _render_dead_letters(s.dead_letters) + [""]
    lines += _render_alerts(s.alerts)
    if s.errors:
        lines += ["", "could not read:"] + [f"  {e}" for e in s.errors]
    return "\n".join(lines)


def add_parsers(sub: Any) -> None:
    st = sub.add_parser(
        "status",
        help="one screen: extractor leader/position/lag, stage rows/s, consumer clients, heartbeats, "
        "dead letters, full pulls, open alerts",
        description=DESCRIPTION,
    )
    st.add_argument("--source", required=True, help="source name under 'sources' or 'log_sources'")
    st.add_argument(
        "--window",
        type=float,
        default=10.0,
        metavar="MINUTES",
        help="stage and client rates older than this read 'no data' (default: %(default)s)",
    )
    st.add_argument("--json", action="store_true", help="print the snapshot as JSON")
    st.set_defaults(handler=cli)


def cli(args: argparse.Namespace) -> int:
    from dbuslib.config import load_config
    from status.readers import LogSnapshot, collect

    cfg = load_config(args.config)
    snap = collect(cfg, args.source, window_s=int(round(args.window * 60)))
    text = render_log(snap) if isinstance(snap, LogSnapshot) else render(snap)
    print(snap.to_json() if args.json else text, flush=True)
    return 1 if snap.errors else 0
