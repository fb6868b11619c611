"""The Spark edge: the connector jars resolved by `make stack-up`, spark-submit arguments, sessions.

Every Spark stage is started by ``dbus submit <stage> --source DS`` (cli/submit.py), which runs spark-submit
with ``submit_args``: the master, the jars, DBus's code as ``--py-files`` and the settings, the stage's
resources among them. A stage started by spark-submit keeps what spark-submit set (``session``); the same
jars and settings are used when a test or the demo builds a session in-process.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dbuslib.config import DbusConfig, KafkaEndpoint, parse_listen, uri_scheme
from dbuslib.errors import StackError
from dbuslib.kafka_security import spark_options

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def spark_submit() -> str:
    """spark-submit of ``$SPARK_HOME`` (a Spark installation, e.g. a cluster's), else pyspark's own."""
    home = os.environ.get("SPARK_HOME")
    if home:
        return str(Path(home) / "bin" / "spark-submit")
    import pyspark

    return str(Path(pyspark.__file__).parent / "bin" / "spark-submit")


def jvm_class(jvm: Any, java_class: str, who: str) -> Any:
    """The py4j class ``java_class`` (dotted name) of the JVM view ``jvm``; StackError naming ``who`` when
    the class is not on Spark's classpath (py4j then gives a ``JavaPackage``)."""
    cls = jvm
    for part in java_class.split("."):
        cls = getattr(cls, part)
    if not callable(cls) or type(cls).__name__ == "JavaPackage":
        msg = f"{who}: the JVM class {java_class} is not on Spark's classpath (`make stack-up` builds it)"
        raise StackError(msg)
    return cls


def configured_jars(cfg: DbusConfig) -> Path | None:
    """``spark.jars_file`` when that file exists (the local stack's, or an operator's own), else None."""
    configured = cfg.resolve(cfg.spark.jars_file)
    return configured if configured.exists() else None


def jars_list(cfg: DbusConfig) -> Path:
    """The file that lists a stage's jars: ``configured_jars``, else the list DBus writes beside the
    connectors it resolved itself (``dbuslib.connectors``, ``dbus spark jars``: a pip install)."""
    from dbuslib import connectors

    return configured_jars(cfg) or connectors.user_folder() / connectors.FULL_LIST_NAME


def jars(cfg: DbusConfig) -> list[str]:
    """Absolute paths of the connector jars (spark-sql-kafka and its deps, the MariaDB JDBC driver) and
    the JVM decoder (``dbus-jvm.jar``), as ``jars_list`` lists them; each listed file must exist (a URI,
    ``hdfs:``/``local:``, is Spark's to fetch)."""
    path = jars_list(cfg)
    try:
        listed = [j for j in path.read_text().strip().split(",") if j]
    except FileNotFoundError:
        msg = (
            f"{cfg.resolve(cfg.spark.jars_file)} (spark.jars_file) is missing and DBus has not resolved "
            "Spark's connectors itself: `dbus spark jars` does (`dbus submit` on its own), "
            "`make stack-up` in a checkout"
        )
        raise StackError(msg) from None
    if not listed:
        msg = f"{path} lists no jars: run `make stack-up` again"
        raise StackError(msg)
    missing = [j for j in listed if scheme(j) == "file" and not os.path.isfile(j.removeprefix("file:"))]
    if missing:
        fixes = [f"`{_jvm_build(j, listed)}` (the JVM decoder; a JDK 17)" for j in missing if _is_jvm(j)]
        if not all(_is_jvm(j) for j in missing):
            fixes.append("`make stack-up` (Spark's Kafka connector and the JDBC driver)")
        msg = f"{path} lists jars that do not exist: {', '.join(missing)}: run {' and '.join(fixes)}"
        raise StackError(msg)
    return listed


JVM_JAR = "dbus-jvm.jar"  # the JVM decoder's jar (binlog/jvmjar.py builds it)


def _jvm_build(jar: str, listed: list[str]) -> str:
    """The command that builds ``jar``: with ``--kafka-jars`` when the list's kafka-clients jar is not in
    ``spark/`` beside it (where ``dbus jvm build`` looks by default)."""
    out = jar.removeprefix("file:")
    clients = [j.removeprefix("file:") for j in listed if os.path.basename(j).startswith("kafka-clients-")]
    folder = os.path.dirname(clients[0]) if clients else None
    beside = os.path.normpath(os.path.join(os.path.dirname(out), "spark"))
    extra = f" --kafka-jars {folder}" if folder and os.path.normpath(folder) != beside else ""
    return f"dbus jvm build --out {jar}{extra}"


def _is_jvm(jar: str) -> bool:
    return os.path.basename(jar) == JVM_JAR


CHECKPOINT_MANAGER = "spark.sql.streaming.checkpointFileManagerClass"
# The checkpoint manager by the checkpoint root's filesystem, unless ``spark.conf`` names one. A local
# folder: Spark's default manager makes Hadoop fork ``readlink`` for each file, the FileSystem-based one
# forks nothing (measured: docs/performance.md); its rename is atomic there, as on HDFS, where Spark's
# default (FileContext-based) is kept. S3 has no atomic rename: spark-hadoop-cloud's abortable-stream manager
# (its jar given by ``--packages``, docs/deploy.md).
CHECKPOINT_MANAGERS = {
    "file": "org.apache.spark.sql.execution.streaming.checkpointing.FileSystemBasedCheckpointFileManager",
    "s3a": "org.apache.spark.internal.io.cloud.AbortableStreamBasedCheckpointFileManager",
}


def scheme(location: str) -> str:
    """The filesystem of a path or URI: ``file`` for a plain path, else the URI's scheme (``hdfs``)."""
    return uri_scheme(location) or "file"


# Spark hides a setting whose key or value this matches (its UI, event log, plans): its default, and the
# Kafka client's PEM key that endpoints.kafka.security inlines (kafka.ssl.keystore.key; the SASL password
# is inside kafka.sasl.jaas.config's value, which the default's "password" matches)
REDACTION_REGEX = r"(?i)secret|password|token|access[.]key|ssl[.]keystore[.]key|PRIVATE KEY"


# Spark 4 refuses to start a query whose checkpoint has no batch yet but a file in offsets/, commits/ or
# state/: what a kill -9 while batch 0's offsets were written leaves (the manager's temporary file), after
# which the stage could never start again. Each stage's checkpoint is its own folder (stage and source in
# its name), which is what the check guards; Spark's older behaviour (start at batch 0) is the right one.
VERIFY_EMPTY_CHECKPOINT = "spark.sql.streaming.verifyCheckpointDirectoryEmptyOnStart"


def settings(cfg: DbusConfig) -> dict[str, str]:
    """The Spark settings of DBus's stages: the checkpoint manager for the checkpoint root's filesystem
    (``CHECKPOINT_MANAGERS``), a checkpoint left by a kill before its first batch accepted
    (``VERIFY_EMPTY_CHECKPOINT``), the redaction of secrets (``REDACTION_REGEX``), Spark's JSON log lines
    when ``logging.format`` is ``json``, overridden by the configuration's ``spark.conf``."""
    manager = CHECKPOINT_MANAGERS.get(scheme(cfg.spark.checkpoint_root))
    fixed = {VERIFY_EMPTY_CHECKPOINT: "false", "spark.redaction.regex": REDACTION_REGEX}
    if cfg.logging.format == "json":  # Spark's JSON lines, the form of DBus's own (dbuslib/logs.py)
        fixed["spark.log.structuredLogging.enabled"] = "true"
    if cfg.prometheus.spark_metrics:
        fixed.update(spark_metrics_settings(cfg.prometheus.spark_metrics))
    return {**({CHECKPOINT_MANAGER: manager} if manager else {}), **fixed, **cfg.spark.conf}


def spark_metrics_settings(address: str) -> dict[str, str]:
    """Spark's metrics system reporting to ``dbus metrics exporter`` at ``address`` (``prometheus.
    spark_metrics``): its GraphiteSink on the driver and every executor, every ``graphite.PERIOD_S``
    seconds, the application's name as the namespace (not its id, which changes at each start) and the
    JVM's own metrics (heap, GC) among them (dbuslib/graphite.py reads the lines)."""
    from dbuslib import graphite

    host, port = parse_listen(address, "prometheus.spark_metrics")
    sink = "spark.metrics.conf.*.sink.graphite"
    return {
        "spark.metrics.namespace": "${spark.app.name}",
        f"{sink}.class": "org.apache.spark.metrics.sink.GraphiteSink",
        f"{sink}.host": host,
        f"{sink}.port": str(port),
        f"{sink}.period": str(graphite.PERIOD_S),
        f"{sink}.unit": "seconds",
        f"{sink}.prefix": graphite.PREFIX,
        "spark.metrics.conf.*.source.jvm.class": "org.apache.spark.metrics.source.JvmSource",
    }


def is_local(master: str) -> bool:
    """A ``local`` master: the driver's JVM runs the tasks, on the driver's machine."""
    return master.strip().startswith("local")


def resources(cfg: DbusConfig, stage: str, tasks: int, master: str) -> dict[str, str]:
    """The Spark settings sizing ``stage``'s executors on a cluster ``master`` for ``tasks`` tasks at once
    (a real-time query's: one per Kafka partition read), overridden by ``spark.stages.<stage>``: on a
    standalone cluster ``spark.cores.max`` (without it the first stage takes every core of the cluster
    and the next waits for ever), on YARN and Kubernetes ``spark.executor.instances``, of
    ``spark.executor.cores`` each; 1 GiB per executor unless said. A local master has nothing to size
    (``realtime_master`` gives it threads)."""
    explicit = {**cfg.spark.conf, **cfg.spark.stages.get(stage, {})}
    if is_local(master):
        return dict(cfg.spark.stages.get(stage, {}))
    tasks = max(tasks, 1)
    sized = {"spark.executor.memory": "1g"}
    if master.startswith(("yarn", "k8s://")):
        cores = int(explicit.get("spark.executor.cores", "1"))
        sized["spark.executor.instances"] = str(-(-tasks // cores))
    else:  # standalone
        sized["spark.cores.max"] = str(tasks)
    return {**sized, **cfg.spark.stages.get(stage, {})}


def submit_args(
    cfg: DbusConfig,
    stage: str | None = None,
    tasks: int = 0,
    master: str | None = None,
    py_files: str = "",
    conf: dict[str, str] | None = None,
) -> list[str]:
    """Arguments for spark-submit before the application file: the master (a local one with a thread
    for each of ``tasks``), the connector jars, ``py_files`` (DBus's code, dbuslib/ship.py) and the
    settings, with ``stage``'s resources (``resources``) and ``conf`` over them."""
    master = master or cfg.spark.master
    if is_local(master) and tasks:
        master = realtime_master(master, tasks)
    args = ["--master", master, "--jars", ",".join(jars(cfg))]
    if py_files:
        args += ["--py-files", py_files]
    from dbuslib import sparkcds

    final = {**settings(cfg), **(resources(cfg, stage, tasks, master) if stage else {}), **(conf or {})}
    final = sparkcds.with_archive(cfg, final)
    hidden = {k: v for k, v in final.items() if is_secret_setting(k, v)}
    for key, value in sorted(final.items()):
        if key not in hidden:
            args += ["--conf", f"{key}={value}"]
    if hidden:  # a command line is anyone's to read (ps): these go in a file only this user reads
        args += ["--extra-properties-file", str(secret_properties(hidden))]
    return args


def is_secret_setting(key: str, value: str) -> bool:
    """A setting Spark itself would redact (``REDACTION_REGEX`` matches its key or its value), such as
    ``spark.hadoop.fs.s3a.secret.key``: never put on spark-submit's command line."""
    import re

    return key != "spark.redaction.regex" and any(re.search(REDACTION_REGEX, x) for x in (key, value))


def _escaped(text: str, key: bool) -> str:
    """``text`` as java.util.Properties reads it back: backslashes and line breaks; in a key the
    separators and a leading comment mark; in a value a leading blank (which the reader would drop)."""
    out = text.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r").replace("\t", "\\t")
    out = out.replace("\f", "\\f")
    if key:
        for c in "=: #!":
            out = out.replace(c, "\\" + c)
        return out
    return "\\" + out if out[:1] == " " else out


def secret_properties(conf: dict[str, str], folder: Path | None = None) -> Path:
    """``conf`` as a properties file for spark-submit's ``--extra-properties-file`` (read on top of
    spark-defaults.conf), readable by this user only, in ``folder`` (default: ``conf/`` of DBus's cache,
    made 0700), named by a hash of its content: the same settings reuse one file."""
    import hashlib

    from dbuslib import ship

    text = "".join(f"{_escaped(k, True)}={_escaped(v, False)}\n" for k, v in sorted(conf.items()))
    folder = folder or ship.cache_root() / "conf"
    folder.mkdir(parents=True, exist_ok=True)
    folder.chmod(0o700)
    path = folder / f"secret-{hashlib.sha256(text.encode()).hexdigest()[:16]}.properties"
    if not path.exists() or path.read_text() != text:
        fd = os.open(path.with_suffix(".tmp"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(path.with_suffix(".tmp"), path)
    return path


def submitted() -> bool:
    """This Python driver was started by spark-submit (which gave it its gateway), not in-process."""
    import os

    return "PYSPARK_GATEWAY_PORT" in os.environ


def realtime_master(master: str, tasks: int) -> str:
    """``master``, or for a local master with fewer task slots than ``tasks`` (a real-time query's tasks
    all run at once, one per Kafka partition read) ``local[<tasks>]``: threads, mostly waiting for
    records, so more of them than cores is what real-time mode needs, not an overload."""
    import os
    import re

    m = re.fullmatch(r"local(?:\[(\d+|\*)(,\d+)?\])?", master.strip())
    if m is None:
        return master
    slots = 1 if m[1] is None else (os.cpu_count() or 1) if m[1] == "*" else int(m[1])
    return master if slots >= tasks else f"local[{tasks}{m[2] or ''}]"


def session(cfg: DbusConfig, app_name: str, realtime_tasks: int = 0, **conf: str) -> SparkSession:
    """A SparkSession configured like spark-submit would configure it (for tests and the demo), plus
    ``conf`` (dots written as ``__``: ``spark__ui__showConsoleProgress="false"``). ``realtime_tasks``: the
    tasks of the real-time query the session will run, each needing a slot (``realtime_master``)."""
    import sys

    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(app_name)
    if submitted():  # spark-submit set the master, jars, code and settings: kept, never overridden
        from pyspark import SparkConf, SparkContext

        SparkContext._ensure_initialized()  # the gateway spark-submit started: its JVM holds the settings
        master = SparkConf().get("spark.master", "local[*]")
        raised = realtime_master(master, realtime_tasks) if realtime_tasks else master
        if raised != master:  # a local master's threads only: the query could not run with fewer
            import logging

            logging.getLogger("dbus.spark").warning(
                "%s: --master %s has fewer task slots than the %d tasks of its real-time query: "
                "running with %s (dbus submit sizes it)",
                app_name,
                master,
                realtime_tasks,
                raised,
            )
            builder = builder.master(raised)
    else:
        master = realtime_master(cfg.spark.master, realtime_tasks) if realtime_tasks else cfg.spark.master
        builder = builder.master(master).config("spark.jars", ",".join(jars(cfg)))
        builder = builder.config("spark.pyspark.python", sys.executable)  # workers import DBus from this venv
        from dbuslib import sparkcds

        for key, value in sparkcds.with_archive(cfg, settings(cfg)).items():
            builder = builder.config(key, value)
    for key, value in conf.items():
        builder = builder.config(key.replace("__", "."), value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(cfg.logging.spark_level)
    return spark


def stage_session(
    cfg: DbusConfig,
    app_name: str,
    settings: Any,
    inputs: list[str],
    available_now: bool = False,
    spare_tasks: int = 0,
) -> SparkSession:
    """The session of a stage whose query reads ``inputs`` in the mode of ``settings``
    (``dbuslib.config.StreamSettings``): in real-time mode (not ``available_now``) sized for its tasks, one
    per partition of ``inputs``, and ``spare_tasks`` more for topics that appear later (``realtime_master``),
    with a warning when they cannot all run."""
    from dbuslib import kafka

    realtime = settings.trigger == "realtime" and not available_now
    tasks = kafka.partition_count(cfg.endpoints.kafka, inputs) if realtime else 0
    spark = session(cfg, app_name, realtime_tasks=tasks + spare_tasks if realtime else 0)
    spark.conf.set(TASKS_CONF, str(tasks))
    check_slots(spark, tasks, app_name)
    return spark


TASKS_CONF = "spark.dbus.realtimeTasks"  # a session's real-time tasks, set by stage_session


def short_of_slots(spark: SparkSession) -> bool:
    """The session's queries wait for the cluster's resources: on a cluster master, no executor at all,
    or fewer executor cores (``defaultParallelism``) than its real-time query's tasks (``stage_session``),
    all of which run at once. A local master runs its tasks in the driver: never short."""
    sc = spark.sparkContext
    if is_local(sc.master or "local"):
        return False
    if len(list(sc._jsc.sc().statusTracker().getExecutorInfos())) <= 1:  # the driver's only
        return True
    tasks = int(spark.conf.get(TASKS_CONF, "0") or 0)
    return bool(tasks) and sc.defaultParallelism < tasks


def check_slots(spark: SparkSession, tasks: int, what: str) -> None:
    """Warns when the session has fewer task slots than a real-time query's ``tasks``: Spark then waits
    for slots that never come (a local master is sized by ``realtime_master``; a cluster's are its
    executors' cores)."""
    if not is_local(spark.sparkContext.master or "local"):
        return  # a cluster's executors register after the session starts: dbus status says if they are short
    have = spark.sparkContext.defaultParallelism
    if tasks and have < tasks:
        import logging

        logging.getLogger("dbus.spark").warning(
            "%s: real-time mode runs its %d tasks (one per Kafka partition read) at once, and Spark has %d "
            "task slots: the query waits until it has them (give the executors %d cores, docs/realtime.md)",
            what,
            tasks,
            have,
            tasks,
        )


def checkpoint(cfg: DbusConfig, *parts: str) -> str:
    """Checkpoint folder of one query: <checkpoint_root>/<part>/<part>, a local folder (relative to the
    configuration file's) or a URI on the root's filesystem."""
    from pathlib import Path

    root = cfg.spark.checkpoint_root
    if scheme(root) != "file" or root.startswith("file:"):
        return "/".join([root.rstrip("/"), *parts])
    return str(cfg.resolve(Path(root)).joinpath(*parts))


def with_trigger(
    writer: Any, available_now: bool = False, interval_ms: int = 0, async_progress: bool = False
) -> Any:
    """A DataStreamWriter's trigger: ``availableNow`` (process what is there, then stop), a fixed
    interval, or (0) the next micro-batch as soon as the previous one ends. ``async_progress`` writes
    the offset and commit logs beside the processing instead of between micro-batches (Kafka sink only;
    Spark refuses it with availableNow): lower latency, and a restart may redo up to a second more."""
    if available_now:
        return writer.trigger(availableNow=True)
    if async_progress:
        writer = writer.option("asyncProgressTrackingEnabled", "true")
    if interval_ms > 0:
        return writer.trigger(processingTime=f"{interval_ms} milliseconds")
    return writer


def start_query(
    df: Any,
    kafka: KafkaEndpoint,
    name: str,
    checkpoint: str,
    settings: Any,
    available_now: bool = False,
    batching: bool = False,
) -> Any:
    """A stage's query started: ``df`` (topic, key, value[, headers]) to the Kafka sink, named ``name``,
    checkpointed in ``checkpoint``, in the mode of ``settings`` (``dbuslib.config.StreamSettings``):
    real-time, or micro-batches (``available_now``: drain what is there and stop, in either mode's
    record path). ``batching``: the sink lingers in real-time mode too (``kafka_sink``)."""
    realtime = settings.trigger == "realtime" and not available_now
    writer = kafka_sink(df.writeStream, kafka, realtime=realtime, batching=batching).queryName(name)
    writer = writer.option("checkpointLocation", checkpoint)
    if realtime:
        query = with_realtime_trigger(writer, settings.realtime_checkpoint_s).start()
        register_planned_stop(df.sparkSession, query, settings.realtime_checkpoint_s, kafka, checkpoint)
        return query
    return with_trigger(writer, available_now, settings.trigger_interval_ms, settings.async_progress).start()


PLANNED_STOP = "dbus.jvm.PlannedStop"
PLANNED_STOP_MARGIN_S = 15  # past the batch's end: its commit, and a busy driver
FIRST_BATCH_WAIT_S = 2.0  # a query stopped as it starts: how long its first batch's offsets may take


@dataclass(frozen=True)
class PlannedStop:
    """How a real-time query is stopped at a committed point (``stop_query``)."""

    cls: Any  # binlog/jvm/src/dbus/jvm/PlannedStop.java through py4j
    wait_ms: int  # the longest wait for the running batch: its length and a margin
    kafka: KafkaEndpoint  # where the query reads: "nothing new since the last commit" is asked there
    checkpoint: str  # the query's checkpoint: where its running batch started


_planned: dict[str, PlannedStop] = {}  # query id -> how to stop it


def register_planned_stop(
    session: Any, query: Any, checkpoint_s: int, kafka: KafkaEndpoint, checkpoint: str
) -> None:
    """A planned stop of the real-time ``query`` ends its running batch at a committed point first
    (``stop_query``), also when SIGTERM reaches the JVM itself (a shutdown hook of PlannedStop.java)."""
    cls = jvm_class(session.sparkContext._jvm, PLANNED_STOP, query.name or "query")
    wait_ms = (checkpoint_s + PLANNED_STOP_MARGIN_S) * 1000
    cls.register(query._jsq, wait_ms)
    _planned[str(query.id)] = PlannedStop(cls, wait_ms, kafka, checkpoint)


def planned_stop_s(query: Any) -> float:
    """How long a planned stop of ``query`` may wait for its running batch (0: not a real-time query)."""
    entry = _planned.get(str(getattr(query, "id", "")))
    return entry.wait_ms / 1000 if entry else 0.0


def offset_log_ends(text: str) -> dict[tuple[str, int], int] | None:
    """``(topic, partition) -> offset`` of a Kafka query's offset-log file (``v1``, then the batch's metadata
    and a JSON line per source: where the batch ended) or initial-offsets file (``v1``, then the JSON);
    None when a source is not Kafka's."""
    lines = [ln for ln in text.replace("\0", "").splitlines() if ln.strip()]
    if not lines or not lines[0].strip().startswith("v"):
        return None
    ends: dict[tuple[str, int], int] = {}
    for line in lines[1:]:
        value = json.loads(line)
        if isinstance(value, dict) and "batchTimestampMs" in value:
            continue  # the batch's metadata
        if not isinstance(value, dict) or not all(isinstance(v, dict) for v in value.values()):
            return None
        ends.update({(topic, int(p)): int(o) for topic, parts in value.items() for p, o in parts.items()})
    return ends


def running_batch_start(checkpoint: str) -> dict[tuple[str, int], int] | None:
    """Where the running batch of the real-time query checkpointed in ``checkpoint`` started: the end of the
    last committed batch (a real-time batch writes its offsets when it ends), or the query's initial offsets
    before any; ``{}`` before the first batch was planned (its initial offsets not written yet); None when
    that cannot be told (not a local path, a batch ended but not committed)."""
    root = Path(checkpoint[len("file:") :] if checkpoint.startswith("file:") else checkpoint)
    if uri_scheme(checkpoint) not in (None, "file") or not root.is_dir():
        return None
    try:
        logged = {int(f.name) for f in (root / "offsets").iterdir() if f.name.isdigit()}
        committed = {int(f.name) for f in (root / "commits").iterdir() if f.name.isdigit()}
        if logged:
            last = max(logged)
            return offset_log_ends((root / "offsets" / str(last)).read_text()) if last in committed else None
        initial = sorted((root / "sources").glob("*/0"))
        ends: dict[tuple[str, int], int] = {}
        for f in initial:
            part = offset_log_ends(f.read_text())
            if part is None:
                return None
            ends.update(part)
        return ends  # {}: no batch planned yet, none has read anything
    except (OSError, ValueError):
        return None


def nothing_since(start: dict[tuple[str, int], int] | None, now: dict[tuple[str, int], int]) -> bool:
    """Whether no partition a batch that started at ``start`` reads holds a record past it ``now`` (so that
    batch has read nothing)."""
    return start is not None and all(now.get(tp, 0) <= off for tp, off in start.items())


def _read_nothing(entry: PlannedStop) -> bool:
    from dbuslib import kafka as kafkalib

    start = running_batch_start(entry.checkpoint)
    deadline = time.monotonic() + FIRST_BATCH_WAIT_S
    while start == {} and time.monotonic() < deadline:  # a first batch being planned: where it starts
        time.sleep(0.05)
        start = running_batch_start(entry.checkpoint)
    if start is None:
        return False
    try:
        now = kafkalib.end_offsets(entry.kafka, sorted({t for t, _ in start}))
    except Exception:
        return False  # Kafka does not answer: wait for the batch to commit instead
    return nothing_since(start, {(tp.topic, tp.partition): int(o) for tp, o in now.items()})


STOP_MARKER_KEY = b"dbus:planned-stop"  # key of a planned stop's marker record; its value: the run id
STOP_MARKER_FUNCTION = "dbus_stop_marker"  # PlannedStop.Marker: ends the marker's run's readers in its JVM


def without_stop_markers(df: Any) -> Any:
    """A stage's Kafka input without the marker records of planned stops (``wake_readers``): every stage
    reading a topic another stage's stop may have written into skips them (``read_topic``, the appender's
    reader). Each marker is handed to ``PlannedStop.Marker`` first, in the task that read it: on a cluster's
    executor, a marker of the task's own run ends that run's readers there at their next record, as the
    driver's stop does in its own JVM (docs/realtime.md, Stopping). Without dbus-jvm.jar markers are only
    skipped."""
    from pyspark.sql import functions as F

    is_marker = F.col("key").eqNullSafe(F.lit(STOP_MARKER_KEY))
    session = df.sparkSession
    try:
        if not session.catalog.functionExists(STOP_MARKER_FUNCTION):  # once: Spark warns of a replaced one
            session.udf.registerJavaFunction(STOP_MARKER_FUNCTION, f"{PLANNED_STOP}$Marker", "boolean")
        seen = F.call_function(STOP_MARKER_FUNCTION, F.col("value"))
    except Exception:  # a session without dbus-jvm.jar (some tests): markers skipped, no executor's stop
        seen = F.lit(True)
    # CASE WHEN: the function runs for markers alone, and cannot be evaluated ahead of the key's test
    return df.where(~F.when(is_marker, seen).otherwise(F.lit(False)))


def input_partitions(query: Any, checkpoint: str) -> set[tuple[str, int]]:
    """The (topic, partition) pairs a real-time query reads: its last batch's end offsets, else where its
    checkpoint says the running batch started; empty when neither tells."""
    progress = getattr(query, "lastProgress", None) or {}
    parts: set[tuple[str, int]] = set()
    for source in progress.get("sources", []):
        end = source.get("endOffset")
        if isinstance(end, str):
            try:
                end = json.loads(end)
            except ValueError:
                continue
        if isinstance(end, dict):
            parts |= {(t, int(p)) for t, ps in end.items() if isinstance(ps, dict) for p in ps}
    if parts:
        return parts
    return set(running_batch_start(checkpoint) or {})


def wake_readers(entry: PlannedStop, query: Any) -> int:
    """A stop marker (key ``STOP_MARKER_KEY``, value the query's run id) written into every partition the
    real-time ``query`` reads, once its readers were told to end at their next record: a reader waiting on an
    idle partition gets one and ends at once, instead of at the batch's end; on a cluster, the executor whose
    reader gets it ends that run's other readers there too (``without_stop_markers``). Returns how many were
    written; 0 when the partitions cannot be told or Kafka refuses (the stop then waits for the batch's
    end)."""
    from dbuslib import kafka as kafkalib

    parts = input_partitions(query, entry.checkpoint)
    if not parts:
        return 0
    run = str(getattr(query, "runId", "") or "").encode()
    try:
        producer = kafkalib.producer(entry.kafka, linger_ms=0)
        try:
            for topic, partition in sorted(parts):
                producer.send(topic, key=STOP_MARKER_KEY, value=run, partition=partition)
            producer.flush(timeout=10)
        finally:
            producer.close(timeout=5)
    except Exception as e:  # the stop goes on without them: at the batch's end at the latest
        import logging

        logging.getLogger("dbus.spark").warning(
            "%s: no stop markers written (%s): the running batch ends at its end time", query.name, e
        )
        return 0
    return len(parts)


def stop_query(query: Any, say: Any) -> None:
    """Stops ``query``; a real-time one at a committed point (a restart replays nothing): at once when
    nothing came since its last committed batch, else once its running batch, told to end at its next
    record, committed. ``say`` tells which."""
    entry = _planned.pop(str(getattr(query, "id", "")), None)
    _quiet()
    if entry is None:
        query.stop()
        return
    if _read_nothing(entry):  # asked before the readers are told to end: no batches run empty meanwhile
        entry.cls.settled()
        say(f"{query.name}: stopping with nothing read in its running batch: a restart replays nothing")
        query.stop()
        return
    say(f"{query.name}: finishing the running real-time batch (at most {entry.wait_ms // 1000} s)")
    running = entry.cls.begin(query._jsq)  # from here the readers end at their next record
    wake_readers(entry, query)  # which an idle partition now gets at once
    batch = entry.cls.awaitCommit(query._jsq, running, entry.wait_ms)
    if batch >= 0:  # said first: with SIGTERM to the whole group the JVM may go while the query stops
        entry.cls.settled()
        say(f"{query.name}: stopped after batch {batch} committed: a restart replays nothing")
    else:
        say(f"{query.name}: stopped before its running batch committed: a restart replays it")
    query.stop()
    entry.cls.resume()


def _quiet() -> None:
    """Spark's own lines off for a stop DBus asked for: stopping a query cancels its running job, which
    Spark logs as ERRORs with stack traces (an aborted write, interrupted tasks) that are no fault; DBus's
    lines (Python's logging, ``say``) tell how the stop went."""
    from pyspark import SparkContext

    try:
        sc = SparkContext._active_spark_context  # the query's: a stage runs one session
        if sc is not None:
            sc.setLogLevel("OFF")
    except Exception:  # the JVM already going (SIGTERM to the group): nothing left to quiet
        pass


def with_realtime_trigger(writer: Any, checkpoint_s: int) -> Any:
    """Spark's real-time mode (docs/realtime.md): batches of ``checkpoint_s`` seconds whose tasks run the
    whole time and pass each record on as it arrives; the duration is how often progress is checkpointed
    (what a restart may redo), not a latency. Needs a task slot for every partition read, at once."""
    return writer.outputMode("update").trigger(realTime=f"{checkpoint_s} seconds")


# Kafka sink producer settings for DBus's stages: the kafka-clients defaults send 16 kB batches, one per
# UMS message of ~25 kB (measured: docs/performance.md).
KAFKA_SINK_OPTIONS = {
    "kafka.acks": "all",
    "kafka.batch.size": "1048576",
    "kafka.linger.ms": "5",
    "kafka.compression.type": "lz4",
}


def kafka_sink(
    writer: Any, kafka: KafkaEndpoint | str, realtime: bool = False, batching: bool = False
) -> Any:
    """``writer`` (batch or streaming) set up for the Kafka sink with DBus's producer settings
    (``kafka_sink_options``)."""
    writer = writer.format("kafka")
    for key, value in kafka_sink_options(kafka, realtime, batching).items():
        writer = writer.option(key, value)
    return writer


def kafka_sink_options(
    kafka: KafkaEndpoint | str, realtime: bool = False, batching: bool = False
) -> dict[str, str]:
    """The Kafka sink's ``kafka.*`` producer options (the one home of DBus's producer settings in Spark: the
    sink, and the appender's JVM producer of a per-row source, appender/job.py), taking records up to
    ``endpoints.kafka.max_message_bytes`` (``kafka.max.request.size``; kafka-clients' default, 1 MiB, failed
    the query on the first larger UMS message). With the endpoint the limit is checked against the broker's
    ``message.max.bytes`` first (dbuslib.kafka.check_message_limit); a bare bootstrap string gets the key's
    default. In ``realtime`` mode records are sent at once (no linger), unless ``batching``: a per-row
    source's records (one per row change, debezium-json's 6.4 kB each) keep the 5 ms linger, which made the
    e2e bench's appender batches fewer and larger (lz4's 128 kB of buffers per batch, the broker's work per
    request: docs/performance.md)."""
    if isinstance(kafka, str):
        limit = KafkaEndpoint.model_fields["max_message_bytes"].default
    else:
        from dbuslib.kafka import check_message_limit

        check_message_limit(kafka)
        limit = kafka.max_message_bytes
    sized = {
        "kafka.max.request.size": str(limit),  # a record must also fit the producer's buffer
        "kafka.buffer.memory": str(max(2 * limit, 33_554_432)),
    }
    latency = {"kafka.linger.ms": "0"} if realtime and not batching else {}
    return {**kafka_client_options(kafka), **KAFKA_SINK_OPTIONS, **sized, **latency}


def kafka_producer_config(
    kafka: KafkaEndpoint | str, realtime: bool = False, batching: bool = False
) -> dict[str, str]:
    """``kafka_sink_options`` in kafka-clients' own spelling (without ``kafka.``): a producer of DBus's own
    with the sink's settings (the appender's ``DirectSink``)."""
    return {k.removeprefix("kafka."): v for k, v in kafka_sink_options(kafka, realtime, batching).items()}


# Kafka source consumer settings. A task's cached consumer may still have a fetch in flight from the
# previous micro-batch, which the broker holds for fetch.max.wait.ms (default 500 ms) before the consumer
# can ask for the new range; consumers only fetch inside tasks, so 10 ms makes no idle polling
# (measured: docs/performance.md).
KAFKA_SOURCE_OPTIONS = {"kafka.fetch.max.wait.ms": "10"}


def kafka_client_options(kafka: KafkaEndpoint | str) -> dict[str, str]:
    """What every Spark Kafka source and sink of DBus is given first: the servers and
    ``endpoints.kafka.security`` (dbuslib.kafka_security.spark_options); a bare bootstrap string (tests,
    benchmarks) is a plaintext cluster."""
    if isinstance(kafka, str):
        return {"kafka.bootstrap.servers": kafka}
    return {"kafka.bootstrap.servers": kafka.bootstrap_servers, **spark_options(kafka.security)}


def kafka_source(reader: Any, kafka: KafkaEndpoint | str) -> Any:
    """``reader`` (``spark.read`` or ``spark.readStream``) set up for the Kafka source of ``kafka``
    (servers and security: ``kafka_client_options``) with DBus's consumer settings."""
    reader = reader.format("kafka")
    for key, value in {**kafka_client_options(kafka), **KAFKA_SOURCE_OPTIONS}.items():
        reader = reader.option(key, value)
    return reader


def read_topic(spark: Any, kafka: KafkaEndpoint | str, topic: str, max_offsets: int | None) -> Any:
    """A stage's input: ``topic`` as a stream of Kafka source rows (key, value, topic, partition, offset,
    timestamp, ...), from the earliest offset on a first start (afterwards the checkpoint decides), at most
    ``max_offsets`` records per micro-batch (None: no cap, as in real-time mode)."""
    reader = kafka_source(spark.readStream, kafka).option("subscribe", topic)
    reader = reader.option("startingOffsets", "earliest")
    if max_offsets is not None:
        reader = reader.option("maxOffsetsPerTrigger", str(max_offsets))
    return without_stop_markers(reader.load())
