"""The log processor: a log source's raw topic -> a UMS topic per table, the unknown bucket, dead letters
(docs/logs.md).

Usage: dbus submit logprocessor --source applog
   or: mapfile -t args < <(dbus spark args --stage logprocessor --source applog)
       spark-submit "${args[@]}" logprocessor/main.py --config conf/dbus.yaml --source applog
           [--max-offsets-per-trigger N] [--available-now]

The published rules of the source's tables (``dbus logrules publish``) run in the query, in the JVM's rule
engine (logprocessor/rules_jvm.py). A ``LOG_PROCESSOR_RELOAD_CONFIG`` (sent by ``dbus logrules publish``)
makes the driver load the new rules and ask the engine to check them: refused with the rule named (the running
rules stay), or applied from the switch offsets it answers by restarting the query from its checkpoint
(logprocessor/reload.py), the lines before them keeping the old rules when the restarted query reads them
again (logprocessor/switch.py). The query is named ``logprocessor_<ds>`` and checkpoints under
``<spark.checkpoint_root>/logprocessor/<ds>``.

Exit codes (``dbuslib.errors.exit_code``): 0 stopped (SIGTERM/SIGINT, or ``--available-now`` drained the
topic); 2 bad configuration or published rules the engine refuses; 3 Kafka, ZooKeeper or the meta store
unreachable; 1 the query failed (``logprocessor: LOG_PROCESS_FAILED: <ds>: <error>``); 5 its Spark JVM
died; 6 its configuration file was removed (dbuslib/lifecycle.py, docs/errors.md).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import threading
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # a file run by spark-submit: packages come from the repo, not this folder
    sys.path[0] = str(Path(__file__).resolve().parent.parent)

from dbuslib import stagemain
from dbuslib.config import DbusConfig
from dbuslib.errors import DbusError
from ums.errors import UmsError

log = logging.getLogger("logprocessor")

FAILED = "LOG_PROCESS_FAILED"
IDLE_WAIT_S = 10.0  # how long a reload waits for the running batch to end before stopping the query


def load_rules(cfg: DbusConfig, ds: str) -> Any:
    """The source's published rule set, from the meta store."""
    from dbuslib.logstore import LogStore
    from logprocessor.rules import load_rule_set

    store = LogStore(cfg.endpoints.meta_store.url.get_secret_value())
    try:
        store.create_schema()
        return load_rule_set(store, ds, cfg.log_source(ds).schema_name(ds))
    finally:
        store.dispose()


def check_rules(rules: Any, jvm: Any) -> None:
    """Refuses (``RuleError`` naming group, rule and operator) a rule set the engine would fail on every line
    of a group: asked of the engine itself, in the query's JVM (``jvm``: py4j's view), as publishing asked it
    (logprocessor/rules_jvm.py). A rule set published before this check, or by hand, stops here."""
    from logprocessor.rules_jvm import problems_in, refuse, ruleset_json

    refuse(problems_in(jvm, ruleset_json(rules.tables)))


def end_offsets(query: Any) -> dict[int, int]:
    """Per partition, the offset after the last batch the query finished (its last progress's end)."""
    progress = query.lastProgress
    if not progress or not progress.get("sources"):
        return {}
    end = progress["sources"][0].get("endOffset")
    if isinstance(end, str):
        end = json.loads(end)
    if not isinstance(end, dict):
        return {}
    [offsets] = end.values() if len(end) == 1 else [{}]
    return {int(p): int(o) for p, o in offsets.items()}


def log_end(cfg: DbusConfig, topic: str, attempts: int = 3) -> dict[int, int] | None:
    """Per partition, the end of ``topic`` now: a query stopped before this call read nothing at or after it,
    not even in a batch its stop interrupted, whose end no log may hold (None: Kafka did not answer)."""
    from dbuslib import kafka

    for attempt in range(attempts):
        try:
            ends = kafka.end_offsets(cfg.endpoints.kafka, [topic])
            return {tp.partition: int(o) for tp, o in ends.items()}
        except Exception as e:
            log.warning("%s: the end offsets of %s (attempt %d): %s", topic, topic, attempt + 1, e)
            time.sleep(1.0)
    return None


def stop_between_batches(query: Any, wait_s: float = IDLE_WAIT_S) -> None:
    """Stops ``query`` when no batch is running (up to ``wait_s``: then whatever runs is interrupted, and
    redone by the next query from the checkpoint)."""
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        try:
            if not query.status.get("isTriggerActive", False):
                break
        except Exception:
            break
        time.sleep(0.005)
    query.stop()


def released(session: Any, query: Any, wait_s: float = 60.0) -> None:
    """Returns once ``query``'s name is free in ``session`` for the next query: a query that ended may stay
    registered as active for a moment (a real-time query did, and the next start failed: "a query with that
    name is already active"). ``stop()`` joins the query's thread; then the registry is polled."""
    query.stop()
    deadline = time.monotonic() + wait_s
    while any(q.name == query.name for q in session.streams.active):
        if time.monotonic() > deadline:
            msg = f"query {query.name} still active {wait_s:g}s after it stopped"
            raise RuntimeError(msg)
        time.sleep(0.05)


