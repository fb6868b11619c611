"""``endpoints.kafka.security`` spelled for each Kafka client library DBus starts: the one home of that
translation, so no client can be left on plaintext while the others are secured.

- ``python_options``: kafka-python (every producer, consumer and admin client of dbuslib/kafka.py: the
  extractor, the heartbeat, control messages, ``dbus status``, the console, ``dbusclient``);
- ``java_options``: kafka-clients (Spark's Kafka source and sink as ``kafka.*`` options, ``spark_options``,
  and the appender's own producer): PEM contents inline (``ssl.truststore.certificates``,
  ``ssl.keystore.certificate.chain``/``ssl.keystore.key``), so executors on other hosts need no files;
  SASL as ``sasl.jaas.config``;
- ``librdkafka_options``: librdkafka (rsyslog's omkafka, confluent-kafka).

Secrets (the SASL password, a key and its password) are in the returned values: they go into clients'
settings and files written 0600, never onto a command line or into a log (``is_secret`` names the
settings that hold them, for redaction).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dbuslib.config import KafkaSecurity

_JAAS_MODULE = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}

# every setting, in any of the three spellings (and Spark's ``kafka.`` prefix), whose value is a secret
SECRET_KEYS = (
    "sasl_plain_password",
    "ssl_password",
    "sasl.jaas.config",
    "ssl.keystore.key",
    "ssl.key.password",
    "sasl.password",
)


def is_secret(key: str) -> bool:
    """Whether a client setting (any spelling, ``kafka.``-prefixed or not) holds a secret."""
    return key.removeprefix("kafka.") in SECRET_KEYS


@dataclass(frozen=True)
class _FileSpelling:
    """The names a client library with PEM files by path gives each setting; ``hostname``: the key of the
    host name check and its values when on and when off."""

    protocol: str
    lower: bool  # the protocol in lower case
    mechanism: str
    username: str
    password: str
    ca: str
    cert: str
    key: str
    key_password: str
    hostname: tuple[str, Any, Any]


_KAFKA_PYTHON = _FileSpelling(
    "security_protocol", False, "sasl_mechanism", "sasl_plain_username", "sasl_plain_password",
    "ssl_cafile", "ssl_certfile", "ssl_keyfile", "ssl_password", ("ssl_check_hostname", True, False),
)  # fmt: skip
_LIBRDKAFKA = _FileSpelling(
    "security.protocol", True, "sasl.mechanisms", "sasl.username", "sasl.password",
    "ssl.ca.location", "ssl.certificate.location", "ssl.key.location", "ssl.key.password",
    ("ssl.endpoint.identification.algorithm", "https", "none"),
)  # fmt: skip


def _with_files(sec: KafkaSecurity, n: _FileSpelling) -> dict[str, Any]:
    out: dict[str, Any] = {n.protocol: sec.protocol.lower() if n.lower else sec.protocol}
    if sec.sasl is not None:
        out |= {
            n.mechanism: sec.sasl.mechanism,
            n.username: sec.sasl.username,
            n.password: sec.sasl.password.get_secret_value(),
        }
    if sec.tls_on:
        tls = sec.tls
        key, on, off = n.hostname
        out[key] = on if tls is None or tls.check_hostname else off
        if tls is not None and tls.ca is not None:
            out[n.ca] = str(tls.ca)
        if tls is not None and tls.cert is not None and tls.key is not None:
            out |= {n.cert: str(tls.cert), n.key: str(tls.key)}
            if tls.key_password is not None:
                out[n.key_password] = tls.key_password.get_secret_value()
    return out


def python_options(sec: KafkaSecurity) -> dict[str, Any]:
    """kafka-python's settings (its keyword arguments)."""
    return _with_files(sec, _KAFKA_PYTHON)


_JAAS_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r"}


def jaas_quote(value: str) -> str:
    """A JAAS option value in double quotes as Kafka's JaasConfig reads it (a ``StreamTokenizer``: a
    backslash escapes ``\\`` and ``"``, ``\\n`` and ``\\r`` are line breaks, which would end the string)."""
    return '"' + "".join(_JAAS_ESCAPES.get(c, c) for c in value) + '"'


def java_options(sec: KafkaSecurity, read: Callable[[Path], str] = Path.read_text) -> dict[str, str]:
    """kafka-clients' settings (without Spark's ``kafka.`` prefix); ``read`` reads a PEM file."""
    out: dict[str, str] = {"security.protocol": sec.protocol}
    if sec.sasl is not None:
        user, password = sec.sasl.username, sec.sasl.password.get_secret_value()
        out |= {
            "sasl.mechanism": sec.sasl.mechanism,
            "sasl.jaas.config": f"{_JAAS_MODULE[sec.sasl.mechanism]} required "
            f"username={jaas_quote(user)} password={jaas_quote(password)};",
        }
    if sec.tls_on and sec.tls is not None:
        tls = sec.tls
        if not tls.check_hostname:
            out["ssl.endpoint.identification.algorithm"] = ""
        if tls.ca is not None:
            out |= {"ssl.truststore.type": "PEM", "ssl.truststore.certificates": read(tls.ca)}
        if tls.cert is not None and tls.key is not None:
            out |= {
                "ssl.keystore.type": "PEM",
                "ssl.keystore.certificate.chain": read(tls.cert),
                "ssl.keystore.key": read(tls.key),
            }
            if tls.key_password is not None:
                out["ssl.key.password"] = tls.key_password.get_secret_value()
    return out


def spark_options(sec: KafkaSecurity, read: Callable[[Path], str] = Path.read_text) -> dict[str, str]:
    """``java_options`` as Spark's Kafka source and sink take them (``kafka.`` before each)."""
    return {f"kafka.{k}": v for k, v in java_options(sec, read).items()}


def librdkafka_options(sec: KafkaSecurity) -> dict[str, str]:
    """librdkafka's settings (rsyslog's omkafka ``confParam``, confluent-kafka)."""
    return _with_files(sec, _LIBRDKAFKA)
