"""dbuslib.registry against a small Confluent-API server on 127.0.0.1 (real HTTP, real client library):
caching, compatibility levels, refused schemas, basic auth, and what is retried and what is not."""

from __future__ import annotations

import base64
import json
import logging
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dbuslib.config import RegistryEndpoint, RetrySettings
from dbuslib.errors import exit_code
from dbuslib.registry import (
    CONFLICT_ATTEMPTS,
    Registry,
    RegistryAuthFailed,
    RegistryRequestFailed,
    RegistryUnavailable,
    SchemaNotFound,
)
from dbuslib.retry import RetriesExhausted, RetryPolicy
from ums.formats import SchemaRefused

FAST = RetryPolicy(budget_s=3.0, initial_backoff_s=0.01, max_backoff_s=0.02)
PASSWORD = "s3cret-registry-pw"
BASE = "/apis/ccompat/v6"  # where the fake serves, as Apicurio does


def avro(name: str, *fields: str) -> str:
    return json.dumps(
        {"type": "record", "name": name, "fields": [{"name": f, "type": "int"} for f in fields]}
    )


@dataclass
class FakeRegistry:
    """The Confluent API's calls DBus makes, in memory: content ids (one id per distinct text, as
    Apicurio's), a level per subject set only once the subject exists (Apicurio 2.0's 404 otherwise)."""

    user: tuple[str, str] | None = None  # basic auth required when set
    refuse: set[str] = field(default_factory=set)  # texts answered 409
    fail_next: list[int] = field(default_factory=list)  # statuses answered before serving normally
    races: int = 0  # registrations answered 409 "already exists" (another writer's first schema won)
    hang: threading.Event | None = None  # when set: every request waits for it (a registry that hangs)
    ids: dict[str, int] = field(default_factory=dict)
    subjects: dict[str, list[str]] = field(default_factory=dict)
    levels: dict[str, str] = field(default_factory=dict)
    requests: list[tuple[str, str]] = field(default_factory=list)

    def answer(self, method: str, path: str, body: dict | None, auth: str | None) -> tuple[int, object]:
        self.requests.append((method, path))
        if self.hang is not None:
            self.hang.wait(10)
        if self.fail_next:
            return self.fail_next.pop(0), {"error_code": 50001, "message": "not now"}
        if self.user is not None:
            expected = "Basic " + base64.b64encode(":".join(self.user).encode()).decode()
            if auth != expected:
                return 401, {"error_code": 401, "message": "Unauthorized"}
        route = path.split("?")[0].removeprefix(BASE)
        parts = [unquote(p) for p in route.strip("/").split("/")]
        if method == "POST" and len(parts) == 3 and parts[0] == "subjects" and parts[2] == "versions":
            assert body is not None
            subject, text = parts[1], body["schema"]
            if self.races:
                self.races -= 1
                self.subjects.setdefault(subject, [text])
                return 409, {"error_code": 409, "message": f"An artifact with ID '{subject}' already exists."}
            if text in self.refuse and self.subjects.get(subject):
                return 409, {"error_code": 409, "message": f"Incompatible artifact: {subject} [AVRO]"}
            schema_id = self.ids.setdefault(text, len(self.ids) + 1)
            versions = self.subjects.setdefault(subject, [])
            if text not in versions:
                versions.append(text)
            return 200, {"id": schema_id}
        if method == "GET" and parts[:2] == ["schemas", "ids"]:
            texts = [t for t, i in self.ids.items() if i == int(parts[2])]
            if not texts:
                return 404, {"error_code": 40403, "message": "Schema not found"}
            return 200, {"schema": texts[0]}
        if method == "PUT" and parts[0] == "config":
            assert body is not None
            if parts[1] not in self.subjects:
                return 404, {"error_code": 40401, "message": f"No artifact with ID '{parts[1]}'"}
            self.levels[parts[1]] = body["compatibility"]
            return 200, {"compatibility": body["compatibility"]}
        return 404, {"error_code": 404, "message": "no such path"}


