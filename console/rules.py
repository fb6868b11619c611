"""The console's Log rules page (docs/console.md, Log rules): per log table of each log source, its rule
groups as an editable list of operators, run step by step on sample lines (the newest lines of the source's
raw topic, or pasted), saved as the draft and published as a new version, and any two versions diffed.

The rules are the meta store's (dbuslib/logstore.py) as ``dbus logrules`` keeps them: the model and its
checks are logprocessor/grammar.py, the draft and publish logprocessor/rules.py, the rules' semantics
logprocessor/operators.py (``steps``), the shipper records logprocessor/adapters.py, and the reload a publish
sends logprocessor/reload.py. This module only shapes their answers for the page:

- the editor's groups: ``[{"groupName", "active", "rules": [{"ruleTypeName", "ruleGrammar": [entry, ...]}]}]``
  (the export format, each ``ruleGrammar`` as a list instead of JSON text);
- ``check_groups``: every problem of every group at once, each naming the group, the rule's position, its
  operator and the parameter (``grammar.check_rule``'s messages);
- ``preview``: per sample record, the adapter's lines and per group the rows after every rule, where the
  group stopped and why (``operators.steps``);
- ``diff``: a unified diff of two versions' groups, each rule's grammar spread out one entry a line.

Reading is open to every user (viewers included: the preview and the samples change nothing); saving the
draft and publishing need an operator and are audited (``rules-save-draft``, ``rules-publish``).
"""

from __future__ import annotations

import difflib
import json
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime
from functools import wraps
from typing import Any, TypeVar, cast

from flask import Blueprint, Flask, abort, current_app, jsonify, render_template, request
from flask_login import current_user

from console.auth import audit, config, operator_required, viewer_required
from console.body import BOOL, LIST, TEXT, json_object, kind
from console.budget import Budget, Busy, Failed, OverBudget, Slots
from console.masked import Masking, mask_rows, viewer_preview, viewer_sample
from dbuslib.config import DbusConfig
from dbuslib.errors import DbusError, EndpointError
from logprocessor.grammar import OPERATORS, Group, RuleError, rule_from_json
from ums.masking import compile_rules

TITLE = "Log rules"
bp = Blueprint("rules", __name__, url_prefix="/rules")
F = TypeVar("F", bound=Callable[..., Any])

SAMPLE_LINES = 20  # the newest lines of the raw topic a sample takes by default
MAX_SAMPLE_LINES = 200
MAX_PREVIEW_RECORDS = 200
SAMPLE_WAIT_S = 5.0  # how long reading a sample may take
PREVIEW_BUDGET_S = 5.0  # how long a preview (or a viewer's masked sample) may run in its process
PREVIEW_SLOTS = 2  # previews running at once (one per user)
log = logging.getLogger("dbus.console")

# Each operator's grammar keys as the editor shows them (spec §2.1); keys an entry has beyond these are kept.
FIELDS: dict[str, tuple[str, ...]] = {
    "flattenUms": ("ruleParamter",),
    "keyFilter": ("filterKey", "ruleOperate", "ruleType", "ruleParamter"),
    "toIndex": ("ruleScope", "ruleParamter"),
    "filter": ("ruleScope", "ruleOperate", "ruleType", "ruleParamter"),
    "trim": ("ruleScope", "ruleOperate", "ruleParamter"),
    "replace": ("ruleScope", "ruleType", "ruleParamter", "ruleOperate"),
    "split": ("ruleScope", "ruleType", "ruleParamter"),
    "subString": ("ruleScope", "subStart", "subStartType", "subEnd", "subEndType"),
    "concat": ("ruleScope", "ruleParamter"),
    "select": ("ruleScope",),
    "saveAs": ("ruleScope", "name", "type"),
    "prefixOrAppend": ("ruleScope", "ruleOperate", "ruleParamter"),
    "regexExtract": ("ruleScope", "ruleParamter"),
    "jsonPath": ("ruleScope", "ruleParamter"),
    "excludeField": (),
    "flattenJsonArray": ("ruleScope", "ruleParamter"),
}
assert set(FIELDS) == set(OPERATORS)


