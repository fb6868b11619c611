"""Every console endpoint answers malformed input with 400/413, never 500 (issue 29, acceptance 3): a
hypothesis fuzz of every route and method of the app, taken from ``app.url_map`` (an endpoint added later is
fuzzed too), as a viewer and as an operator (with and without the CSRF token), with path values and query
strings of any text, and bodies of any JSON shape, nesting, size and encoding (invalid UTF-8, a wrong
content type, 3 MB). The body reader's pure part (console/body.py) is table-driven.

Flask's test client, no stack: the pages' data sources (ZooKeeper, Kafka, InfluxDB) are faked at their
edges as the pages' own unit tests fake them, the meta store is SQLite."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest
from console_fakes import CONF, console_app, csrf_token, log_in, with_users
from flask import Flask
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from pydantic import SecretStr
from rule_engines import accepts_all

from console import body as console_body
from console import deadletters, pulls, rules, tables
from console.overview import Collector
from dbuslib.config import load_config
from dbuslib.errors import EndpointError
from logprocessor.grammar import OPERATORS

APP_ORDERS = Path(__file__).resolve().parents[2] / "conf" / "demo" / "logrules" / "app_orders.json"
IGNORED_METHODS = {"HEAD", "OPTIONS"}


# ---------------------------------------------------------------- the reader, pure


@pytest.mark.parametrize(
    ("data", "fields", "problem"),
    [
        (b'{"a": 1}', {}, None),
        (b"[1]", {}, "the body must be a JSON object, not a list"),
        (b"\xff\xfe", {}, "the body is not UTF-8 text (byte 0)"),
        (b"[" * 65 + b"]" * 65, {}, "the body nests 65 levels deep (at most 64)"),
        (b'{"a": "' + b"[" * 500 + b'"}', {}, None),  # brackets in a string do not nest
        (b'{"groups": 5}', {"groups": "list"}, "groups: must be a list, not a number"),
        (b'{"raw": "yes"}', {"raw": "boolean"}, "raw: must be a boolean, not text"),
        (b'{"n": true}', {"n": "whole number"}, "n: must be a whole number, not a boolean"),
        (b'{"groups": null}', {"groups": "list"}, None),  # absent or null: the endpoint's default
        (b"{", {}, "the body is not JSON: Expecting property name enclosed in double quotes"),
        (b'{"a": ' + b"9" * 5000 + b"}", {}, "the body is not JSON: Exceeds the limit"),
    ],
)
def test_a_body_is_an_object_of_the_named_kinds_or_refused_naming_why(
    data: bytes, fields: dict[str, str], problem: str | None
) -> None:
    if problem is None:
        assert isinstance(console_body.parse(data, fields), dict)
        return
    with pytest.raises(console_body.BodyError) as e:
        console_body.parse(data, fields)
    assert str(e.value).startswith(problem)


@given(st.integers(0, 3000))
def test_the_depth_is_counted_as_json_nests(n: int) -> None:
    assert console_body.depth("[" * n + "]" * n) == n
    assert console_body.depth('{"k": ' * n + "1" + "}" * n) == n


# ---------------------------------------------------------------- the app, its data sources faked


class NoZk:
    """A ZooKeeper client whose server holds nothing."""

    def get(self, path: str) -> Any:
        from kazoo.exceptions import NoNodeError

        raise NoNodeError(path)

    def get_children(self, path: str) -> Any:
        from kazoo.exceptions import NoNodeError

        raise NoNodeError(path)

    def exists(self, path: str) -> None:
        return None

    def stop(self) -> None:
        pass

    def close(self) -> None:
        pass


def _refused(*args: Any, **kwargs: Any) -> Any:
    raise EndpointError("kafka: the fuzz has no Kafka")


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Flask]:
    tmp = tmp_path_factory.mktemp("console_fuzz")
    base = with_users(load_config(CONF))
    meta = base.endpoints.meta_store.model_copy(update={"url": SecretStr(f"sqlite:///{tmp / 'meta.db'}")})
    cfg = base.model_copy(update={"endpoints": base.endpoints.model_copy(update={"meta_store": meta})})
    from dbuslib.logstore import LogStore
    from logprocessor import rules as lr

    store = LogStore(meta.url.get_secret_value())
    store.create_schema()
    t, _ = store.add_table("applog", cfg.log_source("applog").schema_name("applog"), "app_orders")
    lr.import_groups(store, t, APP_ORDERS.read_text(), "app_orders.json", replace=True, active=True)
    lr.publish(store, t, accepts_all)
    store.dispose()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(rules, "newest_records", lambda cfg, topic, n: [])
        mp.setattr("logprocessor.reload.send", lambda cfg, ds, **kw: 41)
        mp.setattr("dbuslib.zk.client", lambda *a, **k: NoZk())
        mp.setattr(deadletters, "letters", lambda cfg, ds, scan: ([], {}))
        mp.setattr(deadletters, "counts", lambda cfg, ds, now=None: {"source": ds})
        mp.setattr(pulls, "pulls", lambda cfg, ds, requests: {"source": ds})
        mp.setattr("fullpuller.commands.send_request", _refused)
        mp.setattr(tables, "newest_beats", lambda cfg, ds, now: {})
        mp.setattr(tables, "monitored", lambda cfg, ds, now: [])
        mp.setattr(tables, "chart", lambda cfg, ds, schema, table: tables.chart_series([]))
        made = console_app(cfg, tmp)
        c = Collector(cfg, snapshot_fn=lambda *a: None, zk_fn=NoZk, host="fuzz")
        c.ready.set()
        made.extensions["dbus_collector"] = c  # not started: no thread, no stack
        yield made


@pytest.fixture(scope="module")
def clients(app: Flask) -> dict[str, Any]:
    out: dict[str, Any] = {"anonymous": app.test_client()}
    for name in ("vi", "op"):
        out[name] = _logged_in(app, name)
    return out


def _logged_in(app: Flask, name: str) -> Any:
    client = app.test_client()
    assert log_in(client, name).status_code == 302
    client.token = csrf_token(client, "/rules/")  # type: ignore[attr-defined]
    return client


# ---------------------------------------------------------------- what a request may carry

NAMES = ["applog", "demo", "app_orders", "shop.orders", "nope", "applog_schema.app_orders", "..", "%"]
FIELDS = ["groups", "records", "raw", "group", "source", "key", "table", "split_col", "shard_size", "where"]
# a path's values that name what the app has, drawn as often as any other (the deeper checks need them)
KNOWN: dict[str, Any] = {
    "ds": "applog",
    "table": "app_orders",
    "name": "applog_schema.app_orders",
    "version": 1,
    "request_id": 41,
    "filename": "console.js",
}
QUERY = ["n", "a", "b", "source", "scan", "page", "size", "stage", "code", "table", "next"]

scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True), st.text(max_size=40))
json_values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=5), st.dictionaries(st.text(max_size=12), inner, max_size=5)
    ),
    max_leaves=30,
)
grammar_entries = st.dictionaries(
    st.sampled_from(
        [
            "ruleScope",
            "ruleParamter",
            "ruleOperate",
            "ruleType",
            "subStart",
            "subStartType",
            "subEnd",
            "subEndType",
            "filterKey",
            "name",
            "type",
            "extra",
        ]
    ),
    st.one_of(
        scalars, st.sampled_from(["0", "1", "*", "1:3", "-1", "string", "regex", "==", "both", "STRING"])
    ),
    max_size=6,
)
rule_docs = st.fixed_dictionaries(
    {"ruleTypeName": st.one_of(st.sampled_from(sorted(OPERATORS)), scalars)},
    optional={
        "ruleGrammar": st.one_of(
            st.lists(st.one_of(grammar_entries, json_values), max_size=3),
            st.lists(grammar_entries, max_size=3).map(json.dumps),
            json_values,
        )
    },
)
group_docs = st.one_of(
    st.fixed_dictionaries(
        {"groupName": st.sampled_from(["app_orders", "g1"])},  # a name that checks: the rules are read
        optional={
            "active": st.one_of(st.booleans(), scalars, json_values),
            "rules": st.one_of(st.lists(rule_docs, max_size=4), scalars, json_values),
        },
    ),
    json_values,
)
optional_fields = {
    **{f: json_values for f in FIELDS},
    "records": st.one_of(st.lists(st.one_of(st.text(max_size=200), json_values), max_size=4), json_values),
    "source": st.one_of(st.sampled_from(NAMES), json_values),
}
groups = st.one_of(st.lists(group_docs, min_size=1, max_size=3), json_values)
objects = st.one_of(
    st.fixed_dictionaries(
        {"groups": groups}, optional={k: v for k, v in optional_fields.items() if k != "groups"}
    ),
    st.fixed_dictionaries({}, optional=optional_fields),
)


def _deep(n: int, opener: str) -> bytes:
    if opener == "[":
        return ("[" * n + "]" * n).encode()
    return ('{"groups": ' * n + "1" + "}" * n).encode()


bodies = st.one_of(
    objects.map(lambda d: (json.dumps(d).encode(), "application/json")),
    json_values.map(lambda d: (json.dumps(d).encode(), "application/json")),
    st.tuples(st.integers(1, 200_000), st.sampled_from("[{")).map(lambda t: (_deep(*t), "application/json")),
    st.binary(max_size=200).map(lambda b: (b, "application/json")),
    st.tuples(
        st.binary(max_size=200),
        st.sampled_from(
            [
                "text/plain",
                "application/x-www-form-urlencoded",
                "multipart/form-data; boundary=x",
                "",
                "application/json; charset=latin-1",
                "application/octet-stream",
            ]
        ),
    ),
    st.just((b'{"records": ["' + b"x" * (3 * 1024 * 1024) + b'"]}', "application/json")),  # over 2 MB
    st.just((b"", "application/json")),
)


@st.composite
def requests(draw: Any, app: Flask) -> dict[str, Any]:
    routes = sorted(
        (r.rule, r.endpoint, m, r)
        for r in app.url_map.iter_rules()
        for m in (r.methods or set()) - IGNORED_METHODS
    )
    rule_text, endpoint, method, rule = draw(st.sampled_from(routes))
    values = {}
    for arg in rule.arguments:
        known = st.just(KNOWN[arg]) if arg in KNOWN else st.nothing()
        if type(rule._converters[arg]).__name__ == "IntegerConverter":
            values[arg] = draw(st.one_of(known, known, st.integers(0, 10**20)))
        else:
            values[arg] = draw(
                st.one_of(known, known, st.sampled_from(NAMES), st.text(min_size=1, max_size=30))
            )
    adapter = app.url_map.bind("localhost")
    path = adapter.build(endpoint, values, force_external=False)
    query = draw(st.dictionaries(st.sampled_from(QUERY), st.text(max_size=30), max_size=3))
    if query:
        path += ("&" if "?" in path else "?") + urlencode(query)
    data, content_type = draw(bodies) if method in ("POST", "PUT", "PATCH", "DELETE") else (None, None)
    return {
        "rule": rule_text,
        "method": method,
        "path": path,
        "data": data,
        "content_type": content_type,
        "who": draw(st.sampled_from(["vi", "op", "anonymous"])),
        "csrf": draw(st.sampled_from([True, True, True, False])),
        "accept": draw(st.sampled_from(["application/json", "text/html", "*/*"])),
        "address": draw(st.ip_addresses(v=4).map(str)),
    }


@settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example],
)
@given(data=st.data())
def test_no_request_to_any_route_gets_a_500(app: Flask, clients: dict[str, Any], data: Any) -> None:
    req = data.draw(requests(app))
    client = clients[req["who"]]
    headers = {"Accept": req["accept"]}
    if req["csrf"] and req["who"] != "anonymous":
        headers["X-CSRFToken"] = client.token
    if req["content_type"] is not None:
        headers["Content-Type"] = req["content_type"]
    got = client.open(
        req["path"],
        method=req["method"],
        data=req["data"],
        headers=headers,
        environ_base={"REMOTE_ADDR": req["address"]},  # the login throttle counts per address
    )
    shown = {k: (v[:200] if isinstance(v, bytes) else v) for k, v in req.items()}
    text = got.get_data(as_text=True)
    event(f"{req['who']} {req['method']} {req['rule']}: {got.status_code}")
    assert got.status_code != 500, f"{shown}: {text[:500]}"
    assert "Traceback" not in text, shown
    if got.status_code == 413:
        assert len(req["data"] or b"") > app.config["MAX_CONTENT_LENGTH"]
    if req["rule"] == "/logout" and req["who"] != "anonymous" and got.status_code < 400:
        clients[req["who"]] = _logged_in(app, req["who"])  # the next examples need the login back


@st.composite
def object_posts(draw: Any, app: Flask) -> dict[str, Any]:
    routes = sorted(
        (r.rule, r.endpoint, r)
        for r in app.url_map.iter_rules()
        if "POST" in (r.methods or ()) and r.rule not in ("/login", "/logout")  # the fuzz above has those
    )
    rule_text, endpoint, rule = draw(st.sampled_from(routes))
    path = app.url_map.bind("localhost").build(endpoint, {a: KNOWN[a] for a in rule.arguments})
    return {
        "rule": rule_text,
        "path": path,
        "body": draw(objects),
        "who": draw(st.sampled_from(["vi", "op"])),
    }


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_no_json_object_of_any_shape_gets_a_500(app: Flask, clients: dict[str, Any], data: Any) -> None:
    """The same, deeper: every POST route of the app with the path of what the app has, as a logged-in
    user with the CSRF token, bodies that are JSON objects of the fields the endpoints read, any shape."""
    req = data.draw(object_posts(app))
    client = clients[req["who"]]
    headers = {"Accept": "application/json", "X-CSRFToken": client.token}
    got = client.post(req["path"], json=req["body"], headers=headers)
    event(f"{req['who']} POST {req['rule']}: {got.status_code}")
    assert got.status_code != 500, f"{req}: {got.get_data(as_text=True)[:500]}"
