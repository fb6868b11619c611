"""``dbus fullpull request|status``, ``dbus reconcile`` and ``dbus verify`` (registered by cli/main.py).

    dbus fullpull request --source demo --table shop.orders [--split-col C] [--shard-size N] [--where SQL]
    dbus fullpull status --source demo [--id ID] [--watch]

``request`` prints the request id, then waits (``--wait``, default 60 s) for the full puller to accept
it (exit 0) or reject it (exit 2, with the reason from its ``<ds>_callback`` reply); ``--follow`` shows
the progress bar until the pull ends. Exit 1 when the full puller did not answer (is it running?).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    from fullpuller.progress import Progress


def add_parsers(sub: Any) -> None:
    fp = sub.add_parser("fullpull", help="full pulls: request one, show progress").add_subparsers(
        dest="action", required=True
    )
    rq = fp.add_parser(
        "request",
        help="send FULL_DATA_INDEPENDENT_PULL_REQ for a table",
        description="Send FULL_DATA_INDEPENDENT_PULL_REQ on <ds>_ctrl and print the request id. "
        + __doc__.split("\n\n")[2].replace("\n", " "),
    )
    rq.add_argument("--source", required=True, help="source name under 'sources'")
    rq.add_argument("--table", required=True, help="schema.table to pull")
    rq.add_argument(
        "--split-col", help="split column(s), e.g. id or a,b (default: primary key, unique key, index)"
    )
    rq.add_argument(
        "--shard-size",
        type=int,
        help="rows per shard (default: the source's fullpull.shard_size; -1 one shard)",
    )
    rq.add_argument("--where", help="SQL condition the pulled rows must meet (INPUT_CONDITIONS)")
    rq.add_argument("--result-topic", help="topic to write to (default: the table's result topic)")
    rq.add_argument(
        "--wait",
        type=float,
        default=60.0,
        metavar="SECONDS",
        help="wait for acceptance or rejection (0: send and exit)",
    )
    rq.add_argument("--follow", action="store_true", help="show progress until the pull ends")
    rq.set_defaults(handler=request_cli)

    stp = fp.add_parser("status", help="progress of full pulls (rows, shards, rows/s, ETA)")
    stp.add_argument("--source", required=True, help="source name under 'sources'")
    stp.add_argument("--id", type=int, help="one request (default: the newest pulls)")
    stp.add_argument("--limit", type=int, default=10, help="pulls to show (default: %(default)s)")
    stp.add_argument("--watch", action="store_true", help="refresh every second until the pulls end")
    stp.set_defaults(handler=status_cli)

    from fullpuller import reconcile, verify

    rc = sub.add_parser("reconcile", help="merge full-pull rows and increments into a snapshot (Spark batch)")
    reconcile.add_arguments(rc)
    reconcile.add_master(rc)
    rc.set_defaults(handler=reconcile.cli)
    vf = sub.add_parser("verify", help="compare a reconciled snapshot with the live source table")
    verify.add_arguments(vf)
    vf.set_defaults(handler=verify.cli)


def _store(cfg: Any, ds: str) -> Any:
    from dbuslib import zk, zkpaths
    from fullpuller.progress import ProgressStore

    client = zk.client(cfg.endpoints.zookeeper)
    return ProgressStore(client, zkpaths.fullpuller(cfg.endpoints.zookeeper.root, ds))


def _close(store: Any) -> None:
    store.zk.stop()
    store.zk.close()


@dataclass(frozen=True)
class Sent:
    """A request on its way: the control message, the topics it went to and came back on, and the
    callback topic's end offsets before it was sent (its reply is after them: ``reply_to``)."""

    message: Any  # ums.control.ControlMessage
    ctrl: str
    callback: str
    since: dict[Any, int]

    @property
    def id(self) -> int:
        return int(self.message.id)


