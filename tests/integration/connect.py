"""Kafka Connect workers with real third-party connectors, for the interoperability tests.

The jars come from ``make stack-up`` (stack/services/connect.sh: the worker under .stack/jars/connect/runtime,
the plugins under .stack/jars/connect/plugins). A test starts its own worker and stops it afterwards:

- ``running_worker(endpoint, folder, mode)``: a started ``ConnectWorker`` for a ``with`` block, stopped
  after it. ``ConnectWorker(endpoint, folder, mode="distributed"|"standalone").start()``: a worker on a
  free loopback port, its configuration, offsets and log in ``folder`` (distributed: its own group and
  internal topics, deleted by ``stop``), in its own process group (``java -Xmx512m``, serial GC);
  ``start`` returns once the REST API answers. ``create(name, config)``, ``delete(name)``,
  ``status(name)``, ``wait_running(name)`` (the connector and its tasks RUNNING; a FAILED one fails at
  once with its trace and the worker's log), ``stop()`` (TERM, then ``kill -9`` after a grace period),
  ``log_tail()``;
- ``jdbc_sink(topics, url, ...)``: the configuration of Debezium's JDBC sink (io.debezium.connector.jdbc
  .JdbcSinkConnector) for a SQLAlchemy URL of the stack's PostgreSQL (upsert on the record key, deletes
  and schema evolution on); ``json_converters()`` and ``apicurio_avro_converters(url)`` the key and value
  converters for debezium-json and avro records;
- ``wait_consumed(worker, name, topics)``: until a sink has committed the topics' end offsets (every record
  written before is applied); ``wait_rows(url, table, n)`` / ``wait_state(url, query, expected)``: until
  PostgreSQL holds ``n`` rows, or until a query's rows are the expected ones (the last rows seen are in
  the failure).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import sqlalchemy as sa
from console_env import free_port
from extractor_env import REPO
from helpers import wait_until

from dbuslib import kafka
from dbuslib.config import KafkaEndpoint

STACK_CACHE = Path(os.environ.get("STACK_CACHE", REPO / ".stack"))  # the jars (stack/env.sh)
JARS = STACK_CACHE / "jars" / "connect"
INSTALL = "install them with `bash stack/stack.sh install connect` (part of `make stack-up`)"
JAVA = (
    "java",
    "-Xms64m",
    "-Xmx512m",
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",
    "-Djava.awt.headless=true",
)
LOG4J2 = """\
status = warn
appender.out.type = Console
appender.out.name = out
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d{HH:mm:ss.SSS}] %-5p %m (%c{1})%n%throwable
rootLogger.level = INFO
rootLogger.appenderRef.out.ref = out
logger.kafka.name = org.apache.kafka.clients
logger.kafka.level = WARN
logger.reflections.name = org.reflections
logger.reflections.level = ERROR
logger.hibernate.name = org.hibernate
logger.hibernate.level = WARN
"""
JDBC_SINK = "io.debezium.connector.jdbc.JdbcSinkConnector"
APICURIO_AVRO = "io.apicurio.registry.utils.converter.AvroConverter"


class ConnectError(AssertionError):
    """The worker or a connector failed: the message holds the REST answer and the log's last lines."""


