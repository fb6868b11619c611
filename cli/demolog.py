"""The demo's log step (issue 16; docs/logs.md, The demo's log step): an application log file written live,
shipped by rsyslog, structured by the log processor into two tables and the unknown bucket, printed as UMS.

1. ``ensure_rules``: the log source's two demo tables, ``app_orders`` and ``http_access``, exist in the meta
   store, their rule files (conf/demo/logrules/<table>.json, the original's export format) are their draft
   and are published (``dbus logrules add-table``, ``import --replace --active``, ``publish``); rules equal
   to the version in force publish nothing, so a second demo changes nothing.
2. The log processor starts as an operator starts it (``dbus submit logprocessor --source applog``).
3. ``run``: a writer appends lines to ``demo.log`` beside the source's watched files for DEMO_LOG_SECONDS at
   DEMO_LOG_LINES_PER_S: order lines (``app_orders``), HTTP access lines (``http_access``) and lines no group
   accepts (the unknown bucket); rsyslog ships each as one record to the raw topic. Every line carries a
   request id ``req=<run>-<n>``, and the step waits until each of this run's ids is a row of its table or a
   line of the unknown topic (what earlier runs left in the topics is not counted), then prints one UMS
   message of each table.
"""

from __future__ import annotations

import bisect
import fnmatch
import json
import math
import os
import random
import re
import threading
import time
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from cli.stages import Stages
from dbuslib import kafka
from dbuslib.config import DbusConfig
from dbuslib.errors import StackError

RULES_DIR = Path(__file__).resolve().parent.parent / "conf" / "demo" / "logrules"
LOG_SOURCE = "applog"
TABLES = ("app_orders", "http_access")  # the kinds of line the writer makes, each a table's; then the rest
UNKNOWN = "unknown"
DEMO_LOG_SECONDS = float(os.environ.get("DEMO_LOG_SECONDS", "5"))
DEMO_LOG_LINES_PER_S = int(os.environ.get("DEMO_LOG_LINES_PER_S", "200"))
FILE_NAME = "demo.log"
REQ = re.compile(r" req=(\S+)")


def rule_file(table: str) -> Path:
    return RULES_DIR / f"{table}.json"


def ensure_rules(cfg: DbusConfig, ds: str) -> list[str]:
    """Each demo table exists, its rule file is its draft (active) and is the version in force; returns a
    line per table saying which version is in force and whether this call published it."""
    from dbuslib.logstore import LogStore
    from logprocessor import rules, rules_jvm

    src = cfg.log_source(ds)
    schema = src.schema_name(ds)
    store = LogStore(cfg.endpoints.meta_store.url.get_secret_value())
    said = []
    try:
        store.create_schema()
        for table in TABLES:
            path = rule_file(table)
            t, created = store.add_table(ds, schema, table)
            rules.import_groups(
                store, t, path.read_text(encoding="utf-8"), str(path), replace=True, active=True
            )
            done = rules.publish(store, t, rules_jvm.engine(cfg))
            what = "published" if done.published else "in force"
            state = (
                "" if t.status == "ok" else f" (status {t.status}: the processor gives it heartbeats only)"
            )
            said.append(
                f"{t.where}: {'created, ' if created else ''}version {done.version} {what}, rules "
                f"{path.relative_to(RULES_DIR.parent.parent.parent)}{state}"
            )
    finally:
        store.dispose()
    return said


def log_file(cfg: DbusConfig, ds: str) -> Path:
    """``demo.log`` in the folder of the first of the source's ``shipper.files`` globs that matches it."""
    from logprocessor.shipper import globs

    src = cfg.log_source(ds)
    for g in globs(cfg, src):
        candidate = Path(g).parent / FILE_NAME
        if fnmatch.fnmatch(str(candidate), g):
            return candidate
    msg = f"log source {ds}: no glob of shipper.files {list(src.shipper.files)} matches a file {FILE_NAME}"
    raise StackError(msg)