# ---------------------------------------------------------------- pure: the editor's groups


def editor_groups(doc: Any) -> list[dict[str, Any]]:
    """Stored groups (the export format, or the draft's rows as such) as the editor's: each rule's
    ``ruleGrammar`` JSON text parsed into its list of entries; ``active`` kept (default True)."""
    out = []
    for g in doc:
        rules = []
        for r in g.get("rules") or []:
            grammar = r.get("ruleGrammar", "[]")
            try:
                entries = json.loads(grammar) if isinstance(grammar, str) else grammar
            except ValueError:
                entries = grammar  # shown as it is; check_groups names it
            rules.append({"ruleTypeName": r.get("ruleTypeName"), "ruleGrammar": entries or []})
        out.append({"groupName": g.get("groupName"), "active": g.get("active", True), "rules": rules})
    return out


def check_groups(doc: Any) -> tuple[tuple[Group, ...], list[dict[str, Any]]]:
    """The editor's groups checked as publish checks each rule (``grammar.rule_from_json``): the groups
    that check (in order, ``active`` kept) and every problem, each ``{"group", "rule", "op", "message"}``
    (``rule`` 1-based, None for a problem of the group itself), the message naming the group, the rule's
    position, its operator, the entry and the parameter."""
    from dbuslib.logstore import group_name_problem

    if not isinstance(doc, list):
        return (), [_problem(None, None, None, "the rules must be a list of groups ({groupName, rules})")]
    groups: list[Group] = []
    problems: list[dict[str, Any]] = []
    seen: set[str] = set()
    for gi, g in enumerate(doc, 1):
        if not isinstance(g, dict):
            problems.append(_problem(None, None, None, f"group {gi}: not an object"))
            continue
        name = g.get("groupName")
        why = group_name_problem(name) if isinstance(name, str) else "is missing"
        if why or not isinstance(name, str):
            problems.append(_problem(name, None, None, f"group {gi}: groupName {name!r} {why}"))
            continue
        if name in seen:
            problems.append(_problem(name, None, None, f"group {name!r}: the name is given twice"))
        seen.add(name)
        listed, active = g.get("rules") or [], g.get("active", True)
        if not isinstance(listed, list) or not isinstance(active, bool):
            what = (
                f"rules must be a list of rules, not {kind(listed)}"
                if not isinstance(listed, list)
                else (f"active must be true or false, not {kind(active)}")
            )
            problems.append(_problem(name, None, None, f"group {name!r}: {what}"))
            continue
        rules, ok = [], True
        for ri, r in enumerate(listed, 1):
            op = r.get("ruleTypeName") if isinstance(r, dict) else None
            try:
                rules.append(rule_from_json(r, f"group {name!r} rule {ri}"))
            except RuleError as e:
                problems.append(_problem(name, ri, op, str(e)))
                ok = False
        if ok:
            groups.append(Group(name, tuple(rules), active=active))
    return tuple(groups), problems


def _problem(group: str | None, rule: int | None, op: str | None, message: str) -> dict[str, Any]:
    return {"group": group, "rule": rule, "op": op, "message": message}


def stored_rules(groups: tuple[Group, ...]) -> list[tuple[str, bool, str]]:
    """Checked groups as the draft stores them: ``(name, active, rules JSON)``."""
    from logprocessor.rules import rules_to_json

    return [(g.name, g.active, rules_to_json(g.rules)) for g in groups]


# ---------------------------------------------------------------- pure: the step-by-step preview