def send_request(
    cfg: Any,
    ds: str,
    schema: str,
    table: str,
    *,
    split_col: str | None = None,
    shard_size: int | None = None,
    where: str | None = None,
    result_topic: str | None = None,
) -> Sent:
    """Send ``FULL_DATA_INDEPENDENT_PULL_REQ`` for ``schema.table`` of source ``ds`` on ``<ds>_ctrl`` (the
    one way ``dbus fullpull request`` and the console's Full pulls page ask for a pull); EndpointError when
    Kafka does not take it."""
    from dbuslib import kafka
    from dbuslib.errors import EndpointError
    from fullpuller import request

    src = cfg.source(ds)
    message = request.build(
        ds,
        schema,
        table,
        split_col=split_col,
        shard_size=shard_size,
        where=where,
        result_topic=result_topic,
    )
    ctrl, callback = src.topics.name("ctrl", ds), src.topics.name("callback", ds)
    kafka.ensure_topics(
        cfg.endpoints.kafka, [ctrl, callback], src.topics.partitions, src.topics.replication_factor
    )
    since = kafka.end_offsets(cfg.endpoints.kafka, [callback])
    producer = kafka.producer(cfg.endpoints.kafka, max_block_ms=15_000)
    key, value = request.to_record(message)
    try:
        producer.send(ctrl, key=key, value=value).get(30)
    except Exception as e:
        msg = f"could not send {key.decode()} to {ctrl} on {cfg.endpoints.kafka.bootstrap_servers}: {e}"
        raise EndpointError(msg) from e
    finally:
        producer.close()
    return Sent(message, ctrl, callback, since)


def request_cli(args: argparse.Namespace) -> int:
    from dbuslib.config import load_config
    from ums.names import split_table

    cfg = load_config(args.config)
    cfg.source(args.source)
    try:
        schema, table = split_table(args.table)
    except ValueError as e:
        print(f"dbus: FULLPULL_BAD_REQUEST: --table {e}", file=sys.stderr)
        return 2
    sent = send_request(
        cfg,
        args.source,
        schema,
        table,
        split_col=args.split_col,
        shard_size=args.shard_size,
        where=args.where,
        result_topic=args.result_topic,
    )
    message, ctrl, callback, since = sent.message, sent.ctrl, sent.callback, sent.since
    print(f"{message.id}\tFULL_DATA_INDEPENDENT_PULL_REQ for {args.table} sent to {ctrl}", flush=True)
    if args.wait <= 0:
        return 0
    store = _store(cfg, args.source)
    try:
        deadline = time.monotonic() + args.wait
        accepted = None
        while time.monotonic() < deadline and accepted is None:
            answer = reply_to(cfg, callback, since, message.id)
            if answer is not None and answer.get("STATUS") == "abort":
                print(f"dbus: {answer.get('ERROR_CODE')}: {answer.get('ERROR_MSG')}", file=sys.stderr)
                return 2
            p = store.get(schema, table, message.id)
            if p is not None and p.Status == "abort":  # refused after acceptance (e.g. a bad --where)
                print(f"dbus: {p.ErrorCode}: {p.ErrorMsg}", file=sys.stderr)
                return 2
            if p is not None and p.Status in ("pulling", "ending"):
                accepted = p
                break
            time.sleep(0.5)
        if accepted is None:
            print(
                f"dbus: no answer from the full puller of {args.source} within {args.wait:g}s "
                f"(is it running? it reads {ctrl})",
                file=sys.stderr,
            )
            return 1
        print(
            f"{message.id}\taccepted at ums_id {accepted.UmsId}: {accepted.TotalRows} rows in "
            f"{accepted.TotalCount} shard(s), split by {accepted.SplitCol or 'nothing'}"
            + (f"; warning: {accepted.Warning}" if accepted.Warning else ""),
            flush=True,
        )
        if not args.follow:
            return 0
        p = follow(lambda: store.refreshed(store.get(schema, table, message.id)), sys.stdout)
        return 0 if p.Status == "ending" else 1
    finally:
        _close(store)


FOLLOW_S = 1.0  # how often --follow reads the pull's progress
PLAIN_EVERY_S = 10.0  # off a terminal, a line at least this often while nothing else changes


