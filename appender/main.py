"""The appender: per-schema topics -> UMS 1.3 result topics, dead letters to ``<ds>.dlq``.

Usage: dbus submit appender --source demo [--schema SCHEMA ...]
   or: mapfile -t args < <(dbus spark args --stage appender --source demo)
       spark-submit "${args[@]}" appender/main.py --config conf/dbus.yaml --source demo
           [--schema SCHEMA ...]

It reads the ``<ds>.<schema>`` topic of every schema ``capture.include`` names (or ``--schema``), and
when an include's schema is a glob (``db_*.*``, ``*.*``) every schema topic the dispatcher can write for
it, those made after the start included, each from its first record (a Kafka pattern:
dbuslib.topics.appender_subscription; ``dbus config check`` says which). It creates the meta-store
tables and the result and dead-letter topics it knows of (a new schema's when its first record is
converted), and runs until stopped; a restart resumes from its checkpoint
(``<checkpoint_root>/appender/<ds>``). Its masking rules are reloaded
without a restart by ``dbus reload --source <ds>`` (``APPENDER_RELOAD_CONFIG`` on ``<ds>_ctrl``; see
appender/rules.py and appender/commands.py).

Exit codes (``dbuslib.errors.exit_code``): 0 stopped (SIGTERM/SIGINT), 2 bad configuration, 3 the meta
store or Kafka unreachable at start for longer than ``endpoints.retry.budget_s``
(``ENDPOINT_RETRIES_EXHAUSTED``), 1 the query failed (``appender: APPENDER_FAILED: <ds>: <error>``), 5 its
Spark JVM died, 6 its configuration file was removed (dbuslib/lifecycle.py, docs/errors.md).
"""

from __future__ import annotations

import logging
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

if __package__ in (None, ""):  # a file run by spark-submit: packages come from the repo, not this folder
    sys.path[0] = str(Path(__file__).resolve().parent.parent)

from dbuslib import stagemain, topics
from dbuslib.config import DbusConfig

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)


def run(cfg: DbusConfig, ds: str, schemas: list[str] | None = None) -> int:
    """Start the appender of ``ds`` and run it until stopped (Maxwell's ``startInner()``: a checklist)."""
    from appender import rules
    from dbuslib import kafka, spark

    src = cfg.source(ds)
    subscription = topics.appender_subscription(cfg, ds, schemas)
    ensure_meta_store(cfg)
    ensure_topics(cfg, ds, schemas or topics.literal_schemas(src))
    if subscription.pattern:
        log.info("%s: %s", ds, topics.describe_subscription(cfg, ds))
    inputs = kafka.subscribed_topics(cfg.endpoints.kafka, subscription)  # sizes a real-time query
    spare = src.appender.realtime_spare_tasks if subscription.pattern else 0  # for schema topics made later
    session = spark.stage_session(cfg, f"dbus-appender-{ds}", src.appender, inputs, spare_tasks=spare)
    rules.start_listener(cfg, ds)  # publishes the file's rules, then applies APPENDER_RELOAD_CONFIG
    return run_query(session, cfg, ds, subscription)


def ensure_meta_store(cfg: DbusConfig) -> None:
    """The meta store's tables exist (an unreachable database is retried within ``endpoints.retry``)."""
    from dbuslib.metastore import MetaStore
    from dbuslib.retry import RetryPolicy

    MetaStore(cfg.endpoints.meta_store.url.get_secret_value(), RetryPolicy.of(cfg)).create_schema()


def ensure_topics(cfg: DbusConfig, ds: str, schemas: list[str]) -> None:
    """The result and dead-letter topics the query writes exist (Kafka retried within ``endpoints.retry``)."""
    from dbuslib import kafka, topics

    kafka.ensure_source_topics(cfg, ds, topics.source_topics(ds, cfg.source(ds), schemas))


def run_query(session: SparkSession, cfg: DbusConfig, ds: str, subscription: topics.Subscription) -> int:
    """The streaming query over the ``<ds>.<schema>`` topics, watched by the stage's lifecycle."""
    from appender import job
    from dbuslib import spark, stagemetrics
    from dbuslib.lifecycle import Lifecycle

    # SIGTERM, the JVM and the config watched; the process announced while it runs (dbuslib/liveness.py)
    zookeeper = cfg.endpoints.zookeeper
    with Lifecycle("appender", ds, cfg.path, zookeeper=zookeeper) as life:
        query = job.start(session, cfg, ds, subscription, spark.checkpoint(cfg, "appender", ds))
        metrics = stagemetrics.watch_stage(query, session, cfg, ds, "appender")  # dbus_stage points
        log.info("%s: query %s started", ds, query.name)
        stop = threading.Event()
        if subscription.pattern and cfg.source(ds).appender.trigger == "realtime":
            threading.Thread(
                target=watch_slots, args=(session, cfg, ds, subscription, stop), daemon=True
            ).start()
        try:
            return life.await_query(query, "APPENDER_FAILED")
        finally:
            stop.set()
            stagemetrics.unwatch(metrics)


def watch_slots(session: Any, cfg: DbusConfig, ds: str, subscription: topics.Subscription, stop: Any) -> None:
    """Real-time mode with a topic pattern, once per batch length until ``stop``: the partitions the query
    reads now against the session's task slots. A real-time batch runs all its tasks at once, and a task
    that gets a slot only after the others ended reads nothing: a warning (once per count) says so, and
    ``dbus status`` counts the tasks (``dbuslib.spark.TASKS_CONF``)."""
    from dbuslib import kafka, spark

    warned = 0
    while not stop.wait(cfg.source(ds).appender.realtime_checkpoint_s):
        try:
            followed = kafka.subscribed_topics(cfg.endpoints.kafka, subscription)
            tasks = kafka.partition_count(cfg.endpoints.kafka, followed)
            slots = session.sparkContext.defaultParallelism
            session.conf.set(spark.TASKS_CONF, str(tasks))
        except Exception as e:  # Kafka or the session away a moment: asked again at the next batch
            log.debug("%s: task slots not checked: %s", ds, e)
            continue
        if tasks > slots and tasks != warned:
            warned = tasks
            log.warning(
                "%s: real-time mode reads %d partitions of %d schema topics at once and Spark has %d task "
                "slots: the partitions beyond them are not read until the appender restarts with more "
                "(dbus submit sizes it for the topics there, appender.realtime_spare_tasks: appender.md)",
                ds,
                tasks,
                len(followed),
                slots,
            )


def main(argv: list[str] | None = None) -> int:
    p = stagemain.parser("appender", __doc__.splitlines()[0])
    p.add_argument("--schema", action="append", help="schema to read (repeatable; default: capture.include)")
    return stagemain.run("appender", p, argv, lambda cfg, args: run(cfg, args.source, args.schema))


if __name__ == "__main__":
    sys.exit(main())
