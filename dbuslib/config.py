"""One configuration object: loaded once from YAML, validated, frozen, passed down.

Every error names the file and the dotted key, e.g.::

    conf/dbus.yaml: sources.demo.mysql.port: Input should be less than or equal to 65535

Unknown keys are errors (a typo must not silently fall back to a default). Secrets are ``SecretStr``
and print as ``**********``. Relative paths are resolved against the folder of the config file.
Which file: ``find_config`` (``--config``, else ``$DBUS_CONFIG``, else ``./conf/dbus.yaml``, else a source
checkout's conf/dbus.yaml). A file may say ``extends: OTHER`` (relative: to its folder) to be read over
OTHER, mappings merged key by key, its other values replacing OTHER's; ``raw_config`` reads a file so,
each file's relative paths made absolute against its own folder (a changed copy written elsewhere keeps
meaning the same). Any string value may be ``${env:NAME}``, ``${env:NAME:-default}`` or
``${file:/path}``, filled in before validation (``resolve_refs``), so secrets can come from the environment.
The shape, by example (see conf/dbus.yaml for every key)::

    endpoints: {kafka: {bootstrap_servers: "127.0.0.1:19092"}, zookeeper: {hosts: "127.0.0.1:12181"}, ...}
    spark: {master: "local[2]", jars_file: ../.stack/jars/spark.jars}
    sources: {demo: {mysql: {host: 127.0.0.1, port: 13306, ...}, capture: {include: ["shop.*"]}}}
"""

from __future__ import annotations

import fnmatch
import os
import re
import string
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)

from dbuslib.errors import ConfigError
from dbuslib.topics import glob_schemas, include_problems, render
from ums.build import DEFAULT_MAX_BYTES, DEFAULT_MAX_TUPLES

# A source checkout (or an editable install of one) has conf/dbus.yaml beside the packages; an installed
# wheel has not (its sample: SAMPLE_CONFIG, ``dbus config sample``).
CHECKOUT = Path(__file__).resolve().parent.parent
DEFAULT_CONFIG = CHECKOUT / "conf" / "dbus.yaml"
SAMPLE_CONFIG = Path(__file__).resolve().parent / "conf" / "dbus.example.yaml"  # a copy of conf/dbus.yaml
CONFIG_ENV = "DBUS_CONFIG"
LOCAL_CONFIG = Path("conf") / "dbus.yaml"
CONFIG_HELP = (
    "configuration file (default: $DBUS_CONFIG, else ./conf/dbus.yaml, else the source checkout's "
    "conf/dbus.yaml)"
)
_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_\-]*$")


class _Model(BaseModel):
    """Every section: an unknown key is an error, and the loaded object is frozen."""

    model_config = ConfigDict(extra="forbid", frozen=True)


# ---------------------------------------------------------------- endpoints


class KafkaSasl(_Model):
    """SASL credentials: ``mechanism`` PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512; the password usually a
    ``${env:...}`` or ``${file:...}`` reference."""

    mechanism: Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
    username: str = Field(min_length=1)
    password: SecretStr


class Tls(_Model):
    """TLS to a server (Kafka's brokers, a MySQL source), PEM files (relative: to this file's folder):
    ``ca`` the certificates to trust (None: the system's), ``cert`` and ``key`` the client's own (mutual
    TLS; both or neither), ``key_password`` if the key is encrypted; ``check_hostname``: the server's
    certificate must name the host it was reached at."""

    ca: Path | None = None
    cert: Path | None = None
    key: Path | None = None
    key_password: SecretStr | None = None
    check_hostname: bool = True

    @model_validator(mode="after")
    def _pair(self) -> Tls:
        if (self.cert is None) != (self.key is None):
            msg = "cert and key go together (a client certificate needs its key): give both or neither"
            raise ValueError(msg)
        if self.key_password is not None and self.key is None:
            msg = "key_password without key"
            raise ValueError(msg)
        return self


class KafkaSecurity(_Model):
    """How every Kafka client DBus starts reaches the brokers (dbuslib/kafka_security.py spells it for
    each client library): ``protocol`` PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL; ``sasl`` for the
    SASL protocols, ``tls`` for the SSL ones (optional there: the system's CAs, no client certificate)."""

    protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] = "PLAINTEXT"
    sasl: KafkaSasl | None = None
    tls: Tls | None = None

    @model_validator(mode="after")
    def _fits_protocol(self) -> KafkaSecurity:
        if self.protocol.startswith("SASL_") and self.sasl is None:
            msg = f"protocol {self.protocol} needs sasl (mechanism, username, password)"
            raise ValueError(msg)
        if not self.protocol.startswith("SASL_") and self.sasl is not None:
            msg = f"sasl is given but protocol {self.protocol} does not use it (the SASL_* protocols do)"
            raise ValueError(msg)
        if not self.protocol.endswith("SSL") and self.tls is not None:
            msg = f"tls is given but protocol {self.protocol} does not use it (SSL or SASL_SSL does)"
            raise ValueError(msg)
        return self

    @property
    def tls_on(self) -> bool:
        return self.protocol.endswith("SSL")


class KafkaEndpoint(_Model):
    """Kafka. ``security``: how every client reaches the brokers (protocol, SASL, TLS). ``client`` passes
    extra kafka-python options in kafka-python's own spelling, to each client the keys it knows (checked
    against kafka-python when a client is made, not here: ``dbuslib.kafka.client_extras``).
    ``max_message_bytes``: the largest record DBus writes (every producer's ``max.request.size``, the
    ``max.message.bytes`` of the topics it creates); at most the broker's ``message.max.bytes``, checked
    when a stage starts. A UMS message above it is cut into chunks (ums.chunks, docs/ums.md)."""

    bootstrap_servers: str
    security: KafkaSecurity = KafkaSecurity()
    client: dict[str, Any] = Field(default_factory=dict)
    max_message_bytes: int = Field(16_777_216, ge=65_536)

    @field_validator("client")
    @classmethod
    def _no_security_in_client(cls, v: dict[str, Any]) -> dict[str, Any]:
        taken = sorted(k for k in v if k.startswith(("security_", "sasl_", "ssl_")))
        if taken:
            msg = f"{taken}: set through endpoints.kafka.security, which every client (Spark's too) follows"
            raise ValueError(msg)
        return v


class ZooKeeperAuth(_Model):
    """DBus's identity in ZooKeeper (the ``digest`` scheme): every node DBus creates gets an ACL that lets
    only this identity change it, and anyone read it unless ``world_readable`` is off (dbuslib/zk.py)."""

    username: str = Field(min_length=1, pattern=r"^[^:]+$")
    password: SecretStr
    world_readable: bool = True


class ZooKeeperEndpoint(_Model):
    """ZooKeeper: ``hosts`` as kazoo takes them, ``root`` of every DBus node (dbuslib/zkpaths.py),
    ``timeout_s`` for connect and session (an extractor leader's takeover waits for its session to end),
    ``auth``: DBus's digest identity and the ACL of the nodes it creates (none: open nodes)."""

    hosts: str
    root: str = "/DBus"
    timeout_s: float = Field(10.0, gt=0)
    auth: ZooKeeperAuth | None = None

    @field_validator("root")
    @classmethod
    def _absolute(cls, v: str) -> str:
        if not v.startswith("/") or v.endswith("/"):
            msg = f"must start with '/' and not end with one, got {v!r}"
            raise ValueError(msg)
        return v


