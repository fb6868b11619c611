"""The console's Tables pages in Debian's Chromium, on the real stack (fixtures in conftest.py).

The demo source's tables are listed from the meta store (their versions, written by the appender when the
demo ran), the heartbeat writer's listing and InfluxDB. A table of the demo source made for the test
(``shop.console_<hex>``, in no database) gets three versions in the meta store, written as the appender
writes them (MetaStore.add), and heartbeat points of the last 20 minutes in InfluxDB (the appender's
``Beat.to_point``): its page shows the version history with the changes and positions, and both charts.
Both are removed at the end. Screenshots: docs/console/tables.png, docs/console/table.png."""

from __future__ import annotations

import time
import uuid

import pytest
from dashboards import influxql

from appender.heartbeat import Beat
from cli.demo import create_shop
from dbuslib import influx
from dbuslib.metastore import MetaStore, Reason, Version, meta_version
from ums import ColumnSpec

pytestmark = pytest.mark.integration

COLUMNS = [
    (ColumnSpec("id", "int", False), ColumnSpec("amount", "decimal(10,2)")),
    (ColumnSpec("id", "bigint", False), ColumnSpec("amount", "decimal(10,2)"), ColumnSpec("note", "text")),
    (ColumnSpec("id", "bigint", False), ColumnSpec("total", "decimal(12,2)"), ColumnSpec("note", "text")),
]
SINCE = [3 * 10**13 + 4, 4 * 10**13 + 120_394, 4 * 10**13 + 982_117]


@pytest.fixture
def sample_table(cfg):
    """The demo's tables, and ``shop.console_<hex>`` of source demo with three versions and a heartbeat
    every 30 s of the last 20 minutes; the made table is removed afterwards."""
    create_shop(cfg.source("demo"))  # the demo's tables (idempotent), which the heartbeat writer lists
    table = f"console_{uuid.uuid4().hex[:6]}"
    store = MetaStore(cfg.endpoints.meta_store.url.get_secret_value())
    reasons = [Reason.FIRST, Reason.COLUMNS, Reason.COLUMNS]
    now_ms = int(time.time() * 1000)
    beats = [
        Beat("demo", "shop", table, 40.0 + (i % 7) * 15.0, 120 + 30 * (i % 5), t, t - 5)
        for i, t in enumerate(range(now_ms - 20 * 60_000, now_ms, 30_000))
    ]
    try:
        for i, (cols, since, reason) in enumerate(zip(COLUMNS, SINCE, reasons, strict=True)):
            store.add("demo", "shop", table, Version(i, since, cols, reason))
        influx.write(cfg.endpoints.influxdb, [b.to_point() for b in beats])
        yield table
    finally:
        with store.engine.begin() as conn:
            conn.execute(
                meta_version.delete().where(meta_version.c.ds == "demo", meta_version.c.table_name == table)
            )
        store.dispose()
        influxql(cfg, f'DROP SERIES FROM "dbus_heartbeat" WHERE "ds" = \'demo\' AND "table" = \'{table}\'')


def test_the_tables_page_and_a_tables_versions_masking_and_charts(
    cfg, page, console_server, logged_in, screenshot, sample_table
):
    logged_in(page, "viewer")
    page.goto(f"{console_server.url}/tables/")
    demo = page.locator("section[data-source='demo']")
    for name in ("shop.orders", "shop.customers", "shop.order_items", "shop.products"):
        demo.locator(f"tr[data-table='{name}']").wait_for()
    ours = demo.locator(f"tr[data-table='shop.{sample_table}']")
    assert ours.locator("td.version").inner_text() == "2"
    assert ours.locator("td.latency").inner_text().endswith(" ms")
    assert page.locator("section[data-source='applog']").count() == 1  # the log source's card
    assert page.inner_text("#problems") == ""
    screenshot(page, "tables")

    with page.expect_navigation():
        ours.locator("a").click()
    assert page.url.endswith(f"/tables/demo/shop.{sample_table}")
    versions = page.locator("#versions tbody tr")
    assert [versions.nth(i).get_attribute("data-version") for i in range(versions.count())] == ["2", "1", "0"]
    newest, middle = versions.nth(0).inner_text(), versions.nth(1).inner_text()
    assert ".000004:982117" in newest and "total" in newest and "amount" in newest  # added, dropped
    assert ".000004:120394" in middle and "note" in middle and "int → bigint" in middle
    assert page.locator("#no-masking").count() == 1
    # both charts drawn from the points written: a line per chart, and the figures filled in
    drawn = "[...document.querySelectorAll('figure.chart svg')].filter(s => +s.dataset.points >= 15)"
    page.wait_for_function(f"() => {drawn}.length == 2")
    assert page.locator("#chart-latency svg path.series").count() >= 1
    assert page.locator("#chart-rows svg path.series").count() >= 1
    assert page.inner_text("#fig-version") == "2"
    assert page.inner_text("#fig-latency").endswith(" ms")
    screenshot(page, "table")

    page.goto(f"{console_server.url}/tables/demo/shop.customers")
    masks = page.locator("#masking tbody tr")
    assert [masks.nth(i).get_attribute("data-column") for i in range(masks.count())] == [
        "email",
        "id_card",
        "phone",
    ]
    assert "sha256" in masks.nth(0).inner_text() and "fixed salt" in masks.nth(0).inner_text()
    salt = cfg.sources["demo"].masking["shop.customers"]["email"].salt
    assert salt is not None and salt.get_secret_value() not in page.content()
    assert page.locator("#versions, #no-versions").count() == 1
