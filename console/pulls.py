"""The console's Full pulls page (docs/console.md#full-pulls): request a pull, follow its progress, see the
pulls that ended and their errors.

A request goes out exactly as ``dbus fullpull request`` sends it (``fullpuller.commands.send_request``);
the form is checked here first so that a mistake is named by its field before anything is sent. Progress
is the full puller's own record in ZooKeeper (``fullpuller.progress.ProgressStore``, rows/s and ETA by
``rate_and_eta``), as ``dbus fullpull status`` reads it. A request the full puller has not recorded yet is
"pending" until it appears there, or its ``<ds>_callback`` reply rejects it, or ``ANSWER_S`` pass.

Shard bounds are values of the split column: they are withheld when that column is masked
(``sources.<ds>.masking``), like every masked value."""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from flask import Blueprint, current_app, render_template, request

from console.auth import audit, config, operator_required, viewer_required
from console.body import json_object

TITLE = "Full pulls"
bp = Blueprint("pulls", __name__, url_prefix="/pulls")

MAX_WHERE_CHARS = 4000
MAX_SHARD_SIZE = 2**31 - 1
HISTORY = 20  # ended pulls shown
MAX_SHARDS = 500  # per-shard rows shown for one pull at most
ANSWER_S = 120.0  # a request nobody answered within this is reported as unanswered
WITHHELD = "withheld"


class FormError(ValueError):
    """The request form's problems, by field (``source``, ``table``, ``split_col``, ``shard_size``,
    ``where``)."""

    def __init__(self, problems: Mapping[str, str]) -> None:
        super().__init__("; ".join(f"{k}: {v}" for k, v in problems.items()))
        self.problems = dict(problems)


@dataclass(frozen=True)
class PullForm:
    """A checked request: what ``send_request`` takes."""

    source: str
    schema: str
    table: str
    split_col: str | None = None
    shard_size: int | None = None
    where: str | None = None

    @property
    def name(self) -> str:
        return f"{self.schema}.{self.table}"


def _text(data: Mapping[str, Any], name: str) -> str:
    value = data.get(name)
    if value is None:
        return ""
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise FormError({name: "must be text"})
    return str(value).strip()


def validate(cfg: Any, data: Mapping[str, Any]) -> PullForm:
    """The form (a JSON object or form fields) -> the request; FormError names every field that is wrong."""
    from ums.control import identifier_problem
    from ums.names import split_table

    problems: dict[str, str] = {}
    texts: dict[str, str] = {}
    for name in ("source", "table", "split_col", "shard_size", "where"):
        try:
            texts[name] = _text(data, name)
        except FormError as e:
            problems.update(e.problems)
    source = texts.get("source", "")
    if "source" not in problems:
        if not source:
            problems["source"] = "choose a source"
        elif source in cfg.log_sources:
            problems["source"] = f"{source!r} is a log source: only database sources have full pulls"
        elif source not in cfg.sources:
            problems["source"] = f"{source!r} is not a source of this configuration"
    schema = table = ""
    if "table" not in problems:
        try:
            schema, table = split_table(texts.get("table", ""))
        except ValueError as e:
            problems["table"] = str(e) if texts.get("table") else "give the table as schema.table"
        else:
            for part, what in ((schema, "schema"), (table, "table")):
                if problem := identifier_problem(part):
                    problems["table"] = f"the {what} name {problem}"
    split_col = texts.get("split_col") or None
    if split_col and "split_col" not in problems:
        for column in split_col.split(","):
            if problem := identifier_problem(column.strip()):
                problems["split_col"] = (
                    f"column {column.strip()!r} {problem} (columns are separated by commas)"
                )
                break
        else:
            split_col = ",".join(c.strip() for c in split_col.split(","))
    shard_size: int | None = None
    size_text = texts.get("shard_size", "")
    if size_text and "shard_size" not in problems:
        try:
            shard_size = int(size_text)
        except ValueError:
            problems["shard_size"] = f"{size_text!r} is not a whole number of rows"
        else:
            if shard_size != -1 and not 1 <= shard_size <= MAX_SHARD_SIZE:
                problems["shard_size"] = (
                    f"{shard_size}: give rows per shard (1 to {MAX_SHARD_SIZE}) or -1 for one shard"
                )
    where = texts.get("where") or None
    if where and "where" not in problems:
        if len(where) > MAX_WHERE_CHARS:
            problems["where"] = f"has {len(where)} characters (at most {MAX_WHERE_CHARS})"
        elif "\x00" in where:
            problems["where"] = "contains a NUL character"
    if problems:
        raise FormError(problems)
    form = PullForm(source, schema, table, split_col, shard_size, where)
    _check_as_the_full_puller_does(form)
    return form


