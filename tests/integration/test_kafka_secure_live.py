"""Every Kafka client DBus starts reaches a SASL_SSL broker through ``endpoints.kafka.security`` (issue #31).

The stack's broker listens on SASL_SSL at ``KAFKA_SECURE_PORT`` (19094) beside its plaintext listener:
SCRAM-SHA-512, SCRAM-SHA-256 and PLAIN for user ``dbus`` (password in ``.stack/tls/kafka-password``), a
certificate signed by the stack's CA (``.stack/tls/ca.pem``; stack/services/kafka.sh).

- kafka-python's admin, producer and consumer (dbuslib/kafka.py) with each mechanism; a wrong password and
  an untrusted CA are refused;
- a whole pipeline on the secure listener only: the extractor (kafka-python), the dispatcher (Spark's
  Kafka source and sink) and the appender (Spark's source, and its own producer of per-row records,
  ``output.format: debezium-json``) as real processes; every row change of the binlog arrives, read back
  through the secure listener. Neither the stages' command lines nor their logs hold the password.
"""

from __future__ import annotations

import os
import re
import subprocess
import uuid
from pathlib import Path

import pytest
import yaml
from helpers import wait_until
from pipeline_env import (
    appender_stage,
    binlog_changes,
    cleanup_pipeline,
    dispatcher_stage,
    make_pipeline_env,
    start_pipeline,
)

from dbuslib import kafka, topics
from dbuslib.config import load_config
from dbuslib.errors import EndpointError
from dbuslib.kafka import KafkaAuthFailed
from ums.formats import UMS_UID_HEADER

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
STACK = Path(os.environ.get("STACK_HOME", REPO / ".stack"))
TLS = STACK / "tls"
SECURE = f"127.0.0.1:{os.environ.get('KAFKA_SECURE_PORT', '19094')}"


def secure_kafka(
    mechanism: str = "SCRAM-SHA-512", password: str | None = None, ca: Path | None = None
) -> dict:
    """``endpoints.kafka`` of the stack's SASL_SSL listener, the password read from its file."""
    return {
        "bootstrap_servers": SECURE,
        "security": {
            "protocol": "SASL_SSL",
            "sasl": {
                "mechanism": mechanism,
                "username": "dbus",
                "password": password if password is not None else f"${{file:{TLS / 'kafka-password'}}}",
            },
            "tls": {"ca": str(ca or TLS / "ca.pem")},
        },
    }


def with_kafka(path: Path, endpoint: dict) -> Path:
    raw = yaml.safe_load(path.read_text())
    raw["endpoints"]["kafka"] = {**raw["endpoints"]["kafka"], **endpoint}
    path.write_text(yaml.safe_dump(raw))
    return path


@pytest.fixture
def secure_cfg(tmp_path, cfg, kafka_up):
    def make(**kw):
        p = tmp_path / f"dbus-{uuid.uuid4().hex[:6]}.yaml"
        p.write_text(cfg.path.read_text())
        raw = yaml.safe_load(p.read_text())
        base = cfg.path.parent
        raw["spark"]["jars_file"] = str((base / raw["spark"]["jars_file"]).resolve())
        p.write_text(yaml.safe_dump(raw))
        return load_config(with_kafka(p, secure_kafka(**kw)))

    return make


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-512", "SCRAM-SHA-256", "PLAIN"])
def test_kafka_python_clients_over_sasl_ssl(secure_cfg, mechanism):
    endpoint = secure_cfg(mechanism=mechanism).endpoints.kafka
    topic = f"dbus_test_secure_{uuid.uuid4().hex[:8]}"
    kafka.ensure_topics(endpoint, [topic], partitions=1)
    try:
        producer = kafka.producer(endpoint)
        for i in range(3):
            producer.send(topic, key=b"k", value=f"v{i}".encode())
        producer.flush(30)
        producer.close()
        assert [r.value for r in kafka.read_range(endpoint, [topic])] == [b"v0", b"v1", b"v2"]
    finally:
        kafka.delete_topics(endpoint, [topic])


