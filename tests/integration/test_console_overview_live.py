"""The overview and the alerts pages in Debian's Chromium, on the real stack (fixtures in conftest.py).

A stage started as the operator starts it (cli.stages: the demo's heartbeat, a cheap one) announces
itself (dbuslib/liveness.py) and shows running; ``kill -9`` of it shows down within one refresh of the
page, and its ``stage_down`` incident appears on the alerts page, where an operator acknowledges it and a
viewer cannot. Screenshots: docs/console/overview.png and docs/console/alerts.png."""

from __future__ import annotations

import os
import signal
import time

import pytest
from helpers import wait_until

from cli.stages import Stages
from console.overview import LIVE_S
from dbuslib import liveness, zk

pytestmark = pytest.mark.integration

DEMO = "section[data-source='demo']"
HEARTBEAT = f"{DEMO} [data-node='heartbeat']"
ROW = "#open-alerts tr[data-source='demo'][data-key='heartbeat.stage_down']"
PAGE_SLACK_S = 3.0  # rendering, and a 2-core machine busy with the console and the browser


def demo_heartbeats(cfg) -> list[liveness.Process]:
    """The demo's heartbeat processes that run now (another test's would hide the one killed here)."""
    client = zk.client(cfg.endpoints.zookeeper)
    try:
        procs = liveness.read(client, cfg.endpoints.zookeeper.root, "demo").get("heartbeat", [])
    finally:
        client.stop()
        client.close()
    return liveness.alive(procs, liveness.this_host())


@pytest.fixture
def heartbeat(cfg, tmp_path):
    """The demo's heartbeat (writer and monitor) as a process of its own; stopped at the end."""
    wait_until(lambda: not demo_heartbeats(cfg), 60, "no other demo heartbeat process running")
    stages = Stages(cfg, "demo", tmp_path / "logs")
    proc = stages.start("heartbeat")
    yield stages, proc
    stages.stop_all()


def test_a_killed_stage_shows_down_within_one_refresh_and_its_alert_is_acknowledged(
    page, console_server, logged_in, screenshot, heartbeat, cfg
):
    stages, proc = heartbeat
    logged_in(page, "operator")
    page.goto(f"{console_server.url}/")
    for stage in ("extractor", "dispatcher", "appender", "fullpuller", "heartbeat"):
        page.locator(f"{DEMO} [data-node='{stage}']").wait_for()
    assert page.locator(f"{DEMO} .node.server").first.inner_text().count("MariaDB") == 1
    page.locator(f"{HEARTBEAT}[data-state='running']").wait_for(timeout=60_000)  # announced once it starts
    assert f"{proc.pid}@" in page.locator(HEARTBEAT).inner_text()
    screenshot(page, "overview")

    os.killpg(proc.pid, signal.SIGKILL)  # no clean stop: the ZooKeeper node stays until its session ends
    killed = time.monotonic()
    refresh_s = cfg.console.refresh_s
    page.locator(f"{HEARTBEAT}[data-state='down']").wait_for(timeout=int(1000 * (2 * refresh_s + 10)))
    took = time.monotonic() - killed
    assert took <= refresh_s + LIVE_S + PAGE_SLACK_S, f"down after {took:.1f} s (refresh {refresh_s} s)"
    assert "is gone" in page.locator(HEARTBEAT).inner_text()
    assert proc.poll() is not None
    stages.procs.pop("heartbeat", None)

    page.goto(f"{console_server.url}/alerts/")
    row = page.locator(ROW)
    row.wait_for()
    assert "demo: heartbeat is down" in row.inner_text()
    row.locator("button.ack").click()
    page.locator(f"{ROW} td.acked-by").wait_for()
    assert page.locator(f"{ROW} td.acked-by").inner_text().startswith("operator")
    assert "acknowledged demo heartbeat.stage_down" in page.inner_text("#ack-result")
    screenshot(page, "alerts")


def test_a_viewer_sees_the_alerts_but_cannot_acknowledge(page, console_server, logged_in):
    logged_in(page, "viewer")
    page.goto(f"{console_server.url}/alerts/")
    page.locator("#open-count").wait_for()
    wait_until(lambda: page.inner_text("#open-count").startswith("("), 10, "the alerts listed")
    assert page.locator("#open-alerts button.ack").count() == 0
    refused = page.request.post(
        f"{console_server.url}/alerts/api/ack",
        data={"source": "demo", "key": "heartbeat.stage_down"},
        headers={
            "Accept": "application/json",
            "X-CSRFToken": page.get_attribute("meta[name='csrf-token']", "content") or "",
        },
    )
    assert refused.status == 403, refused.text()
