"""Ending a log table's old version (logprocessor/termination.py): the hosts noted from batch progresses,
kept in the meta store (dbus_log_table_host, here on SQLite), and one ``data_increment_termination`` per
(table, old version, host), written once. The whole path (a publish mid-stream on the real stack) is
tests/integration/test_logprocessor_live.py::test_a_publish_mid_stream_switches_at_the_offset_it_answers."""

from __future__ import annotations

import json

from dbuslib.config import LogSource, load_config
from dbuslib.logstore import LogStore
from logprocessor.metrics import counts_json, fold, format_metric
from logprocessor.termination import HostNotes, end_old_versions, termination
from ums.namespace import Namespace

DS, SCHEMA = "applog", "applog_schema"


def progress(*metrics: str) -> dict:
    return {"observedMetrics": {"dbus_log_counts": {"counts": counts_json(fold(metrics))}}}


def _publish(store: LogStore, table: str, columns: str) -> None:
    t = store.need_table(DS, SCHEMA, table)
    store.publish(t, "[]", columns, True)


class Sent:
    """A producer that keeps what it is given (kafka-python's send/flush/future shape)."""

    def __init__(self) -> None:
        self.records: list[tuple[str, bytes, bytes]] = []

    def send(self, topic, key, value):
        self.records.append((topic, key, value))
        return self

    def get(self, timeout=None):
        return None

    def flush(self) -> None:
        pass


def test_the_termination_is_the_ums_of_the_old_namespace():
    key, value = termination("log_rsyslog", DS, SCHEMA, "orders", 3, "app-01_prod", 1795947330000, "UTC")
    m = json.loads(value)
    assert m["protocol"]["type"] == "data_increment_termination"
    assert Namespace.parse(m["schema"]["namespace"]).version == 3
    assert m["schema"]["namespace"] == f"log_rsyslog.{DS}.{SCHEMA}.orders.3.app-01_prod.0"
    assert [f["name"] for f in m["schema"]["fields"]] == ["ums_ts_"]
    assert m["payload"] == [{"tuple": ["2026-11-29 10:15:30.000"]}]
    assert key == f"data_increment_termination.{m['schema']['namespace']}.1795947330000.wh_placeholder"


def test_notes_take_the_hosts_of_rows_and_heartbeats_of_known_tables_only():
    notes = HostNotes({"orders": 1, "access": 2})
    notes.take(
        progress(
            format_metric("rows", "app-01_prod", "orders", 3),
            format_metric("heartbeat", "app-02_prod", "access", 12),
            format_metric("unknown", "app-03_prod", "", 1),
            format_metric("error", "app-04_prod", "LOG_LINE_RULE_ERROR", 1),
            format_metric("rows", "app-05_prod", "gone", 1),
            format_metric("rows", "", "orders", 1),
        )
    )
    notes.take({})  # a batch without the observation
    assert notes.pending == {("orders", 1, "app-01_prod"), ("access", 2, "app-02_prod")}


def test_a_store_that_fails_keeps_the_notes_for_the_next_flush():
    class Away:
        def note_hosts(self, *a):
            raise OSError("meta store away")

    notes = HostNotes({"orders": 1})
    notes.take(progress(format_metric("rows", "h1", "orders", 1)))
    notes.flush(Away(), DS, SCHEMA)
    assert notes.pending == {("orders", 1, "h1")}


def test_old_versions_are_ended_once_per_host_and_the_current_one_never(log_store):
    store = log_store
    cfg = load_config()
    cfg = cfg.model_copy(update={"log_sources": {**cfg.log_sources, DS: LogSource(schema=SCHEMA)}})
    store.add_table(DS, SCHEMA, "orders")
    _publish(store, "orders", '[{"name":"a","type":"string"}]')  # version 1
    notes = HostNotes({"orders": 1})
    for host in ("h1", "h2", "h1"):
        notes.take(progress(format_metric("rows", host, "orders", 1)))
        notes.flush(store, DS, SCHEMA)
    assert notes.noted == {("orders", 1, "h1"), ("orders", 1, "h2")} and not notes.pending
    sent = Sent()
    assert end_old_versions(cfg, DS, store, sent) == [], "version 1 is the table's current version"

    _publish(store, "orders", '[{"name":"a","type":"long"}]')  # version 2
    notes.switch({"orders": 2})
    notes.take(progress(format_metric("rows", "h1", "orders", 1)))
    notes.flush(store, DS, SCHEMA)
    ended = end_old_versions(cfg, DS, store, sent)
    assert ended == [("orders", 1, "h1"), ("orders", 1, "h2")]
    topic = cfg.log_source(DS).topics.name("result", DS, SCHEMA, "orders")
    spaces = [(t, json.loads(v)["schema"]["namespace"]) for t, _, v in sent.records]
    assert spaces == [(topic, f"log_rsyslog.{DS}.{SCHEMA}.orders.1.{h}.0") for h in ("h1", "h2")]
    assert end_old_versions(cfg, DS, store, sent) == [], "ended once"
    assert len(sent.records) == 2
    assert store.drop_source(DS) == 1 and store.unended_hosts(DS, SCHEMA) == []