def test_a_wrong_password_and_an_untrusted_ca_are_refused(secure_cfg, tmp_path):
    other = tmp_path / "other-ca"
    other.mkdir()
    openssl = ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1"]
    subprocess.run(
        [
            *openssl,
            "-subj",
            "/CN=not the stack",
            "-keyout",
            str(other / "ca.key"),
            "-out",
            str(other / "ca.pem"),
        ],
        check=True,
        capture_output=True,
    )
    # kafka-python reads the broker's SaslAuthenticate error when it arrives before the broker closes the
    # connection (KAFKA_AUTH_FAILED naming it), else it sees a closed connection: unreachable, saying it may
    # be the credentials. Which one a run sees is the network's race (both were seen on the same machine).
    with pytest.raises(EndpointError) as e:
        kafka.admin(secure_cfg(password="not-the-password").endpoints.kafka)
    refused = r"Kafka at .* \(SASL_SSL\): connection refused: .*SaslAuthenticationFailedError.*SCRAM-SHA-512"
    maybe = r"not reachable.*or it refused SCRAM-SHA-512 as 'dbus'"
    assert re.search(refused if isinstance(e.value, KafkaAuthFailed) else maybe, str(e.value)), str(e.value)
    assert "not-the-password" not in str(e.value)
    with pytest.raises(
        KafkaAuthFailed, match=rf"Kafka at {SECURE} \(SASL_SSL\).*CERTIFICATE_VERIFY_FAILED"
    ) as e:
        kafka.admin(secure_cfg(ca=other / "ca.pem").endpoints.kafka)
    assert e.value.exit_code == 3 and not e.value.retriable


def test_a_pipeline_on_the_sasl_ssl_listener_only(writer_db, tmp_path, kafka_up):
    """The extractor, the dispatcher and the appender (debezium-json: its own producer) on SASL_SSL."""
    db, name = writer_db
    env = make_pipeline_env(tmp_path, name, partitions=2)  # topics made through the plaintext listener
    raw = yaml.safe_load(env.cfg_path.read_text())
    raw["sources"][env.ds]["output"] = {"format": "debezium-json", "topic": "table"}
    for stage in ("dispatcher", "appender"):
        raw["sources"][env.ds].setdefault(stage, {}).update(
            {"trigger": "realtime", "realtime_checkpoint_s": 5}
        )
    env.cfg_path.write_text(yaml.safe_dump(raw))
    with_kafka(env.cfg_path, secure_kafka())
    env.cfg = load_config(env.cfg_path)
    endpoint = env.cfg.endpoints.kafka
    assert endpoint.bootstrap_servers == SECURE
    password = (TLS / "kafka-password").read_text().strip()
    src = env.cfg.source(env.ds)
    table_topic = topics.result_topic(env.ds, src, name, "t")
    dispatcher, appender = dispatcher_stage(env), appender_stage(env)
    stages = (dispatcher, appender)
    try:
        with db.cursor() as cur:
            cur.execute("CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(32))")
        start_pipeline(env, dispatcher, appender)
        with db.cursor() as cur:
            for i in range(60):
                cur.execute("INSERT INTO t VALUES (%s, %s)", (i, f"v{i}"))
            cur.execute("UPDATE t SET v = CONCAT(v, '+') WHERE id < 10")
            cur.execute("DELETE FROM t WHERE id >= 55")
        db.commit()
        changes = binlog_changes(env, name)
        assert len(changes) == 60 + 10 + 5

        def arrived() -> int | None:
            try:
                records = kafka.read_range(endpoint, [table_topic])
            except Exception:  # the table's topic is made with its first record
                return None
            uids = {dict(r.headers)[UMS_UID_HEADER] for r in records if r.value is not None}
            return len(uids) if len(uids) >= len(changes) else None

        got = wait_until(
            arrived, 240, f"{len(changes)} row changes in {table_topic}", interval=2, alive=stages
        )
        assert got == len(changes)

        # the password is on no command line and in no log of the stages (extractor, dispatcher, appender)
        ps = subprocess.run(["ps", "-eww", "-o", "args"], capture_output=True, text=True, check=True).stdout
        assert "spark-submit" in ps or "SparkSubmit" in ps
        assert password not in ps
        logs = sorted(env.logs.glob("*.log"))
        assert len(logs) >= 3
        for log in logs:
            assert password not in log.read_text(errors="replace"), log
    finally:
        cleanup_pipeline(env, list(stages))
