"""The web console under test (tests/integration/test_console_browser.py, fixtures in conftest.py).

- ``ConsoleServer(cfg_path, logs)``: ``dbus console --listen 127.0.0.1:<free port>`` as a process of its own
  (own process group), with users ``operator`` and ``viewer`` whose passwords are made here for the run
  (their werkzeug scrypt hashes reach the console through ``DBUS_CONSOLE_OPERATOR_HASH`` and
  ``DBUS_CONSOLE_VIEWER_HASH``, which conf/dbus.yaml's ``console.users`` name). ``start()`` returns once
  ``/login`` answers 200, or fails with the console's log; ``stop()`` ends the group.
- ``CHROMIUM``: Debian's browser, which Playwright drives (``executable_path``; it downloads none):
  ``make browser`` installs it (stack/services/chromium.sh).
"""

from __future__ import annotations

import http.cookiejar
import os
import re
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import urllib.error
import urllib.parse
import urllib.request
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from helpers import wait_until
from pydantic import BaseModel, SecretStr
from werkzeug.security import generate_password_hash

REPO = Path(__file__).resolve().parents[2]
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
VIEWPORT = {"width": 1280, "height": 800}
# docs/console/<page>.png, shown in the README: written there by `make screenshots` (CONSOLE_SCREENSHOTS=docs)
# only; `make test` takes them too, into a temporary folder, and leaves the checkout as it was
SCREENSHOTS = (
    REPO / "docs" / "console"
    if os.environ.get("CONSOLE_SCREENSHOTS") == "docs"
    else Path(tempfile.gettempdir()) / "dbus-console-screenshots"
)
FAILED_SHOTS = Path(tempfile.gettempdir()) / "dbus-browser-failures"  # a failed test's page
ROLES = ("operator", "viewer")  # the user of each role is named after it
START_S = 60  # the console imports the CLI (pyspark among it) before it listens


def page_state(page, errors: list[str], test: str) -> str:
    """What a failed browser test's report shows: the page's address, a screenshot of it (saved under
    FAILED_SHOTS, named after the test) and its script errors."""
    shot = FAILED_SHOTS / f"{re.sub(r'[^A-Za-z0-9_.-]', '_', test)[:120]}.png"
    try:
        FAILED_SHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(shot), full_page=True, timeout=5_000)
        taken = str(shot)
    except Exception as e:  # a closed or hung page: the rest still helps
        taken = f"none ({e})"
    lines = [f"page: {page.url}", f"screenshot: {taken}", f"script errors: {len(errors)}", *errors[-20:]]
    return "\n".join(lines)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class ConsoleServer:
    """``dbus console`` on a free local port, with a known password per role (``passwords[role]``, its
    hash ``hashes[role]``)."""

    cfg_path: Path
    logs: Path
    port: int = field(default_factory=free_port)
    passwords: dict[str, str] = field(default_factory=lambda: {r: secrets.token_urlsafe(16) for r in ROLES})
    proc: subprocess.Popen | None = None

    def __post_init__(self) -> None:
        self.hashes = {r: generate_password_hash(p, method="scrypt") for r, p in self.passwords.items()}

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def log(self) -> Path:
        return self.logs / "console.log"

    def env(self) -> dict[str, str]:
        return {
            **os.environ,
            "DBUS_CONSOLE_OPERATOR_HASH": self.hashes["operator"],
            "DBUS_CONSOLE_VIEWER_HASH": self.hashes["viewer"],
            "PYTHONUNBUFFERED": "1",
        }

    def start(self) -> ConsoleServer:
        self.logs.mkdir(parents=True, exist_ok=True)
        dbus = str(Path(sys.executable).with_name("dbus"))
        cmd = [dbus, "--config", str(self.cfg_path), "console", "--listen", f"127.0.0.1:{self.port}"]
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(
                cmd, cwd=REPO, stdout=out, stderr=subprocess.STDOUT, start_new_session=True, env=self.env()
            )
        wait_until(self.answers, START_S, f"dbus console on {self.url}/login", alive=[self])
        return self

    def answers(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.url}/login", timeout=2) as r:
                return bool(r.status == 200)
        except (urllib.error.URLError, OSError):
            return False

    def check_alive(self) -> None:
        assert self.proc is not None and self.proc.poll() is None, (
            f"dbus console exited ({self.proc.returncode if self.proc else 'not started'}); "
            f"see {self.log}:\n{self.tail()}"
        )

    def tail(self, n: int = 40) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-n:])
        except FileNotFoundError:
            return ""

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=15)


