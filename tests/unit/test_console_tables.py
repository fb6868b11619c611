"""The console's Tables page: version diffs, chart series, the table list and masking rules (pure), and its
pages and JSON endpoints through Flask's test client over a meta store on SQLite (the time-series server
and MySQL replaced by fakes)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from console_fakes import CONF, console_app, log_in, with_users
from flask import Flask
from hypothesis import given
from hypothesis import strategies as st
from pydantic import SecretStr

from console import tables
from console.tables import Beat, Retyped, TableVersion
from dbuslib.config import DbusConfig, load_config
from dbuslib.metastore import MetaStore, Reason, Version, meta_version
from ums import ColumnSpec

# ------------------------------------------------------------------------------------ version diffs


def test_the_first_version_has_no_changes_and_its_binlog_position() -> None:
    (v0,) = tables.version_changes([TableVersion(0, "first", (("id", "bigint"),), since=1030000012345678)])
    assert (v0.added, v0.dropped, v0.retyped) == ((), (), ())
    assert (v0.binlog_file_number, v0.binlog_offset) == (103, 12345678)
    assert tables.position_text(v0.since) == ".000103:12345678"
    assert tables.position_text(None) is None


def test_versions_show_what_was_added_dropped_and_retyped() -> None:
    versions = [
        TableVersion(
            2, "columns", (("id", "bigint"), ("total", "decimal(12,2)"), ("note", "text")), 3 * 10**13
        ),
        TableVersion(0, "first", (("id", "int"), ("amount", "decimal(10,2)")), 10**13 + 4),
        TableVersion(1, "columns", (("id", "bigint"), ("amount", "decimal(10,2)")), 2 * 10**13 + 5),
        TableVersion(
            3, "truncate", (("id", "bigint"), ("total", "decimal(12,2)"), ("note", "text")), 3 * 10**13 + 9
        ),
    ]
    changes = tables.version_changes(versions)
    assert [c.version for c in changes] == [0, 1, 2, 3]  # sorted by number
    assert changes[1].retyped == (Retyped("id", "int", "bigint"),)
    assert (changes[1].added, changes[1].dropped) == ((), ())
    assert (changes[2].added, changes[2].dropped, changes[2].retyped) == (("total", "note"), ("amount",), ())
    assert (changes[3].added, changes[3].dropped, changes[3].retyped, changes[3].reason) == (
        (),
        (),
        (),
        "truncate",
    )
    assert (changes[3].binlog_file_number, changes[3].binlog_offset) == (3, 9)


names = st.text(alphabet="abcdefgh", min_size=1, max_size=3)
types = st.sampled_from(["int", "bigint", "varchar(10)", "text", "datetime"])
column_lists = st.dictionaries(names, types, max_size=8).map(lambda d: tuple(d.items()))


@given(column_lists, column_lists)
def test_a_diff_turns_the_old_columns_into_the_new(old: tuple, new: tuple) -> None:
    added, dropped, retyped = tables.column_diff(old, new)
    before, after = dict(old), dict(new)
    assert (set(before) - set(dropped)) | set(added) == set(after)
    assert not set(added) & set(before) and not set(dropped) & set(after)
    assert {r.name: r.after for r in retyped} == {n: t for n, t in after.items() if before.get(n, t) != t}
    assert all(before[r.name] == r.before for r in retyped)
    assert tables.column_diff(new, new) == ((), (), ())


@given(st.lists(column_lists, min_size=1, max_size=6))
def test_every_version_after_the_first_is_diffed_against_the_one_before(history: list[tuple]) -> None:
    versions = [TableVersion(i, "columns", cols, since=i) for i, cols in enumerate(history)]
    changes = tables.version_changes(reversed(versions))
    assert [c.version for c in changes] == list(range(len(history)))
    for prev, c in zip(changes, changes[1:], strict=False):
        assert (c.added, c.dropped, c.retyped) == tables.column_diff(prev.columns, c.columns)


# ------------------------------------------------------------------------------------------ charts


def test_the_chart_query_groups_one_table_by_minute_over_the_last_hour() -> None:
    q = tables.chart_query("demo", "sh'op", "orders")
    assert q.startswith('SELECT mean("latency_ms") AS "latency_ms"')
    assert "\"ds\" = 'demo' AND \"schema\" = 'sh\\'op' AND \"table\" = 'orders'" in q
    assert q.endswith("time > now() - 3600s GROUP BY time(60s) fill(null)")


def test_chart_series_gives_latency_and_rows_per_second_with_gaps() -> None:
    series = [
        {
            "name": "dbus_heartbeat",
            "columns": ["time", "latency_ms", "latency_max_ms", "rows"],
            "values": [[120_000, 15.5, 20.0, 600], [0, 10.0, 12.0, 60], [60_000, None, None, None]],
        }
    ]
    out = tables.chart_series(series)
    assert out == {
        "bucket_s": 60,
        "latency_ms": [[0, 10.0], [60_000, None], [120_000, 15.5]],
        "rows_per_s": [[0, 1.0], [60_000, None], [120_000, 10.0]],
    }
    assert tables.chart_series([]) == {"bucket_s": 60, "latency_ms": [], "rows_per_s": []}


def test_chart_series_of_several_series_adds_rows_and_keeps_the_larger_latency() -> None:
    cols = ["time", "latency_ms", "rows"]
    series = [
        {"columns": cols, "values": [[0, 5.0, 30]]},
        {"columns": cols, "values": [[0, 9.0, 90], [60, None, 6]]},
    ]
    out = tables.chart_series(series, bucket_s=30)
    assert out["latency_ms"] == [[0, 9.0], [60, None]]
    assert out["rows_per_s"] == [[0, 4.0], [60, 0.2]]


# ---------------------------------------------------------------------------- the list, masking


def test_table_rows_join_versions_heartbeats_and_the_monitored_tables() -> None:
    rows = tables.table_rows(
        "demo",
        "database",
        {("shop", "orders"): (2, 10**13 + 7)},
        {("shop", "orders"): Beat(12.5, 40, 3.0), ("shop", "quiet"): Beat(None, None, 90.0)},
        [("shop", "orders"), ("shop", "new")],
    )
    assert [(r["schema"], r["table"]) for r in rows] == [
        ("shop", "new"),
        ("shop", "orders"),
        ("shop", "quiet"),
    ]
    new, orders, quiet = rows
    assert (orders["version"], orders["position"], orders["latency_ms"], orders["rows"]) == (
        2,
        ".000001:7",
        12.5,
        40,
    )
    assert (orders["heartbeat_age_s"], orders["monitored"]) == (3.0, True)
    assert (new["version"], new["latency_ms"], new["monitored"]) == (None, None, True)
    assert (quiet["monitored"], quiet["heartbeat_age_s"]) == (False, 90.0)
    (log_row,) = tables.table_rows("applog", "log", {("applog_schema", "t"): (1, None)}, {})
    assert (log_row["monitored"], log_row["position"], log_row["version"]) == (None, None, 1)


def test_masking_rules_name_type_column_and_pattern_but_no_salt_or_value() -> None:
    masking: dict[str, dict[str, dict[str, Any]]] = {
        "shop.customers": {
            "email": {"type": "sha256", "salt": "very-secret-salt"},
            "phone": {"type": "regex", "pattern": r"^(\d{3})\d+$", "replacement": r"\1****"},
        },
        "shop.*": {
            "email": {"type": "md5"},
            "note": {"type": "truncate", "length": 8},
            "card": {"type": "md5", "salt_field": "id"},
            "name": {"type": "replace", "value": "hidden-value"},
        },
    }
    cfg = load_config(CONF)
    src = cfg.sources["demo"].model_copy(update={"masking": _masking(masking)})
    rules = tables.masking_rules(src.masking, "shop", "customers")
    assert [(r["column"], r["type"], r["pattern"], r["salted"], r["length"]) for r in rules] == [
        ("card", "md5", "shop.*", "column id", None),
        ("email", "sha256", "shop.customers", "fixed salt", None),  # the most specific pattern wins
        ("name", "replace", "shop.*", None, None),
        ("note", "truncate", "shop.*", None, 8),
        ("phone", "regex", "shop.customers", None, None),
    ]
    assert "very-secret-salt" not in repr(rules) and "hidden-value" not in repr(rules)
    assert "****" not in repr(rules)
    assert tables.masking_rules(src.masking, "other", "customers") == []
    assert [r["column"] for r in tables.masking_rules(src.masking, "shop", "orders")] == [
        "card",
        "email",
        "name",
        "note",
    ]


def _masking(raw: dict[str, dict[str, dict[str, Any]]]) -> dict[str, Any]:
    from dbuslib.config import MaskRule

    return {t: {c: MaskRule.model_validate(r) for c, r in cols.items()} for t, cols in raw.items()}


def test_split_name() -> None:
    assert tables.split_name("shop.orders") == ("shop", "orders")
    assert tables.split_name("a.b.c") == ("a", "b.c")
    for bad in ("orders", ".orders", "shop.", ""):
        assert tables.split_name(bad) is None


# ------------------------------------------------------------------------------ pages, endpoints

COLS_0 = (ColumnSpec("id", "int", False), ColumnSpec("amount", "decimal(10,2)"))
COLS_1 = (
    ColumnSpec("id", "bigint", False),
    ColumnSpec("amount", "decimal(10,2)"),
    ColumnSpec("note", "text"),
)


@pytest.fixture
def cfg(tmp_path: Path) -> DbusConfig:
    base = with_users(load_config(CONF))
    url = f"sqlite:///{tmp_path / 'meta.db'}"
    store = MetaStore(url)
    store.create_schema()
    rows = [
        ("demo", "orders", Version(0, 10**13 + 4, COLS_0, Reason.FIRST)),
        ("demo", "orders", Version(1, 2 * 10**13 + 99, COLS_1, Reason.COLUMNS)),
        ("demo", "customers", Version(0, 10**13 + 5, COLS_0, Reason.FIRST)),
        ("other", "orders", Version(0, 10**13 + 6, COLS_0, Reason.FIRST)),
    ]
    with store.engine.begin() as conn:  # MetaStore.add's row, its id given (SQLite numbers no BIGINT key)
        for i, (ds, table, v) in enumerate(rows, 1):
            columns = [
                {"name": c.name, "column_type": c.column_type, "nullable": c.nullable} for c in v.columns
            ]
            conn.execute(
                meta_version.insert().values(
                    id=i,
                    ds=ds,
                    schema_name="shop",
                    table_name=table,
                    version=v.version,
                    since_id=v.since,
                    reason=v.reason.value,
                    columns=json.dumps(columns),
                )
            )
    assert [v.version for v in store.history("demo", "shop", "orders")] == [0, 1]
    store.dispose()
    endpoints = base.endpoints.model_copy(
        update={"meta_store": base.endpoints.meta_store.model_copy(update={"url": SecretStr(url)})}
    )
    return base.model_copy(update={"endpoints": endpoints})


BEATS = {
    "demo": {("shop", "orders"): Beat(12.5, 40, 3.0)},
    "applog": {
        ("applog_schema", "app_orders"): Beat(80.0, 7, 2.0),
        ("applog_schema", "gone"): Beat(1.0, 1, 1.0),
    },
}
CHART = [{"columns": ["time", "latency_ms", "rows"], "values": [[0, 10.0, 60], [60_000, None, None]]}]


@pytest.fixture
def app(cfg: DbusConfig, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Flask:
    from dbuslib.logstore import LogStore

    logs = LogStore(cfg.endpoints.meta_store.url.get_secret_value())
    logs.create_schema()
    t, _ = logs.add_table("applog", "applog_schema", "app_orders")
    one = json.dumps([{"name": "log_time", "type": "datetime"}, {"name": "level", "type": "string"}])
    two = json.dumps(
        [
            {"name": "log_time", "type": "datetime"},
            {"name": "level", "type": "int"},
            {"name": "host", "type": "string"},
        ]
    )
    logs.publish(t, "[]", one, True)
    logs.publish(logs.need_table("applog", "applog_schema", "app_orders"), "[]", two, True)
    logs.dispose()
    monkeypatch.setattr(tables, "newest_beats", lambda cfg, ds, now: BEATS[ds])
    monkeypatch.setattr(tables, "monitored", lambda cfg, ds, now: [("shop", "orders"), ("shop", "products")])
    monkeypatch.setattr(tables, "chart", lambda cfg, ds, schema, table: tables.chart_series(CHART))
    return console_app(cfg, tmp_path)


def _client(app: Flask) -> Any:
    client = app.test_client()
    assert log_in(client, "vi").status_code == 302
    return client


def test_the_endpoints_need_a_login(app: Flask) -> None:
    client = app.test_client()
    for path in ("/tables/api/tables", "/tables/api/demo/shop.orders"):
        r = client.get(path)
        assert r.status_code == 401 and r.get_json() == {"error": "not logged in"}, path
    assert client.get("/tables/demo/shop.orders").status_code == 302


def test_the_list_has_every_table_of_every_source(app: Flask) -> None:
    data = _client(app).get("/tables/api/tables").get_json()
    demo, applog = data["sources"]
    assert (demo["source"], demo["kind"], demo["errors"]) == ("demo", "database", [])
    by_name = {f"{t['schema']}.{t['table']}": t for t in demo["tables"]}
    assert sorted(by_name) == ["shop.customers", "shop.orders", "shop.products"]  # not another source's
    orders = by_name["shop.orders"]
    assert (orders["version"], orders["position"], orders["latency_ms"], orders["rows"]) == (
        1,
        ".000002:99",
        12.5,
        40,
    )
    assert (by_name["shop.products"]["version"], by_name["shop.products"]["monitored"]) == (None, True)
    assert by_name["shop.customers"]["monitored"] is False
    assert (applog["source"], applog["kind"]) == ("applog", "log")
    (app_orders,) = applog["tables"]
    assert (app_orders["table"], app_orders["version"], app_orders["latency_ms"]) == ("app_orders", 2, 80.0)


def test_a_tables_page_shows_its_versions_with_their_changes_and_positions(app: Flask) -> None:
    page = _client(app).get("/tables/demo/shop.orders").get_data(as_text=True)
    rows = re.findall(r'<tr data-version="(\d+)">(.*?)</tr>', page, re.S)
    assert [v for v, _ in rows] == ["1", "0"]  # newest first
    newest = re.sub(r"\s+", " ", rows[0][1])
    assert "<code>.000002:99</code>" in newest and "columns" in newest
    assert '<td class="added"><code>note</code> </td>' in newest
    assert "<code>id</code> int &rarr; bigint" in newest
    assert 'id="no-masking"' in page
    assert 'data-api="/tables/api/demo/shop.orders"' in page


def test_a_tables_page_shows_its_masking_rules_without_a_salt(app: Flask, cfg: DbusConfig) -> None:
    page = _client(app).get("/tables/demo/shop.customers").get_data(as_text=True)
    assert re.findall(r'<tr data-column="([^"]+)">', page) == ["email", "id_card", "phone"]
    assert "sha256" in page and "fixed salt" in page
    salt = cfg.sources["demo"].masking["shop.customers"]["email"].salt
    assert salt is not None and salt.get_secret_value() not in page
    assert "****" not in page  # the regex's replacement


def test_a_log_tables_page_shows_its_published_versions(app: Flask) -> None:
    page = _client(app).get("/tables/applog/applog_schema.app_orders").get_data(as_text=True)
    rows = re.findall(r'<tr data-version="(\d+)">(.*?)</tr>', page, re.S)
    assert [v for v, _ in rows] == ["2", "1"]
    newest = re.sub(r"\s+", " ", rows[0][1])
    assert (
        "UTC" in newest and "<code>host</code>" in newest and "<code>level</code> string &rarr; int" in newest
    )


def test_a_tables_figures_and_charts(app: Flask) -> None:
    data = _client(app).get("/tables/api/demo/shop.orders").get_json()
    assert data["version"] == 1 and data["versions"] == 2 and data["errors"] == []
    assert data["heartbeat"] == {"latency_ms": 12.5, "rows": 40, "age_s": 3.0}
    assert data["charts"]["latency_ms"] == [[0, 10.0], [60_000, None]]
    assert data["charts"]["rows_per_s"] == [[0, 1.0], [60_000, None]]


def test_an_unknown_source_or_name_is_404(app: Flask) -> None:
    client = _client(app)
    for path in ("/tables/nope/shop.orders", "/tables/demo/orders"):
        assert client.get(path).status_code == 404, path
    r = client.get("/tables/api/nope/shop.orders", headers={"Accept": "application/json"})
    assert r.status_code == 404 and "nope" in r.get_json()["error"]


def test_an_unreadable_time_series_server_is_named_and_the_rest_still_shown(
    app: Flask, monkeypatch: pytest.MonkeyPatch
) -> None:
    def down(*args: Any) -> Any:
        raise OSError("connection refused")

    monkeypatch.setattr(tables, "newest_beats", down)
    monkeypatch.setattr(tables, "chart", down)
    data = _client(app).get("/tables/api/demo/shop.orders").get_json()
    assert data["version"] == 1 and data["heartbeat"] is None
    assert data["charts"]["latency_ms"] == []
    assert [e.split(":")[0] for e in data["errors"]] == [
        "dbus_heartbeat",
        "dbus_heartbeat over the last hour",
    ]
    listed = _client(app).get("/tables/api/tables").get_json()["sources"][0]
    assert listed["errors"][0].startswith("dbus_heartbeat: OSError: connection refused")
    assert {t["table"] for t in listed["tables"]} == {"customers", "orders", "products"}