def _check_as_the_full_puller_does(form: PullForm) -> None:
    """The request as the full puller will parse it (``fullpuller.request.check``): what it would refuse is
    refused here, before it is sent."""
    from fullpuller import request as pullrequest

    message = pullrequest.build(
        form.source,
        form.schema,
        form.table,
        split_col=form.split_col,
        shard_size=form.shard_size,
        where=form.where,
    )
    try:
        pullrequest.check(message, form.source)
    except pullrequest.PullRejected as e:
        raise FormError({"request": f"{e.code}: {e}"}) from None


# ----------------------------------------------------------------------------------------- progress


def masked_columns(cfg: Any, ds: str, schema: str, table: str) -> frozenset[str]:
    """The columns of ``schema.table`` that ``sources.<ds>.masking`` masks."""
    from ums.masking import compile_rules

    rules = compile_rules(cfg.source(ds).masking).rules_for(schema, table)
    return frozenset(rules.rules) if rules is not None else frozenset()


def pull_dict(p: Any, shards: Mapping[int, Any], masked: frozenset[str] = frozenset()) -> dict[str, Any]:
    """One pull (``fullpuller.progress.Progress``, its counts refreshed from ``shards``) as the page's JSON:
    rows, shards, rows/s, ETA, state of each shard; shard bounds withheld when a split column is masked."""
    from fullpuller.progress import DONE, ENDING, rate_and_eta

    rate, eta = rate_and_eta(p)
    total = max(p.TotalRows, 1)
    fraction = 1.0 if p.Status == ENDING else min(1.0, p.FinishedRows / total)
    split = [c.strip() for c in (p.SplitCol or "").split(",") if c.strip()]
    hide = any(c in masked for c in split)
    shard_rows = []
    for i, plan in enumerate(p.Shards[:MAX_SHARDS]):
        st = shards.get(i)
        shard_rows.append(
            {
                "index": i,
                "state": st.state if st is not None else "waiting",
                "rows": st.rows if st is not None else 0,
                "lower": WITHHELD if hide else _bound(plan.get("lower")),
                "upper": WITHHELD if hide else _bound(plan.get("upper")),
            }
        )
    return {
        "id": p.SeqNo,
        "table": f"{p.Schema}.{p.Table}",
        "status": p.Status,
        "finished": p.finished,
        "rows": p.FinishedRows,
        "total_rows": p.TotalRows,
        "fraction": round(fraction, 4),
        "shards_done": sum(1 for s in shards.values() if s.state == DONE) if shards else p.FinishedCount,
        "shards_total": p.TotalCount,
        "rows_per_s": round(rate, 1),
        "eta_s": None if eta is None else round(eta, 1),
        "started_at": p.StartSecs or None,
        "ended_at": p.EndSecs or None,
        "seconds": p.ConsumeSecs,
        "split_col": p.SplitCol,
        "split_source": p.SplitSource,
        "ums_id": p.UmsId,
        "version": p.Version,
        "batch": p.BatchNo,
        "resumes": p.Resumes,
        "topic": p.Topic,
        "warning": p.Warning,
        "error_code": p.ErrorCode,
        "error": p.ErrorMsg,
        "shards": shard_rows,
        "shards_cut": max(0, len(p.Shards) - MAX_SHARDS),
    }


def _bound(value: Any) -> str | None:
    return None if value is None else str(value)


@dataclass
class Pending:
    """A request sent from this console that the full puller has not recorded yet."""

    sent: Any  # fullpuller.commands.Sent
    source: str
    table: str
    user: str
    at: float
    state: str = "pending"  # pending | rejected | unanswered
    error_code: str = ""
    error: str = ""


@dataclass
class Requests:
    """The requests this console sent, until the full puller records them (one per app, shared by its
    threads)."""

    items: dict[int, Pending] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, p: Pending) -> None:
        with self.lock:
            self.items[p.sent.id] = p
            for old in sorted(self.items.values(), key=lambda x: x.at)[:-50]:  # keep the newest 50
                self.items.pop(old.sent.id, None)

    def of(self, source: str) -> list[Pending]:
        with self.lock:
            return [p for p in self.items.values() if p.source == source]

    def drop(self, ident: int) -> None:
        with self.lock:
            self.items.pop(ident, None)


def _requests() -> Requests:
    found: Requests = current_app.extensions.setdefault("dbus_pull_requests", Requests())
    return found