@dataclass
class ConnectWorker:
    """One Kafka Connect worker (see the module's doc)."""

    endpoint: KafkaEndpoint
    folder: Path
    mode: Literal["distributed", "standalone"] = "distributed"
    port: int = field(default_factory=free_port)
    worker_id: str = field(default_factory=lambda: f"dbus-test-{uuid.uuid4().hex[:8]}")
    java: tuple[str, ...] = JAVA  # the JVM and its options (bench/peer_snapshot.py gives a throughput JVM)
    extra: dict[str, str] = field(default_factory=dict)  # more worker properties, over the defaults
    proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def log(self) -> Path:
        return self.folder / "connect.log"

    @property
    def internal_topics(self) -> list[str]:
        if self.mode == "standalone":
            return []
        return [f"{self.worker_id}-{what}" for what in ("configs", "offsets", "status")]

    def properties(self) -> dict[str, str]:
        props = {
            "bootstrap.servers": self.endpoint.bootstrap_servers,
            "listeners": self.url,
            "rest.advertised.host.name": "127.0.0.1",
            "rest.advertised.port": str(self.port),
            "plugin.path": str(JARS / "plugins"),
            "key.converter": "org.apache.kafka.connect.json.JsonConverter",
            "value.converter": "org.apache.kafka.connect.json.JsonConverter",
            "offset.flush.interval.ms": "1000",
            # a sink commits its offsets at the flush interval; a consumer's record batches stay small
            "consumer.max.poll.records": "500",
        }
        if self.mode == "standalone":
            props["offset.storage.file.filename"] = str(self.folder / "offsets")
        else:
            configs, offsets, status = self.internal_topics
            props |= {
                "group.id": self.worker_id,
                "config.storage.topic": configs,
                "offset.storage.topic": offsets,
                "status.storage.topic": status,
                "config.storage.replication.factor": "1",
                "offset.storage.replication.factor": "1",
                "status.storage.replication.factor": "1",
                "offset.storage.partitions": "1",
                "status.storage.partitions": "1",
                "scheduled.rebalance.max.delay.ms": "0",
            }
        return props | self.extra

    def start(self, timeout: float = 120) -> ConnectWorker:
        missing = [
            d for d in (JARS / "runtime", JARS / "plugins" / "debezium-jdbc") if not any(d.glob("*.jar"))
        ]
        if missing:
            raise ConnectError(f"no Kafka Connect jars in {', '.join(map(str, missing))}: {INSTALL}")
        self.folder.mkdir(parents=True, exist_ok=True)
        worker = self.folder / "worker.properties"
        worker.write_text("".join(f"{k}={v}\n" for k, v in self.properties().items()), encoding="utf-8")
        (self.folder / "log4j2.properties").write_text(LOG4J2, encoding="utf-8")
        main = {
            "distributed": "org.apache.kafka.connect.cli.ConnectDistributed",
            "standalone": "org.apache.kafka.connect.cli.ConnectStandalone",
        }[self.mode]
        argv = [
            *self.java,
            f"-Dlog4j2.configurationFile={self.folder / 'log4j2.properties'}",
            "-cp",
            str(JARS / "runtime" / "*"),
            main,
            str(worker),
        ]
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            wait_until(self._serving, timeout, f"Kafka Connect's REST API on {self.url}", alive=[self])
        except AssertionError as e:
            raise ConnectError(f"{e}\n{self.log_tail()}") from None
        return self

    def _serving(self) -> bool:
        try:  # the herder answers /connectors once it has started (joined its group, read its topics)
            self.request("GET", "/connectors")
            return True
        except (OSError, ConnectError):
            return False

    def check_alive(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            code = None if self.proc is None else self.proc.returncode
            raise ConnectError(f"the Kafka Connect worker exited ({code}); {self.log}:\n{self.log_tail()}")

    def log_tail(self, lines: int = 60) -> str:
        try:
            text = self.log.read_text(encoding="utf-8", errors="replace").splitlines()
        except FileNotFoundError:
            return f"(no log at {self.log})"
        return "\n".join(text[-lines:])

    def request(self, method: str, path: str, body: Any = None) -> Any:
        """One REST call; a 4xx/5xx raises ConnectError with the answer's message."""
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, method=method)
        req.add_header("Content-Type", "application/json")
        req.add_header("Accept", "application/json")
        try:
            with urllib.request.urlopen(req, timeout=30) as resp:
                text = resp.read()
        except urllib.error.HTTPError as e:
            detail = e.read().decode(errors="replace")
            raise ConnectError(f"{method} {path}: HTTP {e.code}: {detail}") from None
        return json.loads(text) if text else None

    def create(self, name: str, config: dict[str, str], timeout: float = 60) -> None:
        """Create (or reconfigure) connector ``name``; retried while a distributed worker rebalances."""

        def put() -> bool:
            try:
                self.request("PUT", f"/connectors/{name}/config", config)
                return True
            except ConnectError as e:
                if "HTTP 409" in str(e):  # rebalance in progress: ask again
                    return False
                raise ConnectError(f"connector {name}: {e}\n{self.log_tail()}") from None

        wait_until(put, timeout, f"connector {name} accepted by {self.url}", alive=[self], interval=0.5)

    def delete(self, name: str) -> None:
        self.request("DELETE", f"/connectors/{name}")

    def status(self, name: str) -> dict[str, Any]:
        return dict(self.request("GET", f"/connectors/{name}/status"))

    def wait_running(self, name: str, tasks: int = 1, timeout: float = 120) -> dict[str, Any]:
        """Until connector ``name`` and at least ``tasks`` tasks are RUNNING; its status."""

        def running() -> dict[str, Any] | None:
            try:
                got = self.status(name)
            except ConnectError:
                return None  # not known yet
            self.fail_on_failed(name, got)
            states = [t["state"] for t in got.get("tasks", [])]
            ok = got["connector"]["state"] == "RUNNING" and states.count("RUNNING") >= tasks
            return got if ok else None

        try:
            return wait_until(running, timeout, f"connector {name} RUNNING", alive=[self], interval=0.5)
        except AssertionError as e:
            if isinstance(e, ConnectError):
                raise
            raise ConnectError(f"{e}\n{self.log_tail()}") from None

    def fail_on_failed(self, name: str, got: dict[str, Any] | None = None) -> None:
        """Raise with the trace and the log's tail when the connector or one of its tasks has FAILED."""
        got = self.status(name) if got is None else got
        failed = [got["connector"], *got.get("tasks", [])]
        traces = [
            f"{p.get('id', 'connector')}: {p.get('trace', '')}" for p in failed if p["state"] == "FAILED"
        ]
        if traces:
            raise ConnectError(f"connector {name} FAILED:\n" + "\n".join(traces) + f"\n{self.log_tail()}")

    def stop(self, timeout: float = 30) -> None:
        """TERM the worker's process group, kill -9 after ``timeout``; delete its internal topics."""
        if self.proc is not None and self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)
            except ProcessLookupError:
                pass
        if self.internal_topics:
            kafka.delete_topics(self.endpoint, self.internal_topics)


