"""DBus's client of a Confluent-compatible schema registry: the I/O edge of the ``avro`` output format.

``ums.formats`` stays pure: its Avro encoder asks a ``SchemaIds`` callable for the id of a (subject,
schema) and its decoder a ``SchemaLookup`` for the schema of an id. ``Registry`` gives both
(``Registry.schema_id`` and ``Registry.schema``) over the registry's Confluent API, by example the local
stack's Apicurio at ``http://127.0.0.1:18081/apis/ccompat/v6`` (docs/formats.md#registry,
docs/stack.md#schema-registry). The HTTP calls are confluent-kafka's ``SchemaRegistryClient``; this module
decides caching, retries and errors:

- ``schema_id(subject, text)`` registers the schema under the subject, or gets the id of the identical
  version already there (the registry answers both the same); cached per (subject, text), so a worker asks
  once per table version;
- ``schema(id)`` fetches the schema's text, cached per id (ids never change meaning);
- ``ensure_compatibility(subject, level)`` sets the subject's compatibility level (``output.compatibility``),
  once per subject and client: callers call it before the subject's first registration;
- a refused schema (HTTP 409: incompatible with the subject's level) is ``ums.formats.SchemaRefused``
  naming the subject and the registry's message (the record becomes a dead letter);
- 401/403 is ``RegistryAuthFailed`` (``REGISTRY_AUTH_FAILED``, not retried, exit 3);
- a refused connection, a timeout, HTTP 408, 429 or 5xx are retried within ``endpoints.retry``
  (dbuslib/retry.py), then ``ENDPOINT_RETRIES_EXHAUSTED``; without a retry policy they are
  ``RegistryUnavailable`` (``ENDPOINT_UNREACHABLE``) at once;
- any other answer is ``RegistryRequestFailed`` (``REGISTRY_REQUEST_FAILED``); an unknown schema id is its
  subclass ``SchemaNotFound``, also a ``ValueError``: a record naming an id the registry does not know is a
  record that cannot be read.

HTTP basic auth when ``endpoints.registry.username`` is set; the password is never logged nor put in a
message.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

from dbuslib.errors import DbusError, EndpointError
from dbuslib.retry import RetryPolicy, call
from ums.formats import SchemaIds, SchemaRefused

if TYPE_CHECKING:
    from dbuslib.config import DbusConfig, RegistryEndpoint, RetrySettings

log = logging.getLogger("dbus.registry")

# HTTP statuses a registry may answer while it (re)starts or is overloaded: worth another attempt.
TRANSIENT_STATUSES = frozenset({408, 429, 500, 502, 503, 504})
CONFLICT_ATTEMPTS = 3  # a 409 asked again this many times in all before it is a refusal (see _register)


class RegistryAuthFailed(EndpointError):
    """The registry refused the account (HTTP 401 or 403): wrong ``endpoints.registry`` credentials or
    rights. Retrying cannot help; exits 3 as an endpoint that refuses an account does."""

    code = "REGISTRY_AUTH_FAILED"
    retriable = False


class RegistryUnavailable(EndpointError):
    """The registry did not answer, or answered that it cannot serve now (408, 429, 5xx): transient."""


class RegistryRequestFailed(DbusError):
    """The registry answered a request with an error that is neither transient nor a refused schema;
    ``status``: the HTTP status (0 when there was no answer to read)."""

    code = "REGISTRY_REQUEST_FAILED"

    def __init__(self, message: str, status: int = 0) -> None:
        super().__init__(message)
        self.status = status


class SchemaNotFound(RegistryRequestFailed, ValueError):
    """No schema has this id in the registry: the record naming it cannot be read."""


def _safe_url(url: str) -> str:
    """``url`` without any user or password in it (for messages)."""
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit(parts._replace(netloc=netloc))


class Registry:
    """A Confluent-compatible schema registry (see the module's docstring). Thread-safe; one per worker."""

    def __init__(
        self,
        url: str,
        *,
        username: str | None = None,
        password: str = "",
        timeout_s: float = 10.0,
        retry: RetryPolicy | None = None,
    ) -> None:
        from confluent_kafka.schema_registry import SchemaRegistryClient

        conf: dict[str, Any] = {"url": url, "timeout": timeout_s, "max.retries": 0}  # retries: ours
        if username:
            conf["basic.auth.user.info"] = f"{username}:{password}"
        self._client = SchemaRegistryClient(conf)
        self.url = _safe_url(url)
        self.retry = retry
        self._ids: dict[tuple[str, str], int] = {}
        self._schemas: dict[int, str] = {}
        self._levels: dict[str, str] = {}  # subject -> the level this client set
        self._pending: dict[str, str] = {}  # subject -> the level to set once the subject exists
        self._lock = threading.Lock()

    @classmethod
    def from_config(
        cls, endpoint: RegistryEndpoint, retry: RetrySettings | RetryPolicy | None = None
    ) -> Registry:
        """The registry of ``endpoints.registry``, its transient failures retried within ``retry``
        (``endpoints.retry``; None: not retried)."""
        policy: RetryPolicy | None
        if retry is None or isinstance(retry, RetryPolicy):
            policy = retry
        else:
            policy = RetryPolicy(retry.budget_s, retry.initial_backoff_s, retry.max_backoff_s)
        return cls(
            endpoint.url,
            username=endpoint.username,
            password=endpoint.password.get_secret_value(),
            timeout_s=endpoint.timeout_s,
            retry=policy,
        )

    @classmethod
    def of(cls, cfg: DbusConfig) -> Registry:
        """The registry of a configuration (``endpoints.registry``, retried within ``endpoints.retry``)."""
        from dbuslib.errors import ConfigError

        if cfg.endpoints.registry is None:
            msg = "endpoints.registry: not set, and a registry is needed (an avro output or topic)"
            raise ConfigError(msg)
        return cls.from_config(cfg.endpoints.registry, cfg.endpoints.retry)

    def __repr__(self) -> str:
        return f"Registry({self.url!r})"

    def close(self) -> None:
        self._client.close()

    # -- the callables of ums.formats ------------------------------------------------------------------

    def schema_id(self, subject: str, schema_text: str) -> int:
        """The id of Avro schema ``schema_text`` under ``subject`` (``ums.formats.SchemaIds``): registered
        when new, the existing version's id when identical. Raises ``SchemaRefused`` when the subject's
        compatibility level refuses it."""
        key = (subject, schema_text)
        found = self._ids.get(key)
        if found is not None:
            return found
        from confluent_kafka.schema_registry import Schema

        def register() -> int:
            return int(self._client.register_schema(subject, Schema(schema_text, "AVRO")))

        schema_id = self._register(subject, register)
        with self._lock:
            self._ids[key] = schema_id
            self._schemas.setdefault(schema_id, schema_text)
        log.info("registry %s: subject %s has schema id %d", self.url, subject, schema_id)
        level = self._pending.get(subject)
        if level is not None:
            self.ensure_compatibility(subject, level)
        return schema_id

    def _register(self, subject: str, register: Any) -> int:
        """``register()``; a 409 is asked again (up to ``CONFLICT_ATTEMPTS`` times) before it counts as a
        refusal: two writers registering a new subject's first schema at once (two shards of a full pull)
        get one id and one 409 from Apicurio ("An artifact with ID ... already exists"), and asked again
        the loser gets the same id. A schema the subject's level refuses is refused every time."""
        what = f"register a schema under subject {subject}"
        for attempt in range(1, CONFLICT_ATTEMPTS):
            try:
                return int(self._call(what, register, subject=subject))
            except SchemaRefused:
                log.info("registry %s: subject %s answered 409, asked again (%d)", self.url, subject, attempt)
                time.sleep(0.05 * attempt)
        return int(self._call(what, register, subject=subject))  # a refusal now is the level's

    def schema(self, schema_id: int) -> str:
        """The text of the schema with id ``schema_id`` (``ums.formats.SchemaLookup``)."""
        found = self._schemas.get(schema_id)
        if found is not None:
            return found

        def fetch() -> str:
            return str(self._client.get_schema(schema_id).schema_str)

        text = self._call(f"schema id {schema_id}", fetch, schema_id=schema_id)
        with self._lock:
            self._schemas[schema_id] = text
        return text

    def ensure_compatibility(self, subject: str, level: str) -> None:
        """Set ``subject``'s compatibility level (BACKWARD, FULL_TRANSITIVE, NONE...) unless this client
        set it already: call it before the subject's first registration. A registry that keeps no level
        for a subject it does not have (Apicurio 2.0 answers 404) gets it right after the subject's first
        schema, which any level accepts."""
        if self._levels.get(subject) == level:
            return

        def put() -> None:
            self._client.set_compatibility(subject, level)

        try:
            self._call(f"set compatibility {level} on subject {subject}", put, subject=subject)
        except RegistryRequestFailed as e:
            if e.status != 404:
                raise
            with self._lock:
                self._pending[subject] = level
            return
        with self._lock:
            self._levels[subject] = level
            self._pending.pop(subject, None)

    def schema_ids(self, level: str | None = None) -> SchemaIds:
        """A ``SchemaIds`` that sets each subject's level to ``level`` (None: leaves it) before it
        registers the subject's first schema."""

        def ids(subject: str, schema_text: str) -> int:
            if level is not None:
                self.ensure_compatibility(subject, level)
            return self.schema_id(subject, schema_text)

        return ids

    # -- errors and retries ----------------------------------------------------------------------------

    def _call(self, what: str, fn: Any, *, subject: str | None = None, schema_id: int | None = None) -> Any:
        """``fn()`` with the registry's errors made DBus's, retried within the policy when transient."""
        label = f"registry {self.url}: {what}"

        def attempt() -> Any:
            try:
                return fn()
            except Exception as e:  # sorted into DBus's errors
                mapped = _translate(e, label, subject=subject, schema_id=schema_id)
                if mapped is e:
                    raise
                raise mapped from e

        if self.retry is None:
            return attempt()
        return call(self.retry, label, attempt)


def _translate(err: Exception, label: str, *, subject: str | None, schema_id: int | None) -> Exception:
    """The DBus error for an error of confluent-kafka's client (or of httpx beneath it)."""
    from confluent_kafka.schema_registry.common._httpx_compat import httpx  # the client's own httpx
    from confluent_kafka.schema_registry.error import SchemaRegistryError

    if isinstance(err, SchemaRegistryError):
        status, message = err.http_status_code, err.error_message
        if status == 409 and subject is not None:
            return SchemaRefused(f"{label}: refused (incompatible with the subject's level): {message}")
        if status in (401, 403):
            return RegistryAuthFailed(
                f"{label}: HTTP {status}, the registry refused the account: check endpoints.registry's "
                f"username and password ({message})"
            )
        if status in TRANSIENT_STATUSES:
            return RegistryUnavailable(f"{label}: HTTP {status}: {message}")
        if status == 404 and schema_id is not None:
            return SchemaNotFound(f"{label}: no such schema in the registry (HTTP 404: {message})", 404)
        return RegistryRequestFailed(
            f"{label}: HTTP {status}, registry code {err.error_code}: {message}", status
        )
    if isinstance(err, (httpx.TransportError, ConnectionError, TimeoutError)):
        return RegistryUnavailable(f"{label}: {type(err).__name__}: {err}")
    if isinstance(err, DbusError | SchemaRefused):
        return err
    return RegistryRequestFailed(f"{label}: {type(err).__name__}: {err}")
