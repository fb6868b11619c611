"""The console's Dead letters page (docs/console.md#dead-letters): the letters of ``<ds>.dlq`` by stage,
code and table, newest first, and their counts over time.

Letters are read from a bounded window of the topic (the newest ``scan`` records of each partition, at
most ``MAX_SCAN``), never the whole topic, with kafka-python and no consumer group. Each record is read as
the heartbeat monitor counts it (``heartbeat.deadletters.parse``: stage, code, table, coordinates); its
reason and value are the stage's ``dbuslib.deadletter.DeadLetter``. A letter's value (the original
record's bytes) goes to the page only when no masked value can be in it: ``withheld`` gives the reason it
does not (``dbuslib.deadletter.withheld_reason`` of ``sources.<ds>.masking``: a table with masking rules,
or a letter of no known table in a source that masks columns), whatever the stage decided when it wrote
the letter. The counts are the heartbeat monitor's ``dbus_dead_letter`` points (as ``dbus status`` reads
them, ``status.readers.dead_letters``), with their sums per hour bucket for the chart."""

from __future__ import annotations

import base64
import binascii
import json
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

from flask import Blueprint, render_template, request

from console.auth import config, viewer_required

TITLE = "Dead letters"
bp = Blueprint("deadletters", __name__, url_prefix="/dead-letters")

DEFAULT_SCAN = 2000  # records read from the end of each partition
MAX_SCAN = 20_000
PAGE_SIZE = 50
MAX_PAGE_SIZE = 200
PREVIEW_BYTES = 2048  # of a letter's value, shown
READ_BUDGET_S = 8.0
CHART_HOURS = 24
CHART_BUCKET_S = 3600
WITHHELD = "withheld"


@dataclass(frozen=True)
class LetterView:
    """One letter as the page shows it. ``value_text``: the original record's first ``PREVIEW_BYTES`` as
    text when they are UTF-8 (``value_base64`` otherwise: the first bytes, base64), both None when
    ``withheld`` says why not; ``value_bytes`` its size (-1 unknown)."""

    stage: str
    code: str
    table: str
    error: str
    topic: str
    partition: int
    offset: int
    key: str | None
    dlq_topic: str
    dlq_partition: int
    dlq_offset: int
    at_ms: int
    withheld: str
    value_bytes: int
    value_text: str | None
    value_base64: str | None


def masking_plan(cfg: Any, ds: str) -> Any:
    """``ums.masking.MaskPlan`` of a database or log source's ``masking``."""
    from ums.masking import compile_rules

    src = cfg.log_sources[ds] if ds in cfg.log_sources else cfg.source(ds)
    return compile_rules(src.masking)


def withhold(plan: Any, schema: str | None, table: str | None, stage_withheld: str) -> str:
    """Why a letter's value must not reach the page ("" when it may): the stage's own reason, else the
    stages' rule (``withheld_reason``) for the letter's table under the source's masking now."""
    from dbuslib.deadletter import withheld_reason

    if stage_withheld:
        return stage_withheld
    masks_any = bool(plan.has_rules)
    masked = bool(plan.rules_for(schema, table)) if masks_any and schema is not None and table else None
    return withheld_reason(masks_any, masked)


def _doc(value: bytes | None) -> dict[str, Any]:
    try:
        doc = json.loads(value) if value is not None else None
    except (ValueError, RecursionError):
        return {}
    return doc if isinstance(doc, dict) else {}