def follow(read: Callable[[], Progress], out: TextIO) -> Progress:
    """Shows a pull's progress (``read()`` gives it) until it ends and returns its last state: on a
    terminal a bar that redraws itself (tqdm); elsewhere (a file, a pipe) plain lines, one when a shard
    ends or the state changes and one every ``PLAIN_EVERY_S`` otherwise, never a carriage return."""
    from tqdm import tqdm

    from fullpuller.progress import bar

    p = read()
    if not out.isatty():
        pace = _Pace()
        while True:
            if pace.due((p.FinishedCount, p.Status), force=p.finished):
                print(bar(p), file=out, flush=True)
            if p.finished:
                return p
            time.sleep(FOLLOW_S)
            p = read()
    with tqdm(
        total=p.TotalRows, unit="row", unit_scale=True, file=out, desc=f"{p.Schema}.{p.Table}"
    ) as shown:
        while True:
            shown.total = max(p.TotalRows, p.FinishedRows)
            shown.n = p.FinishedRows
            shown.set_postfix_str(f"{p.FinishedCount}/{p.TotalCount} shards {p.Status}", refresh=False)
            shown.refresh()
            if p.finished:
                break
            time.sleep(FOLLOW_S)
            p = read()
    if p.ErrorMsg:
        print(f"{p.ErrorCode}: {p.ErrorMsg}", file=out, flush=True)
    return p


class _Pace:
    """When a plain (not redrawn) progress line or screen is due: when what it shows changed (``key``), and
    at least every ``PLAIN_EVERY_S`` while nothing did; ``force`` for one that is due anyway."""

    def __init__(self) -> None:
        self.key: Any = None
        self.at = float("-inf")

    def due(self, key: Any, force: bool = False) -> bool:
        now = time.monotonic()
        if force or key != self.key or now - self.at >= PLAIN_EVERY_S:
            self.key, self.at = key, now
            return True
        return False


def reply_to(cfg: Any, topic: str, since: dict[Any, int], seqno: int) -> dict[str, Any] | None:
    """The payload of the callback reply to ``seqno`` written after ``since``, if any yet (``Sent``)."""
    import json

    from dbuslib import kafka

    for rec in kafka.read_range(cfg.endpoints.kafka, [topic], since):
        try:
            payload = json.loads(rec.value).get("payload", {})
        except (ValueError, AttributeError):
            continue
        if payload.get("SEQNO") == str(seqno):
            return payload
    return None


def status_cli(args: argparse.Namespace) -> int:
    from dbuslib.config import load_config
    from fullpuller.progress import bar

    cfg = load_config(args.config)
    cfg.source(args.source)
    store = _store(cfg, args.source)
    tty = sys.stdout.isatty()
    pace = _Pace()
    try:
        while True:
            pulls = store.all()
            if args.id is not None:
                pulls = [p for p in pulls if p.SeqNo == args.id]
                if not pulls:
                    print(f"dbus: no full pull {args.id} for source {args.source}", file=sys.stderr)
                    return 1
            lines = [
                f"{p.SeqNo}  {p.Schema}.{p.Table}  batch {p.BatchNo}  v{p.Version}  ums_id {p.UmsId}\n"
                f"  {bar(p)}"
                for p in pulls[: args.limit]
            ]
            if args.id is not None and pulls:
                p = pulls[0]
                states = store.shards(p)
                for i, shard in enumerate(p.Shards):
                    st = states.get(i)
                    lines.append(
                        f"    shard {i}: {st.state if st else 'waiting':8} {st.rows if st else 0:>10} rows"
                        f"  [{_bound(shard.get('lower'), '-inf')} .. {_bound(shard.get('upper'), '+inf')})"
                    )
            done = not args.watch or all(p.finished for p in pulls)
            changed = tuple((p.SeqNo, p.Status, p.FinishedCount) for p in pulls)
            # --watch: on a terminal the screen redrawn each second; elsewhere a screen when a pull changes
            # state or ends a shard, and every PLAIN_EVERY_S otherwise
            if pace.due(changed, force=tty or done):
                text = "\n".join(lines) if lines else f"no full pulls recorded for source {args.source}"
                print(("\x1b[H\x1b[2J" if tty and args.watch else "") + text, flush=True)
                if not tty and not done:
                    print()
            if done:
                return 0
            time.sleep(1.0)
    finally:
        _close(store)


def _bound(value: Any, open_end: str) -> str:
    return open_end if value is None else str(value)