# ---------------------------------------------------------------------------- secrets and crawling


def secret_values(model: Any) -> set[str]:
    """Every SecretStr value in the configuration, recursively; a URL's password on its own too (the meta
    store's ``mysql+pymysql://user:PASSWORD@host/db``)."""
    found: set[str] = set()
    if isinstance(model, SecretStr):
        value = model.get_secret_value()
        found.add(value)
        if "://" in value:
            password = urllib.parse.urlsplit(value).password
            if password:
                found.add(urllib.parse.unquote(password))
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


def distinctive_secrets(cfg: Any, raw: dict) -> set[str]:
    """The configuration's secrets a grep can look for: 6 characters or more, and not also a plain value
    of it (the demo stack's password ``dbus`` is also a user name)."""
    plain = plain_values(raw)
    return {v for v in secret_values(cfg) if len(v) >= 6 and v not in plain}


def session(server: ConsoleServer, role: str) -> urllib.request.OpenerDirector:
    """An HTTP client logged in to ``server`` as ``role`` through the login form (its CSRF token)."""
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()))
    page = opener.open(f"{server.url}/login", timeout=10).read().decode()
    match = re.search(r'name="csrf_token" value="([^"]+)"', page)
    assert match, page[:2000]
    form = {"username": role, "password": server.passwords[role], "csrf_token": match.group(1)}
    answer = opener.open(f"{server.url}/login", data=urllib.parse.urlencode(form).encode(), timeout=10)
    assert answer.geturl().rstrip("/") == server.url, "the login did not lead to the overview"
    return opener


def json_endpoints(cfg: Any) -> list[str]:
    """The GET routes under an ``/api/`` without arguments, as the console registers them."""
    from console.app import create_app

    app = create_app(cfg)
    return sorted(
        r.rule
        for r in app.url_map.iter_rules()
        if "GET" in r.methods and not r.arguments and "/api/" in r.rule
    )


def crawl(
    server: ConsoleServer, opener: urllib.request.OpenerDirector, start: list[str], limit: int = 80
) -> dict[str, tuple[int, str]]:
    """``path -> (status, body)`` of every answer from ``start`` and every page a link leads to (not
    /static/, not /logout), at most ``limit``."""
    seen: dict[str, tuple[int, str]] = {}
    todo = deque(start)
    while todo and len(seen) < limit:
        path = todo.popleft()
        if path in seen:
            continue
        try:
            with opener.open(f"{server.url}{path}", timeout=60) as r:
                status, body = r.status, r.read().decode("utf-8", "replace")
        except urllib.error.HTTPError as e:
            status, body = e.code, e.read().decode("utf-8", "replace")
        seen[path] = (status, body)
        for href in re.findall(r'href="(/[^"#?]*)"', body):
            if href not in seen and not href.startswith("/static/") and href != "/logout":
                todo.append(href)
    return seen


def add_made_secrets(raw: dict, ds: str, table: str) -> dict[str, str]:
    """Distinctive secrets of the test's own put into the raw configuration ``raw``: a masking salt on
    ``table``'s (``schema.table``) ``email`` column, a webhook URL with a token and an SMTP password for
    source ``ds``'s heartbeat alerts, and the console's session key; returned by name."""
    tag = secrets.token_hex(6)
    made = {
        "salt": f"salt-{tag}-never-shown",
        "smtp": f"smtp-{tag}-never-shown",
        "hook": f"hooktoken{tag}",
        "key": f"session-key-{tag}-never-shown",
    }
    src = raw["sources"][ds]
    src.setdefault("masking", {}).setdefault(table, {})["email"] = {"type": "sha256", "salt": made["salt"]}
    src.setdefault("heartbeat", {})["webhook_url"] = f"http://127.0.0.1:9/hook?token={made['hook']}"
    src["heartbeat"]["smtp"] = {
        "host": "127.0.0.1",
        "port": 9,
        "from_addr": "dbus@example.invalid",
        "to_addrs": ["ops@example.invalid"],
        "user": "mailer",
        "password": made["smtp"],
    }
    raw.setdefault("console", {})["secret_key"] = made["key"]
    return made