class InfluxEndpoint(_Model):
    """Where DBus's measurements go: the InfluxDB-protocol server (influxdb-client: url, org, bucket, token)
    and/or ``exporter``, the URL of DBus's Prometheus exporter (``dbus metrics exporter``), which gets every
    point too. Without ``url`` there is no InfluxDB: the points go to the exporter alone and every
    reader (``dbus status``, the console, the heartbeat monitor) asks ``prometheus.server``
    (dbuslib/seriesread.py)."""

    url: str | None = None
    org: str = "-"
    bucket: str = "dbus/autogen"
    token: SecretStr = SecretStr("")
    exporter: str | None = None

    @property
    def where(self) -> str:
        """Where the points go, for a log line: InfluxDB's URL, or the exporter's when there is none."""
        return self.url or f"the Prometheus exporter at {self.exporter}"

    @model_validator(mode="after")
    def _somewhere(self) -> InfluxEndpoint:
        if self.url is None and self.exporter is None:
            msg = "needs url (an InfluxDB), exporter (dbus metrics exporter, for Prometheus) or both"
            raise ValueError(msg)
        return self


class PrometheusSettings(_Model):
    """``dbus metrics exporter`` (dbuslib/promexport.py): where it listens, and how long a series nobody
    writes stays on ``/metrics``; ``server``: the Prometheus that scrapes it (the demo reads through its
    HTTP API); ``spark_metrics``: where the exporter also takes Spark's own metrics, which every Spark stage
    then sends there (its GraphiteSink, dbuslib/graphite.py); none: Spark's metrics stay in Spark."""

    listen: str = "127.0.0.1:19091"
    expire_s: float = Field(600.0, gt=0)
    server: str | None = None
    spark_metrics: str | None = Field(None, pattern=r"^[^:\s]+:\d{1,5}$")


class MetaStore(_Model):
    """SQLAlchemy URL of the meta store (table versions, full-pull history)."""

    url: SecretStr


class RetrySettings(_Model):
    """How long-running stages retry a transient endpoint failure (dbuslib/retry.py): with exponential
    backoff from ``initial_backoff_s`` up to ``max_backoff_s`` between attempts, for at most ``budget_s``
    per call; then ENDPOINT_RETRIES_EXHAUSTED (exit 3)."""

    budget_s: float = Field(60.0, gt=0)
    initial_backoff_s: float = Field(0.2, gt=0)
    max_backoff_s: float = Field(5.0, gt=0)


class RegistryEndpoint(_Model):
    """A Confluent-compatible schema registry (the ``avro`` output format, docs/formats.md): ``url`` of its
    Confluent API (Apicurio's ``.../apis/ccompat/v6``), HTTP basic auth when ``username`` is set."""

    url: str
    username: str | None = None
    password: SecretStr = SecretStr("")
    timeout_s: float = Field(10.0, gt=0)


class Endpoints(_Model):
    """The servers every source shares, and how a transient failure of one is retried."""

    kafka: KafkaEndpoint
    zookeeper: ZooKeeperEndpoint
    influxdb: InfluxEndpoint
    meta_store: MetaStore
    registry: RegistryEndpoint | None = None
    retry: RetrySettings = Field(default_factory=RetrySettings)


SPARK_STAGES = ("dispatcher", "appender", "fullpuller", "reconcile", "logprocessor")


class SparkSettings(_Model):
    """How the Spark stages run. ``jars_file`` holds the comma-separated connector jars (make stack-up).
    ``checkpoint_root``: a folder (relative: to this file's) or any Hadoop filesystem URI (``hdfs://``,
    ``s3a://``, ``file:///shared``) that the driver of every stage reaches. ``conf``: Spark settings of
    every stage; ``stages.<stage>``: more for one stage (its resources: ``spark.cores.max``,
    ``spark.executor.cores``, ``spark.executor.memory``, ``spark.executor.instances``), over the sizing
    ``dbus submit`` computes (dbuslib.spark.resources). ``class_data_sharing``: a driver starts from the
    archive of the classes a stage loads when ``dbus spark cds`` made it (dbuslib/sparkcds.py)."""

    master: str = "local[2]"
    jars_file: Path = Path("../.stack/jars/spark.jars")
    checkpoint_root: str = "../.stack/checkpoints"
    conf: dict[str, str] = Field(default_factory=dict)
    stages: dict[str, dict[str, str]] = Field(default_factory=dict)
    class_data_sharing: bool = True

    @field_validator("stages")
    @classmethod
    def _stage_names(cls, v: dict[str, dict[str, str]]) -> dict[str, dict[str, str]]:
        unknown = sorted(set(v) - set(SPARK_STAGES))
        if unknown:
            msg = f"unknown stage(s) {unknown}; known: {', '.join(SPARK_STAGES)}"
            raise ValueError(msg)
        return v


# ---------------------------------------------------------------- sources


class MysqlAccount(_Model):
    """A second account on the source (``mysql.writer``: heartbeat rows and the demo's workload)."""

    user: str
    password: SecretStr


class MysqlConnection(_Model):
    """How DBus reaches a source. ``user`` reads the binlog (replication privileges only); the optional
    ``writer`` account writes heartbeat rows and is used by the demo workload. ``tls``: TLS, required when
    set (a server that does not offer it is refused), on every connection DBus makes to the server (the
    binlog reader, pymysql's, the full puller's reads, reconcile's JDBC write)."""

    host: str
    port: int = Field(3306, ge=1, le=65535)
    user: str
    password: SecretStr
    server_id: int = Field(..., ge=1, le=2**32 - 1, description="replica server_id, unique per reader")
    charset: str = "utf8mb4"
    writer: MysqlAccount | None = None
    tls: Tls | None = None


def _check_table_pattern(pattern: str) -> str:
    if pattern.count(".") != 1 or not all(pattern.split(".")):
        msg = f"table pattern must be 'schema.table' (globs allowed), got {pattern!r}"
        raise ValueError(msg)
    return pattern


