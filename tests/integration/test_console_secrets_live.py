"""No secret of the configuration reaches the console's pages or JSON (issue #18, acceptance 2): a console
over a configuration with distinctive secrets (a masking salt, an SMTP password, a webhook URL with a token,
the session key, the users' hashes) is crawled as an operator: every page a link leads to and every JSON
endpoint without arguments; none of them holds any of those values, nor a password of the sources."""

from __future__ import annotations

import http.cookiejar
import re
import secrets
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections import deque
from typing import Any

import pytest
import yaml
from console_env import ConsoleServer
from pydantic import BaseModel, SecretStr

from dbuslib.config import DbusConfig, load_config, raw_config

pytestmark = pytest.mark.integration
MAX_PAGES = 80


def secret_values(model: Any) -> set[str]:
    """Every SecretStr value in the configuration, recursively."""
    found: set[str] = set()
    if isinstance(model, SecretStr):
        found.add(model.get_secret_value())
    elif isinstance(model, BaseModel):
        for name in type(model).model_fields:
            found |= secret_values(getattr(model, name))
    elif isinstance(model, dict):
        for v in model.values():
            found |= secret_values(v)
    elif isinstance(model, (tuple, list)):
        for v in model:
            found |= secret_values(v)
    return found


def plain_values(node: Any) -> set[str]:
    """Every string of the YAML that is not a secret's (user names, hosts...)."""
    if isinstance(node, str):
        return {node}
    if isinstance(node, dict):
        return {
            s
            for k, v in node.items()
            if k not in ("password", "salt", "token", "url")
            for s in plain_values(v)
        }
    if isinstance(node, list):
        return {s for v in node for s in plain_values(v)}
    return set()


@pytest.fixture(scope="module")
def secret_console(cfg: DbusConfig, tmp_path_factory):
    raw = raw_config(cfg.path)
    tag = secrets.token_hex(6)
    made = {
        "salt": f"salt-{tag}-never-shown",
        "smtp": f"smtp-{tag}-never-shown",
        "hook": f"hooktoken{tag}",
        "key": f"session-key-{tag}-never-shown",
    }
    demo = raw["sources"]["demo"]
    demo.setdefault("masking", {}).setdefault("shop.customers", {})["email"] = {
        "type": "sha256",
        "salt": made["salt"],
    }
    demo.setdefault("heartbeat", {})["webhook_url"] = f"http://127.0.0.1:9/hook?token={made['hook']}"
    demo["heartbeat"]["smtp"] = {
        "host": "127.0.0.1",
        "port": 9,
        "from_addr": "dbus@example.invalid",
        "to_addrs": ["ops@example.invalid"],
        "user": "mailer",
        "password": made["smtp"],
    }
    raw.setdefault("console", {})["secret_key"] = made["key"]
    path = cfg.path.parent / f".test-console-secrets-{uuid.uuid4().hex[:8]}.yaml"  # relative paths hold
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    try:
        loaded = load_config(path)
        server = ConsoleServer(path, tmp_path_factory.mktemp("console-secrets")).start()
        try:
            plain = plain_values(raw)
            values = {v for v in secret_values(loaded) if len(v) >= 6 and v not in plain}
            values |= {*made.values(), *server.passwords.values(), *server.hashes.values()}
            yield server, values
        finally:
            server.stop()
    finally:
        path.unlink(missing_ok=True)


def session(server: ConsoleServer, role: str) -> urllib.request.OpenerDirector:
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()))
    page = opener.open(f"{server.url}/login", timeout=10).read().decode()
    token = re.search(r'name="csrf_token" value="([^"]+)"', page).group(1)
    form = {"username": role, "password": server.passwords[role], "csrf_token": token}
    answer = opener.open(f"{server.url}/login", data=urllib.parse.urlencode(form).encode(), timeout=10)
    assert answer.geturl().rstrip("/") == server.url, "the login did not lead to the overview"
    return opener


def json_endpoints() -> list[str]:
    """The GET routes under an ``/api/`` without arguments, as the console registers them."""
    from console.app import create_app

    app = create_app(load_config())
    return sorted(
        r.rule
        for r in app.url_map.iter_rules()
        if "GET" in r.methods and not r.arguments and "/api/" in r.rule
    )


def test_no_secret_reaches_a_page_or_a_json_answer(secret_console) -> None:
    server, values = secret_console
    opener = session(server, "operator")
    seen: dict[str, int] = {}
    # pages whose links the page's script makes: a masked table's (a log table's rules page is linked from
    # /rules/ when the log source has tables: crawled then)
    shown = ["/tables/demo/shop.customers", "/tables/api/demo/shop.customers"]
    todo = deque(["/", *json_endpoints(), *shown])
    while todo and len(seen) < MAX_PAGES:
        path = todo.popleft()
        if path in seen:
            continue
        try:
            with opener.open(f"{server.url}{path}", timeout=60) as r:
                status, body = r.status, r.read().decode("utf-8", "replace")
        except urllib.error.HTTPError as e:
            status, body = e.code, e.read().decode("utf-8", "replace")
        seen[path] = status
        if path == "/tables/demo/shop.customers":  # the salted rule is shown, its salt is not
            assert "sha256" in body and "email" in body, body[:2000]
        leaked = sorted(v[:12] + "..." for v in values if v in body)
        assert not leaked, f"{path} ({status}) holds secret(s) {leaked}"
        for href in re.findall(r'href="(/[^"#?]*)"', body):
            if href not in seen and not href.startswith("/static/") and href != "/logout":
                todo.append(href)
    pages = [p for p in seen if "/api/" not in p]
    print(f"\ncrawled {len(seen)} answers: {seen}")
    assert len(pages) >= 6 and all(status == 200 for status in seen.values()), seen
