"""The README's web console commands, run as written: the export of a password hash and ``dbus console
--listen 127.0.0.1:18088``; the operator then logs in with that password (a plain HTTP client: the CSRF
token from the login form, the session cookie)."""

from __future__ import annotations

import http.cookiejar
import os
import re
import signal
import subprocess
import sys
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
from helpers import wait_until

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]
SECTION = "## The web console"


def readme_block() -> str:
    text = (REPO / "README.md").read_text()
    assert SECTION in text, f"README.md has no {SECTION!r} section"
    section = text.split(SECTION, 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```sh\n(.*?)```", section, re.DOTALL)
    assert len(blocks) == 1, blocks
    return blocks[0]


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):  # the answer itself, not where it points
        return None


def test_the_readme_console_commands_serve_a_console_the_operator_logs_in_to(tmp_path):
    block = readme_block()
    password = re.search(r"echo '([^']+)' \| dbus console hash-password", block).group(1)
    url = re.search(r"--listen (\S+)", block).group(1)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    env.pop("DBUS_CONSOLE_OPERATOR_HASH", None)
    log = (tmp_path / "console.log").open("wb")
    proc = subprocess.Popen(
        ["bash", "-euo", "pipefail", "-c", block],
        cwd=REPO,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    jar = http.cookiejar.CookieJar()
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar), NoRedirect)

    def answers() -> bool:
        assert proc.poll() is None, (tmp_path / "console.log").read_text(errors="replace")[-3000:]
        try:
            return opener.open(f"http://{url}/login", timeout=5).status == 200
        except (urllib.error.URLError, ConnectionError):
            return False

    try:
        wait_until(answers, 60, f"the console on {url}")
        page = opener.open(f"http://{url}/login", timeout=10).read().decode()
        token = re.search(r'name="csrf_token" value="([^"]+)"', page).group(1)
        form = urllib.parse.urlencode({"username": "operator", "password": password, "csrf_token": token})
        with pytest.raises(urllib.error.HTTPError) as answer:  # a 302 is not followed: raised as such
            opener.open(f"http://{url}/login", data=form.encode(), timeout=10)
        assert answer.value.code == 302 and answer.value.headers["Location"] == "/"
        overview = opener.open(f"http://{url}/", timeout=10)
        assert overview.status == 200 and "Overview" in overview.read().decode()
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(30)
        log.close()
