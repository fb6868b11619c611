"""The web console in Debian's Chromium (Playwright; fixtures in conftest.py and console_env.py)."""

from __future__ import annotations

import threading
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

import pytest

PAGE = """<!doctype html><title>probe</title>
<button id="go" onclick="document.getElementById('out').textContent = 'clicked'">Go</button>
<p id="out"></p>"""


@pytest.fixture
def local_page(tmp_path):
    """A tiny page served by Python's http.server on a free port: its URL."""
    (tmp_path / "index.html").write_text(PAGE)

    class Quiet(SimpleHTTPRequestHandler):
        def log_message(self, *args) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(Quiet, directory=str(tmp_path)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/index.html"
    server.shutdown()
    server.server_close()


def test_chromium_clicks_a_button_on_a_local_page(page, local_page):
    page.goto(local_page)
    page.click("#go")
    page.wait_for_selector("#out:has-text('clicked')")
    assert page.title() == "probe"