def own_source_config(cfg: DbusConfig, ds: str, home: Path, processor: dict | None = None) -> DbusConfig:
    """A copy of ``cfg`` in ``home/dbus.yaml`` whose only log source is ``ds`` (``log_rsyslog``, its
    ``processor`` settings), shipped from ``home/logs/*.log``, checkpoints under ``home``: for a test or a
    bench with a source of its own, shipped by an rsyslogd of its own (``cli.stages.private_rsyslog``)."""
    import yaml

    from dbuslib.config import load_config, raw_config

    raw = raw_config(cfg.path)  # its relative paths made absolute, its ``extends`` followed
    spark = raw.setdefault("spark", {})
    spark["jars_file"] = str(cfg.resolve(Path(cfg.spark.jars_file)))  # the default's too (relative)
    spark["checkpoint_root"] = str(home / "checkpoints")
    raw["log_sources"] = {
        ds: {
            "type": "log_rsyslog",
            "shipper": {"files": [str(home / "logs" / "*.log")]},
            "processor": processor or {},
        }
    }
    (home / "logs").mkdir(parents=True, exist_ok=True)
    path = home / "dbus.yaml"
    path.write_text(yaml.safe_dump(raw))
    return load_config(path)


def drop_own_source(cfg: DbusConfig, ds: str) -> None:
    """What a source of ``own_source_config`` left: its topics deleted, its tables and rules dropped from
    the meta store."""
    from dbuslib.logstore import LogStore

    src = cfg.log_source(ds)
    names = [src.topics.name(k, ds) for k in ("raw", "ctrl")] + list(topics_of(cfg, ds).values())
    kafka.delete_topics(cfg.endpoints.kafka, sorted(set(names)))
    store = LogStore(cfg.endpoints.meta_store.url.get_secret_value())
    try:
        store.drop_source(ds)
    finally:
        store.dispose()


def topics_of(cfg: DbusConfig, ds: str) -> dict[str, str]:
    """Kind (a table, ``unknown``, ``raw``, ``dead_letter``) -> topic. The tables share one topic unless
    ``topics.result`` names the ``{table}`` (the default, ``{ds}.{schema}.result``, does not)."""
    src = cfg.log_source(ds)
    schema = src.schema_name(ds)
    out = {t: src.topics.name("result", ds, schema, t) for t in TABLES}
    out |= {k: src.topics.name(k, ds) for k in (UNKNOWN, "raw", "dead_letter")}
    return out


# ---------------------------------------------------------------- the writer


def _line(kind: str, n: int, req: str, rnd: random.Random) -> str:
    now = datetime.now(UTC)
    stamp = now.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]
    order = 500_000 + n
    if kind == "app_orders":
        level = rnd.choice(("INFO", "INFO", "WARN", "ERROR"))
        amount = rnd.randint(100, 99999) / 100
        return f"{stamp} | [{level}] | OrderService order={order} amount={amount:.2f} req={req}"
    if kind == "http_access":
        method, status = rnd.choice((("GET", 200), ("GET", 200), ("POST", 201), ("GET", 404)))
        return (
            f"10.0.{rnd.randint(0, 9)}.{rnd.randint(1, 254)} - - [{now.strftime('%Y-%m-%dT%H:%M:%S+00:00')}] "
            f'"{method} /api/orders/{order} HTTP/1.1" {status} {rnd.randint(64, 9999)} '
            f"rt={rnd.randint(1, 250) / 1000:.3f} req={req}"
        )
    if n % 2:
        return f"{stamp} | [INFO] | PaymentService paid={order} req={req}"
    return f"{stamp} | [DEBUG] | CacheService refreshed {rnd.randint(1, 500)} entries req={req}"


@dataclass
class Written:
    """What the writer appended: the request ids of each kind of line, and when they were in the file."""

    path: Path
    run: str
    ids: dict[str, set[str]] = field(default_factory=lambda: {k: set() for k in (*TABLES, UNKNOWN)})
    seconds: float = 0.0
    flushed: list[tuple[int, float]] = field(default_factory=list)  # (lines so far, epoch s) per flush

    @property
    def lines(self) -> int:
        return sum(len(v) for v in self.ids.values())

    def written_at(self, n: int) -> float:
        """Epoch seconds when line ``n`` (of ``req=<run>-<n>``) was in the file: the flush after it."""
        return self.flushed[bisect.bisect_right(self.flushed, (n, math.inf))][1]


def write_lines(path: Path, seconds: float, per_s: int, run: str) -> Written:
    """Appends lines to ``path`` for ``seconds`` at ``per_s`` (see ``append``)."""
    out = Written(path, run)
    append(out, seconds, per_s)
    return out