class Capture(_Model):
    """Which tables are captured: fnmatch globs over ``schema.table``; exclude wins over include."""

    include: tuple[str, ...] = ("*.*",)
    exclude: tuple[str, ...] = ()

    @field_validator("include", "exclude")
    @classmethod
    def _patterns(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(_check_table_pattern(p) for p in v)


_TOPIC_FIELDS = {
    "raw": {"ds"},
    "schema": {"ds", "schema"},
    "result": {"ds", "schema", "table"},
    "table": {"ds", "schema", "table"},
    "events": {"ds", "schema"},
}


class Topics(_Model):
    """Topic name templates; placeholders ``{ds}``, ``{schema}``, ``{table}`` where they make sense."""

    raw: str = "{ds}"
    schema_: str = Field("{ds}.{schema}", alias="schema")
    result: str = "{ds}.{schema}.result"
    table: str = "{ds}.{schema}.{table}"  # a table's own result topic (output.topic: table)
    events: str = "{ds}.{schema}.events"  # UMS heartbeats/terminations of per-row formats (docs/formats.md)
    ctrl: str = "{ds}_ctrl"
    dead_letter: str = "{ds}.dlq"
    data_shards: str = "{ds}_data_shards"
    callback: str = "{ds}_callback"
    global_ctrl: str = "global_ctrl_topic"
    partitions: int = Field(1, ge=1)
    replication_factor: int = Field(1, ge=1)

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    @model_validator(mode="after")
    def _templates(self) -> Topics:
        for name in (
            "raw",
            "schema_",
            "result",
            "table",
            "events",
            "ctrl",
            "dead_letter",
            "data_shards",
            "callback",
            "global_ctrl",
        ):
            allowed = _TOPIC_FIELDS.get(name.rstrip("_"), {"ds"})
            template = getattr(self, name)
            used = {f for _, f, _, _ in string.Formatter().parse(template) if f is not None}
            if used - allowed:
                msg = f"{name.rstrip('_')}: unknown placeholder(s) {sorted(used - allowed)} in {template!r}"
                raise ValueError(msg)
        return self

    def name(self, kind: str, ds: str, schema: str = "", table: str = "") -> str:
        """Topic of ``kind`` ('raw', 'schema', 'result', 'ctrl', ...) for one source/schema/table; schema
        and table are escaped to legal topic characters (dbuslib.topics.escape: ``shöp`` -> ``sh_x00f6p``)."""
        template = self.schema_ if kind == "schema" else getattr(self, kind)
        return render(template, ds, schema, table)


MaskType = Literal["replace", "md5", "sha256", "murmur3", "regex", "default", "truncate"]


class MaskRule(_Model):
    """How one column is desensitized. ``salt`` is fixed; ``salt_field`` salts with another column."""

    type: MaskType
    value: str | None = None
    salt: SecretStr | None = None
    salt_field: str | None = None
    pattern: str | None = None
    replacement: str | None = None
    length: int | None = Field(None, ge=0)

    @model_validator(mode="after")
    def _fits_type(self) -> MaskRule:
        need = {"replace": ("value",), "regex": ("pattern", "replacement"), "truncate": ("length",)}
        missing = [k for k in need.get(self.type, ()) if getattr(self, k) is None]
        if missing:
            msg = f"mask type {self.type!r} needs {', '.join(missing)}"
            raise ValueError(msg)
        if self.salt is not None and self.salt_field is not None:
            msg = "give salt or salt_field, not both"
            raise ValueError(msg)
        if self.pattern is not None:
            try:
                re.compile(self.pattern)
            except re.error as e:
                msg = f"pattern {self.pattern!r} is not a valid regex: {e}"
                raise ValueError(msg) from e
        return self


def _mask_tables(v: dict[str, dict[str, MaskRule]]) -> dict[str, dict[str, MaskRule]]:
    for table in v:
        _check_table_pattern(table)
    return v


# A source's ``masking``: per ``schema.table`` pattern (globs allowed), per column, its rule
Masking = Annotated[dict[str, dict[str, MaskRule]], AfterValidator(_mask_tables)]


class MonitorSettings(_Model):
    """The heartbeat monitor's keys, the same for database sources (``sources.<ds>.heartbeat``) and log
    sources (``log_sources.<ds>.heartbeat``); seconds throughout.

    ``check_interval_s``: the monitor looks at the time-series data this often; a table is *stale* when its
    last heartbeat point is older than ``timeout_s`` and *slow* when its last end-to-end latency exceeds
    ``latency_alert_s``. Alerts always go to the log, and also to ``webhook_url`` (a JSON POST,
    ``webhook_timeout_s`` per attempt) and to ``smtp`` when given. Dead letters (heartbeat.deadletters): an
    incident per stage and code when more than ``dead_letter_threshold`` arrive within one check; it clears
    after ``dead_letter_quiet_s`` without any."""

    class Smtp(_Model):
        """An SMTP server that relays alert emails; ``user``/``password`` only when it wants a login."""

        host: str
        port: int = Field(25, ge=1, le=65535)
        from_addr: str
        to_addrs: tuple[str, ...] = Field(..., min_length=1)
        user: str | None = None
        password: SecretStr | None = None
        starttls: bool = False
        timeout_s: float = Field(10.0, gt=0)

    interval_s: float = Field(60.0, ge=1)
    check_interval_s: float = Field(30.0, ge=1)
    timeout_s: float = Field(600.0, gt=0)
    latency_alert_s: float = Field(300.0, gt=0)
    webhook_url: str | None = None
    webhook_timeout_s: float = Field(10.0, gt=0)
    smtp: Smtp | None = None
    dead_letter_threshold: int = Field(0, ge=0)
    dead_letter_quiet_s: float = Field(600.0, gt=0)

    @field_validator("webhook_url")
    @classmethod
    def _http_url(cls, v: str | None) -> str | None:
        if v is not None and not re.match(r"^https?://[^/\s]+", v):
            msg = f"must be an http:// or https:// URL, got {v!r}"
            raise ValueError(msg)
        return v


class HeartbeatSettings(MonitorSettings):
    """Heartbeat rows written into the source (one row per monitored table every ``interval_s``, into
    ``schema``.``table``), and the monitor's alerts (MonitorSettings)::

        heartbeat: {interval_s: 60, check_interval_s: 30, timeout_s: 600, latency_alert_s: 300,
                    webhook_url: "http://alerts.example/dbus",
                    smtp: {host: mail.example, port: 587, from_addr: dbus@example, to_addrs: [ops@example],
                           user: dbus, password: secret, starttls: true}}
    """

    schema_: str = Field("dbus", alias="schema")
    table: str = "db_heartbeat_monitor"

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class UmsSettings(_Model):
    """The UMS messages of one source: at most ``tuples_per_message`` rows and ``max_message_bytes`` bytes
    each, times in ``timezone`` (IANA name), ``b`` rows before each ``u`` when ``before_update_image``,
    ``format`` json or avro (docs/ums.md)."""

    tuples_per_message: int = Field(DEFAULT_MAX_TUPLES, ge=1)
    max_message_bytes: int = Field(DEFAULT_MAX_BYTES, ge=1024)
    timezone: str = "UTC"
    before_update_image: bool = False
    format: Literal["json", "avro"] = "json"


GLOB_APPENDER_BATCH_S = 30  # an appender following a schema glob: its real-time batch unless configured


class StreamSettings(_Model):
    """A Spark stage's micro-batches: records read per micro-batch at most (back pressure; the Kafka
    source's ``maxOffsetsPerTrigger``), the trigger interval (0 = the next batch as soon as one ends), and
    whether progress is checkpointed asynchronously (Spark's ``asyncProgressTrackingEnabled``). ``trigger``
    ``realtime``: Spark's real-time mode instead (docs/realtime.md), records passed on as they arrive, in
    batches of ``realtime_checkpoint_s`` seconds (the first three keys then do not apply)."""

    max_offsets_per_trigger: int = Field(100_000, ge=1)
    trigger_interval_ms: int = Field(200, ge=0)
    async_progress: bool = True
    trigger: Literal["microbatch", "realtime"] = "realtime"
    # Spark refuses less (realTimeMode.minBatchDuration); 300 is Spark's own default: each batch boundary
    # stalls the records of about a third of a second, so the longer the batch the smaller the share of rows
    # it delays (the e2e p99, docs/performance.md); a planned stop does not wait for it (stop markers)
    realtime_checkpoint_s: int = Field(300, ge=5)


class AppenderSettings(StreamSettings):
    """``jvm_decoder``: decode rows in the JVM (``dbus_rows``, binlog/jvm) when its jar is on the
    classpath; off, every record is decoded in Python (same output, several times slower).
    ``realtime_spare_tasks``: in real-time mode, with schemas captured through a glob, the task slots
    sized beyond the partitions of the schema topics at start, for the topics that appear later (a real-time
    batch runs all its tasks at once; a task beyond the slots reads nothing: docs/appender.md)."""

    max_offsets_per_trigger: int = Field(20_000, ge=1)
    jvm_decoder: bool = True
    realtime_spare_tasks: int = Field(8, ge=0)


class FullPullSettings(_Model):
    """The full puller of one source (fullpuller/): ``shard_size`` rows per shard unless a request says
    otherwise (-1: one shard), ``parallelism`` shards pulled at once, ``fetch_rows`` rows a shard reader
    fetches per round trip, ``progress_interval_s`` how often a shard reports its rows to ZooKeeper."""

    shard_size: int = Field(250_000, ge=-1)
    parallelism: int = Field(2, ge=1)
    fetch_rows: int = Field(5000, ge=1)
    progress_interval_s: float = Field(2.0, gt=0)
    repull_on_row_loss: bool = False  # the appender asks for a full pull after DDL removed rows

    @field_validator("shard_size")
    @classmethod
    def _shard_size(cls, v: int) -> int:
        if v == 0:
            msg = "must be a positive number of rows, or -1 for one shard"
            raise ValueError(msg)
        return v


class ExtractorSettings(_Model):
    """The binlog reader of one source. ``start`` applies only when no position was ever committed:
    ``current`` (the binlog's end now), ``earliest`` (the oldest binlog still on the server), ``FILE:POS``
    or a GTID position such as ``0-1-42``. ``producer`` passes kafka-python options (acks stays all).
    ``flush_when_quiet``: at a transaction's end with nothing more in the binlog, send at once instead
    of waiting the producer's ``linger_ms`` (a busy binlog keeps batching)."""

    start: str = "current"
    commit_interval_s: float = Field(1.0, gt=0)
    max_pending_records: int = Field(2000, ge=1)
    max_pending_bytes: int = Field(64 * 1024 * 1024, ge=1024 * 1024)
    max_record_bytes: int = Field(1_000_000, ge=4096)
    state_dir: Path = Path("../.stack/extractor")
    metrics_interval_s: float = Field(10.0, gt=0)
    retry_for_s: float = Field(60.0, ge=0)
    flush_when_quiet: bool = True
    producer: dict[str, Any] = Field(
        default_factory=lambda: {"compression_type": "lz4", "linger_ms": 5, "batch_size": 1_048_576}
    )

    @field_validator("start")
    @classmethod
    def _start(cls, v: str) -> str:
        if (
            v in ("current", "earliest")
            or re.fullmatch(r"[^:\s]+\.\d+:\d+", v)
            or re.fullmatch(r"\d+-\d+-\d+(,\d+-\d+-\d+)*", v)
        ):
            return v
        msg = f"must be current, earliest, FILE:POS or a GTID position like 0-1-42, got {v!r}"
        raise ValueError(msg)

    @field_validator("producer")
    @classmethod
    def _no_unsafe(cls, v: dict[str, Any]) -> dict[str, Any]:
        unsafe = sorted(k for k in v if k in ("acks", "enable_idempotence", "allow_auto_create_topics"))
        if unsafe:
            msg = f"{unsafe} cannot be changed: the extractor must not lose or reorder records"
            raise ValueError(msg)
        return v


OutputFormat = Literal["ums", "debezium-json", "canal-json", "avro"]  # ums.formats.FORMATS


class DebeziumSettings(_Model):
    """How the Debezium-shaped formats (debezium-json, avro) write values: Debezium's MySQL connector
    options of the same names (``ums.formats.FormatOptions``, docs/formats.md). ``schemas``: debezium-json
    records carry ``schema`` beside ``payload`` (Kafka Connect's JsonConverter ``schemas.enable``)."""

    schemas: bool = True
    decimal_handling_mode: Literal["precise", "double", "string"] = "precise"
    time_precision_mode: Literal["adaptive_time_microseconds", "connect"] = "adaptive_time_microseconds"
    bigint_unsigned_handling_mode: Literal["long", "precise"] = "long"
    binary_handling_mode: Literal["bytes", "base64", "base64-url-safe", "hex"] = "bytes"
    propagate_source_types: bool = True


RegistryCompatibility = Literal[
    "BACKWARD", "BACKWARD_TRANSITIVE", "FORWARD", "FORWARD_TRANSITIVE", "FULL", "FULL_TRANSITIVE", "NONE"
]


class OutputSettings(_Model):
    """What the result records of a source look like (docs/formats.md).

    ``format``: ``ums`` (UMS messages, ``ums.format`` json or avro; the default), or a per-row format
    (``debezium-json``, ``canal-json``, ``avro`` in the Confluent wire format through
    ``endpoints.registry``): one record per row change, keyed by the primary key. ``tables``: per table
    glob (``schema.table``), another format; the first glob that matches wins. ``tombstones``: a per-row
    delete is followed by a tombstone. ``topic``: ``schema`` (``topics.result``) or ``table``
    (``topics.table``, a topic per table). ``compatibility``: the registry subjects' level (avro)."""

    format: OutputFormat = "ums"
    tables: dict[str, OutputFormat] = Field(default_factory=dict)
    tombstones: bool = True
    topic: Literal["schema", "table"] = "schema"
    debezium: DebeziumSettings = DebeziumSettings()
    compatibility: RegistryCompatibility = "BACKWARD"

    @field_validator("tables")
    @classmethod
    def _table_globs(cls, v: dict[str, OutputFormat]) -> dict[str, OutputFormat]:
        for table in v:
            _check_table_pattern(table)
        return v

    def format_for(self, schema: str, table: str) -> str:
        """The format of ``schema.table``: its first matching ``tables`` glob, else ``format``."""
        name = f"{schema}.{table}"
        for pattern, fmt in self.tables.items():
            if fnmatch.fnmatchcase(name, pattern):
                return fmt
        return self.format

    @property
    def formats(self) -> frozenset[str]:
        """Every format this source may write."""
        return frozenset({self.format, *self.tables.values()})

    @property
    def per_row(self) -> bool:
        """Whether any table of this source is written in a per-row format (not ``ums``)."""
        return any(f != "ums" for f in self.formats)

    def options(self) -> Any:
        """The ``ums.formats.FormatOptions`` of these settings."""
        from ums.formats import FormatOptions

        d = self.debezium
        return FormatOptions(
            tombstones=self.tombstones,
            schemas=d.schemas,
            decimal_handling_mode=d.decimal_handling_mode,
            time_precision_mode=d.time_precision_mode,
            bigint_unsigned_handling_mode=d.bigint_unsigned_handling_mode,
            binary_handling_mode=d.binary_handling_mode,
            propagate_source_types=d.propagate_source_types,
        )


class Source(_Model):
    """One captured database server ("data source" in the original)."""

    type: Literal["mysql"] = "mysql"
    mysql: MysqlConnection
    capture: Capture = Capture()
    topics: Topics = Topics()
    masking: Masking = Field(default_factory=dict)
    heartbeat: HeartbeatSettings = HeartbeatSettings()
    ums: UmsSettings = UmsSettings()
    extractor: ExtractorSettings = ExtractorSettings()
    dispatcher: StreamSettings = StreamSettings()
    appender: AppenderSettings = AppenderSettings()
    fullpull: FullPullSettings = FullPullSettings()
    output: OutputSettings = OutputSettings()

    @model_validator(mode="after")
    def _avro_appender_in_microbatches(self) -> Source:
        """A source writing UMS in Avro (``ums.format: avro``) runs its appender in micro-batches unless
        ``appender.trigger`` says otherwise: in real-time mode its records take the Python sidecar one by
        one (docs/realtime.md), fewer rows/s than micro-batches give it. The per-row ``output`` formats
        (debezium-json, canal-json, avro) stay real-time: the JVM writes them there, at several times
        micro-batch mode's rows/s (measured: docs/performance.md)."""
        if self.ums.format == "avro" and "trigger" not in self.appender.model_fields_set:
            object.__setattr__(self, "appender", self.appender.model_copy(update={"trigger": "microbatch"}))
        return self

    @model_validator(mode="after")
    def _glob_appender_in_short_batches(self) -> Source:
        """An appender that follows a schema glob (``capture.include`` ``db_*.*``) finds a new schema's topic
        when a real-time batch starts (docs/appender.md): unless ``appender.realtime_checkpoint_s`` says
        otherwise its batches last ``GLOB_APPENDER_BATCH_S``, not the default 300 s, so a schema made while
        it runs is read within half a minute, not five."""
        if glob_schemas(self) and "realtime_checkpoint_s" not in self.appender.model_fields_set:
            update = {"realtime_checkpoint_s": GLOB_APPENDER_BATCH_S}
            object.__setattr__(self, "appender", self.appender.model_copy(update=update))
        return self


# ---------------------------------------------------------------- log sources

# Shipper record formats (docs/logs.md, Shipper records): the original's six and the local stack's rsyslog.
LogType = Literal[
    "log_rsyslog", "log_logstash", "log_logstash_json", "log_filebeat", "log_flume", "log_json", "log_ums"
]
_LOG_TOPIC_FIELDS = {"result": {"ds", "schema", "table"}}


class LogTopics(_Model):
    """Topic name templates of a log source; ``{schema}`` is the source's ``schema``."""

    raw: str = "{ds}"
    result: str = "{ds}.{schema}.result"
    ctrl: str = "{ds}_ctrl"
    dead_letter: str = "{ds}.dlq"
    unknown: str = "{ds}._unknown_table_"
    partitions: int = Field(1, ge=1)
    replication_factor: int = Field(1, ge=1)

    @model_validator(mode="after")
    def _templates(self) -> LogTopics:
        for name in ("raw", "result", "ctrl", "dead_letter", "unknown"):
            allowed = _LOG_TOPIC_FIELDS.get(name, {"ds"})
            template = getattr(self, name)
            used = {f for _, f, _, _ in string.Formatter().parse(template) if f is not None}
            if used - allowed:
                msg = f"{name}: unknown placeholder(s) {sorted(used - allowed)} in {template!r}"
                raise ValueError(msg)
        return self

    def name(self, kind: str, ds: str, schema: str = "", table: str = "") -> str:
        """Topic of ``kind`` ('raw', 'result', 'ctrl', 'dead_letter', 'unknown'), escaped as in Topics."""
        return render(getattr(self, kind), ds, schema, table)


class LogShipper(_Model):
    """What the local stack's rsyslog ships for this source: file globs (relative: to this file's folder)
    tailed line by line into the raw topic (docs/logs.md, The shipper)."""

    files: tuple[str, ...] = ()


class LogHeartbeat(MonitorSettings):
    """Heartbeat lines for a log source: the writer appends one to ``file`` every ``interval_s``; they
    travel through the shipper and the processor like any line, and the monitor alerts per host and table
    (MonitorSettings; docs/logs.md, Heartbeats)."""

    file: Path | None = None  # relative: to this file's folder; must be one of shipper.files' matches


class LogUms(_Model):
    """UMS of log tables: the zone of ``ums_ts_`` and datetime columns, and the message size cap."""

    timezone: str = "UTC"
    max_message_bytes: int = Field(DEFAULT_MAX_BYTES, ge=1024)


class LogProcessorSettings(StreamSettings):
    """The log processor stage: its stream settings and how lines meet tables."""

    multi_table: bool = True  # every table tries every line (the original's multiTable); false: first wins
    max_line_bytes: int = Field(1_000_000, ge=1024)  # a longer record is a dead letter (LOG_RECORD_TOO_LARGE)
    heartbeat_type: str = "dbus-heartbeat"  # the ``type`` that marks a shipper's heartbeat record
    # micro-batches: a publish switches rules between two batches, at the offsets it answers (in real-time
    # mode a batch lasts realtime_checkpoint_s: the open one is replayed, under the old rules)
    trigger: Literal["microbatch", "realtime"] = "microbatch"
    # in real-time mode a publish's new rules apply from the next batch: batches of 30 s, not 300
    realtime_checkpoint_s: int = Field(30, ge=5)
    # the rows of up to this many consecutive records of a partition share a table's message per host (the
    # original's one message per host and table per poll of <= 300 records); 1: each record its own messages
    message_records: int = Field(300, ge=1)
    # each rule regex's run on a cell (match, find, split, replace) may take this long; a line over it is a
    # dead letter LOG_RULE_BUDGET and the lines after it go on (docs/logs.md, Regex budget)
    regex_budget_ms: int = Field(100, ge=1, le=60_000)


class LogSource(_Model):
    """One log data source: shipped lines in a raw topic, made into tables by rule groups (docs/logs.md)."""

    type: LogType = "log_rsyslog"
    schema_: str = Field("{ds}_schema", alias="schema")
    host: str | None = None  # log_json only: the host of every record (the original's log.json.host)
    shipper: LogShipper = LogShipper()
    topics: LogTopics = LogTopics()
    masking: Masking = Field(default_factory=dict)
    heartbeat: LogHeartbeat = LogHeartbeat()
    ums: LogUms = LogUms()
    processor: LogProcessorSettings = LogProcessorSettings()

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    @model_validator(mode="after")
    def _json_host(self) -> LogSource:
        if self.type == "log_json" and not self.host:
            msg = (
                "host: a log_json source needs the host its records come from (the original's log.json.host)"
            )
            raise ValueError(msg)
        return self

    def schema_name(self, ds: str) -> str:
        """The schema name of this source's tables (``{ds}`` filled in)."""
        return self.schema_.replace("{ds}", ds)


class ConsoleUser(_Model):
    """One login of the web console: ``role`` viewer (reads every page) or operator (also requests full
    pulls, publishes log rules, acknowledges alerts); ``password_hash`` as ``dbus console hash-password``
    prints it (werkzeug's scrypt form), usually a ``${env:...}`` or ``${file:...}`` reference. A user whose
    hash is empty cannot log in."""

    name: str = Field(..., min_length=1, pattern=r"^[A-Za-z0-9_.@-]+$")
    role: Literal["viewer", "operator"] = "viewer"
    password_hash: SecretStr = SecretStr("")


class ConsoleSettings(_Model):
    """The web console (``dbus console``, docs/console.md). ``listen``: host:port it serves on;
    ``secret_key`` signs the session cookies (a random one per start when unset); ``audit_log``: the
    JSON-lines file of every operator action (relative to this file's folder); ``refresh_s``: how often the
    pages poll for fresh figures. Logins live in the console's memory (a restart or a logout ends them):
    ``session_hours`` after the login at most, ``session_idle_minutes`` without a request; the cookies are
    ``Secure`` with ``secure_cookies`` (for a console served over TLS, by a proxy). Failed logins in the
    last ``login_window_s`` seconds, per user name and per client address: from ``login_slow_after`` on
    each attempt waits ``login_delay_s``, from ``login_user_failures`` (a name) or
    ``login_address_failures`` (an address) on they are refused (429) until the window frees."""

    listen: str = Field("127.0.0.1:18088", pattern=r"^[^:\s]+:\d{1,5}$")
    users: tuple[ConsoleUser, ...] = ()
    secret_key: SecretStr | None = None
    audit_log: Path = Path("console-audit.log")
    refresh_s: float = Field(3.0, ge=0.5)
    session_hours: float = Field(12.0, gt=0)
    session_idle_minutes: float = Field(60.0, gt=0)
    secure_cookies: bool = False
    login_window_s: float = Field(60.0, gt=0)
    login_slow_after: int = Field(5, ge=1)
    login_delay_s: float = Field(1.0, ge=0, le=10)
    login_user_failures: int = Field(10, ge=1)
    login_address_failures: int = Field(30, ge=1)

    @field_validator("users")
    @classmethod
    def _unique_users(cls, v: tuple[ConsoleUser, ...]) -> tuple[ConsoleUser, ...]:
        names = [u.name for u in v]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            msg = f"user names must be unique: {twice}"
            raise ValueError(msg)
        return v


def _with_absolute_pem(node: Any, where: tuple[str, ...], base: Path) -> Any:
    """``node`` with the relative ``ca``/``cert``/``key`` paths of the TLS block at ``where`` (a path of keys)
    joined to ``base`` (new dicts on the way down); ``node`` itself when the block is not there."""
    if not isinstance(node, dict):
        return node
    if where:
        if where[0] not in node:
            return node
        return {**node, where[0]: _with_absolute_pem(node[where[0]], where[1:], base)}
    return {
        k: str(base / v) if k in _PEM_KEYS and isinstance(v, str) and not Path(v).is_absolute() else v
        for k, v in node.items()
    }


class LoggingSettings(_Model):
    """How DBus's processes log (dbuslib/logs.py): ``text`` lines, or ``json`` lines in Spark's structured
    form (``pyspark.logger.SPARK_LOG_SCHEMA``: ts, level, msg, context, exception, logger), the Spark
    stages' own lines included (``spark.log.structuredLogging.enabled``)."""

    format: Literal["text", "json"] = "text"
    # the level of Spark's own (log4j) lines in a stage's log once its session runs: WARN keeps an idle
    # stage's log to DBus's lines and real problems (INFO writes ~200 lines a minute); the lines Spark
    # writes while it starts come before and keep Spark's default, INFO
    spark_level: Literal["ALL", "DEBUG", "INFO", "WARN", "ERROR", "FATAL", "OFF"] = "WARN"


def _named(sources: dict[str, Any], kind: str) -> dict[str, Any]:
    """``sources`` when each name may name topics and ZooKeeper nodes; else ValueError naming the others."""
    bad = [name for name in sources if not _NAME.match(name)]
    if bad:
        msg = f"{kind} names may hold letters, digits, '_' and '-' only: {bad}"
        raise ValueError(msg)
    return sources


class DbusConfig(_Model):
    """The whole file (docs/configuration.md lists every key); ``path`` is where it was read from, and
    relative paths in it resolve against that file's folder."""

    endpoints: Endpoints
    spark: SparkSettings = SparkSettings()
    sources: dict[str, Source]
    log_sources: dict[str, LogSource] = Field(default_factory=dict)
    console: ConsoleSettings = ConsoleSettings()
    logging: LoggingSettings = LoggingSettings()
    prometheus: PrometheusSettings = PrometheusSettings()
    path: Path = Field(DEFAULT_CONFIG, exclude=True)

    @model_validator(mode="before")
    @classmethod
    def _pem_paths(cls, data: Any) -> Any:
        """The PEM files of ``endpoints.kafka.security.tls`` and each ``sources.<ds>.mysql.tls`` made
        absolute against the file's folder here, once: every client is built from its endpoint alone."""
        if not isinstance(data, dict):
            return data
        base = Path(data.get("path", DEFAULT_CONFIG)).parent
        data = _with_absolute_pem(data, ("endpoints", "kafka", "security", "tls"), base)
        sources = data.get("sources")
        for ds in sources if isinstance(sources, dict) else ():
            data = _with_absolute_pem(data, ("sources", ds, "mysql", "tls"), base)
        return data

    @field_validator("sources")
    @classmethod
    def _source_names(cls, v: dict[str, Source]) -> dict[str, Source]:
        if not v:
            msg = "at least one source is needed"
            raise ValueError(msg)
        return _named(v, "source")

    @field_validator("sources")
    @classmethod
    def _topic_names(cls, v: dict[str, Source]) -> dict[str, Source]:
        """Topics named by the config (fixed templates, literal schemas of ``capture.include``) that Kafka
        would refuse, each naming its key (dbuslib.topics.include_problems)."""
        problems = [p for name, src in v.items() if _NAME.match(name) for p in include_problems(name, src)]
        if problems:
            raise ValueError("; ".join(problems))
        return v

    @field_validator("log_sources")
    @classmethod
    def _log_source_names(cls, v: dict[str, LogSource]) -> dict[str, LogSource]:
        return _named(v, "log source")

    @model_validator(mode="after")
    def _one_name_space(self) -> DbusConfig:
        """A name is a database source or a log source, never both (they share topics and ZooKeeper)."""
        both = sorted(set(self.sources) & set(self.log_sources))
        if both:
            msg = f"log_sources: {both} already name(s) a source under 'sources'"
            raise ValueError(msg)
        return self

    @model_validator(mode="after")
    def _record_limits(self) -> DbusConfig:
        """A raw record (extractor.max_record_bytes + the producer's 64 KiB of headroom) must fit the topics'
        ``max.message.bytes`` (endpoints.kafka.max_message_bytes)."""
        limit = self.endpoints.kafka.max_message_bytes
        over = [
            (n, s.extractor.max_record_bytes)
            for n, s in self.sources.items()
            if s.extractor.max_record_bytes + 65_536 > limit
        ]
        if over:
            msg = (
                f"sources.{over[0][0]}.extractor.max_record_bytes must be at most endpoints.kafka."
                f"max_message_bytes ({limit}) - 65536, got {over[0][1]}"
            )
            raise ValueError(msg)
        return self

    @model_validator(mode="after")
    def _a_metrics_reader(self) -> DbusConfig:
        """Without InfluxDB the figures are read from Prometheus: it must be named."""
        if self.endpoints.influxdb.url is None and self.prometheus.server is None:
            msg = (
                "endpoints.influxdb has no url (no InfluxDB): prometheus.server must name the Prometheus "
                "that scrapes the exporter, where dbus status, the console and the heartbeat monitor read"
            )
            raise ValueError(msg)
        return self

    @model_validator(mode="after")
    def _registry_for_avro(self) -> DbusConfig:
        """A source that writes the ``avro`` output format needs ``endpoints.registry``."""
        if self.endpoints.registry is None:
            avro = sorted(n for n, s in self.sources.items() if "avro" in s.output.formats)
            if avro:
                msg = f"sources.{avro[0]}.output: format avro needs endpoints.registry (a registry URL)"
                raise ValueError(msg)
        return self

    def source(self, name: str) -> Source:
        """The source called ``name``; ConfigError naming the known ones otherwise."""
        try:
            return self.sources[name]
        except KeyError:
            msg = (
                f"{self.path}: no source {name!r} under 'sources' (known: {', '.join(sorted(self.sources))})"
            )
            raise ConfigError(msg) from None

    def log_source(self, name: str) -> LogSource:
        """The log source called ``name``; ConfigError naming the known ones otherwise."""
        try:
            return self.log_sources[name]
        except KeyError:
            known = ", ".join(sorted(self.log_sources)) or "none"
            msg = f"{self.path}: no log source {name!r} under 'log_sources' (known: {known})"
            raise ConfigError(msg) from None

    def resolve(self, p: Path) -> Path:
        """A path from the file, made absolute against the config file's folder."""
        return p if p.is_absolute() else (self.path.parent / p).resolve()


def _format_errors(path: Path, err: ValidationError) -> str:
    lines = []
    for e in err.errors():
        key = ".".join(str(x) for x in e["loc"]) or "(top level)"
        lines.append(f"{path}: {key}: {e['msg']}")
    return "\n".join(lines)


def is_checkout() -> bool:
    """True when the packages run from a source checkout (or an editable install of one), not from an
    installed wheel: its pyproject.toml sits beside them."""
    return (CHECKOUT / "pyproject.toml").is_file()


def find_config(explicit: str | Path | None = None) -> Path:
    """The configuration file to read, the first of: ``explicit`` (``--config FILE``), ``$DBUS_CONFIG``,
    ``./conf/dbus.yaml`` in the current directory, and (a source checkout only) the checkout's
    conf/dbus.yaml. The first two are returned as given, missing or not (``load_config`` then says so);
    the last two only when they exist. ConfigError naming every place searched when none applies::

        no configuration file: not --config FILE (not given), not $DBUS_CONFIG (not set), not
        /home/me/conf/dbus.yaml (no such file), not the source checkout's conf/dbus.yaml (dbus is installed
        from a package); give --config FILE or set DBUS_CONFIG (`dbus config sample` prints an example)
    """
    if explicit:
        return Path(explicit)
    if env := os.environ.get(CONFIG_ENV):
        return Path(env)
    local = Path.cwd() / LOCAL_CONFIG
    if local.is_file():
        return local
    if is_checkout() and DEFAULT_CONFIG.is_file():
        return DEFAULT_CONFIG
    checkout = (
        f"not {DEFAULT_CONFIG} (no such file)"
        if is_checkout()
        else "not the source checkout's conf/dbus.yaml (dbus is installed from a package)"
    )
    msg = (
        f"no configuration file: not --config FILE (not given), not ${CONFIG_ENV} (not set), not {local} "
        f"(no such file), {checkout}; give --config FILE or set {CONFIG_ENV} "
        "(`dbus config sample` prints an example)"
    )
    raise ConfigError(msg)


# ${env:NAME}, ${env:NAME:-default}, ${file:/path}; $${...} is the literal text ${...}. Anything else with a
# `$` (a regex's `$`, `${x}`) is left as written.
_REF = re.compile(r"(\$?)\$\{(env|file):([^}]*)(\}?)")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _fill(text: str, key: str, base: Path) -> str:
    """``text`` with each reference in it replaced (see ``resolve_refs``)."""

    def one(m: re.Match[str]) -> str:
        escaped, kind, arg, closed = m.groups()
        ref = f"${{{kind}:{arg}{closed}"
        if escaped:
            return ref
        if not closed:
            msg = f"{key}: {ref!r} is missing its closing '}}'"
            raise ConfigError(msg)
        if kind == "env":
            name, has_default, default = arg.partition(":-")
            if not _ENV_NAME.fullmatch(name):
                msg = f"{key}: {ref}: {name!r} is not an environment variable name"
                raise ConfigError(msg)
            value = os.environ.get(name)
            if has_default and not value:
                return default
            if value is None:
                msg = f"{key}: {ref}: environment variable {name} is not set"
                raise ConfigError(msg)
            return value
        path = base / arg  # an absolute arg replaces base
        try:
            content = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            msg = f"{key}: {ref}: cannot read {path}: {getattr(e, 'strerror', None) or e}"
            raise ConfigError(msg) from None
        return content.removesuffix("\n").removesuffix("\r") if content.endswith("\n") else content

    return _REF.sub(one, text)


def resolve_refs(node: Any, base: Path, key: str = "") -> Any:
    """The parsed YAML ``node`` with every string value's references filled in, recursively through
    mappings and lists (keys are left as written): ``${env:NAME}`` the variable's value (ConfigError naming
    the key and the variable when it is unset), ``${env:NAME:-default}`` the default when it is unset or
    empty, ``${file:PATH}`` the file's content less one trailing newline (PATH relative to ``base``, the
    config file's folder; ConfigError naming the key and the file when it cannot be read). A reference
    may be the whole value or part of it::

        {"meta_store": {"url": "mysql+pymysql://dbus:${file:/run/secrets/meta}@db:3306/dbus"}}
        -> {"meta_store": {"url": "mysql+pymysql://dbus:s3cret@db:3306/dbus"}}

    The values filled in are never part of an error message.
    """
    if isinstance(node, str):
        return _fill(node, key or "(top level)", base) if "${" in node else node
    if isinstance(node, dict):
        return {k: resolve_refs(v, base, f"{key}.{k}" if key else str(k)) for k, v in node.items()}
    if isinstance(node, list):
        return [resolve_refs(v, base, f"{key}[{i}]") for i, v in enumerate(node)]
    return node


def parse_listen(text: str, where: str) -> tuple[str, int]:
    """``host:port`` as a pair; ConfigError naming ``where`` (the option or key) and the text otherwise."""
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        msg = f"{where}: {text!r} is not HOST:PORT"
        raise ConfigError(msg)
    return host, int(port)


# The keys whose relative paths ``raw_config`` makes absolute against their file's folder, besides every
# ``tls`` block's PEM files: ``*`` is any name (a source), a list's entries are each a path.
_PATH_KEYS = (
    ("spark", "jars_file"),
    ("spark", "checkpoint_root"),  # not a URI (``hdfs://nn/dbus``): a URI names no file here
    ("sources", "*", "extractor", "state_dir"),
    ("console", "audit_log"),
    ("log_sources", "*", "shipper", "files"),
    ("log_sources", "*", "heartbeat", "file"),
)
_PEM_KEYS = ("ca", "cert", "key")
_URI_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*):")