def settle(pending: list[Pending], recorded: set[int], reply: Any, now: float) -> list[dict[str, Any]]:
    """The pending requests as the page shows them: those the full puller recorded are dropped (the
    caller forgets them), a rejection read by ``reply(p)`` (the callback payload or None) marks one
    rejected, one with no answer after ``ANSWER_S`` is unanswered."""
    out = []
    for p in pending:
        if p.sent.id in recorded:
            continue
        if p.state == "pending":
            answer = reply(p)
            if answer is not None and answer.get("STATUS") == "abort":
                p.state = "rejected"
                p.error_code = str(answer.get("ERROR_CODE") or "")
                p.error = str(answer.get("ERROR_MSG") or "")
            elif now - p.at > ANSWER_S:
                p.state, p.error_code = "unanswered", "FULLPULL_NO_ANSWER"
                p.error = (
                    f"no answer from the full puller of {p.source} within {ANSWER_S:g}s "
                    f"(is it running? it reads {p.sent.ctrl})"
                )
        out.append(
            {
                "id": p.sent.id,
                "table": p.table,
                "status": p.state,
                "user": p.user,
                "sent_at": p.at,
                "error_code": p.error_code,
                "error": p.error,
            }
        )
    return out


def pulls(cfg: Any, ds: str, requests: Requests) -> dict[str, Any]:
    """The page's JSON for source ``ds``: pulls running, requests pending, pulls ended (newest first)."""
    from dbuslib import zk, zkpaths
    from fullpuller.commands import reply_to
    from fullpuller.progress import ProgressStore

    errors: list[str] = []
    running: list[dict[str, Any]] = []
    ended: list[dict[str, Any]] = []
    recorded: set[int] = set()
    try:
        client = zk.client(cfg.endpoints.zookeeper)
    except Exception as e:
        client = None
        errors.append(f"full pulls (ZooKeeper): {getattr(e, 'code', type(e).__name__)}: {e}")
    if client is not None:
        try:
            store = ProgressStore(client, zkpaths.fullpuller(cfg.endpoints.zookeeper.root, ds))
            for p in store.all():
                recorded.add(p.SeqNo)
                if not p.finished or len(ended) < HISTORY:
                    d = pull_dict(p, store.shards(p), masked_columns(cfg, ds, p.Schema, p.Table))
                    (ended if p.finished else running).append(d)
        except Exception as e:
            errors.append(f"full pulls (ZooKeeper): {getattr(e, 'code', type(e).__name__)}: {e}")
        finally:
            client.stop()
            client.close()
    mine = requests.of(ds)
    for q in mine:
        if q.sent.id in recorded:
            requests.drop(q.sent.id)

    def reply(p: Pending) -> Any:
        try:
            return reply_to(cfg, p.sent.callback, p.sent.since, p.sent.id)
        except Exception as e:
            errors.append(f"{p.sent.callback}: {getattr(e, 'code', type(e).__name__)}: {e}")
            return None

    pending = settle(mine, recorded if client is not None else set(), reply, time.time())
    return {"source": ds, "running": running, "pending": pending, "ended": ended, "errors": errors}


# ----------------------------------------------------------------------------------------- routes


@bp.route("/")
@viewer_required
def index() -> Any:
    return render_template("pulls.html", db_sources=sorted(config().sources))


@bp.route("/api/pulls")
@viewer_required
def api_pulls() -> Any:
    cfg = config()
    ds = request.args.get("source") or next(iter(sorted(cfg.sources)), "")
    if ds not in cfg.sources:
        return {"error": f"source: {ds!r} is not a database source of this configuration"}, 404
    return pulls(cfg, ds, _requests())


@bp.route("/api/request", methods=["POST"])
@operator_required
def api_request() -> Any:
    from flask_login import current_user

    from fullpuller.commands import send_request

    cfg = config()
    data = json_object() if request.is_json else request.form
    try:
        form = validate(cfg, data)
    except FormError as e:
        return {"error": f"not sent: {e}", "fields": e.problems}, 400
    details = {
        "source": form.source,
        "table": form.name,
        "split_col": form.split_col,
        "shard_size": form.shard_size,
        "where": form.where,
    }
    try:
        sent = send_request(
            cfg,
            form.source,
            form.schema,
            form.table,
            split_col=form.split_col,
            shard_size=form.shard_size,
            where=form.where,
        )
    except Exception as e:
        audit("fullpull-request", **details, sent=False, error=str(e))
        return {"error": f"not sent: {getattr(e, 'code', type(e).__name__)}: {e}", "fields": {}}, 502
    audit("fullpull-request", **details, sent=True, id=sent.id, topic=sent.ctrl)
    _requests().add(Pending(sent, form.source, form.name, current_user.name, time.time()))
    return {"id": sent.id, "source": form.source, "table": form.name, "topic": sent.ctrl}, 202
