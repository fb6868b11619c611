"""The overview follows a running source live, in Debian's Chromium (fixtures in conftest.py).

A throwaway source (extractor_env: its own name, database, topic and ZooKeeper nodes) whose extractor runs
while a workload inserts rows into its database, and a console over that source's configuration: the
overview's extractor shows running, and its committed position and lag move from one refresh of the page
to the next, without a reload."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
from console_env import ConsoleServer
from helpers import wait_until

pytestmark = pytest.mark.integration

ROWS_PER_S = 20


@pytest.fixture
def workload(extractor_env, writer_db) -> Iterator[None]:
    """The extractor of the throwaway source, and ROWS_PER_S inserts a second into its database."""
    db, _ = writer_db
    with db.cursor() as cur:
        cur.execute("CREATE TABLE orders (id INT AUTO_INCREMENT PRIMARY KEY, note VARCHAR(40))")
    extractor_env.spawn()
    stop = threading.Event()

    def write() -> None:
        with db.cursor() as cur:
            while not stop.wait(1 / ROWS_PER_S):
                cur.execute("INSERT INTO orders (note) VALUES ('console lag test')")

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    yield
    stop.set()
    writer.join(10)


@pytest.fixture
def console_server(extractor_env, workload) -> Iterator[ConsoleServer]:
    """conftest's console over the throwaway source's configuration (``logged_in`` logs in to it)."""
    server = ConsoleServer(extractor_env.cfg_path, extractor_env.logs / "console")
    try:
        yield server.start()
    finally:
        server.stop()


def test_the_overview_follows_a_running_extractor(page, console_server, logged_in, extractor_env):
    logged_in(page, "viewer")
    extractor = page.locator(f"section[data-source='{extractor_env.ds}'] [data-node='extractor']")
    extractor.and_(page.locator("[data-state='running']")).wait_for(timeout=60_000)

    def figure(name: str) -> str | None:
        found = extractor.locator(f"dt:text-is('{name}') + dd")
        return found.inner_text() if found.count() else None

    committed: list[str] = []  # each new value the page showed
    lags: set[tuple[str | None, str | None]] = set()  # (lag (s), behind (bytes))
    rates: set[str] = set()

    def moved() -> bool:
        now = figure("committed")
        if now and (not committed or committed[-1] != now):
            committed.append(now)
        lags.add((figure("lag (s)"), figure("behind (bytes)")))
        rates.add(figure("rows/s") or "-")
        shown = {lag for lag in lags if lag[0] is not None}
        return len(committed) >= 3 and len(shown) >= 2 and bool(rates - {"-", "0"})

    try:
        wait_until(moved, 90, f"the overview's extractor of {extractor_env.ds} moving")
    except AssertionError as e:
        seen = f"committed {committed}, (lag, behind) {list(lags)}, rows/s {rates}"
        raise AssertionError(f"{e}; seen {seen}") from None
    assert page.locator("#problems").inner_text() == ""  # the last refresh succeeded