def json_converters(schemas: bool = True) -> dict[str, str]:
    """Key and value through Kafka Connect's JsonConverter (debezium-json: ``schema`` + ``payload``)."""
    conv = "org.apache.kafka.connect.json.JsonConverter"
    flag = "true" if schemas else "false"
    return {
        "key.converter": conv,
        "key.converter.schemas.enable": flag,
        "value.converter": conv,
        "value.converter.schemas.enable": flag,
    }


def apicurio_avro_converters(registry: str) -> dict[str, str]:
    """Key and value through Apicurio's AvroConverter reading the Confluent wire format (magic byte, a
    4-byte schema id, no headers). ``registry``: Apicurio's core v2 API (…/apis/registry/v2); the ids are
    the content ids its Confluent-compatible API (…/apis/ccompat/v7) hands out."""
    out = {"key.converter": APICURIO_AVRO, "value.converter": APICURIO_AVRO}
    for side in ("key", "value"):
        p = f"{side}.converter."
        out |= {
            p + "apicurio.registry.url": registry,
            p + "apicurio.registry.headers.enabled": "false",
            p + "apicurio.registry.as-confluent": "true",
            p + "apicurio.registry.use-id": "contentId",
            p + "apicurio.registry.id-handler": "io.apicurio.registry.serde.Legacy4ByteIdHandler",
        }
    return out


def jdbc_url(sqlalchemy_url: str) -> tuple[str, str, str]:
    """A SQLAlchemy PostgreSQL URL -> (JDBC URL, user, password) for the JDBC sink."""
    u = sa.make_url(sqlalchemy_url)
    return f"jdbc:postgresql://{u.host}:{u.port or 5432}/{u.database}", str(u.username), str(u.password)