@pytest.fixture
def server() -> Iterator[tuple[FakeRegistry, str]]:
    fake = FakeRegistry()

    class Handler(BaseHTTPRequestHandler):
        def _serve(self) -> None:
            n = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(n)) if n else None
            status, out = fake.answer(self.command, self.path, body, self.headers.get("Authorization"))
            data = json.dumps(out).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/vnd.schemaregistry.v1+json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = do_PUT = _serve

        def log_message(self, *args: object) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield fake, f"http://127.0.0.1:{httpd.server_address[1]}{BASE}"
    if fake.hang is not None:
        fake.hang.set()
    httpd.shutdown()
    httpd.server_close()


def test_schema_id_registers_once_per_subject_and_text(server):
    fake, url = server
    reg = Registry(url)
    key, value = avro("Key", "id"), avro("Value", "id", "n")
    assert reg.schema_id("shop.orders-key", key) == 1
    assert reg.schema_id("shop.orders-value", value) == 2
    assert reg.schema_id("shop.orders-key", key) == 1  # cached: no request
    assert [m for m, _ in fake.requests] == ["POST", "POST"]
    # another client (another worker): the identical version's id, as the registry answers it
    assert Registry(url).schema_id("shop.orders-key", key) == 1
    assert fake.subjects == {"shop.orders-key": [key], "shop.orders-value": [value]}


def test_schema_is_fetched_once_per_id(server):
    fake, url = server
    Registry(url).schema_id("t-value", avro("V", "a"))
    reader = Registry(url)
    assert reader.schema(1) == avro("V", "a")
    assert reader.schema(1) == avro("V", "a")
    assert fake.requests.count(("GET", "/apis/ccompat/v6/schemas/ids/1")) == 1


def test_unknown_id_is_a_record_that_cannot_be_read(server):
    _, url = server
    with pytest.raises(SchemaNotFound, match=r"schema id 7: no such schema") as e:
        Registry(url).schema(7)
    assert isinstance(e.value, ValueError) and e.value.code == "REGISTRY_REQUEST_FAILED"


def test_compatibility_set_once_and_after_the_first_schema_when_the_subject_is_new(server):
    fake, url = server
    reg = Registry(url)
    reg.ensure_compatibility("t-value", "BACKWARD")  # 404: the subject does not exist yet
    assert fake.levels == {}
    reg.schema_id("t-value", avro("V", "a"))
    assert fake.levels == {"t-value": "BACKWARD"}
    puts = [r for r in fake.requests if r[0] == "PUT"]
    reg.ensure_compatibility("t-value", "BACKWARD")
    reg.schema_id("t-value", avro("V", "a", "b"))
    assert [r for r in fake.requests if r[0] == "PUT"] == puts  # not set again
    Registry(url).ensure_compatibility("t-value", "FULL")  # an existing subject: at once
    assert fake.levels == {"t-value": "FULL"}


def test_schema_ids_callable_sets_the_level_first(server):
    fake, url = server
    ids = Registry(url).schema_ids("FORWARD")
    assert ids("a-key", avro("K", "id")) == 1
    assert fake.levels == {"a-key": "FORWARD"}


def test_refused_schema_names_subject_and_the_registrys_message(server):
    fake, url = server
    reg = Registry(url, retry=FAST)
    reg.schema_id("t-value", avro("V", "a"))
    fake.refuse.add(avro("V", "x"))
    with pytest.raises(SchemaRefused, match=r"subject t-value: refused .*Incompatible artifact: t-value"):
        reg.schema_id("t-value", avro("V", "x"))
    posts = fake.requests.count(("POST", "/apis/ccompat/v6/subjects/t-value/versions?normalize=False"))
    assert posts == 1 + CONFLICT_ATTEMPTS  # the first schema, then the refused one asked again