def run(cfg: DbusConfig, ds: str, max_offsets: int, available_now: bool) -> int:
    from dbuslib import kafka, spark, stagemetrics
    from dbuslib.lifecycle import Lifecycle
    from dbuslib.logstore import LogStore
    from dbuslib.retry import RetryPolicy
    from logprocessor import job
    from logprocessor.metrics import BatchCounts
    from logprocessor.reload import ReloadListener
    from logprocessor.switch import (
        Earlier,
        committed_end,
        passed,
        planned_end,
        start_offsets,
        still_needed,
        switch_at,
    )
    from logprocessor.termination import HostNotes, end_old_versions, versions_of

    src = cfg.log_source(ds)
    rules = load_rules(cfg, ds)
    raw, ctrl = src.topics.name("raw", ds), src.topics.name("ctrl", ds)
    kafka.ensure_topics(
        cfg.endpoints.kafka,
        [raw, ctrl, *job.output_topics(cfg, ds, rules)],
        partitions=src.topics.partitions,
        replication_factor=src.topics.replication_factor,
    )
    with Lifecycle("logprocessor", ds, cfg.path, zookeeper=cfg.endpoints.zookeeper) as life:
        session = spark.stage_session(cfg, job.query_name(ds), src.processor, [raw], available_now)
        jvm = session.sparkContext._jvm
        check_rules(rules, jvm)
        running: dict[str, Any] = {}
        switch = threading.Event()

        def ask_switch() -> None:
            switch.set()
            query = running.get("query")
            if query is not None:
                threading.Thread(target=stop_between_batches, args=(query,), daemon=True).start()

        listener = None
        if not available_now:
            listener = ReloadListener(
                cfg,
                ds,
                lambda: load_rules(cfg, ds),
                lambda r: check_rules(r, jvm),
                ask_switch,
                rules,
            ).start()
        checkpoint = spark.checkpoint(cfg, "logprocessor", ds)
        counts = BatchCounts(ds, src.schema_name(ds))  # rows since each heartbeat, kept across reloads
        store = LogStore(cfg.endpoints.meta_store.url.get_secret_value(), RetryPolicy.of(cfg))
        notes = HostNotes(versions_of(rules.tables))  # the hosts of each table version, for its termination

        # after a reload, the switch offsets: the replaced versions are ended once the query is past them
        # (it reads the lines before them again, in their old versions, when its checkpoint was behind)
        ending: dict[str, Any] = {"until": None}

        def more_points(progress: Any, at_ms: int | None) -> list[Any]:
            notes.take(progress)
            notes.flush(store, ds, src.schema_name(ds))
            until, start = ending["until"], start_offsets(progress)
            if until is not None and start is not None and passed(until, start):
                try:
                    end_old_versions(cfg, ds, store)
                    ending["until"] = None
                except Exception as e:  # Kafka or the meta store away: tried again at the next batch
                    log.warning("%s: could not end the replaced table versions: %s", ds, e)
            return counts.points(progress, at_ms)

        applied: Any = None
        earlier: tuple[Earlier, ...] = ()  # the rule sets reloads replaced, each until its switch offsets
        try:
            while True:
                if ending["until"] is None:
                    end_old_versions(cfg, ds, store)  # a version published since its namespaces were written
                kafka.ensure_topics(
                    cfg.endpoints.kafka,
                    job.output_topics(cfg, ds, rules),
                    partitions=src.topics.partitions,
                    replication_factor=src.topics.replication_factor,
                )
                query = job.start(session, cfg, ds, rules, checkpoint, max_offsets, available_now, earlier)
                running["query"] = query
                if applied is not None and listener is not None:
                    listener.applied(applied[0], applied[1])
                log.info("%s: query %s started, tables %s", ds, query.name, [t.table for t in rules.tables])
                metrics = stagemetrics.watch_stage(
                    query, session, cfg, ds, "logprocessor", more_points=more_points
                )
                try:
                    code = life.await_query(query, FAILED)
                finally:
                    stagemetrics.unwatch(metrics)
                request = listener.take() if listener is not None else None
                if request is None or life.stopping.is_set():
                    return code
                switch.clear()
                released(session, query)
                # exact: the lines before these keep the old rules even when the next query reads them again
                offsets = switch_at(end_offsets(query), planned_end(checkpoint))
                offsets = switch_at(offsets, log_end(cfg, raw))  # past a batch the stop interrupted
                earlier = (*still_needed(earlier, committed_end(checkpoint)), Earlier(rules, offsets))
                ending["until"] = offsets
                applied = (request, offsets)
                for progress in query.recentProgress or []:  # batches the watcher may not have read yet
                    notes.take(progress)
                notes.flush(store, ds, src.schema_name(ds))
                rules = request.rules
                notes.switch(versions_of(rules.tables))
                log.info("%s: rules reloaded, the new ones from the switch offsets %s", ds, applied[1])
        finally:
            if listener is not None:
                listener.stop()
            store.dispose()


def main(argv: list[str] | None = None) -> int:
    p = stagemain.parser(
        "logprocessor", "log lines -> UMS tables by rule groups", source="log source name under 'log_sources'"
    )
    stagemain.add_max_offsets(p, "processor.max_offsets_per_trigger")
    stagemain.add_available_now(p, "process")

    def body(cfg: DbusConfig, args: argparse.Namespace) -> int:
        max_offsets = (
            args.max_offsets_per_trigger or cfg.log_source(args.source).processor.max_offsets_per_trigger
        )
        return run(cfg, args.source, max_offsets, args.available_now)

    # UmsError: a masking rule that cannot work (UMS_BAD_MASK)
    return stagemain.run("logprocessor", p, argv, body, errors=(DbusError, UmsError))


if __name__ == "__main__":
    sys.exit(main())