def uri_scheme(location: str) -> str | None:
    """The scheme of a URI (``hdfs`` of ``hdfs://nn/dbus``, ``file`` of ``file:///shared``), lower-cased;
    None for a plain path (a drive letter, ``C:``, is no scheme)."""
    m = _URI_SCHEME.match(location)
    return m[1].lower() if m and len(m[1]) > 1 else None


def _absolute(value: Any, base: Path) -> Any:
    """``value`` joined to ``base`` (``..`` folded) when it is a relative path written out: a string that is
    not absolute, holds no ``${`` reference and is no URI; anything else as it is."""
    if not isinstance(value, str) or "${" in value or uri_scheme(value) or Path(value).is_absolute():
        return value
    return os.path.normpath(base / value)


def _absolute_refs(text: str, base: Path) -> str:
    """``text`` with the relative path of each ``${file:PATH}`` joined to ``base`` (``$${file:...}``, the
    literal text, and an unclosed reference left as written)."""

    def one(m: re.Match[str]) -> str:
        escaped, kind, arg, closed = m.groups()
        if escaped or kind != "file" or not closed or not arg or "${" in arg or Path(arg).is_absolute():
            return m[0]
        return f"${{file:{base / arg}}}"

    return _REF.sub(one, text)


def _with_absolute_refs_and_pem(node: Any, base: Path) -> Any:
    """``node`` with its ``${file:...}`` references (any string, at any depth) and the PEM files of every
    ``tls`` block made absolute against ``base``."""
    if isinstance(node, str):
        return _absolute_refs(node, base) if "${" in node else node
    if isinstance(node, list):
        return [_with_absolute_refs_and_pem(v, base) for v in node]
    if not isinstance(node, dict):
        return node
    out = {k: _with_absolute_refs_and_pem(v, base) for k, v in node.items()}
    if isinstance(out.get("tls"), dict):
        out["tls"] = {k: _absolute(v, base) if k in _PEM_KEYS else v for k, v in out["tls"].items()}
    return out