def append(
    out: Written, seconds: float, per_s: int, stop: threading.Event | None = None, every_s: float = 0.05
) -> None:
    """Appends lines to ``out.path`` at ``per_s`` until ``seconds`` have passed or ``stop`` is set, flushed
    every ``every_s`` (rsyslog reads them as they come): of every 5, 2 order lines, 2 access lines, 1 line
    no group accepts. ``out`` grows as they are written (another thread may read ``out.lines``)."""
    out.path.parent.mkdir(parents=True, exist_ok=True)
    rnd = random.Random(out.run)
    kinds = ("app_orders", "app_orders", "http_access", "http_access", UNKNOWN)
    n = 0
    start = time.monotonic()
    with out.path.open("a", encoding="utf-8") as f:
        while time.monotonic() - start < seconds and not (stop and stop.is_set()):
            due = int((time.monotonic() - start) * per_s) + 1
            while n < due:
                kind = kinds[n % len(kinds)]
                req = f"{out.run}-{n:06d}"
                f.write(_line(kind, n, req, rnd) + "\n")
                out.ids[kind].add(req)
                n += 1
            f.flush()
            out.flushed.append((n, time.time()))
            time.sleep(max(0.0, every_s - (time.monotonic() - start) % every_s))
    out.seconds = time.monotonic() - start


# ---------------------------------------------------------------- what arrived


@dataclass
class Arrived:
    """This run's lines as they are in the topics: request ids per table and in the unknown bucket, the
    first message of each table, shipped records, dead letters."""

    ids: dict[str, set[str]] = field(default_factory=lambda: {k: set() for k in (*TABLES, UNKNOWN)})
    rows: dict[str, int] = field(default_factory=lambda: dict.fromkeys((*TABLES, UNKNOWN), 0))
    first: dict[str, bytes] = field(default_factory=dict)
    shipped: int = 0
    dead_letters: int = 0
    # every copy of a line, by request id: (kind, the row by field name) for a table, (UNKNOWN, the record
    # read from the unknown topic); and the raw records that shipped it: (partition, offset, the record)
    copies: dict[str, list[tuple[str, dict]]] = field(default_factory=dict)
    records: dict[str, list[tuple[int, int, dict]]] = field(default_factory=dict)

    def complete(self, written: Written) -> bool:
        return all(self.ids[k] >= written.ids[k] for k in written.ids)


def _run_req(text: str, run: str) -> str | None:
    m = REQ.search(text)
    return m.group(1) if m and m.group(1).startswith(f"{run}-") else None


def arrived(cfg: DbusConfig, ds: str, since: dict, run: str) -> Arrived:
    """What the topics hold of run ``run`` after the offsets ``since``."""
    import base64

    topics = topics_of(cfg, ds)
    kind_of = {v: k for k, v in topics.items() if k not in TABLES}
    kind_of |= dict.fromkeys((topics[t] for t in TABLES), "table")
    out = Arrived()
    for r in kafka.read_range(cfg.endpoints.kafka, list(dict.fromkeys(topics.values())), since):
        kind = kind_of[r.topic]
        if kind == "table":
            m = json.loads(r.value)
            names = [f["name"] for f in m.get("schema", {}).get("fields") or []]
            if m.get("protocol", {}).get("type") != "data_increment_data" or "req_id" not in names:
                continue  # a heartbeat, a termination
            kind = m["schema"]["namespace"].split(".")[3]  # type.ds.schema.table.version.host.0
            if kind not in TABLES:
                continue
            req_at = names.index("req_id")
            mine = [t["tuple"] for t in m["payload"] if str(t["tuple"][req_at]).startswith(f"{run}-")]
            if mine:
                out.first.setdefault(kind, r.value)
                out.ids[kind] |= {t[req_at] for t in mine}
                out.rows[kind] += len(mine)
            for t in mine:
                out.copies.setdefault(t[req_at], []).append((kind, dict(zip(names, t, strict=True))))
        elif kind in (UNKNOWN, "raw"):
            try:
                record = json.loads(r.value)
            except ValueError:
                continue
            req = _run_req(str(record.get("message", "")), run) if isinstance(record, dict) else None
            if req is None:
                continue
            if kind == "raw":
                out.shipped += 1
                out.records.setdefault(req, []).append((r.partition, r.offset, record))
            else:
                out.first.setdefault(kind, r.value)
                out.ids[kind].add(req)
                out.rows[kind] += 1
                out.copies.setdefault(req, []).append((kind, record))
        else:
            letter = json.loads(r.value)
            raw = base64.b64decode(letter.get("value_base64") or b"")
            if _run_req(raw.decode(errors="replace"), run):
                out.dead_letters += 1
    return out


