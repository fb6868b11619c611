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
import time
import uuid
from pathlib import Path

import pytest
import yaml
from extractor_env import cleanup, make_env
from helpers import refused_run, untrusted_ca, wait_until
from pipeline_env import (
    appender_stage,
    binlog_changes,
    cleanup_pipeline,
    dispatcher_stage,
    make_pipeline_env,
    start_pipeline,
)

from dbuslib import kafka, topics
from dbuslib.config import load_config, raw_config
from dbuslib.kafka import KafkaAuthFailed
from ums.formats import UMS_UID_HEADER

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
TLS = Path(os.environ.get("STACK_CACHE", REPO / ".stack")) / "tls"  # the stack CA (tls_install)
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
    def make(endpoint: dict | None = None, **kw):
        p = tmp_path / f"dbus-{uuid.uuid4().hex[:6]}.yaml"
        raw = raw_config(cfg.path)
        raw["spark"]["jars_file"] = str(cfg.resolve(cfg.spark.jars_file))
        p.write_text(yaml.safe_dump(raw))
        return load_config(with_kafka(p, endpoint or secure_kafka(**kw)))

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


# A plaintext client at the SASL_SSL listener: the broker's TLS alert is read as a frame length
PLAINTEXT_AT_TLS = {"bootstrap_servers": SECURE, "security": {"protocol": "PLAINTEXT"}}


def test_a_wrong_password_an_untrusted_ca_and_plaintext_are_refused(secure_cfg, tmp_path):
    other = untrusted_ca(tmp_path)
    # refused at the first bootstrap attempt, not retried until kafka-python's bootstrap time (30 s):
    # the broker's SaslAuthenticate error is read (dbuslib.kafka._hand_on_before_the_end) and ends it
    bad = {
        "wrong password": (
            secure_cfg(password="not-the-password"),
            rf"Kafka at {SECURE} \(SASL_SSL\): connection refused: "
            r".*SaslAuthenticationFailedError.*SCRAM-SHA-512",
        ),
        "untrusted CA": (
            secure_cfg(ca=other),
            rf"Kafka at {SECURE} \(SASL_SSL\): connection refused: .*CERTIFICATE_VERIFY_FAILED",
        ),
        "plaintext at the TLS listener": (
            secure_cfg(PLAINTEXT_AT_TLS),
            rf"Kafka at {SECURE} \(PLAINTEXT\): connection refused: .*the broker answered in TLS",
        ),
    }
    for case, (cfg, says) in bad.items():
        for make in (kafka.admin, kafka.producer, kafka.consumer):
            started = time.monotonic()
            with pytest.raises(KafkaAuthFailed, match=says) as e:
                make(cfg.endpoints.kafka)
            print(f"\n{case}, {make.__name__}: {e.value.code} after {time.monotonic() - started:.2f} s")
            assert e.value.exit_code == 3 and not e.value.retriable
            assert "not-the-password" not in str(e.value)


def test_every_stage_stops_at_once_with_kafka_auth_failed(writer_db, tmp_path, kafka_up):
    """A wrong password, an untrusted CA or a plaintext client at the TLS listener: each stage as a user
    starts it exits 3 with one line naming KAFKA_AUTH_FAILED and the servers, no retry loop (the time each
    took is printed)."""
    _, name = writer_db
    env = make_env(tmp_path, name)
    cases = {
        "wrong password": secure_kafka(password="not-the-password"),
        "untrusted CA": secure_kafka(ca=untrusted_ca(tmp_path)),
        "plaintext at the TLS listener": PLAINTEXT_AT_TLS,
    }
    stages = [
        ["extractor", "run", "--source", env.ds],
        ["heartbeat", "run", "--source", env.ds],
        ["submit", "dispatcher", "--source", env.ds],
        ["submit", "appender", "--source", env.ds],
        ["submit", "logprocessor", "--source", "applog"],
    ]
    try:
        for case, endpoint in cases.items():
            with_kafka(env.cfg_path, endpoint)
            for stage in stages:
                done, last = refused_run(env.cfg_path, stage, case)
                # one line: the stage (or dbus) names the code and the servers
                assert re.match(
                    rf"\w+: KAFKA_AUTH_FAILED: Kafka at {SECURE} \((SASL_SSL|PLAINTEXT)\)", last
                ), last
                assert "not-the-password" not in done.stdout + done.stderr
    finally:
        with_kafka(env.cfg_path, {"bootstrap_servers": kafka_up.bootstrap_servers, "security": {}})
        cleanup(env)


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
