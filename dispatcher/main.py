"""The dispatcher: first-level topic ``<ds>`` -> a topic per schema ``<ds>.<schema>`` (docs/dispatcher.md).

Usage: dbus submit dispatcher --source demo
   or: mapfile -t args < <(dbus spark args --stage dispatcher --source demo)
       spark-submit "${args[@]}" dispatcher/main.py --config conf/dbus.yaml --source demo
           [--max-offsets-per-trigger N] [--available-now]

Records are forwarded unchanged (key kept, value byte for byte); heartbeat rows go to the topic of the
schema they monitor; malformed records go to ``<ds>.dlq`` with a reason. The query is named
``dispatcher_<ds>`` and checkpoints under ``<spark.checkpoint_root>/dispatcher/<ds>``: a restart resumes
where the last run stopped.

Exit codes (``dbuslib.errors.exit_code``): 0 stopped cleanly (SIGTERM/SIGINT, or ``--available-now``
drained the topic); 2 bad configuration; 3 Kafka unreachable; 1 the query failed (``dispatcher:
DISPATCH_FAILED: <ds>: <error>``); 5 its Spark JVM died; 6 its configuration file was removed
(dbuslib/lifecycle.py, docs/errors.md).
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

if __package__ in (None, ""):  # a file run by spark-submit: packages come from the repo, not this folder
    sys.path[0] = str(Path(__file__).resolve().parent.parent)

from dbuslib import stagemain
from dbuslib.config import DbusConfig

log = logging.getLogger(__name__)


def known_topics(cfg: DbusConfig, ds: str) -> list[str]:
    """Topics the dispatcher can name before the first record: dead letters and each literal schema."""
    from dbuslib.topics import literal_schemas

    src = cfg.source(ds)
    schemas = [src.topics.name("schema", ds, s) for s in literal_schemas(src)]
    return [src.topics.name("dead_letter", ds), *schemas]


def run(cfg: DbusConfig, ds: str, max_offsets: int, available_now: bool) -> int:
    from dbuslib import kafka, spark
    from dispatcher import job

    src = cfg.source(ds)
    topics = known_topics(cfg, ds)
    kafka.ensure_source_topics(cfg, ds, topics + [src.topics.name("raw", ds)])  # retried, bounded waits
    from dbuslib import stagemetrics
    from dbuslib.lifecycle import Lifecycle

    # SIGTERM, the JVM and the config watched; the process announced while it runs (dbuslib/liveness.py)
    zookeeper = cfg.endpoints.zookeeper
    with Lifecycle("dispatcher", ds, cfg.path, zookeeper=zookeeper) as life:
        raw = [src.topics.name("raw", ds)]
        session = spark.stage_session(cfg, job.query_name(ds), src.dispatcher, raw, available_now)
        query = job.start(
            session,
            cfg,
            ds,
            checkpoint=spark.checkpoint(cfg, "dispatcher", ds),
            max_offsets=max_offsets,
            available_now=available_now,
        )
        metrics = stagemetrics.watch_stage(query, session, cfg, ds, "dispatcher")  # dbus_stage points
        log.info("%s: query %s started", ds, query.name)
        try:
            return life.await_query(query, "DISPATCH_FAILED")
        finally:
            stagemetrics.unwatch(metrics)


def main(argv: list[str] | None = None) -> int:
    p = stagemain.parser("dispatcher", "first-level topic -> per-schema topics")
    stagemain.add_max_offsets(p, "dispatcher.max_offsets_per_trigger")
    stagemain.add_available_now(p, "route")

    def body(cfg: DbusConfig, args: argparse.Namespace) -> int:
        max_offsets = (
            args.max_offsets_per_trigger or cfg.source(args.source).dispatcher.max_offsets_per_trigger
        )
        return run(cfg, args.source, max_offsets, args.available_now)

    return stagemain.run("dispatcher", p, argv, body)


if __name__ == "__main__":
    sys.exit(main())
