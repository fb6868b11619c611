"""``dbus submit <stage> --source DS [-- spark-submit args]``: a Spark stage started on the configured master.

It runs spark-submit with an argument list, nothing quoted for a shell::

    spark-submit --master M --jars <connector jars, JVM decoder> --py-files <DBus's code zip>
                 --conf <spark.conf, spark.stages.<stage>, the stage's resources> [extra args]
                 <installed stage>/main.py --config <file> --source DS

- The master: ``spark.master``, or a ``--master`` among the extra arguments (spark-submit takes the last
  one, and the stage keeps it: dbuslib.spark.session). A local master gets a thread per task of a real-time
  query; a cluster's executors are sized for them (``spark.cores.max`` on a standalone cluster,
  ``spark.executor.instances`` on YARN and Kubernetes: dbuslib.spark.resources).
- DBus's code travels as one zip (dbuslib/ship.py); executors bring the libraries (a packed venv with
  ``spark.archives`` and ``spark.pyspark.python: ./env/bin/python`` in ``spark.conf``, or the Workers' own
  Python: docs/deploy.md). The configuration travels inside the job, never by this file's path.
- The driver runs here (client mode), with this Python; on a local master the executors run it too.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

# kafka and zk are imported where a stage is sized or started, not for `dbus --help`
from dbuslib import ship, spark, topics
from dbuslib.config import DbusConfig
from dbuslib.errors import ConfigError, EndpointError
from dbuslib.spark import spark_submit  # the one home of the spark-submit to run (tests import it from here)

SUBMITTED = ("dispatcher", "appender", "fullpuller", "logprocessor")
PREFLIGHT_ZK_S = 3.0  # how long `dbus submit` waits for ZooKeeper (check_zookeeper_identity)


def stage_tasks(cfg: DbusConfig, stage: str, ds: str, schemas: list[str] | None = None) -> int:
    """How many tasks ``stage`` runs at once: one per Kafka partition it reads (its topics as they are, or
    as the stage will create them; an appender following a pattern in real-time mode
    ``appender.realtime_spare_tasks`` more, for schema topics made later), or the full puller's
    ``fullpull.parallelism`` shards."""
    from dbuslib import kafka

    if stage == "logprocessor":
        raw = cfg.log_source(ds).topics
        return kafka.partition_count(cfg.endpoints.kafka, [raw.name("raw", ds)]) or raw.partitions
    src = cfg.source(ds)
    spare = 0
    if stage == "fullpuller":
        return src.fullpull.parallelism
    if stage == "dispatcher":
        inputs = [src.topics.name("raw", ds)]
    else:
        subscription = topics.appender_subscription(cfg, ds, schemas)
        inputs = kafka.subscribed_topics(cfg.endpoints.kafka, subscription)
        if subscription.pattern and src.appender.trigger == "realtime":  # slots for schema topics made later
            spare = src.appender.realtime_spare_tasks
    partitions = (kafka.partition_count(cfg.endpoints.kafka, [t]) or src.topics.partitions for t in inputs)
    return spare + sum(partitions)


def main_file(stage: str) -> Path:
    """The stage's main.py where it is installed (a checkout, or site-packages)."""
    return ship.package_dirs()[stage] / "main.py"


def master_of(cfg: DbusConfig, extra: list[str]) -> str:
    """The master spark-submit will use: the last ``--master`` of ``extra``, else ``spark.master``."""
    master = cfg.spark.master
    for i, arg in enumerate(extra):
        if arg == "--master" and i + 1 < len(extra):
            master = extra[i + 1]
        elif arg.startswith("--master="):
            master = arg.split("=", 1)[1]
    return master


def command(
    cfg: DbusConfig, stage: str, ds: str, extra: list[str] | None = None, schemas: list[str] | None = None
) -> list[str]:
    """The spark-submit argument list that starts ``stage`` for source ``ds``."""
    if stage not in SUBMITTED:
        msg = f"dbus submit: unknown stage {stage!r}; Spark stages: {', '.join(SUBMITTED)}"
        raise ConfigError(msg)
    if stage == "logprocessor":
        cfg.log_source(ds)  # a ConfigError naming the known log sources
    else:
        cfg.source(ds)  # a ConfigError naming the known sources
    from cli import sparkjars

    sparkjars.ensure(cfg)  # a pip install: Spark's connectors and DBus's JVM jar, once
    extra = list(extra or [])
    master = master_of(cfg, extra)
    tasks = stage_tasks(cfg, stage, ds, schemas)
    code = str(ship.code_zip())
    app = [str(main_file(stage)), "--config", str(cfg.path), "--source", ds]
    app += [x for s in schemas or [] for x in ("--schema", s)]
    # the driver runs here, on this Python, also when spark.pyspark.python names the executors' (spark-submit
    # would run that for the driver too, e.g. ./env/bin/python of spark.archives, which is not here)
    driver = ["--conf", f"spark.pyspark.driver.python={sys.executable}"]
    return [spark_submit(), *spark.submit_args(cfg, stage, tasks, master, code), *driver, *extra, *app]