def group_preview(group: Group, line: str, masking: Masking | None = None) -> dict[str, Any]:
    """One group on one line: the rows after every rule (``operators.steps``) and the outcome:
    ``accepted`` (its rows), ``rejected`` (the rule that left no rows), ``broken`` (the rule that broke on
    the line and why: the processor sends such a line to the dead-letter topic)::

        {"group": "orders", "outcome": "rejected", "reason": "rule 2 (filter) leaves no rows: ...",
         "steps": [{"position": 1, "op": "toIndex", "rows": [["app-01", "..."]], "columns": null}, ...]}

    ``columns`` names the cells of the rows after saveAs (None before it); with ``masking`` (the source's),
    the masked columns' values there are masked as the processor publishes them, ``masked`` naming them."""
    from logprocessor.grammar import save_as_columns
    from logprocessor.operators import steps

    out: dict[str, Any] = {"group": group.name, "active": group.active, "steps": []}
    if not group.rules:
        return {**out, "outcome": "rejected", "reason": "the group has no rules (publish refuses it)"}
    columns = save_as_columns(group)
    names = [c.name for c in columns]
    plan = masking.plan() if masking is not None else None
    taken = steps(group, line)
    for s in taken:
        rows = _plain(s.rows)
        step: dict[str, Any] = {"position": s.position, "op": s.op, "rows": rows, "columns": None}
        step["error"] = s.error
        if s.op == "saveAs":
            where: list[int] = []
            if masking is not None:
                rows, where = mask_rows(plan, masking.schema, masking.table, columns, rows)
            step.update(rows=_plain(rows), columns=names, masked=[names[i] for i in where])
        out["steps"].append(step)
    last = taken[-1]
    at = f"rule {last.position} ({last.op})"
    if last.error is not None:
        return {**out, "outcome": "broken", "reason": f"{at} breaks on the line: {last.error}"}
    if not last.rows:
        return {**out, "outcome": "rejected", "reason": f"{at} leaves no rows: the group does not accept it"}
    return {**out, "outcome": "accepted", "reason": f"{len(last.rows)} row(s)"}


def preview(
    groups: tuple[Group, ...],
    records: list[str],
    settings: Any,
    *,
    raw: bool = False,
    masking: Masking | None = None,
    mark: Callable[[int, int], None] | None = None,
) -> dict[str, Any]:
    """Each sample record through the source's adapter (logprocessor/adapters.py; with ``raw`` a plain
    text line is wrapped as the type's message first, as ``dbus logrules test --raw``), then every line it
    gives through every group (``group_preview``)::

        {"records": [{"number": 1, "record": "...", "refused": null, "heartbeat": null,
                      "lines": [{"line": "...", "groups": [...], "table": "accepted by 'orders'"}]}],
         "summary": {"records": 3, "accepted": 1, "rejected": 1, "broken": 0, "refused": 1}}

    The groups run in order as the processor tries them; ``table`` says what the processor would do with
    the line (the first group that accepts it takes it; otherwise the unknown bucket). ``masking``: see
    ``group_preview``; ``mark(record number, group index)`` is called before each group runs on a line
    (where a preview over budget was, console/budget.py)."""
    from logprocessor.adapters import Adapted, KafkaRecord, adapt, as_record

    now_ms = int(time.time() * 1000)
    shown, tally = [], {"records": 0, "accepted": 0, "rejected": 0, "broken": 0, "refused": 0}
    for n, text in enumerate(records, 1):
        if not text.strip():
            continue
        tally["records"] += 1
        item: dict[str, Any] = {"number": n, "record": text, "refused": None, "heartbeat": None, "lines": []}
        shown.append(item)
        try:
            value = as_record(settings.log_type, text, "pasted") if raw else text
        except DbusError as e:
            item["refused"] = str(e)
            tally["refused"] += 1
            continue
        got = adapt(KafkaRecord(value.encode(), None, 0, n - 1, now_ms), settings)
        if not isinstance(got, Adapted):
            item["refused"] = f"{got.code}: {got.message.split(': ', 1)[-1]}"
            tally["refused"] += 1
            continue
        if got.heartbeat:
            item["heartbeat"] = got.host
            continue
        outcome = "rejected"
        for line in got.lines:
            results = []
            for gi, g in enumerate(groups):
                if mark is not None:
                    mark(n, gi)
                results.append(group_preview(g, line, masking))
            taker = next((r for r in results if r["outcome"] == "accepted"), None)
            broke = next((r for r in results if r["outcome"] == "broken"), None)
            if taker is not None:
                verdict, outcome = f"accepted by {taker['group']!r}", "accepted"
            elif broke is not None:
                verdict = f"a dead letter: group {broke['group']!r} {broke['reason']}"
                outcome = "broken" if outcome != "accepted" else outcome
            else:
                verdict = "accepted by no group: the unknown bucket"
            item["lines"].append({"line": line, "groups": results, "table": verdict})
        tally[outcome] += 1
    return {"records": shown, "summary": tally}