def _preview(doc: Mapping[str, Any]) -> tuple[int, str | None, str | None]:
    raw = doc.get("value_base64")
    if not isinstance(raw, str):
        return -1, None, None
    try:
        value = base64.b64decode(raw, validate=True)
    except (binascii.Error, ValueError):
        return -1, None, raw[: PREVIEW_BYTES * 4 // 3]
    head = value[:PREVIEW_BYTES]
    try:
        return len(value), head.decode("utf-8"), None
    except UnicodeDecodeError as e:
        if e.start >= len(head) - 3 and len(value) > PREVIEW_BYTES:  # a character cut by the preview
            return len(value), head[: e.start].decode("utf-8"), None
        return len(value), None, base64.b64encode(head).decode()


def view(
    value: bytes | None,
    key: bytes | None,
    *,
    dlq_topic: str,
    dlq_partition: int,
    dlq_offset: int,
    at_ms: int,
    plan: Any,
) -> LetterView:
    """One DLQ record -> what the page shows of it (never raises; masked values withheld)."""
    from heartbeat.deadletters import parse

    letter = parse(value, key, dlq_partition=dlq_partition, dlq_offset=dlq_offset, at_ms=at_ms)
    doc = _doc(value)
    error = doc.get("error")
    if not isinstance(error, str):
        error = "" if doc else "the record is not a dead letter (not a JSON object with a code)"
    stage_withheld = str(doc.get("withheld") or "")
    reason = withhold(plan, letter.schema, letter.table, stage_withheld)
    size, text, b64 = (-1, None, None) if reason else _preview(doc)
    if not reason and size < 0 and b64 is None:
        reason = "the letter carries no value"
    letter_key = doc.get("key") if isinstance(doc.get("key"), str) else None
    if letter_key is None and key is not None:
        letter_key = key.decode("utf-8", "replace")
    return LetterView(
        letter.stage,
        letter.code,
        letter.origin,
        error,
        letter.topic,
        letter.partition,
        letter.offset,
        letter_key,
        dlq_topic,
        dlq_partition,
        dlq_offset,
        at_ms,
        reason,
        size,
        text,
        b64,
    )


def select(
    letters: Iterable[LetterView], stage: str = "", code: str = "", table: str = ""
) -> list[LetterView]:
    """The letters of ``stage``, ``code`` and ``table`` ("" = any; table "-" = no known table), newest
    first (by when the stage wrote them, then by DLQ offset)."""
    out = [
        v
        for v in letters
        if (not stage or v.stage == stage)
        and (not code or v.code == code)
        and (not table or v.table == table or (table == "-" and not v.table))
    ]
    return sorted(out, key=lambda v: (v.at_ms, v.dlq_offset, v.dlq_partition), reverse=True)


def page_of(letters: list[LetterView], page: int, size: int) -> dict[str, Any]:
    pages = max(1, -(-len(letters) // size))
    page = min(max(page, 0), pages - 1)
    return {
        "letters": [asdict(v) for v in letters[page * size : (page + 1) * size]],
        "total": len(letters),
        "page": page,
        "pages": pages,
        "page_size": size,
    }


def facets(letters: Iterable[LetterView]) -> dict[str, list[dict[str, Any]]]:
    """Counts of the letters read, per stage, code, table and (stage, code)."""
    by: dict[str, Counter[Any]] = {"stages": Counter(), "codes": Counter(), "tables": Counter()}
    pairs: Counter[tuple[str, str]] = Counter()
    for v in letters:
        by["stages"][v.stage] += 1
        by["codes"][v.code] += 1
        by["tables"][v.table or "-"] += 1
        pairs[(v.stage, v.code)] += 1
    out: dict[str, list[dict[str, Any]]] = {
        k: [{"name": n, "count": c} for n, c in sorted(cnt.items())] for k, cnt in by.items()
    }
    out["stage_codes"] = [{"stage": s, "code": c, "count": n} for (s, c), n in sorted(pairs.items())]
    return out


# ----------------------------------------------------------------------------------------- Kafka edge


def read_tail(
    kcfg: Any, topic: str, per_partition: int, make: Callable[[Any], LetterView | None]
) -> tuple[list[LetterView], list[dict[str, Any]], list[str]]:
    """The newest ``per_partition`` records of each partition of ``topic``, each made a view at once (the
    values are not kept); the window read per partition; problems (a partition not read to its end in
    ``READ_BUDGET_S``). A topic that does not exist: nothing."""
    from kafka import TopicPartition

    from dbuslib import kafka

    c = kafka.consumer(kcfg, enable_auto_commit=False, group_id=None, allow_auto_create_topics=False)
    try:
        parts = sorted(c.partitions_for_topic(topic) or ())
        tps = [TopicPartition(topic, p) for p in parts]
        if not tps:
            return [], [], []
        first, ends = c.beginning_offsets(tps), c.end_offsets(tps)
        start = {tp: max(first[tp], ends[tp] - per_partition) for tp in tps}
        windows = [
            {"partition": tp.partition, "first": first[tp], "end": ends[tp], "from": start[tp]} for tp in tps
        ]
        todo = [tp for tp in tps if ends[tp] > start[tp]]
        if not todo:
            return [], windows, []
        c.assign(todo)
        for tp in todo:
            c.seek(tp, start[tp])
        out: list[LetterView] = []
        left = set(todo)
        deadline = time.monotonic() + READ_BUDGET_S
        while left and time.monotonic() < deadline:
            for tp, records in c.poll(timeout_ms=1000, max_records=2000).items():
                for r in records:
                    if r.offset < ends[tp] and (v := make(r)) is not None:
                        out.append(v)
                if c.position(tp) >= ends[tp]:
                    left.discard(tp)
        problems = [
            f"{topic} partition {tp.partition}: not read to offset {ends[tp]} within {READ_BUDGET_S:g}s"
            for tp in sorted(left, key=lambda t: t.partition)
        ]
        return out, windows, problems
    finally:
        c.close()


def letters(cfg: Any, ds: str, scan: int) -> tuple[list[LetterView], dict[str, Any]]:
    """The letters of the newest ``scan`` records of each partition of ``<ds>.dlq``, and what was read."""
    from heartbeat.deadletters import dead_letter_topic

    topic = dead_letter_topic(cfg, ds)
    plan = masking_plan(cfg, ds)

    def make(r: Any) -> LetterView:
        return view(
            r.value,
            r.key,
            dlq_topic=topic,
            dlq_partition=r.partition,
            dlq_offset=r.offset,
            at_ms=int(r.timestamp or 0),
            plan=plan,
        )

    got, windows, problems = read_tail(cfg.endpoints.kafka, topic, scan, make)
    return got, {"dlq_topic": topic, "scan": scan, "partitions": windows, "errors": problems}


def timeline_query(ds: str, hours: int, bucket_s: int) -> str:
    """InfluxQL: the letters counted per (stage, code) in each ``bucket_s`` of the last ``hours``."""
    from dbuslib.seriesread import influxql_string

    return (
        f'SELECT sum("count") AS "count" FROM "dbus_dead_letter" WHERE "ds" = {influxql_string(ds)} '
        f'AND time > now() - {int(hours)}h GROUP BY time({int(bucket_s)}s), "stage", "code" fill(0)'
    )


def timeline(series: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The query's series as ``[{"stage", "code", "points": [[epoch_ms, count], ...]}]``, sorted."""
    out = []
    for s in series:
        tags = s.get("tags") or {}
        cols = s.get("columns") or []
        points = []
        for row in s.get("values") or []:
            r = dict(zip(cols, row, strict=False))
            points.append([int(r.get("time") or 0), int(r.get("count") or 0)])
        if any(n for _, n in points):
            out.append({"stage": tags.get("stage") or "", "code": tags.get("code") or "", "points": points})
    return sorted(out, key=lambda d: (d["stage"], d["code"]))


def counts(cfg: Any, ds: str, now: float | None = None) -> dict[str, Any]:
    """The last hour's counts per (stage, code) as ``dbus status`` shows them, and the last day's per hour."""
    from dbuslib import promread, seriesread
    from heartbeat.deadletters import dead_letter_topic
    from status.readers import DEAD_LETTER_WINDOW_S, dead_letter_series, dead_letters

    at = time.time() if now is None else now
    errors: list[str] = []
    recent: list[dict[str, Any]] = []
    series: list[dict[str, Any]] = []
    try:
        rows = dead_letter_series(cfg, ds, DEAD_LETTER_WINDOW_S)
        recent = [asdict(d) for d in dead_letters(rows, at, dead_letter_topic(cfg, ds))]
        by = ("stage", "code")
        per_bucket = promread.tally("dbus_dead_letter", "count", ds, CHART_BUCKET_S, by)
        series = timeline(
            seriesread.buckets(
                cfg,
                timeline_query(ds, CHART_HOURS, CHART_BUCKET_S),
                {"count": per_bucket},
                by,
                "dbus_dead_letter",
                CHART_HOURS * 3600,
                CHART_BUCKET_S,
            )
        )
    except Exception as e:
        errors.append(f"dbus_dead_letter: {getattr(e, 'code', type(e).__name__)}: {e}")
    return {
        "source": ds,
        "window_s": DEAD_LETTER_WINDOW_S,
        "counts": recent,
        "chart": {"hours": CHART_HOURS, "bucket_s": CHART_BUCKET_S, "series": series},
        "errors": errors,
    }


# ----------------------------------------------------------------------------------------- routes


def _source(cfg: Any) -> str | None:
    every = [*sorted(cfg.sources), *sorted(cfg.log_sources)]
    ds = request.args.get("source") or (every[0] if every else "")
    return ds if ds in every else None


def _int_arg(name: str, default: int, low: int, high: int) -> int:
    try:
        return min(max(int(request.args.get(name, default)), low), high)
    except ValueError:
        return default


@bp.route("/")
@viewer_required
def index() -> Any:
    cfg = config()
    return render_template(
        "deadletters.html",
        every_source=[*sorted(cfg.sources), *sorted(cfg.log_sources)],
        default_scan=DEFAULT_SCAN,
        max_scan=MAX_SCAN,
    )


@bp.route("/api/letters")
@viewer_required
def api_letters() -> Any:
    cfg = config()
    ds = _source(cfg)
    if ds is None:
        return {"error": f"source: {request.args.get('source')!r} is not a source of this configuration"}, 404
    scan = _int_arg("scan", DEFAULT_SCAN, 1, MAX_SCAN)
    try:
        got, read = letters(cfg, ds, scan)
    except Exception as e:
        return {"error": f"{getattr(e, 'code', type(e).__name__)}: {e}"}, 502
    chosen = select(
        got, request.args.get("stage", ""), request.args.get("code", ""), request.args.get("table", "")
    )
    size = _int_arg("size", PAGE_SIZE, 1, MAX_PAGE_SIZE)
    return {
        "source": ds,
        **read,
        "read": len(got),
        "facets": facets(got),
        **page_of(chosen, _int_arg("page", 0, 0, 10**9), size),
    }


@bp.route("/api/counts")
@viewer_required
def api_counts() -> Any:
    cfg = config()
    ds = _source(cfg)
    if ds is None:
        return {"error": f"source: {request.args.get('source')!r} is not a source of this configuration"}, 404
    return counts(cfg, ds)