def show(value: bytes) -> str:
    """A table's UMS message: its type, namespace, tuples and the first tuple by field name."""
    m = json.loads(value)
    names = [f["name"] for f in m["schema"]["fields"]]
    first = dict(zip(names, m["payload"][0]["tuple"], strict=True))
    return (
        f"   {m['protocol']['type']} {m['schema']['namespace']}: {len(m['payload'])} tuple(s)\n"
        f"     first: {json.dumps(first, ensure_ascii=False)[:400]}"
    )


# ---------------------------------------------------------------- the step


@dataclass
class Outcome:
    written: Written
    got: Arrived

    @property
    def ok(self) -> bool:
        """Every line in its place, once: its table's rows or the unknown bucket, no dead letter."""
        exact = all(self.got.ids[k] == self.written.ids[k] for k in self.written.ids)
        once = all(self.got.rows[k] == len(self.got.ids[k]) for k in self.got.ids)
        return exact and once and self.got.dead_letters == 0

    def summary(self, ds: str) -> str:
        w, g = self.written, self.got
        counts = ", ".join(f"{len(g.ids[t])} in {t}" for t in TABLES)
        if self.ok:
            return (
                f"demo: OK, {ds}: {w.lines} log lines written live, shipped by rsyslog, structured: "
                f"{counts}, {len(g.ids[UNKNOWN])} in the unknown bucket, 0 dead letters"
            )
        expected = ", ".join(f"{len(w.ids[k])} {k}" for k in w.ids)
        return (
            f"demo: FAILED: {ds}: of {w.lines} log lines ({expected}): {counts}, "
            f"{len(g.ids[UNKNOWN])} in the unknown bucket ({sum(g.rows.values())} rows and lines in all), "
            f"{g.dead_letters} dead letters (see the log processor's log)"
        )


def run(
    cfg: DbusConfig,
    ds: str,
    stages: Stages,
    seconds: float = DEMO_LOG_SECONDS,
    per_s: int = DEMO_LOG_LINES_PER_S,
    timeout: float = 300,
) -> Outcome:
    """The log processor of ``stages`` (started) ready, lines written for ``seconds``, and every one
    waited for in its table or the unknown bucket; prints what arrived."""
    stages.wait_ready("logprocessor", timeout=timeout)
    topics = topics_of(cfg, ds)
    since = kafka.end_offsets(cfg.endpoints.kafka, list(topics.values()))
    run_id = uuid.uuid4().hex[:8]
    path = log_file(cfg, ds)
    written = write_lines(path, seconds, per_s, run_id)  # shipped and processed as they are written
    shown = path.relative_to(Path.cwd()) if path.is_relative_to(Path.cwd()) else path
    print(
        f"   {written.lines} lines appended to {shown} in {written.seconds:.1f}s, "
        f"request ids req={run_id}-*: " + ", ".join(f"{len(written.ids[k])} {k}" for k in (*TABLES, UNKNOWN)),
        flush=True,
    )
    deadline = time.monotonic() + timeout
    while True:
        stages.check_alive()
        got = arrived(cfg, ds, since, run_id)
        if got.complete(written) or got.dead_letters:
            break
        if time.monotonic() > deadline:
            hint = " (is rsyslog running? make stack-up)" if got.shipped < written.lines else ""
            msg = (
                f"{ds}: not every log line of run {run_id} arrived in {timeout:.0f}s: {got.shipped} of "
                f"{written.lines} shipped to {topics['raw']}{hint}; in their place: "
                + ", ".join(f"{len(got.ids[k])} of {len(written.ids[k])} {k}" for k in written.ids)
                + f" (see {stages.log('logprocessor')})"
            )
            raise TimeoutError(msg)
        time.sleep(0.5)
    print(f"   rsyslog      -> {topics['raw']}: {got.shipped} records")
    for t in TABLES:
        print(f"   logprocessor -> {topics[t]}: {got.rows[t]} rows of {t}")
        if t in got.first:
            print(show(got.first[t]))
    print(f"   logprocessor -> {topics[UNKNOWN]}: {got.rows[UNKNOWN]} lines no group accepts")
    if UNKNOWN in got.first:
        print(f"     first: {got.first[UNKNOWN].decode(errors='replace').strip()[:400]}")
    print(f"   logprocessor -> {topics['dead_letter']}: {got.dead_letters} dead letters")
    return Outcome(written, got)