def preview_job(
    groups: tuple[Group, ...],
    records: list[str],
    settings: Any,
    raw: bool,
    masking: Masking,
    budget_ms: int | None = None,
    *,
    mark: Callable[[int, int], None],
) -> dict[str, Any]:
    """``preview`` as the preview's process runs it (console/budget.py), each regex within the source's
    ``processor.regex_budget_ms`` as the processor runs it: redacted for a viewer of a masking source
    (console/masked.py)."""
    from logprocessor.regexbudget import budget

    with budget(budget_ms):
        done = preview(groups, records, settings, raw=raw, masking=masking, mark=mark)
    return viewer_preview(done, groups, settings, raw, masking) if masking.redact else done


def _plain(rows: list[list[Any]]) -> list[list[Any]]:
    """Rows as JSON gives them to the page (saveAs's values: text, numbers, null)."""
    return [[v if v is None or isinstance(v, (str, int, float)) else str(v) for v in row] for row in rows]


# ---------------------------------------------------------------- pure: diff


def readable(groups_text: str) -> list[str]:
    """A version's groups (the export format's JSON text) one thing a line, for a diff: the group, each
    rule's position and operator, each grammar entry as compact JSON."""
    lines = []
    for g in json.loads(groups_text):
        state = "" if g.get("active", True) else " (inactive)"
        lines.append(f"group {g.get('groupName')!r}{state}")
        for i, r in enumerate(g.get("rules") or [], 1):
            lines.append(f"  {i:>2} {r.get('ruleTypeName')}")
            grammar = r.get("ruleGrammar", "[]")
            try:
                entries = json.loads(grammar) if isinstance(grammar, str) else grammar
            except ValueError:
                entries = [grammar]
            for e in entries or []:
                lines.append(f"       {json.dumps(e, ensure_ascii=False)}")
    return lines


def diff(a_text: str, b_text: str, a_name: str, b_name: str) -> list[str]:
    """The unified diff of two versions' groups (``readable``), named ``a_name`` and ``b_name``; no lines
    when they are equal."""
    return list(difflib.unified_diff(readable(a_text), readable(b_text), a_name, b_name, n=3, lineterm=""))


# ---------------------------------------------------------------- I/O: the store, the raw topic


def store() -> Any:
    """The meta store's log tables, one LogStore for the application (made, with its tables, once)."""
    from dbuslib.logstore import LogStore

    found = current_app.extensions.get("dbus_logstore")
    if found is None:
        found = LogStore(config().endpoints.meta_store.url.get_secret_value())
        found.create_schema()
        current_app.extensions["dbus_logstore"] = found
    return found


def rules_engine() -> Any:
    """What publishing asks about a table's groups: the JVM's rule engine on the configured jars
    (``rules_jvm.engine``; its JVM starts on the first publish), one for the application."""
    from logprocessor import rules_jvm

    found = current_app.extensions.get("dbus_rules_engine")
    if found is None:
        found = current_app.extensions["dbus_rules_engine"] = rules_jvm.engine(config())
    return found