def _with_absolute_key(node: Any, where: tuple[str, ...], base: Path) -> Any:
    """``node`` with the path at ``where`` (keys, ``*`` any) made absolute against ``base``, each entry of a
    list there; ``node`` itself where the keys are not there."""
    if not where:
        return [_absolute(v, base) for v in node] if isinstance(node, list) else _absolute(node, base)
    if not isinstance(node, dict):
        return node
    keys = list(node) if where[0] == "*" else [where[0]] if where[0] in node else []
    return {**node, **{k: _with_absolute_key(node[k], where[1:], base) for k in keys}}


# The PEM files a SQLAlchemy URL may name in its query (pymysql's, through SQLAlchemy's MySQL dialects)
_URL_PEMS = re.compile(r"([?&](?:ssl_ca|ssl_cert|ssl_key|ssl_capath)=)([^&#]+)")


def _url_with_absolute_pems(url: Any, base: Path) -> Any:
    """The meta store's URL with the relative PEM paths of its query (``?ssl_ca=../tls/ca.pem``) joined to
    ``base``: pymysql would read them against the working directory."""
    if not isinstance(url, str):
        return url
    return _URL_PEMS.sub(lambda m: m[1] + str(_absolute(m[2], base)), url)


def _with_absolute_paths(raw: dict[str, Any], base: Path) -> dict[str, Any]:
    """One file's mapping with every relative path in it made absolute against ``base``, its folder."""
    out = _with_absolute_refs_and_pem(raw, base)
    for where in _PATH_KEYS:
        out = _with_absolute_key(out, where, base)
    store = out.get("endpoints", {}).get("meta_store") if isinstance(out.get("endpoints"), dict) else None
    if isinstance(store, dict) and "url" in store:
        url = _url_with_absolute_pems(store["url"], base)
        out = {**out, "endpoints": {**out["endpoints"], "meta_store": {**store, "url": url}}}
    return out