def jdbc_sink(
    topics: str | Sequence[str],
    url: str,
    *,
    table: str | None = None,
    tasks: int = 1,
    converters: dict[str, str] | None = None,
    **extra: str,
) -> dict[str, str]:
    """Debezium's JDBC sink into the database of SQLAlchemy URL ``url``: upsert on the record key, a
    delete (or tombstone) deletes, tables created and evolved from the records' schemas. ``table``: the
    table's name (default: the sink's own, from the topic: dots become underscores)."""
    conn, user, password = jdbc_url(url)
    config = {
        "connector.class": JDBC_SINK,
        "topics": topics if isinstance(topics, str) else ",".join(topics),
        "tasks.max": str(tasks),
        "connection.url": conn,
        "connection.username": user,
        "connection.password": password,
        "insert.mode": "upsert",
        "delete.enabled": "true",
        "primary.key.mode": "record_key",
        "schema.evolution": "basic",
        "use.time.zone": "UTC",
        # a record the sink cannot apply fails the task (the test sees it), it is never skipped
        "errors.tolerance": "none",
        **(converters if converters is not None else json_converters()),
    }
    if table is not None:
        config["collection.name.format"] = table
    return config | extra


def rows(url: str, query: str) -> list[tuple[Any, ...]] | None:
    """The rows of ``query`` (None while its table does not exist)."""
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            return [tuple(r) for r in conn.execute(sa.text(query))]
    except sa.exc.ProgrammingError:
        return None
    finally:
        engine.dispose()


def wait_rows(url: str, table: str, n: int, worker: ConnectWorker, name: str, timeout: float = 300) -> int:
    """Until ``table`` holds ``n`` rows (the sink's tasks must not fail meanwhile)."""
    return wait_state(url, f'SELECT count(*) FROM "{table}"', [(n,)], worker, name, timeout)[0][0]


def wait_state(
    url: str,
    query: str,
    expected: Iterable[tuple[Any, ...]] | Callable[[list[tuple[Any, ...]]], bool],
    worker: ConnectWorker,
    name: str,
    timeout: float = 300,
) -> list[tuple[Any, ...]]:
    """Until ``query``'s rows equal ``expected`` (or ``expected(rows)`` is true); fails at once when
    connector ``name`` fails, with its trace, and on timeout with the last rows seen."""
    want = expected if callable(expected) else list(expected)
    seen: list[list[tuple[Any, ...]] | None] = [None]

    def check() -> list[tuple[Any, ...]] | None:
        worker.fail_on_failed(name)
        got = rows(url, query)
        seen[0] = got
        if got is None:
            return None
        return got if (want(got) if callable(want) else got == want) else None

    try:
        return wait_until(check, timeout, f"{query} by connector {name}", alive=[worker], interval=0.5)
    except ConnectError:
        raise
    except AssertionError as e:
        raise ConnectError(f"{e}; last rows: {seen[0]!r}\n{worker.log_tail()}") from None


def wait_consumed(worker: ConnectWorker, name: str, topics: Sequence[str], timeout: float = 300) -> None:
    """Until sink connector ``name`` has committed the end offsets of ``topics`` as they are now (its
    consumer group ``connect-<name>``): every record written before the call has been applied."""
    ends = kafka.end_offsets(worker.endpoint, topics)
    client = kafka.admin(worker.endpoint)
    try:

        def done() -> bool:
            worker.fail_on_failed(name)
            group = f"connect-{name}"
            committed = client.list_group_offsets({group: None}).get(group, {})
            return all(
                end == 0 or (tp in committed and committed[tp].offset >= end) for tp, end in ends.items()
            )

        try:
            wait_until(
                done, timeout, f"connector {name} consumed {', '.join(topics)}", alive=[worker], interval=0.5
            )
        except ConnectError:
            raise
        except AssertionError as e:
            raise ConnectError(f"{e}\n{worker.log_tail()}") from None
    finally:
        client.close()


@contextlib.contextmanager
def running_worker(
    endpoint: KafkaEndpoint,
    folder: Path,
    mode: Literal["distributed", "standalone"] = "distributed",
    java: tuple[str, ...] = JAVA,
) -> Iterator[ConnectWorker]:
    """A started worker, stopped (killed if need be, its internal topics deleted) when the block ends."""
    worker = ConnectWorker(endpoint, folder, mode, java=java)
    try:
        yield worker.start()
    finally:
        worker.stop()
