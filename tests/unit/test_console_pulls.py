"""The console's Full pulls page without a stack: the request form's checks, who may request, the audit
line, progress as the page shows it (shard bounds of a masked split column withheld), pending requests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from console_fakes import CONF, console_app, csrf_token, log_in, with_users
from flask import Flask

from console import pulls
from dbuslib.config import DbusConfig, load_config
from fullpuller.commands import Sent
from fullpuller.progress import Progress, ShardState
from ums.control import full_pull_request


@pytest.fixture(scope="module")
def cfg() -> DbusConfig:
    return with_users(load_config(CONF))


@pytest.fixture
def app(cfg: DbusConfig, tmp_path: Path) -> Flask:
    return console_app(cfg, tmp_path)


def logged_in(app: Flask, name: str) -> tuple[Any, str]:
    client = app.test_client()
    assert log_in(client, name).status_code == 302
    return client, csrf_token(client, "/pulls/")


def post(client: Any, csrf: str, body: dict[str, Any]) -> Any:
    return client.post(
        "/pulls/api/request", json=body, headers={"X-CSRFToken": csrf, "Accept": "application/json"}
    )


# ----------------------------------------------------------------------------------------- the form


def test_a_good_form_is_the_request(cfg: DbusConfig) -> None:
    form = pulls.validate(
        cfg,
        {
            "source": "demo",
            "table": "shop.orders",
            "split_col": " id , ts",
            "shard_size": "5000",
            "where": "id<9",
        },
    )
    assert form == pulls.PullForm("demo", "shop", "orders", "id,ts", 5000, "id<9")
    minimal = pulls.validate(cfg, {"source": "demo", "table": "shop.orders", "shard_size": "", "where": " "})
    assert (minimal.split_col, minimal.shard_size, minimal.where) == (None, None, None)
    assert (
        pulls.validate(cfg, {"source": "demo", "table": "shop.orders", "shard_size": "-1"}).shard_size == -1
    )


@pytest.mark.parametrize(
    ("data", "field", "words"),
    [
        ({"table": "shop.orders"}, "source", "choose a source"),
        ({"source": "nope", "table": "shop.orders"}, "source", "not a source"),
        ({"source": "applog", "table": "shop.orders"}, "source", "log source"),
        ({"source": "demo"}, "table", "schema.table"),
        ({"source": "demo", "table": "orders"}, "table", "expected schema.table"),
        ({"source": "demo", "table": "shop." + "t" * 65}, "table", "65 characters"),
        ({"source": "demo", "table": "shop.orders", "split_col": "id,,ts"}, "split_col", "is empty"),
        ({"source": "demo", "table": "shop.orders", "shard_size": "ten"}, "shard_size", "not a whole number"),
        ({"source": "demo", "table": "shop.orders", "shard_size": "0"}, "shard_size", "or -1"),
        ({"source": "demo", "table": "shop.orders", "shard_size": "-2"}, "shard_size", "or -1"),
        ({"source": "demo", "table": "shop.orders", "where": "x" * 4001}, "where", "4001 characters"),
        ({"source": "demo", "table": "shop.orders", "where": ["a"]}, "where", "must be text"),
    ],
)
def test_a_bad_form_names_the_field(cfg: DbusConfig, data: dict[str, Any], field: str, words: str) -> None:
    with pytest.raises(pulls.FormError) as e:
        pulls.validate(cfg, data)
    assert field in e.value.problems, e.value.problems
    assert words in e.value.problems[field]


def test_every_wrong_field_is_named_at_once(cfg: DbusConfig) -> None:
    with pytest.raises(pulls.FormError) as e:
        pulls.validate(cfg, {"source": "x", "table": "y", "shard_size": "z"})
    assert set(e.value.problems) == {"source", "table", "shard_size"}


# ----------------------------------------------------------------------------------------- requests


def sent(seqno: int = 1_700_000_000_123) -> Sent:
    return Sent(full_pull_request("demo", "shop", "orders", seqno=seqno), "demo_ctrl", "demo_callback", {})


def test_a_viewer_sees_no_form_and_gets_403(app: Flask, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[Any] = []

    def fake(*args: Any, **kwargs: Any) -> Sent:
        calls.append(args)
        return sent()

    monkeypatch.setattr("fullpuller.commands.send_request", fake)
    client, csrf = logged_in(app, "vi")
    page = client.get("/pulls/").get_data(as_text=True)
    assert 'id="pull-form"' not in page and 'id="pull-request"' not in page
    assert "only an operator may request" in page
    r = post(client, csrf, {"source": "demo", "table": "shop.orders"})
    assert r.status_code == 403 and "viewer" in r.get_json()["error"]
    assert calls == [] and not Path(app.config["DBUS_AUDIT_LOG"]).exists()


def test_an_operator_requests_a_pull_and_it_is_audited(app: Flask, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[Any, dict[str, Any]]] = []

    def fake(cfg: Any, *args: Any, **kwargs: Any) -> Sent:
        calls.append((args, kwargs))
        return sent()

    monkeypatch.setattr("fullpuller.commands.send_request", fake)
    client, csrf = logged_in(app, "op")
    assert 'id="pull-request"' in client.get("/pulls/").get_data(as_text=True)
    r = post(client, csrf, {"source": "demo", "table": "shop.orders", "shard_size": "100", "where": "id > 3"})
    assert r.status_code == 202, r.get_data(as_text=True)
    assert r.get_json() == {
        "id": 1_700_000_000_123,
        "source": "demo",
        "table": "shop.orders",
        "topic": "demo_ctrl",
    }
    assert calls == [
        (("demo", "shop", "orders"), {"split_col": None, "shard_size": 100, "where": "id > 3"}),
    ]
    (line,) = Path(app.config["DBUS_AUDIT_LOG"]).read_text().splitlines()
    record = json.loads(line)
    assert record["action"] == "fullpull-request" and record["user"] == "op"
    assert (record["table"], record["id"], record["sent"], record["where"]) == (
        "shop.orders",
        1_700_000_000_123,
        True,
        "id > 3",
    )


def test_a_bad_request_is_refused_with_its_fields_and_not_sent(
    app: Flask, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("fullpuller.commands.send_request", lambda *a, **k: pytest.fail("sent"))
    client, csrf = logged_in(app, "op")
    r = post(client, csrf, {"source": "demo", "table": "orders", "shard_size": "0"})
    assert r.status_code == 400
    body = r.get_json()
    assert set(body["fields"]) == {"table", "shard_size"} and body["error"].startswith("not sent: ")


def test_a_request_without_the_csrf_token_is_refused(app: Flask, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("fullpuller.commands.send_request", lambda *a, **k: pytest.fail("sent"))
    client, _ = logged_in(app, "op")
    r = client.post("/pulls/api/request", json={"source": "demo", "table": "shop.orders"})
    assert r.status_code == 400 and "CSRF" in r.get_data(as_text=True)


def test_the_pulls_api_answers_for_a_database_source_only(
    app: Flask, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[str] = []

    def fake(cfg: Any, ds: str, reqs: Any) -> dict[str, Any]:
        seen.append(ds)
        return {"source": ds}

    monkeypatch.setattr(pulls, "pulls", fake)
    client, _ = logged_in(app, "vi")
    assert client.get("/pulls/api/pulls?source=demo").get_json() == {"source": "demo"}
    assert (
        client.get("/pulls/api/pulls?source=applog", headers={"Accept": "application/json"}).status_code
        == 404
    )
    assert seen == ["demo"]


# ----------------------------------------------------------------------------------------- progress


def progress(**kw: Any) -> Progress:
    base = {
        "SeqNo": 7,
        "Schema": "shop",
        "Table": "customers",
        "Status": "pulling",
        "TotalCount": 3,
        "TotalRows": 300,
        "StartSecs": 1000.0,
        "SplitCol": "id",
        "Shards": [
            {"where": "x", "lower": None, "upper": "101"},
            {"lower": "101", "upper": "201"},
            {"lower": "201"},
        ],
    }
    return Progress(**{**base, **kw})


def test_progress_has_rows_shards_rate_eta_and_each_shards_state() -> None:
    p = progress()
    shards = {0: ShardState(100, "done"), 1: ShardState(50, "pulling")}
    d = pulls.pull_dict(p.with_shards(shards, now=1010.0), shards)
    assert (d["rows"], d["total_rows"], d["shards_done"], d["shards_total"]) == (150, 300, 1, 3)
    assert d["rows_per_s"] == 15.0 and d["eta_s"] == 10.0 and d["fraction"] == 0.5
    assert [(s["index"], s["state"], s["rows"]) for s in d["shards"]] == [
        (0, "done", 100),
        (1, "pulling", 50),
        (2, "waiting", 0),
    ]
    assert [(s["lower"], s["upper"]) for s in d["shards"]] == [(None, "101"), ("101", "201"), ("201", None)]
    assert "where" not in json.dumps(d["shards"])


def test_shard_bounds_of_a_masked_split_column_are_withheld(cfg: DbusConfig) -> None:
    masked = pulls.masked_columns(cfg, "demo", "shop", "customers")
    assert {"phone", "email"} <= masked
    d = pulls.pull_dict(
        progress(SplitCol="phone", Shards=[{"lower": "+86-1391234", "upper": None}]), {}, masked
    )
    assert d["shards"][0]["lower"] == d["shards"][0]["upper"] == pulls.WITHHELD
    assert "1391234" not in json.dumps(d)


def test_an_ended_pull_keeps_its_error() -> None:
    d = pulls.pull_dict(progress(Status="abort", ErrorCode="FULLPULL_BAD_WHERE", ErrorMsg="near 'x'"), {})
    assert (
        d["finished"]
        and d["eta_s"] == 0.0
        and (d["error_code"], d["error"]) == ("FULLPULL_BAD_WHERE", "near 'x'")
    )


def test_pending_requests_are_settled_by_the_reply_or_the_clock() -> None:
    a, b, c = (pulls.Pending(sent(n), "demo", "shop.orders", "op", 100.0) for n in (1, 2, 3))
    replies = {2: {"STATUS": "abort", "ERROR_CODE": "FULLPULL_UNKNOWN_TABLE", "ERROR_MSG": "no shop.orders"}}
    out = pulls.settle([a, b, c], {3}, lambda p: replies.get(p.sent.id), now=110.0)
    assert [(o["id"], o["status"], o["error_code"]) for o in out] == [
        (1, "pending", ""),
        (2, "rejected", "FULLPULL_UNKNOWN_TABLE"),
    ]
    late = pulls.settle([a], set(), lambda p: None, now=100.0 + pulls.ANSWER_S + 1)
    assert late[0]["status"] == "unanswered" and "is it running?" in late[0]["error"]