def _merged(base: Any, over: Any) -> Any:
    """``over`` over ``base``: two mappings merge key by key, recursively; any other value of ``over``
    (a list, a scalar, null) replaces the base's."""
    if not (isinstance(base, dict) and isinstance(over, dict)):
        return over
    return {**base, **{k: _merged(base[k], v) if k in base else v for k, v in over.items()}}


def raw_config(path: Path, *, origin: str = "") -> dict[str, Any]:
    """The YAML mapping of the configuration file at ``path``, as ``load_config`` validates it (its
    ``${env:...}`` and ``${file:...}`` references not filled in yet), for whoever writes a changed copy
    of a configuration elsewhere:

    - every relative path of each file is made absolute against that file's own folder (the PEM files of
      every ``tls`` block, the paths of ``${file:...}`` references, ``spark.jars_file``,
      ``spark.checkpoint_root`` unless a URI, ``sources.<ds>.extractor.state_dir``, ``console.audit_log``,
      ``log_sources.<ds>.shipper.files`` and ``.heartbeat.file``), a path holding a ``${`` reference left
      as written;
    - ``extends: OTHER`` (relative: to this file's folder) puts this file over OTHER's raw config: mappings
      merge key by key, any other value of this file replaces OTHER's; ``extends`` is not in the result::

          # conf/dbus-secure.yaml: conf/dbus.yaml, Kafka reached on the stack's SASL_SSL listener
          extends: dbus.yaml
          endpoints: {kafka: {bootstrap_servers: "127.0.0.1:19094", security: {protocol: SASL_SSL, ...}}}

    ConfigError naming the file when it is missing (``origin`` said after: where ``path`` came from), is
    not YAML or not a mapping, when ``extends`` is not a file name, and naming every file of a cycle.
    """
    return _raw_config(Path(path), origin, ())


