"""The console's Dead letters page without a stack: a letter as the page shows it (reason, coordinates,
masked values withheld), the filters, the paging, the counts' chart, and that no masked value reaches a
response."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
from console_fakes import CONF, console_app, log_in, with_users
from flask import Flask

from console import deadletters
from dbuslib.config import DbusConfig, load_config
from dbuslib.deadletter import TABLE_MASKED, UNATTRIBUTED, DeadLetter

SECRET_PHONE = "+86-13912345678"


@pytest.fixture(scope="module")
def cfg() -> DbusConfig:
    return with_users(load_config(CONF))


@pytest.fixture
def app(cfg: DbusConfig, tmp_path: Path) -> Flask:
    return console_app(cfg, tmp_path)


def letter(
    key: str | None, value: bytes | None, *, stage: str = "appender", code: str = "X", **kw: Any
) -> bytes:
    d = DeadLetter(
        code=code,
        error=kw.pop("error", "shop.t at mariadb-bin.000003:1234: bad"),
        topic=kw.pop("topic", "demo.shop"),
        partition=0,
        offset=kw.pop("offset", 42),
        key=key.encode() if key is not None else None,
        value=value,
        stage=stage,
        withheld=kw.pop("withheld", ""),
    )
    return d.to_json().encode()


def view(
    cfg: DbusConfig, value: bytes | None, key: bytes | None = None, *, ds: str = "demo", **kw: Any
) -> Any:
    args = {"dlq_topic": "demo.dlq", "dlq_partition": 0, "dlq_offset": 17, "at_ms": 1000, **kw}
    return deadletters.view(value, key, plan=deadletters.masking_plan(cfg, ds), **args)


def test_a_letter_shows_its_reason_coordinates_and_value(cfg: DbusConfig) -> None:
    v = view(cfg, letter("shop.orders", b'{"id": 1}', code="RAW_UNDECODABLE"), b"shop.orders")
    assert (v.stage, v.code, v.table, v.error) == (
        "appender",
        "RAW_UNDECODABLE",
        "shop.orders",
        "shop.t at mariadb-bin.000003:1234: bad",
    )
    assert (v.topic, v.partition, v.offset, v.dlq_topic, v.dlq_partition, v.dlq_offset) == (
        "demo.shop",
        0,
        42,
        "demo.dlq",
        0,
        17,
    )
    assert (v.withheld, v.value_text, v.value_bytes, v.key) == ("", '{"id": 1}', 9, "shop.orders")


def test_binary_values_are_shown_as_base64() -> None:
    size, text, b64 = deadletters._preview({"value_base64": base64.b64encode(b"\xff\x00DBR").decode()})
    assert (size, text, b64) == (5, None, base64.b64encode(b"\xff\x00DBR").decode())


def test_a_masked_tables_value_is_withheld_even_when_the_letter_carries_it(cfg: DbusConfig) -> None:
    # a letter written before the table got its masking rules still carries the value: the page withholds it
    v = view(cfg, letter("shop.customers", SECRET_PHONE.encode()))
    assert v.withheld == TABLE_MASKED and v.value_text is None and v.value_base64 is None
    assert SECRET_PHONE not in json.dumps(v.__dict__)


@pytest.mark.parametrize(
    ("key", "stage"),
    [(None, "appender"), ("not a table", "dispatcher"), ("shop.orders", "logprocessor")],
)
def test_a_letter_of_no_known_table_is_withheld_in_a_source_that_masks(
    cfg: DbusConfig, key: str | None, stage: str
) -> None:
    v = view(cfg, letter(key, SECRET_PHONE.encode(), stage=stage))
    assert v.withheld == UNATTRIBUTED and v.value_text is None
    assert SECRET_PHONE not in json.dumps(v.__dict__)


def test_the_stages_own_withholding_is_kept(cfg: DbusConfig) -> None:
    v = view(cfg, letter("shop.orders", None, withheld="the record did not decode"))
    assert v.withheld == "the record did not decode" and v.value_text is None


def test_a_record_that_is_no_letter_is_shown_without_its_bytes(cfg: DbusConfig) -> None:
    v = view(cfg, b"\x00garbage " + SECRET_PHONE.encode(), b"shop.orders")
    assert v.code == "DLQ_UNREADABLE" and v.withheld and v.value_text is None
    assert "not a dead letter" in v.error and SECRET_PHONE not in json.dumps(v.__dict__)


def test_select_filters_and_sorts_newest_first(cfg: DbusConfig) -> None:
    vs = [
        view(cfg, letter("shop.a", b"1", code="A"), dlq_offset=1, at_ms=100),
        view(cfg, letter("shop.b", b"2", code="B"), dlq_offset=2, at_ms=300),
        view(cfg, letter(None, None, code="A", stage="dispatcher"), dlq_offset=3, at_ms=200),
    ]
    assert [v.dlq_offset for v in deadletters.select(vs)] == [2, 3, 1]
    assert [v.dlq_offset for v in deadletters.select(vs, code="A")] == [3, 1]
    assert [v.dlq_offset for v in deadletters.select(vs, stage="dispatcher")] == [3]
    assert [v.dlq_offset for v in deadletters.select(vs, table="shop.b")] == [2]
    assert [v.dlq_offset for v in deadletters.select(vs, table="-")] == [3]
    page = deadletters.page_of(deadletters.select(vs), 1, 2)
    assert (page["total"], page["pages"], page["page"]) == (3, 2, 1)
    assert [d["dlq_offset"] for d in page["letters"]] == [1]
    assert deadletters.page_of([], 5, 2)["page"] == 0
    f = deadletters.facets(vs)
    assert f["codes"] == [{"name": "A", "count": 2}, {"name": "B", "count": 1}]
    assert {"stage": "dispatcher", "code": "A", "count": 1} in f["stage_codes"]


def test_the_chart_series_come_from_the_hourly_sums() -> None:
    q = deadletters.timeline_query("de'mo", 24, 3600)
    assert "\"ds\" = 'de\\'mo'" in q and 'GROUP BY time(3600s), "stage", "code" fill(0)' in q
    series = [
        {
            "tags": {"stage": "appender", "code": "X"},
            "columns": ["time", "count"],
            "values": [[1, 0], [2, 3]],
        },
        {"tags": {"stage": "dispatcher", "code": "Y"}, "columns": ["time", "count"], "values": [[1, 0]]},
    ]
    assert deadletters.timeline(series) == [{"stage": "appender", "code": "X", "points": [[1, 0], [2, 3]]}]


def test_no_masked_value_reaches_the_letters_api(
    app: Flask, cfg: DbusConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    records = [
        (
            letter("shop.customers", SECRET_PHONE.encode(), code="APPENDER_RECORD_FAILED"),
            b"shop.customers",
            5,
        ),
        (letter("shop.orders", b"order 1", code="RAW_UNDECODABLE"), b"shop.orders", 6),
    ]

    def fake_read(kcfg: Any, topic: str, per_partition: int, make: Any) -> Any:
        assert per_partition == 10
        recs = [
            type("R", (), {"value": v, "key": k, "partition": 0, "offset": o, "timestamp": 1000 + o})()
            for v, k, o in records
        ]
        return [make(r) for r in recs], [{"partition": 0, "first": 0, "end": 7, "from": 5}], []

    monkeypatch.setattr(deadletters, "read_tail", fake_read)
    client = app.test_client()
    log_in(client, "vi")
    r = client.get("/dead-letters/api/letters?source=demo&scan=10")
    assert r.status_code == 200
    body = r.get_json()
    assert SECRET_PHONE not in r.get_data(as_text=True)
    assert base64.b64encode(SECRET_PHONE.encode()).decode() not in r.get_data(as_text=True)
    assert [(d["code"], d["withheld"], d["value_text"]) for d in body["letters"]] == [
        ("RAW_UNDECODABLE", "", "order 1"),
        ("APPENDER_RECORD_FAILED", TABLE_MASKED, None),
    ]
    assert body["dlq_topic"] == "demo.dlq" and body["read"] == 2 and body["total"] == 2
    only = client.get("/dead-letters/api/letters?source=demo&scan=10&code=RAW_UNDECODABLE").get_json()
    assert [d["dlq_offset"] for d in only["letters"]] == [6]
    unknown = client.get("/dead-letters/api/letters?source=nope", headers={"Accept": "application/json"})
    assert unknown.status_code == 404 and "source" in unknown.get_json()["error"]