def test_a_subjects_first_schema_registered_by_two_writers_at_once_is_not_a_refusal(server):
    fake, url = server
    fake.races = CONFLICT_ATTEMPTS - 1  # Apicurio's 409 to the writer that lost the race
    assert Registry(url, retry=FAST).schema_id("t-value", avro("V", "a")) == 1


def test_basic_auth(server):
    fake, url = server
    fake.user = ("dbus", PASSWORD)
    endpoint = RegistryEndpoint(url=url, username="dbus", password=PASSWORD)
    assert Registry.from_config(endpoint).schema_id("t-key", avro("K", "id")) == 1


def test_wrong_password_is_not_retried_and_not_shown(server, caplog):
    fake, url = server
    fake.user = ("dbus", "the-right-one")
    endpoint = RegistryEndpoint(url=url, username="dbus", password=PASSWORD)
    reg = Registry.from_config(
        endpoint, RetrySettings(budget_s=3, initial_backoff_s=0.01, max_backoff_s=0.02)
    )
    with caplog.at_level(logging.DEBUG), pytest.raises(RegistryAuthFailed, match="HTTP 401") as e:
        reg.schema_id("t-key", avro("K", "id"))
    assert len(fake.requests) == 1
    assert e.value.code == "REGISTRY_AUTH_FAILED" and not e.value.retriable and exit_code(e.value) == 3
    assert PASSWORD not in str(e.value) and PASSWORD not in caplog.text and PASSWORD not in repr(reg)


def test_url_credentials_are_not_shown(server):
    _, url = server
    with_user = url.replace("http://", f"http://dbus:{PASSWORD}@")
    reg = Registry(with_user)
    assert PASSWORD not in reg.url and PASSWORD not in repr(reg)


def test_unavailable_registry_is_retried_within_the_budget(server):
    fake, url = server
    fake.fail_next = [503, 502, 500]
    assert Registry(url, retry=FAST).schema_id("t-key", avro("K", "id")) == 1
    assert len(fake.requests) == 4


def test_no_policy_no_retry(server):
    fake, url = server
    fake.fail_next = [503]
    with pytest.raises(RegistryUnavailable, match="HTTP 503") as e:
        Registry(url).schema(1)
    assert e.value.code == "ENDPOINT_UNREACHABLE" and exit_code(e.value) == 3


def test_refused_connection_exhausts_the_retries():
    reg = Registry("http://127.0.0.1:9/apis/ccompat/v6", retry=RetryPolicy(0.3, 0.01, 0.02))
    with pytest.raises(RetriesExhausted, match=r"schema id 3: still failing .*ConnectError") as e:
        reg.schema(3)
    assert e.value.code == "ENDPOINT_RETRIES_EXHAUSTED" and exit_code(e.value) == 3


def test_a_registry_that_hangs_times_out(server):
    fake, url = server
    fake.hang = threading.Event()
    reg = Registry.from_config(RegistryEndpoint(url=url, timeout_s=0.2))
    with pytest.raises(RegistryUnavailable, match="Timeout"):
        reg.schema(1)


def test_other_errors_are_request_failures(server):
    fake, url = server
    fake.fail_next = [422]
    with pytest.raises(RegistryRequestFailed, match="HTTP 422") as e:
        Registry(url, retry=FAST).schema_id("t-key", avro("K", "id"))
    assert len(fake.requests) == 1 and e.value.status == 422 and not e.value.retriable


subjects = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789._-/ ", min_size=1, max_size=12).filter(
    lambda s: s.strip("./") == s and ".." not in s
)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(calls=st.lists(st.tuples(subjects, st.sampled_from(["a", "b", "c"])), min_size=1, max_size=8))
def test_ids_follow_the_registry_and_each_pair_is_asked_once(server, calls):
    fake, url = server
    fake.requests.clear()
    reg = Registry(url)
    for subject, f in calls:
        text = avro("R", f)
        assert reg.schema_id(subject, text) == fake.ids[text]
        assert text in fake.subjects[subject]  # the subject's name arrives as given (URL-encoded)
    assert len(fake.requests) == len(set(calls))