def _raw_config(p: Path, origin: str, chain: tuple[Path, ...]) -> dict[str, Any]:
    """``raw_config`` of ``p``, which the files of ``chain`` extend, the first one first."""
    here = p.resolve()
    try:
        raw = yaml.safe_load(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        msg = f"{p}: no such configuration file{origin}"
        raise ConfigError(msg) from None
    except yaml.YAMLError as e:
        msg = f"{p}: not valid YAML: {e}"
        raise ConfigError(msg) from None
    if not isinstance(raw, dict):
        msg = f"{p}: the top level must be a mapping"
        raise ConfigError(msg)
    raw = _with_absolute_paths(raw, here.parent)
    if "extends" not in raw:
        return raw
    other = raw.pop("extends")
    if not isinstance(other, str) or not other:
        msg = f"{p}: extends: must be the name of another configuration file, got {other!r}"
        raise ConfigError(msg)
    chain = (*chain, here)
    if (here.parent / other).resolve() in chain:
        files = " -> ".join(str(f) for f in (*chain, (here.parent / other).resolve()))
        msg = f"{p}: extends: {other}: a cycle: {files}"
        raise ConfigError(msg)
    return _merged(_raw_config(here.parent / other, f" (extended by {p})", chain), raw)


def load_config(path: str | Path | None = None) -> DbusConfig:
    """Read, validate and freeze the configuration at ``path`` (None: the file ``find_config`` finds): its
    ``raw_config`` (``extends`` followed, relative paths made absolute), then its ``${env:...}`` and
    ``${file:...}`` references filled in (``resolve_refs``)."""
    p = find_config(path)
    given = f" (from ${CONFIG_ENV})" if not path and os.environ.get(CONFIG_ENV) else ""
    raw = raw_config(p, origin=given)
    if "path" in raw:
        msg = f"{p}: path: not a configuration key"
        raise ConfigError(msg)
    try:
        raw = resolve_refs(raw, p.resolve().parent)
    except ConfigError as e:
        msg = f"{p}: {e}"
        raise ConfigError(msg) from None
    try:
        cfg = DbusConfig.model_validate({**raw, "path": p.resolve()})
    except ValidationError as e:
        raise ConfigError(_format_errors(p, e)) from None
    from dbuslib import logs

    logs.configure(cfg)  # the process logs in the file's logging.format from here on
    return cfg
