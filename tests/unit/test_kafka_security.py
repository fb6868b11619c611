"""endpoints.kafka.security: validated once, spelled alike for kafka-python, kafka-clients (Spark's
``kafka.*``, the appender's producer) and librdkafka (rsyslog's omkafka); endpoints.kafka.client: the
extras each kafka-python client takes."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from dbuslib import kafka
from dbuslib import kafka_security as ks
from dbuslib.config import DEFAULT_CONFIG, KafkaEndpoint, KafkaSecurity, load_config
from dbuslib.errors import ConfigError
from dbuslib.spark import REDACTION_REGEX, kafka_client_options, kafka_sink_options


def _config(tmp_path: Path, security: dict | None = None, client: dict | None = None) -> Path:
    raw = yaml.safe_load(DEFAULT_CONFIG.read_text())
    raw["spark"]["jars_file"] = str(DEFAULT_CONFIG.parent / raw["spark"]["jars_file"])
    raw["spark"]["checkpoint_root"] = str(tmp_path / "checkpoints")
    if security is not None:
        raw["endpoints"]["kafka"]["security"] = security
    if client is not None:
        raw["endpoints"]["kafka"]["client"] = client
    p = tmp_path / "dbus.yaml"
    p.write_text(yaml.safe_dump(raw))
    return p


SASL = {"mechanism": "SCRAM-SHA-512", "username": "dbus", "password": "s3cr3t-pw"}


def test_the_default_is_plaintext_and_every_client_says_so(tmp_path: Path) -> None:
    cfg = load_config(_config(tmp_path))
    sec = cfg.endpoints.kafka.security
    assert sec.protocol == "PLAINTEXT"
    assert ks.python_options(sec) == {"security_protocol": "PLAINTEXT"}
    assert ks.java_options(sec) == {"security.protocol": "PLAINTEXT"}
    assert ks.librdkafka_options(sec) == {"security.protocol": "plaintext"}


@pytest.mark.parametrize(
    ("security", "words"),
    [
        ({"protocol": "SASL_SSL"}, "protocol SASL_SSL needs sasl"),
        ({"protocol": "SASL_PLAINTEXT"}, "protocol SASL_PLAINTEXT needs sasl"),
        ({"protocol": "SSL", "sasl": SASL}, "does not use it"),
        ({"protocol": "SASL_PLAINTEXT", "sasl": SASL, "tls": {"ca": "ca.pem"}}, "tls is given"),
        ({"protocol": "SSL", "tls": {"cert": "c.pem"}}, "cert and key go together"),
        ({"protocol": "SSL", "tls": {"key_password": "x"}}, "key_password without key"),
        ({"protocol": "TLS"}, "endpoints.kafka.security.protocol"),
        ({"protocol": "SASL_SSL", "sasl": {**SASL, "mechanism": "GSSAPI"}}, "sasl.mechanism"),
        ({"protocol": "SASL_SSL", "sasl": {**SASL, "username": ""}}, "sasl.username"),
    ],
)
def test_a_setting_that_cannot_work_is_refused_naming_the_key(
    tmp_path: Path, security: dict, words: str
) -> None:
    with pytest.raises(ConfigError, match="endpoints.kafka.security") as e:
        load_config(_config(tmp_path, security))
    assert words in str(e.value)
    assert "s3cr3t-pw" not in str(e.value)


def test_security_settings_in_client_are_refused(tmp_path: Path) -> None:
    with pytest.raises(
        ConfigError, match=r"endpoints.kafka.client.*'sasl_plain_password'.*endpoints.kafka.security"
    ):
        load_config(_config(tmp_path, client={"sasl_plain_password": "x", "request_timeout_ms": 1000}))


# a consumer's, a producer's and a setting every client has
EXTRAS = {
    "session_timeout_ms": 10_000,
    "heartbeat_interval_ms": 3_000,
    "linger_ms": 5,
    "request_timeout_ms": 31_000,
}
CLIENTS = [kafka.KafkaProducer, kafka.KafkaConsumer, kafka.KafkaAdminClient]


@pytest.mark.parametrize(
    ("client", "takes"),
    [
        (kafka.KafkaProducer, {"linger_ms": 5, "request_timeout_ms": 31_000}),
        (
            kafka.KafkaConsumer,
            {"session_timeout_ms": 10_000, "heartbeat_interval_ms": 3_000, "request_timeout_ms": 31_000},
        ),
        (kafka.KafkaAdminClient, {"request_timeout_ms": 31_000}),
    ],
)
def test_each_client_takes_the_extras_it_knows(client: type, takes: dict) -> None:
    assert kafka.client_extras(KafkaEndpoint(bootstrap_servers="b:1", client=EXTRAS), client) == takes


@pytest.mark.parametrize("client", CLIENTS)
@pytest.mark.parametrize(
    ("extras", "named"),
    [
        ({"sesion_timeout_ms": 1}, "endpoints.kafka.client.sesion_timeout_ms:"),
        ({"linger_ms": 5, "linger.ms": 5}, "endpoints.kafka.client.linger.ms:"),  # kafka-clients' spelling
        ({"a": 1, "session_timeout_ms": 1, "b": 2}, "endpoints.kafka.client.a, endpoints.kafka.client.b:"),
    ],
)
def test_an_extra_no_client_knows_is_refused_naming_the_key(client: type, extras: dict, named: str) -> None:
    with pytest.raises(ConfigError) as err:
        kafka.client_extras(KafkaEndpoint(bootstrap_servers="b:1", client=extras), client)
    assert str(err.value).startswith(named)
    assert err.value.exit_code == 2


@pytest.mark.parametrize("client", CLIENTS)
def test_every_client_knows_each_option_it_is_given_and_the_callers_win(tmp_path: Path, client: type) -> None:
    endpoint = KafkaEndpoint(bootstrap_servers="b:1", security=_secure(tmp_path), client=EXTRAS)
    options = kafka._options(endpoint, client, {"request_timeout_ms": 5_000})
    assert set(options) <= set(client.DEFAULT_CONFIG)  # each refuses any other
    assert options["request_timeout_ms"] == 5_000


def test_pem_paths_resolve_against_the_config_folder(tmp_path: Path) -> None:
    tls = {"ca": "tls/ca.pem", "cert": "/abs/client.pem", "key": "tls/client.key"}
    cfg = load_config(_config(tmp_path, {"protocol": "SSL", "tls": tls}))
    got = cfg.endpoints.kafka.security.tls
    assert got is not None
    assert (got.ca, got.cert, got.key) == (
        tmp_path / "tls/ca.pem",
        Path("/abs/client.pem"),
        tmp_path / "tls/client.key",
    )


def _secure(tmp_path: Path) -> KafkaSecurity:
    for name in ("ca.pem", "client.pem", "client.key"):
        (tmp_path / name).write_text(f"-----BEGIN {name}-----\n")
    security = {
        "protocol": "SASL_SSL",
        "sasl": SASL,
        "tls": {"ca": "ca.pem", "cert": "client.pem", "key": "client.key", "key_password": "k3y-pw"},
    }
    return load_config(_config(tmp_path, security)).endpoints.kafka.security


def test_sasl_ssl_in_each_spelling(tmp_path: Path) -> None:
    sec = _secure(tmp_path)
    assert ks.python_options(sec) == {
        "security_protocol": "SASL_SSL",
        "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_plain_username": "dbus",
        "sasl_plain_password": "s3cr3t-pw",
        "ssl_check_hostname": True,
        "ssl_cafile": str(tmp_path / "ca.pem"),
        "ssl_certfile": str(tmp_path / "client.pem"),
        "ssl_keyfile": str(tmp_path / "client.key"),
        "ssl_password": "k3y-pw",
    }
    assert ks.java_options(sec) == {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule required "
        'username="dbus" password="s3cr3t-pw";',
        "ssl.truststore.type": "PEM",
        "ssl.truststore.certificates": "-----BEGIN ca.pem-----\n",  # inline: executors need no file
        "ssl.keystore.type": "PEM",
        "ssl.keystore.certificate.chain": "-----BEGIN client.pem-----\n",
        "ssl.keystore.key": "-----BEGIN client.key-----\n",
        "ssl.key.password": "k3y-pw",
    }
    assert ks.librdkafka_options(sec) == {
        "security.protocol": "sasl_ssl",
        "sasl.mechanisms": "SCRAM-SHA-512",
        "sasl.username": "dbus",
        "sasl.password": "s3cr3t-pw",
        "ssl.endpoint.identification.algorithm": "https",
        "ssl.ca.location": str(tmp_path / "ca.pem"),
        "ssl.certificate.location": str(tmp_path / "client.pem"),
        "ssl.key.location": str(tmp_path / "client.key"),
        "ssl.key.password": "k3y-pw",
    }


def test_every_secret_setting_is_known_as_one(tmp_path: Path) -> None:
    """What the redaction of logs and pages relies on: each setting holding a secret is named a secret, in
    each spelling; the others are not."""
    sec = _secure(tmp_path)
    spellings = [
        ks.python_options(sec),
        ks.java_options(sec),
        ks.spark_options(sec),
        ks.librdkafka_options(sec),
    ]
    for options in spellings:
        for key, value in options.items():
            holds = any(s in str(value) for s in ("s3cr3t-pw", "k3y-pw", "client.key-----"))
            assert ks.is_secret(key) == holds, key


def test_spark_sources_and_sinks_get_the_security(tmp_path: Path) -> None:
    sec = _secure(tmp_path)
    endpoint = load_config(tmp_path / "dbus.yaml").endpoints.kafka
    assert kafka_client_options(endpoint) == {
        "kafka.bootstrap.servers": endpoint.bootstrap_servers,
        **ks.spark_options(sec),
    }
    assert kafka_client_options("h:9092") == {"kafka.bootstrap.servers": "h:9092"}
    sink = kafka_sink_options(endpoint.bootstrap_servers)
    assert "kafka.security.protocol" not in sink


def test_spark_redacts_the_inlined_key_and_the_jaas_password() -> None:
    import re

    assert re.search(REDACTION_REGEX, "kafka.ssl.keystore.key")
    assert re.search(REDACTION_REGEX, 'ScramLoginModule required username="u" password="p";')
    assert not re.search(REDACTION_REGEX, "kafka.bootstrap.servers")


def _stream_tokenizer_quoted(text: str) -> str:
    """What java.io.StreamTokenizer (Kafka's JaasConfig) reads from a double-quoted string at ``text``'s
    start: backslash escapes (a, b, f, n, r, t, v, octal, else the character itself); a line break or the
    closing quote ends it."""
    assert text[0] == '"'
    out, i = [], 1
    controls = {"a": "\x07", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\x0b"}
    while i < len(text) and text[i] not in '"\n\r':
        c = text[i]
        if c == "\\":
            i += 1
            c = text[i]
            if c in controls:
                c = controls[c]
            elif "0" <= c <= "7":
                pytest.fail(f"an octal escape in {text!r}")
        out.append(c)
        i += 1
    assert text[i] == '"', f"the string ended before its quote: {text!r}"
    return "".join(out)


@given(st.text())
def test_any_password_survives_jaas_quoting(password: str) -> None:
    quoted = ks.jaas_quote(password)
    assert _stream_tokenizer_quoted(quoted) == password


@pytest.mark.parametrize(
    ("text", "found"),
    [
        (
            "KafkaConnectionError: Handshake failed: [SSL: CERTIFICATE_VERIFY_FAILED] certificate verify",
            True,
        ),
        (
            "StreamingQueryException: ...\n"
            "Caused by: org.apache.kafka.common.errors.SaslAuthenticationException: Authentication failed "
            "authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512\n\tat org.apache...",
            True,
        ),
        ("org.apache.kafka.common.errors.SslAuthenticationException: SSL handshake failed", True),
        ("KafkaConnectionError: socket disconnected", False),  # kafka-python's view of a refused SCRAM login
        ("java.sql.SQLInvalidAuthorizationSpecException: Access denied for user", False),
        ("org.apache.kafka.common.errors.TimeoutException: Timed out waiting for a node assignment", False),
    ],
)
def test_a_refusal_of_dbuss_identity_is_recognised_in_any_failure(text: str, found: bool) -> None:
    from dbuslib.kafka import refused_in

    line = refused_in(text)
    assert (line is not None) == found
    if line is not None:
        assert "\n" not in line and ("CERTIFICATE" in line or "Authentication" in line)


@pytest.mark.parametrize(
    ("text", "found"),
    [
        # kafka-python at the secure stack's SASL_SSL listener with PLAINTEXT: the TLS alert 15 03 03 00 02
        (
            "Bootstrap connection to bootstrap-0 failed: InvalidReceiveError: Invalid frame length: 352518912"
            " (backoff 6.95 secs)",
            True,
        ),
        # kafka-clients (a Spark stage's query) alike, and a TLS handshake record (16 03 01 ...)
        (
            "org.apache.kafka.common.network.InvalidReceiveException: Invalid receive (size = 369295617"
            " larger than 104857600)",
            True,
        ),
        ("Invalid frame length: 104857601", False),  # a frame too large, not TLS
        ("Invalid frame length: 352519936", False),  # 15 03 05: no TLS version
    ],
)
def test_a_plaintext_client_at_a_tls_listener_is_told_so(text: str, found: bool) -> None:
    from dbuslib.kafka import refused_in

    line = refused_in(text)
    assert (line is not None) == found
    if line is not None:
        assert "answered in TLS" in line and "SASL_SSL" in line and "backoff" not in line
