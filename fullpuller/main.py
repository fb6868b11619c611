"""The full-puller service: serves ``FULL_DATA_INDEPENDENT_PULL_REQ`` from ``<ds>_ctrl``, one pull at a time.

Usage: spark-submit $(dbus spark args) fullpuller/main.py --config conf/dbus.yaml --source demo

Requests are sent with ``dbus fullpull request`` (fullpuller/request.py); each one runs as Spark jobs in
this application (fullpuller/job.py) and is answered on ``<ds>_callback``. The service commits its
position on ``<ds>_ctrl`` (consumer group ``dbus-fullpuller-<ds>``) only once a request is served, so a
service killed mid-pull serves that request again when it restarts, and the pull resumes: only the
shards that were not done are pulled again. On its very first start it begins at the topic's end.
Other stages' control messages on the topic (APPENDER_RELOAD_CONFIG, ...) are left alone.
Exit codes: 0 stopped (SIGTERM/SIGINT), 2 bad configuration, 1 failed (the error is printed), 5 its Spark
JVM died, 6 its configuration file was removed (dbuslib/lifecycle.py, docs/errors.md).
"""

from __future__ import annotations

import argparse
import logging
import sys


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="fullpuller", description=__doc__.splitlines()[0])
    p.add_argument("--config", required=True)
    p.add_argument("--source", required=True)
    args = p.parse_args(argv)

    from pyspark.sql import SparkSession

    from dbuslib import kafka
    from dbuslib.config import load_config
    from dbuslib.errors import DbusError
    from dbuslib.lifecycle import Lifecycle
    from fullpuller import service
    from fullpuller.job import Puller
    from fullpuller.source import ShardJob, ShardSource

    logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("dbus").setLevel(logging.INFO)
    log = logging.getLogger("dbus.fullpuller")
    try:
        cfg = load_config(args.config)
        src = cfg.source(args.source)
    except DbusError as e:
        print(f"fullpuller: {e.code}: {e}", file=sys.stderr)
        return 2
    ctrl = src.topics.name("ctrl", args.source)
    kafka.ensure_topics(
        cfg.endpoints.kafka,
        [ctrl, src.topics.name("callback", args.source), src.topics.name("data_shards", args.source)],
        src.topics.partitions,
        src.topics.replication_factor,
    )
    session = SparkSession.builder.appName(f"dbus-fullpuller-{args.source}").getOrCreate()
    session.dataSource.register(ShardSource)
    warm = ShardJob.warm_up(str(cfg.path), args.source).to_json()  # the first pull should not pay for it
    session.read.format(ShardSource.name()).option("job", warm).load().count()
    puller = Puller(session, cfg, args.source)
    # SIGTERM/SIGINT raise KeyboardInterrupt here once (a pull under way is not committed: served again at
    # the next start) and cancel its Spark jobs; the watchdog ends the driver when its JVM or config is gone,
    # and a stop still under way after STOP_GRACE_S ends it too (dbuslib/lifecycle.py)
    life = Lifecycle("fullpuller", args.source, cfg.path, interrupt=True).start()
    life.on_stop(session.sparkContext.cancelAllJobs)
    try:
        service.run(cfg, args.source, puller, life)  # the control loop: fullpuller/service.py
    except KeyboardInterrupt:
        log.info("%s: stopping", args.source)
    finally:
        puller.close()
        life.close()
    return life.code


if __name__ == "__main__":
    sys.exit(main())
