"""The appender: per-schema topics -> UMS 1.3 result topics, dead letters to ``<ds>.dlq``.

Usage: spark-submit $(dbus spark args) appender/main.py --config conf/dbus.yaml --source demo

It reads the ``<ds>.<schema>`` topic of every schema named in ``capture.include`` (or ``--schema``),
creates the result and dead-letter topics it writes, and runs until stopped; a restart resumes from its
checkpoint (``<checkpoint_root>/appender/<ds>``). Its masking rules are reloaded without a restart by
``dbus reload --source <ds>`` (``APPENDER_RELOAD_CONFIG`` on ``<ds>_ctrl``; see appender/rules.py).
Exit codes: 0 stopped (SIGTERM/SIGINT), 2 bad configuration, 1 the query failed (``appender:
APPENDER_FAILED: <ds>: <error>``), 5 its Spark JVM died, 6 its configuration file was removed
(dbuslib/lifecycle.py, docs/errors.md).
"""

from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="appender", description=__doc__.splitlines()[0])
    p.add_argument("--config", required=True)
    p.add_argument("--source", required=True)
    p.add_argument("--schema", action="append", help="schema to read (repeatable; default: capture.include)")
    args = p.parse_args(argv)

    from pyspark.sql import SparkSession

    from appender import job
    from dbuslib import kafka, spark, topics
    from dbuslib.config import load_config
    from dbuslib.errors import DbusError
    from dbuslib.metastore import MetaStore

    try:
        cfg = load_config(args.config)
        src = cfg.source(args.source)
    except DbusError as e:
        print(f"appender: {e.code}: {e}", file=sys.stderr)
        return 2
    schemas = args.schema or topics.literal_schemas(src)
    MetaStore(cfg.endpoints.meta_store.url.get_secret_value()).create_schema()
    kafka.ensure_topics(
        cfg.endpoints.kafka,
        topics.source_topics(args.source, src, schemas),
        src.topics.partitions,
        src.topics.replication_factor,
    )
    session = SparkSession.builder.appName(f"dbus-appender-{args.source}").getOrCreate()
    import logging

    from appender import rules

    logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("dbus").setLevel(logging.INFO)  # rules published, reloads applied or rejected
    try:  # publishes the file's rules, then applies APPENDER_RELOAD_CONFIG from <ds>_ctrl (appender/rules.py)
        rules.start_listener(cfg, args.source)
    except DbusError as e:
        print(f"appender: {e.code}: {e}", file=sys.stderr)
        return 2 if e.code == "CONFIG_INVALID" else 1
    inputs = [src.topics.name("schema", args.source, s) for s in schemas]
    from dbuslib import stagemetrics
    from dbuslib.lifecycle import Lifecycle

    with Lifecycle("appender", args.source, cfg.path) as life:  # SIGTERM, the JVM and the config watched
        query = job.start(session, cfg, args.source, inputs, spark.checkpoint(cfg, "appender", args.source))
        # dbus_stage points
        metrics = stagemetrics.watch(query, cfg.endpoints.influxdb, args.source, "appender")
        logging.getLogger("dbus.appender").info("%s: query %s started", args.source, query.name)
        try:
            return life.await_query(query, "APPENDER_FAILED")
        finally:
            stagemetrics.unwatch(metrics)


if __name__ == "__main__":
    sys.exit(main())