def newest_records(cfg: DbusConfig, topic: str, n: int, wait_s: float = SAMPLE_WAIT_S) -> list[str]:
    """The newest ``n`` records of ``topic`` (every partition), oldest first by timestamp, read from each
    partition's end back ``n`` offsets and no longer than ``wait_s``; none when the topic does not exist."""
    from kafka import TopicPartition

    from dbuslib import kafka

    consumer = kafka.consumer(cfg.endpoints.kafka, enable_auto_commit=False, group_id=None)
    try:
        partitions = consumer.partitions_for_topic(topic)
        if not partitions:
            return []
        tps = [TopicPartition(topic, p) for p in sorted(partitions)]
        consumer.assign(tps)
        ends, starts = consumer.end_offsets(tps), consumer.beginning_offsets(tps)
        todo = {}
        for tp in tps:
            if ends[tp] > starts[tp]:
                consumer.seek(tp, max(starts[tp], ends[tp] - n))
                todo[tp] = ends[tp]
        got: list[tuple[int, int, int, bytes]] = []
        deadline = time.monotonic() + wait_s
        while todo and time.monotonic() < deadline:
            for tp, records in consumer.poll(timeout_ms=500, max_records=n * len(tps)).items():
                got += [(r.timestamp, r.partition, r.offset, r.value or b"") for r in records]
                if consumer.position(tp) >= todo.get(tp, 0):
                    todo.pop(tp, None)
        got.sort()
        return [v.decode("utf-8", errors="replace") for *_, v in got[-n:]]
    finally:
        consumer.close()


# ---------------------------------------------------------------- pages and endpoints


def _answers(view: F) -> F:
    """The store's and the rules' refusals as JSON naming what: 404 an unknown source or table, 400 a
    rule or draft that does not check, 409 a race with another publish, 503 an unreachable store or Kafka."""
    from dbuslib.logstore import ConflictError, NotFoundError

    @wraps(view)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        from sqlalchemy.exc import DBAPIError

        try:
            return view(*args, **kwargs)
        except NotFoundError as e:
            return jsonify({"error": str(e), "code": e.code}), 404
        except ConflictError as e:
            return jsonify({"error": str(e), "code": e.code}), 409
        except EndpointError as e:
            return jsonify({"error": str(e), "code": e.code}), 503
        except DBAPIError as e:
            return jsonify({"error": f"meta store: {getattr(e, 'orig', None) or e}"}), 503
        except DbusError as e:
            return jsonify({"error": str(e), "code": e.code}), 400

    return cast(F, wrapped)


def _source(ds: str) -> Any:
    cfg = config()
    if ds not in cfg.log_sources:
        abort(404, description=f"no log source {ds!r} (log sources: {', '.join(sorted(cfg.log_sources))})")
    return cfg.log_source(ds)


def _table(ds: str, table: str) -> Any:
    return store().need_table(ds, _source(ds).schema_name(ds), table)


def budget_of(app: Flask) -> Budget:
    """The app's previews' budget (console/budget.py), made once; its forkserver started then (in the
    background: ``dbus console`` calls this as it starts, so a first preview does not wait for it)."""
    with _made_lock:
        found = app.extensions.get("dbus_budget")
        if found is None:
            found = app.extensions["dbus_budget"] = Budget(PREVIEW_BUDGET_S, PREVIEW_SLOTS)
            found.warm()
        return cast(Budget, found)


def _sample_slots() -> Slots:
    """Samples read Kafka for up to SAMPLE_WAIT_S on a request thread: two at once, one per user."""
    with _made_lock:
        found = current_app.extensions.get("dbus_sample_slots")
        if found is None:
            found = current_app.extensions["dbus_sample_slots"] = Slots(PREVIEW_SLOTS, 1, "samples")
        return cast(Slots, found)


_made_lock = threading.Lock()