def environment(cfg: DbusConfig, extra: list[str] | None = None) -> dict[str, str]:
    """spark-submit's environment: the driver runs this Python, and so do the executors of a local
    master (unless ``spark.pyspark.python`` or ``$PYSPARK_PYTHON`` says otherwise); a cluster's executors
    run what the configuration or the environment names (docs/deploy.md)."""
    env = dict(os.environ)
    env["PYSPARK_DRIVER_PYTHON"] = sys.executable
    if spark.is_local(master_of(cfg, list(extra or []))) and "spark.pyspark.python" not in cfg.spark.conf:
        env.setdefault("PYSPARK_PYTHON", sys.executable)
    bin_dir = str(Path(sys.executable).parent)  # pyspark's scripts find this Python's packages
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    return env


def driver_dir(cfg: DbusConfig, stage: str) -> Path | None:
    """Where the driver must run when the executors' Python is in an archive (``spark.archives: X#env``,
    ``spark.pyspark.python: ./env/bin/python``): a folder whose ``env`` is this Python's environment.
    Spark runs the same interpreter path for the Python workers of the driver (the full puller's data
    source is planned there), relative to the driver's working directory, where no archive is unpacked
    in client mode. None when the executors' Python is not such a path."""
    conf = {**cfg.spark.conf, **cfg.spark.stages.get(stage, {})}
    python = conf.get("spark.pyspark.python", "")
    for archive in conf.get("spark.archives", "").split(","):
        name = archive.rpartition("#")[2] if "#" in archive else ""
        if name and python.startswith(f"./{name}/"):
            folder = ship.cache_root() / "driver" / name
            folder.mkdir(parents=True, exist_ok=True)
            link = folder / name
            if not link.is_symlink() or os.readlink(link) != sys.prefix:
                link.unlink(missing_ok=True)
                link.symlink_to(sys.prefix)
            return folder
    return None


def check_zookeeper_identity(cfg: DbusConfig) -> None:
    """ZooKeeperAuthFailed, before spark-submit starts a JVM, when ZooKeeper refuses the stage's identity
    (the stage would meet it in its liveness client seconds later, dbuslib/lifecycle.py); a ZooKeeper that
    does not answer within ``PREFLIGHT_ZK_S`` is left to the stage, which starts without it."""
    from dbuslib import zk

    endpoint = cfg.endpoints.zookeeper
    try:
        client = zk.client(endpoint.model_copy(update={"timeout_s": min(endpoint.timeout_s, PREFLIGHT_ZK_S)}))
    except zk.ZooKeeperAuthFailed:
        raise
    except EndpointError:
        return
    client.stop()
    client.close()


def run(cfg: DbusConfig, args: argparse.Namespace) -> int:
    extra = list(args.spark_args or [])
    argv = command(cfg, args.stage, args.source, extra, args.schema)
    if args.print:
        print("\n".join(argv))
        return 0
    check_zookeeper_identity(cfg)
    sys.stdout.flush()
    folder = driver_dir(cfg, args.stage)
    if folder is not None:
        os.chdir(folder)
    os.execvpe(argv[0], argv, environment(cfg, extra))
    return 0  # not reached


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = sub.add_parser(
        "submit",
        help="start a Spark stage with spark-submit (master, jars, code, config, resources)",
        description="Start a Spark stage with spark-submit; arguments after -- go to spark-submit.",
    )
    p.add_argument("stage", choices=SUBMITTED, help="the stage")
    p.add_argument("--source", required=True, help="source name under 'sources'")
    p.add_argument("--schema", action="append", help="appender: schema to read (repeatable)")
    p.add_argument("--print", action="store_true", help="print the command, one argument per line, and stop")
    p.epilog = "Arguments after -- go to spark-submit: dbus submit appender --source demo -- --master M"
    return p
