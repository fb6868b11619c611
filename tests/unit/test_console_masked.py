"""Masked values on the console's Log rules page (console/masked.py, console/rules.py): a viewer's sample
and preview of a log source with masking rules hold no clear value of a masked column (searched for by
value in the whole answer), an operator's saveAs row shows masked columns as the processor publishes them;
the redaction's pure parts table-driven. Flask's test client over a SQLite meta store (no stack; the raw
topic's newest records are given by the test)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from console_fakes import CONF, console_app, csrf_token, log_in, with_users
from flask import Flask
from pydantic import SecretStr
from rule_engines import accepts_all

from console import masked, rules
from dbuslib.config import DbusConfig, MaskRule, load_config
from logprocessor.adapters import AdapterSettings

APP_ORDERS = Path(__file__).resolve().parents[2] / "conf" / "demo" / "logrules" / "app_orders.json"
SCHEMA = "applog_schema"
SECRET_REQ = "zq-SECRET-7731"  # req_id: md5, salted
SECRET_ORDER = "4455667788"  # order_id: truncated to 2 characters
MASKING = {
    f"{SCHEMA}.app_orders": {
        "req_id": {"type": "md5", "salt": "pepper"},
        "order_id": {"type": "truncate", "length": 2},
    }
}
ORDER = f"2026-11-24 10:15:30.100 | [WARN] | OrderService order={SECRET_ORDER} amount=45.50 req={SECRET_REQ}"
PAYMENT = "2026-11-24 10:15:31.002 | [INFO] | PaymentService paid=98123 req=r-3"
RSYSLOG = AdapterSettings("log_rsyslog")
API = "/rules/api/applog/app_orders"


def record(message: str) -> str:
    return json.dumps(
        {
            "host": "app-01.prod",
            "path": "/srv/a.log",
            "timestamp": "2026-11-24T10:15:30.100Z",
            "message": message,
        }
    )


def demo_groups() -> list[dict[str, Any]]:
    return rules.editor_groups(json.loads(APP_ORDERS.read_text()))


def groups() -> tuple[Any, ...]:
    done, problems = rules.check_groups(demo_groups())
    assert problems == []
    return done


def masking(*, redact: bool = True) -> masked.Masking:
    rules_ = {p: {c: MaskRule.model_validate(r) for c, r in cols.items()} for p, cols in MASKING.items()}
    return masked.Masking(rules_, SCHEMA, "app_orders", redact, (("app_orders", groups()),))


# ---------------------------------------------------------------- pure


@pytest.mark.parametrize(
    ("text", "secrets", "want"),
    [
        ("id=abc x", {"abc": "XYZ"}, "id=XYZ x"),
        ('{"m":"a\\"b"}', {'a"b': "H"}, '{"m":"H"}'),  # written inside a JSON string
        ("one two", {"one two": "A", "one": "B"}, "A"),  # the longest first
        ("id=abc", {"nowhere": "X"}, None),  # a value not written as the rules give it: withheld
    ],
)
def test_a_text_is_redacted_or_refused(text: str, secrets: dict[str, str], want: str | None) -> None:
    assert masked.redact_text(text, secrets) == want


def test_the_secrets_of_a_line_are_the_masked_columns_clear_values() -> None:
    m = masking()
    got = masked.line_secrets(m, m.plan(), record(ORDER))
    assert isinstance(got, dict) and set(got) == {SECRET_REQ, SECRET_ORDER}
    assert got[SECRET_ORDER] == SECRET_ORDER[:2] and len(got[SECRET_REQ]) == 32
    assert masked.line_secrets(m, m.plan(), record(PAYMENT)) == {}  # not the table's: nothing masked


def test_a_viewers_sample_is_redacted_and_a_record_the_rules_cannot_place_is_withheld() -> None:
    broken = ORDER.replace("amount=45.50", "amount=x")  # regexExtract finds no amount: rows, not masked cells
    transformed = (
        f"2026-11-24 10:15:30.100 | [WARN] | OrderService order=1 amount=2.5 req=\\u00e9{SECRET_REQ}"
    )
    got = masked.viewer_sample(
        [record(ORDER), record(PAYMENT), record(broken), "not json", json.dumps({"message": transformed})],
        RSYSLOG,
        masking(),
    )
    text = json.dumps(got)
    assert SECRET_REQ not in text and SECRET_ORDER not in text
    assert record(PAYMENT) in got["records"]
    assert got["withheld"] == 3 and len(got["reasons"]) == 3
    # a value one record gives a masked column is redacted in the other records too (a payment line that
    # no masked table accepts, with the same request id)
    paid = record(PAYMENT.replace("r-3", SECRET_REQ))
    got = masked.viewer_sample([paid, record(ORDER)], RSYSLOG, masking())
    assert (
        got["withheld"] == 0 and SECRET_REQ not in json.dumps(got) and "PaymentService" in got["records"][0]
    )


# ---------------------------------------------------------------- the endpoints


@pytest.fixture
def app(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Flask:
    base = with_users(load_config(CONF))
    meta = base.endpoints.meta_store.model_copy(
        update={"url": SecretStr(f"sqlite:///{tmp_path / 'meta.db'}")}
    )
    rules_ = {p: {c: MaskRule.model_validate(r) for c, r in cols.items()} for p, cols in MASKING.items()}
    src = base.log_sources["applog"].model_copy(update={"masking": rules_})
    cfg: DbusConfig = base.model_copy(
        update={
            "endpoints": base.endpoints.model_copy(update={"meta_store": meta}),
            "log_sources": {**base.log_sources, "applog": src},
        }
    )
    from dbuslib.logstore import LogStore
    from logprocessor import rules as lr

    store = LogStore(meta.url.get_secret_value())
    store.create_schema()
    t, _ = store.add_table("applog", cfg.log_source("applog").schema_name("applog"), "app_orders")
    lr.import_groups(store, t, APP_ORDERS.read_text(), "app_orders.json", replace=True, active=True)
    lr.publish(store, t, accepts_all)
    store.dispose()
    monkeypatch.setattr(rules, "newest_records", lambda cfg, topic, n: [record(ORDER), record(PAYMENT)])
    return console_app(cfg, tmp_path)


def logged_in(app: Flask, name: str) -> tuple[Any, dict[str, str]]:
    client = app.test_client()
    log_in(client, name)
    return client, {"X-CSRFToken": csrf_token(client, "/rules/"), "Accept": "application/json"}


def test_a_viewers_sample_and_preview_hold_no_clear_value_of_a_masked_column(app: Flask) -> None:
    client, headers = logged_in(app, "vi")
    sample = client.get(f"{API}/sample")
    assert sample.status_code == 200
    body = sample.get_data(as_text=True)
    assert SECRET_REQ not in body and SECRET_ORDER not in body
    assert "masks columns" in sample.get_json()["masked"] and len(sample.get_json()["records"]) == 2

    # the preview of the sample as the viewer has it, and of pasted lines that hold the values in clear
    for records in (sample.get_json()["records"], [record(ORDER), record(PAYMENT)]):
        got = client.post(
            f"{API}/preview", json={"groups": demo_groups(), "records": records}, headers=headers
        )
        assert got.status_code == 200, got.get_json()
        text = got.get_data(as_text=True)
        assert SECRET_REQ not in text and SECRET_ORDER not in text
        assert got.get_json()["summary"]["accepted"] == 1

    # a viewer's own group that saves a masked value under a column no rule masks: still redacted
    doc = demo_groups()
    doc[0]["rules"][6]["ruleGrammar"][4]["name"] = "not_masked"
    got = client.post(f"{API}/preview", json={"groups": doc, "records": [record(ORDER)]}, headers=headers)
    assert SECRET_REQ not in got.get_data(as_text=True)


def test_an_operator_sees_the_lines_and_the_saved_row_as_the_processor_publishes_it(app: Flask) -> None:
    client, headers = logged_in(app, "op")
    assert SECRET_REQ in client.get(f"{API}/sample").get_data(as_text=True)  # rules are written from lines
    got = client.post(
        f"{API}/preview", json={"groups": demo_groups(), "records": [record(ORDER)]}, headers=headers
    ).get_json()
    save = next(s for s in got["records"][0]["lines"][0]["groups"][0]["steps"] if s["op"] == "saveAs")
    assert save["masked"] == ["order_id", "req_id"]
    row = dict(zip(save["columns"], save["rows"][0], strict=True))
    assert row["order_id"] == SECRET_ORDER[:2] and row["req_id"] != SECRET_REQ and len(row["req_id"]) == 32