def _masking(ds: str, table: str) -> Masking:
    """The source's masking for the editor's ``table``; for a viewer of a source that masks columns, with
    every masked table's published and draft groups (what ``console.masked`` redacts with)."""
    src = _source(ds)
    schema = src.schema_name(ds)
    if current_user.is_operator or not src.masking:
        return Masking(src.masking, schema, table)
    plan = compile_rules(src.masking)
    known = []
    for t in store().tables(ds, schema):
        if plan.rules_for(schema, t.table) is None:
            continue
        docs = [{"groupName": g.name, "rules": json.loads(g.rules)} for g in store().draft(t)]
        found = store().published(t) if t.version else None
        if found is not None:
            docs += json.loads(found.groups)
        groups, _ = check_groups([{**d, "active": True} for d in editor_groups(docs)])
        known.append((t.table, groups))
    return Masking(src.masking, schema, table, redact=True, known=tuple(known))


def _budgeted(fn: Callable[..., Any], *args: Any, where: Callable[[tuple[int, int]], str]) -> Any:
    """``fn(*args)`` in the budget's process: its answer, or a refusal as JSON: 422 over budget (where it
    was: ``where(mark)``), 503 busy, 500 when it raised (logged)."""
    try:
        return budget_of(current_app).run(current_user.name, fn, *args)
    except OverBudget as e:
        reason = (
            f"over budget: {where(e.where)} did not finish within {e.seconds:g} s (a regex that backtracks?)"
        )
        return jsonify({"error": reason, "over_budget": True}), 422
    except Busy as e:
        return jsonify({"error": str(e)}), 503, {"Retry-After": "2"}
    except Failed as e:
        log.error("%s %s: %s", request.method, request.path, e)
        return jsonify({"error": "the preview failed (the reason is in the console's log)"}), 500


@bp.route("/")
@viewer_required
def index() -> Any:
    """Every log source and its tables (status, version, groups), each a link to its editor."""
    cfg, sources, problem = config(), [], None
    try:
        for ds in sorted(cfg.log_sources):
            schema = cfg.log_source(ds).schema_name(ds)
            tables = []
            for t in store().tables(ds, schema):
                groups = store().draft(t)
                tables.append(
                    {
                        "table": t.table,
                        "status": t.status,
                        "version": t.version,
                        "groups": f"{sum(g.active for g in groups)}/{len(groups)}",
                        "columns": ", ".join(f"{c['name']} {c['type']}" for c in json.loads(t.columns)),
                    }
                )
            sources.append({"ds": ds, "type": cfg.log_source(ds).type, "tables": tables})
    except Exception as e:  # the page still shows, saying why it has no tables
        problem = f"meta store: {getattr(e, 'orig', None) or e}"
    return render_template("rules.html", sources=sources, problem=problem)


@bp.route("/<ds>/<table>")
@viewer_required
def editor(ds: str, table: str) -> Any:
    src = _source(ds)
    return render_template(
        "rules_editor.html", ds=ds, table=table, log_type=src.type, sample_lines=SAMPLE_LINES
    )


