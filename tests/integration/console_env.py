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

import os
import re
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from helpers import wait_until
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
