"""Ending a log table's old version: a ``data_increment_termination`` under every namespace it wrote.

A log table's namespace holds its version and the host (``logums.log_namespace``), so publishing a new
version (``dbus logrules publish``) starts new namespaces. Consumers of the old ones are told to stop using
them, as consumers of a database table are at a schema change (``ums.build.build_termination_message``,
spec 1.13 D; docs/logs.md, Table versions): one termination per (table, old version, host) the processor
wrote rows or heartbeats of, to the table's result topic, after the old version's last message.

How the processor knows the hosts: ``HostNotes`` takes each batch progress's counts (``logprocessor.metrics``:
the hosts of the ``rows`` and ``heartbeat`` metrics of each table) and notes new (table, version, host) in
the meta store (``dbus_log_table_host``, dbuslib/logstore.py). Before a query starts (the processor's start,
and after each reload, the old query stopped), ``end_old_versions`` writes the terminations of every noted
namespace older than its table's current version and not ended yet, then marks them ended; so a version
published while the processor was down is ended at its next start. At least once: a processor killed
between the write and the mark writes the termination again, with the same namespace.

    >>> key, value = termination("log_rsyslog", "applog", "applog_schema", "orders", 1, "app-01", 0, "UTC")
    >>> key
    'data_increment_termination.log_rsyslog.applog.applog_schema.orders.1.app-01.0.0.wh_placeholder'
    >>> value[:80]
    '{"protocol":{"type":"data_increment_termination","version":"1.3"},"schema":{"nam'
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from typing import Any

from logprocessor.grammar import TableRules
from logprocessor.logums import log_namespace, ums_ts
from logprocessor.metrics import HEARTBEAT, ROWS, observed_counts
from ums.build import build_termination_message
from ums.encoding import to_json
from ums.keys import data_key
from ums.message import ProtocolType

log = logging.getLogger("logprocessor")

Note = tuple[str, int, str]  # (table, version, host)


def termination(
    log_type: str, ds: str, schema: str, table: str, version: int, host: str, now_ms: int, timezone: str
) -> tuple[str, str]:
    """The Kafka key and value of the termination of ``table`` version ``version`` from ``host``: the
    key ``data_increment_termination.<namespace>.<now ms>.wh_placeholder``, the value its UMS (one tuple, the
    ``ums_ts_`` of now in the source's ``ums.timezone``)."""
    ns = log_namespace(log_type, ds, schema, table, version, host)
    key = data_key(ProtocolType.DATA_INCREMENT_TERMINATION, ns, now_ms, None)
    return key, to_json(build_termination_message(ns, ums_ts(now_ms, timezone)))


def versions_of(tables: Sequence[TableRules]) -> dict[str, int]:
    """Each table's version in force (the version the running query writes)."""
    return {t.table: t.version for t in tables}


class HostNotes:
    """The driver's notes of (table, version, host) a query wrote, from its batch progresses; ``flush``
    writes the new ones to the meta store (a failure is logged and tried again at the next flush)."""

    def __init__(self, versions: Mapping[str, int]) -> None:
        self.versions = dict(versions)
        self.pending: set[Note] = set()
        self.noted: set[Note] = set()

    def take(self, progress: Mapping[str, Any]) -> None:
        """The hosts of one batch progress's ``rows`` and ``heartbeat`` counts (nothing when it has none)."""
        for kind, host, table in observed_counts(progress) or {}:
            if kind in (ROWS, HEARTBEAT) and host and table in self.versions:
                note = (table, self.versions[table], host)
                if note not in self.noted:
                    self.pending.add(note)

    def flush(self, store: Any, ds: str, schema: str) -> None:
        if not self.pending:
            return
        new = sorted(self.pending)
        try:
            store.note_hosts(ds, schema, new)
        except Exception as e:  # the meta store away: the notes wait for the next batch
            log.warning("%s: could not note the hosts of %d table version(s): %s", ds, len(new), e)
            return
        self.noted.update(new)
        self.pending.clear()

    def switch(self, versions: Mapping[str, int]) -> None:
        """The versions of the next query (after a reload)."""
        self.versions = dict(versions)


def end_old_versions(cfg: Any, ds: str, store: Any, producer: Any = None) -> list[Note]:
    """Writes the terminations of the source's noted namespaces older than their table's version (to each
    table's result topic, acknowledged by Kafka), then marks them ended; returns what it ended."""
    from dbuslib import kafka

    src = cfg.log_source(ds)
    schema = src.schema_name(ds)
    ending = store.unended_hosts(ds, schema)
    if not ending:
        return []
    own = producer is None
    producer = producer or kafka.producer(cfg.endpoints.kafka)
    try:
        now = int(time.time() * 1000)
        futures = []
        for table, version, host in ending:
            key, value = termination(src.type, ds, schema, table, version, host, now, src.ums.timezone)
            topic = src.topics.name("result", ds, schema, table)
            futures.append(producer.send(topic, key=key.encode(), value=value.encode()))
        producer.flush()
        for f in futures:
            f.get(timeout=30)
    finally:
        if own:
            producer.close()
    store.end_hosts(ds, schema, ending)
    for table, version, host in ending:
        log.info("%s: %s version %d from %s ended (data_increment_termination)", ds, table, version, host)
    return ending