@bp.route("/api/<ds>/<table>")
@viewer_required
@_answers
def api_table(ds: str, table: str) -> Any:
    """The table, its draft (the editor's groups), its published versions and the operators' fields."""
    t = _table(ds, table)
    draft = [
        {"groupName": g.name, "active": g.active, "rules": json.loads(g.rules)} for g in store().draft(t)
    ]
    versions = [
        {
            "version": v.version,
            "published": datetime.fromtimestamp(v.published_ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S UTC"),
            "columns": json.loads(v.columns),
            "columns_changed": v.columns_changed,
        }
        for v in store().versions(t)
    ]
    return {
        "where": t.where,
        "source": ds,
        "table": t.table,
        "status": t.status,
        "version": t.version,
        "columns": json.loads(t.columns),
        "log_type": _source(ds).type,
        "draft": editor_groups(draft),
        "versions": versions,
        "operators": list(OPERATORS),
        "fields": FIELDS,
    }


@bp.route("/api/<ds>/<table>/version/<int:version>")
@viewer_required
@_answers
def api_version(ds: str, table: str, version: int) -> Any:
    """A published version's groups, as the editor shows them (to load into the editor)."""
    t = _table(ds, table)
    found = store().published(t, version)
    if found is None:
        abort(404, description=f"{t.where} has no published version {version}")
    return {"version": version, "groups": editor_groups(json.loads(found.groups))}


@bp.route("/api/<ds>/<table>/sample")
@viewer_required
@_answers
def api_sample(ds: str, table: str) -> Any:
    """The newest ``n`` records of the source's raw topic (the original's "sample lines")."""
    src = _source(ds)
    n = max(1, min(request.args.get("n", SAMPLE_LINES, type=int) or SAMPLE_LINES, MAX_SAMPLE_LINES))
    topic = src.topics.name("raw", ds)
    masking = _masking(ds, table)
    try:
        with _sample_slots().take(current_user.name):
            records = newest_records(config(), topic, n)
    except Busy as e:
        return jsonify({"error": str(e)}), 503, {"Retry-After": "2"}
    if not masking.redact:
        return {"topic": topic, "records": records}
    shown = _budgeted(viewer_sample, records, _settings(src), masking, where=lambda m: f"record {m[0]}")
    if not isinstance(shown, dict):
        return shown
    note = "the source masks columns: their values are shown masked"
    if shown["withheld"]:
        note += f"; {shown['withheld']} record(s) withheld: " + "; ".join(shown["reasons"])
    return {"topic": topic, **shown, "masked": note}


def _settings(src: Any) -> Any:
    """The source's adapter settings as ``dbus logrules test`` has them (a host for log_json lines; a
    relative ``heartbeat.file`` placed against the configuration's folder, as the processor places it)."""
    from logprocessor.adapters import SAMPLE_HOST, AdapterSettings

    settings = AdapterSettings.of(src, config().path.parent)
    if settings.log_type == "log_json" and not settings.json_host:
        settings = replace(settings, json_host=SAMPLE_HOST)
    return settings


@bp.route("/api/<ds>/<table>/preview", methods=["POST"])
@viewer_required
@_answers
def api_preview(ds: str, table: str) -> Any:
    """The editor's groups (``groups``; only ``group`` when given) on the sample ``records`` (text each),
    in the budget's process (console/budget.py); for a viewer of a masking source, redacted."""
    body = json_object(groups=LIST, records=LIST, raw=BOOL, group=TEXT)
    groups, problems = check_groups(body.get("groups") or [])
    if body.get("group"):
        groups = tuple(g for g in groups if g.name == body["group"])
    records = body.get("records") or []
    wrong = next((i for i, r in enumerate(records) if not isinstance(r, str)), None)
    if wrong is not None:
        abort(400, description=f"records[{wrong}]: must be text, not {kind(records[wrong])}")
    records = records[:MAX_PREVIEW_RECORDS]
    src = _source(ds)
    settings, masking = _settings(src), _masking(ds, table)

    def where(mark: tuple[int, int]) -> str:
        n, gi = mark
        return f"record {n}, group {groups[gi].name!r}" if 0 <= gi < len(groups) else f"record {n}"

    raw, budget_ms = bool(body.get("raw")), src.processor.regex_budget_ms
    done = _budgeted(preview_job, groups, records, settings, raw, masking, budget_ms, where=where)
    return {**done, "problems": problems} if isinstance(done, dict) else done


@bp.route("/api/<ds>/<table>/check", methods=["POST"])
@viewer_required
def api_check(ds: str, table: str) -> Any:
    """Every problem of the editor's groups (what saving would refuse)."""
    _, problems = check_groups(json_object(groups=LIST).get("groups") or [])
    return {"problems": problems}


def _save(t: Any, doc: Any) -> tuple[Group, ...]:
    groups, problems = check_groups(doc)
    if problems:
        raise RuleError("; ".join(p["message"] for p in problems))
    store().add_groups(t, stored_rules(groups), replace=True)
    audit(
        "rules-save-draft",
        source=t.ds,
        table=t.table,
        groups=[g.name for g in groups],
        active=[g.name for g in groups if g.active],
    )
    return groups


@bp.route("/api/<ds>/<table>/draft", methods=["POST"])
@operator_required
@_answers
def api_save(ds: str, table: str) -> Any:
    """Make the editor's groups the table's draft (all of it: groups left out are removed)."""
    t = _table(ds, table)
    groups = _save(t, json_object(groups=LIST).get("groups") or [])
    return {"saved": [g.name for g in groups], "message": f"{t.where}: draft saved, {len(groups)} group(s)"}


@bp.route("/api/<ds>/<table>/publish", methods=["POST"])
@operator_required
@_answers
def api_publish(ds: str, table: str) -> Any:
    """Save the editor's groups as the draft (when given), publish its active groups as a new version
    (logprocessor/rules.publish: refused with the reason otherwise) and send the processor the reload."""
    from logprocessor import reload as logreload
    from logprocessor import rules

    body = json_object(groups=LIST)
    t = _table(ds, table)
    if body.get("groups") is not None:
        _save(t, body["groups"])
    done = rules.publish(store(), t, rules_engine())
    cols = ", ".join(f"{c.name} {c.type}" for c in done.columns)
    if not done.published:
        return {
            "version": done.version,
            "published": False,
            "reload": None,
            "message": f"{t.where}: the active groups equal version {done.version}: nothing to publish",
        }
    audit(
        "rules-publish",
        source=ds,
        table=t.table,
        version=done.version,
        groups=list(done.groups),
        columns_changed=done.columns_changed,
    )
    sent = logreload.send(config(), ds, table=t.table, version=done.version)
    change = "new columns" if done.columns_changed else "same columns"
    return {
        "version": done.version,
        "published": True,
        "reload": sent,
        "message": f"{t.where}: version {done.version} published; {change}: {cols}; reload {sent} sent",
    }


@bp.route("/api/<ds>/reload/<int:request_id>")
@viewer_required
@_answers
def api_reload(ds: str, request_id: int) -> Any:
    """The log processor's answer to reload ``request_id`` (logprocessor/reload.py), or ``waiting``."""
    from dbuslib import zk
    from logprocessor import reload
    from logprocessor import reload as logreload

    cfg = config()
    _source(ds)
    client = zk.client(cfg.endpoints.zookeeper)
    try:
        reply = reload.read_reply(client, cfg, ds)
    finally:
        client.stop()
        client.close()
    if reply is None or reply.get("request_id") != request_id:
        return {"state": "waiting", "message": f"reload {request_id}: no answer from the log processor yet"}
    state, message = logreload.describe(reply)
    return {"state": state, "message": message}


@bp.route("/api/<ds>/<table>/diff")
@viewer_required
@_answers
def api_diff(ds: str, table: str) -> Any:
    """The diff of versions ``a`` and ``b`` (a number, or ``draft``: the stored draft's groups)."""
    t = _table(ds, table)

    def text(which: str) -> tuple[str, str]:
        if which == "draft":
            rows = store().draft(t)
            doc = [
                {"groupName": g.name, "rules": json.loads(g.rules), **({} if g.active else {"active": False})}
                for g in rows
            ]
            return json.dumps(doc), "draft"
        if not which.isdigit():
            abort(400, description=f"version {which!r} is neither a number nor 'draft'")
        found = store().published(t, int(which))
        if found is None:
            abort(404, description=f"{t.where} has no published version {which}")
        return found.groups, f"version {which}"

    a_text, a_name = text(request.args.get("a", ""))
    b_text, b_name = text(request.args.get("b", ""))
    return {"a": a_name, "b": b_name, "lines": diff(a_text, b_text, a_name, b_name)}
