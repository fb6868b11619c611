"""The full-puller service: serves ``FULL_DATA_INDEPENDENT_PULL_REQ`` from ``<ds>_ctrl``, one pull at a time.

Usage: dbus submit fullpuller --source demo
   or: mapfile -t args < <(dbus spark args --stage fullpuller --source demo)
       spark-submit "${args[@]}" fullpuller/main.py --config conf/dbus.yaml --source demo

Requests are sent with ``dbus fullpull request`` (fullpuller/request.py); each one runs as Spark jobs in
this application (fullpuller/job.py) and is answered on ``<ds>_callback``. The service commits its
position on ``<ds>_ctrl`` (consumer group ``dbus-fullpuller-<ds>``) only once a request is served, so a
service killed mid-pull serves that request again when it restarts, and the pull resumes: only the
shards that were not done are pulled again. On its very first start it begins at the topic's end.
Other stages' control messages on the topic (APPENDER_RELOAD_CONFIG, ...) are left alone.
Exit codes (``dbuslib.errors.exit_code``): 0 stopped (SIGTERM/SIGINT), 2 bad configuration, 3 Kafka or
the meta store unreachable at start for longer than ``endpoints.retry.budget_s``
(``ENDPOINT_RETRIES_EXHAUSTED``), 1 failed (the error is printed), 5 its Spark JVM died, 6 its
configuration file was removed (dbuslib/lifecycle.py, docs/errors.md).
"""

from __future__ import annotations

import logging
import sys
import threading
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # a file run by spark-submit: packages come from the repo, not this folder
    sys.path[0] = str(Path(__file__).resolve().parent.parent)

from dbuslib import stagemain
from dbuslib.config import DbusConfig
from dbuslib.ship import config_document

log = logging.getLogger(__name__)


def run(cfg: DbusConfig, ds: str) -> int:
    """Serve the source's full-pull requests until stopped."""
    from dbuslib import spark
    from dbuslib.lifecycle import Lifecycle
    from fullpuller import service
    from fullpuller.job import Puller
    from fullpuller.source import ShardSource

    ensure_topics(cfg, ds)
    session = spark.session(cfg, f"dbus-fullpuller-{ds}")
    session.dataSource.register(ShardSource)
    puller = Puller(session, cfg, ds)  # creates the meta store's tables (retried within endpoints.retry)
    # SIGTERM/SIGINT raise KeyboardInterrupt here once (a pull under way is not committed: served again at
    # the next start) and cancel its Spark jobs; the watchdog ends the driver when its JVM or config is gone,
    # and a stop still under way after STOP_GRACE_S ends it too (dbuslib/lifecycle.py)
    life = Lifecycle("fullpuller", ds, cfg.path, interrupt=True, zookeeper=cfg.endpoints.zookeeper).start()
    life.on_stop(session.sparkContext.cancelAllJobs)
    threading.Thread(target=warm_up, args=(session, cfg, ds), name="fullpuller-warm-up", daemon=True).start()
    try:
        service.run(cfg, ds, puller, life)  # the control loop: fullpuller/service.py
    except KeyboardInterrupt:
        log.info("%s: stopping", ds)
    finally:
        puller.close()
        life.close()
    return life.code


def warm_up(session: Any, cfg: DbusConfig, ds: str) -> None:
    """Start as many Python workers as a pull runs shards at once (``fullpull.parallelism``), so that the
    first pull does not pay for their start (about 4 s on a loaded 2-core machine). It runs beside the
    control loop, so the service listens without waiting for it: a request that comes meanwhile waits for
    its tasks, as it would have waited for its own workers. A stop cancels it."""
    from fullpuller.source import ShardJob, ShardSource

    warm = ShardJob.warm_up(config_document(cfg), ds, cfg.source(ds).fullpull.parallelism).to_json()
    try:
        session.read.format(ShardSource.name()).option("job", warm).load().count()
    except Exception as e:  # cancelled by a stop; else the first pull starts its own workers and says why
        log.info("%s: the workers' warm-up did not finish (%s)", ds, type(e).__name__)


def ensure_topics(cfg: DbusConfig, ds: str) -> None:
    """``<ds>_ctrl``, ``<ds>_callback`` and the data-shards topic exist (Kafka retried within
    ``endpoints.retry``)."""
    from dbuslib import kafka

    names = [cfg.source(ds).topics.name(kind, ds) for kind in ("ctrl", "callback", "data_shards")]
    kafka.ensure_source_topics(cfg, ds, names)


def main(argv: list[str] | None = None) -> int:
    p = stagemain.parser("fullpuller", __doc__.splitlines()[0])
    return stagemain.run("fullpuller", p, argv, lambda cfg, args: run(cfg, args.source))


if __name__ == "__main__":
    sys.exit(main())
