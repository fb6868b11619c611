"""The heartbeat monitor of one source: alerts from the time-series data the appender writes.

Every ``heartbeat.check_interval_s`` it reads, per monitored table, the last ``dbus_heartbeat`` point
(measurement written by the appender: tags ``ds``, ``schema``, ``table``; fields ``latency_ms``, ``rows``,
``packet_ms``, ``tx_ms``), decides with heartbeat.incidents which alerts open or clear, and notifies the
channels (heartbeat.channels). Open alerts live in ZooKeeper, one node each::

    <root>/HeartBeat/<ds>/alerts/<schema>.<table>.<kind>    the alert's JSON (heartbeat.incidents)

    <root>/HeartBeat/<ds>/history                          the last HISTORY_MAX closed incidents (JSON list)

created when an incident opens and deleted when it clears (then appended to the history with its
``closed_ms`` and the recovery's message, ``AlertStore.history``), so a restarted monitor neither repeats nor
forgets one; only the process that creates (or deletes) a node notifies, so two monitors of one source do
not double the notices. A notice a channel failed to take is tried again at the next check (a recovery
only while this process runs). Each opening and recovery is also written as a ``dbus_alert`` point: tags
``ds``, ``schema``, ``table``, ``kind``; fields ``state`` ("open" | "recovered"), ``age_s``, ``latency_s``.

Each check first counts the dead letters written since the last one (heartbeat.deadletters: the source's
``<ds>.dlq`` read with the monitor's own consumer group, ``dbus_dead_letter`` points, one incident per
(stage, code) in the same nodes with kind ``dead_letter``, schema = stage and table = code). Offsets are
committed once the points are stored (a failed write reads the letters again); a broker or server that
cannot be reached skips the dead letters of that check, never the heartbeat verdicts.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from influxdb_client import Point
from kafka.errors import KafkaError
from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, KazooException, NodeExistsError, NoNodeError
from sqlalchemy.exc import SQLAlchemyError

from binlog.heartbeat import LOOKBACK_S, MEASUREMENT
from dbuslib import influx, mysql, seriesread, zk, zkpaths
from dbuslib.config import DbusConfig
from dbuslib.errors import DbusError, EndpointError
from dbuslib.retry import RetryPolicy
from dbuslib.zk import UNREACHABLE, unescape
from heartbeat import deadletters
from heartbeat.channels import Channel, ChannelError, channels
from heartbeat.incidents import Alert, Notification, Observation, Thresholds, evaluate
from heartbeat.writer import MYSQL_ERRORS, REFRESH_EVERY, monitored_tables

log = logging.getLogger(__name__)
ALERT_MEASUREMENT = "dbus_alert"
HISTORY_MAX = 200  # closed incidents kept in the history node (about 100 KB at most)
_WRITE_TRIES = 20  # a versioned rewrite that keeps losing to another writer gives up after these
ZK_ERRORS = (*UNREACHABLE, KazooException)
LIST_ERRORS = (DbusError, SQLAlchemyError)  # a log source's tables not read from the meta store


def alerts_path(root: str, ds: str) -> str:
    return zkpaths.heartbeat_alerts(root, ds)


def last_heartbeats(
    cfg: DbusConfig, ds: str, lookback_s: float, group_by: tuple[str, ...] = ("schema", "table")
) -> list[dict[str, Any]]:
    """The newest heartbeat latency of every table of ``ds`` within ``lookback_s`` as ``records_of``'s
    records, from InfluxDB or Prometheus (dbuslib/seriesread.py); EndpointError when neither can be read."""
    return records_of(
        seriesread.last(cfg, ds, lookback_s, seriesread.Newest(MEASUREMENT, "latency_ms", group_by))
    )


def records_of(series: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """InfluxQL series -> ``{"schema", "table", "_time" (ms), "_value"}`` records for ``observations`` (and
    ``"host"`` for a series tagged with one: a log table's, heartbeat.logmonitor)."""
    out = []
    for s in series:
        tags = s.get("tags") or {}
        for t, value, *_ in s.get("values") or []:
            record = {"schema": tags.get("schema"), "table": tags.get("table"), "_time": t, "_value": value}
            if tags.get("host"):
                record["host"] = tags["host"]
            out.append(record)
    return out


def _ms(t: Any) -> int:
    return int(t.timestamp() * 1000) if isinstance(t, datetime) else int(t)


def observations(
    records: Iterable[Mapping[str, Any]], tables: Iterable[tuple[str, str]]
) -> list[Observation]:
    """One Observation per monitored table from the query's records (a table may have several series:
    the newest point wins; tables with no point get an empty Observation)."""
    # None in a key: a point without the schema or table tag
    last: dict[tuple[str | None, str | None], tuple[int, float | None]] = {}
    for r in records:
        key = (r.get("schema"), r.get("table"))
        t = _ms(r["_time"])
        value = r.get("_value")
        if key not in last or t > last[key][0]:
            last[key] = (t, None if value is None else float(value) / 1000)
    out = []
    for schema, table in tables:
        last_ms, latency = last.get((schema, table), (None, None))
        out.append(Observation(schema, table, last_ms, latency))
    return out


def alert_point(note: Notification) -> Point:
    a = note.alert
    p = (
        Point(ALERT_MEASUREMENT)
        .tag("ds", a.ds)
        .tag("schema", a.schema)
        .tag("table", a.table)
        .tag("kind", a.kind)
        .field("state", "open" if note.event == "alert" else "recovered")
        .time(note.at_ms * 1_000_000)
    )
    if a.age_s is not None:
        p = p.field("age_s", float(a.age_s))
    if a.latency_s is not None:
        p = p.field("latency_s", float(a.latency_s))
    if a.host:
        p = p.tag("host", a.host)
    return p


def unreadable_alert(key: str) -> Alert:
    """What ``AlertStore.read`` shows for a node ``<schema>.<table>.<kind>`` that holds no alert."""
    schema, _, rest = key.partition(".")
    table, _, kind = rest.rpartition(".")
    return Alert("", schema, table, kind, 0, None, None, None, f"unreadable alert node {key!r}")


@dataclass(frozen=True)
class ClosedAlert:
    """An incident that cleared: the alert as it was stored (its acknowledgement too), when it closed
    (epoch ms) and the recovery's message."""

    alert: Alert
    closed_ms: int
    closed_message: str

    def to_dict(self) -> dict[str, Any]:
        return {**self.alert.to_dict(), "closed_ms": self.closed_ms, "closed_message": self.closed_message}

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any]) -> ClosedAlert:
        """KeyError/TypeError/ValueError when it is not one."""
        return cls(Alert.from_dict(doc), int(doc["closed_ms"]), str(doc.get("closed_message", "")))


class AlertStore:
    """Open alerts in ZooKeeper (see the module docstring): ``load`` for the monitor, ``read`` for
    ``dbus status``. A node is ``zkpaths.alert`` of the alert's key (escaped; an ordinary key as it is).
    Closed incidents go to the history node beside (``zkpaths.history_beside``), the newest
    ``history_max``; ``ack`` records an operator's acknowledgement on an open alert."""

    def __init__(self, client: KazooClient, path: str, history_max: int = HISTORY_MAX) -> None:
        self.zk, self.path = client, path
        self.history_path = zkpaths.history_beside(path)
        self.history_max = history_max

    def load(self) -> dict[str, Alert]:
        """The open alerts by key, for the monitor: creates the path when missing; a node that is not an
        alert is logged and skipped."""
        self.zk.ensure_path(self.path)
        out = {}
        for key, data in self._nodes():
            try:
                out[key] = Alert.from_dict(json.loads(data))
            except (ValueError, KeyError, TypeError) as e:
                log.error("%s: not an alert (%s); ignored", zkpaths.alert(self.path, key), e)
        return out

    def read(self) -> list[Alert]:
        """The open alerts sorted by key, read-only (``dbus status`` never writes): no path, no alerts. A
        node that is not an alert is shown, not skipped: an Alert named after the node (``schema.table.kind``)
        whose message says ``unreadable alert node '<key>'`` (``since_ms`` 0, no figures)."""
        if not self.zk.exists(self.path):
            return []
        out = []
        for key, data in sorted(self._nodes()):
            try:
                out.append(Alert.from_dict(json.loads(data)))
            except (ValueError, KeyError, TypeError):
                out.append(unreadable_alert(key))
        return out

    def _nodes(self) -> list[tuple[str, bytes]]:
        """(key, data) of each alert node; a node deleted while listing (a recovery) is left out."""
        try:
            names = self.zk.get_children(self.path)
        except NoNodeError:
            return []
        out = []
        for name in names:
            key = unescape(name)
            try:
                data, _ = self.zk.get(zkpaths.alert(self.path, key))
            except NoNodeError:
                continue
            out.append((key, data))
        return out

    def open(self, alert: Alert) -> bool:
        """Create the alert's node; False when another monitor already did."""
        try:
            self.zk.create(
                zkpaths.alert(self.path, alert.key), json.dumps(alert.to_dict()).encode(), makepath=True
            )
            return True
        except NodeExistsError:
            return False

    def close(self, key: str, recovered: Alert | None = None, at_ms: int | None = None) -> bool:
        """Delete the alert's node; False when it is already gone. The alert as stored (with its
        acknowledgement) goes to the history, closed at ``at_ms`` (now when None) with ``recovered``'s
        message; a history that cannot be written is logged, the close still counts."""
        path = zkpaths.alert(self.path, key)
        try:
            data, _ = self.zk.get(path)
            self.zk.delete(path)
        except NoNodeError:
            return False
        try:
            stored = Alert.from_dict(json.loads(data))
        except (ValueError, KeyError, TypeError):
            stored = recovered or unreadable_alert(key)
        closed_ms = int(time.time() * 1000) if at_ms is None else at_ms
        entry = ClosedAlert(stored, closed_ms, recovered.message if recovered is not None else "closed")
        try:
            self._append_history(entry)
        except (*ZK_ERRORS, ValueError) as e:
            log.warning("%s: %s not added to the history (%r)", self.history_path, key, e)
        return True

    def update(self, alert: Alert) -> None:
        """Store an open alert's new figures (a dead-letter incident's count and newest coordinates); an
        acknowledgement stored meanwhile is kept."""
        self._rewrite(alert.key, lambda doc: {**alert.to_dict(), **_ack_of(doc)})

    def mark_notified(self, alert: Alert, at_ms: int) -> None:
        self._rewrite(alert.key, lambda doc: {**(doc or alert.to_dict()), "notified_ms": at_ms})

    def ack(self, key: str, by: str, at_ms: int) -> Alert | None:
        """Acknowledge the open alert ``key``: ``acked_by`` and ``acked_ms`` added to its node (a second
        acknowledgement keeps the first). The alert as stored now; None when no such alert is open."""
        doc = self._rewrite(
            key, lambda d: d if d is None or d.get("acked_by") else {**d, "acked_by": by, "acked_ms": at_ms}
        )
        if doc is None:
            return None
        try:
            return Alert.from_dict(doc)
        except (KeyError, TypeError, ValueError):
            return None

    def _rewrite(
        self, key: str, change: Callable[[dict[str, Any] | None], dict[str, Any] | None]
    ) -> dict[str, Any] | None:
        """Replace an alert node's JSON with ``change(stored)`` (``stored`` None when the node holds no
        JSON object), only if nobody wrote it meanwhile (tried again then). The written document, or
        None when the node is gone (cleared meanwhile) or ``change`` gave None."""
        path = zkpaths.alert(self.path, key)
        for _ in range(_WRITE_TRIES):
            try:
                data, stat = self.zk.get(path)
            except NoNodeError:
                return None
            try:
                doc = json.loads(data)
            except ValueError:
                doc = None
            new = change(doc if isinstance(doc, dict) else None)
            if new is None:
                return None
            try:
                self.zk.set(path, json.dumps(new).encode(), version=stat.version)
                return new
            except BadVersionError:
                continue
            except NoNodeError:
                return None
        msg = f"{path}: written by others {_WRITE_TRIES} times in a row; not changed"
        raise EndpointError(msg)

    def _append_history(self, entry: ClosedAlert) -> None:
        for _ in range(_WRITE_TRIES):
            try:
                data, stat = self.zk.get(self.history_path)
            except NoNodeError:
                try:
                    self.zk.create(self.history_path, json.dumps([entry.to_dict()]).encode(), makepath=True)
                    return
                except NodeExistsError:
                    continue
            items = _history_items(data)[-(self.history_max - 1) :] if self.history_max > 1 else []
            body = json.dumps([*items, entry.to_dict()]).encode()
            try:
                self.zk.set(self.history_path, body, version=stat.version)
                return
            except BadVersionError:
                continue
        msg = f"{self.history_path}: written by others {_WRITE_TRIES} times in a row"
        raise EndpointError(msg)

    def history(self) -> list[ClosedAlert]:
        """The closed incidents, newest first, read-only (none when there is no history node); an entry
        that is not one is skipped."""
        try:
            data, _ = self.zk.get(self.history_path)
        except NoNodeError:
            return []
        out = []
        for doc in reversed(_history_items(data)):
            try:
                out.append(ClosedAlert.from_dict(doc))
            except (KeyError, TypeError, ValueError):
                continue
        return out


def _ack_of(doc: Mapping[str, Any] | None) -> dict[str, Any]:
    """The acknowledgement fields of a stored alert document (none when it has none)."""
    return {k: doc[k] for k in ("acked_by", "acked_ms") if doc and doc.get(k) is not None}


def _history_items(data: bytes) -> list[dict[str, Any]]:
    try:
        items = json.loads(data)
    except ValueError:
        return []  # a history node that is not JSON starts over
    return [i for i in items if isinstance(i, dict)] if isinstance(items, list) else []


class Monitor:
    """``run()`` until ``stop()``; ``check()`` does one check and returns the notices it opened or cleared."""

    def __init__(
        self,
        cfg: DbusConfig,
        ds: str,
        *,
        client: KazooClient | None = None,
        chans: list[Channel] | None = None,
        clock: Callable[[], float] = time.time,
        list_tables: Callable[[], list[tuple[str, str]]] | None = None,
        dlq: deadletters.DlqReader | None = None,
    ) -> None:
        self.cfg, self.ds = cfg, ds
        self.is_log = ds in cfg.log_sources  # a log source: per host and table (heartbeat.logmonitor)
        self.hb = hb = deadletters.settings_of(cfg, ds)
        self.thresholds = Thresholds(hb.timeout_s, hb.latency_alert_s)
        self.dl_rules = deadletters.Rules(
            hb.dead_letter_threshold, hb.dead_letter_quiet_s, hb.check_interval_s
        )
        self.stop_event = threading.Event()
        self.dlq = dlq or deadletters.DlqReader(cfg, ds, stopping=self.stop_event.is_set)
        self.channels = chans if chans is not None else channels(hb)
        self._clock = clock
        self.started_ms = int(clock() * 1000)
        self._own_client = client is None
        self._zk = client or zk.client(cfg.endpoints.zookeeper, retry=RetryPolicy.of(cfg))
        self.store = AlertStore(self._zk, alerts_path(cfg.endpoints.zookeeper.root, ds))
        self._list_tables = list_tables or self._tables_from_source
        self._tables: list[tuple[str, str]] | None = None
        self._checks_since_listing = REFRESH_EVERY
        # notices some channel has not taken yet: (notification, names of the channels still to send to)
        self.outbox: list[tuple[Notification, set[str]]] = []
        self._resume_undelivered()

    def stop(self) -> None:
        self.stop_event.set()

    def close(self) -> None:
        try:
            self.dlq.close()
        except Exception as e:
            log.warning("%s: closing the dead-letter consumer: %r", self.ds, e)
        if self._own_client:
            self._zk.stop()
            self._zk.close()

    def run(self) -> None:
        """Check now, then every ``check_interval_s``; a failed check is logged and the next one tried,
        unless its error is not ``retriable`` (a refused identity): that one ends the run."""
        try:
            while not self.stop_event.is_set():
                try:
                    self.check()
                except DbusError as e:
                    if not e.retriable:
                        raise  # Kafka refused DBus's identity (KAFKA_AUTH_FAILED): the monitor stops
                    log.warning("%s: heartbeat check skipped: %s", self.ds, e)
                except ZK_ERRORS as e:
                    log.warning("%s: heartbeat check skipped: ZooKeeper: %r", self.ds, e)
                self.stop_event.wait(self.hb.check_interval_s)
        finally:
            self.close()

    # ---------------------------------------------------------------- one check

    def _tables_from_source(self) -> list[tuple[str, str]]:
        if self.is_log:
            from heartbeat.logmonitor import log_tables

            return log_tables(self.cfg, self.ds)
        db = mysql.connect(self.cfg.source(self.ds).mysql)
        try:
            return monitored_tables(self.cfg, self.ds, db)
        finally:
            db.close()

    def tables(self) -> list[tuple[str, str]] | None:
        """The monitored tables, listed again every ``REFRESH_EVERY`` checks; the last good list (or None)
        while the source cannot be reached."""
        if self._tables is None or self._checks_since_listing >= REFRESH_EVERY:
            try:
                self._tables = self._list_tables()
                self._checks_since_listing = 0
            except (*MYSQL_ERRORS, *LIST_ERRORS) as e:
                log.warning("%s: cannot list the monitored tables (%s)", self.ds, e)
        self._checks_since_listing += 1
        return self._tables

    def observe(self, tables: list[tuple[str, str]]) -> list[Observation]:
        """The newest heartbeat point of each table, from InfluxDB or Prometheus (dbuslib/seriesread.py);
        EndpointError: no data, no verdict."""
        lookback = max(LOOKBACK_S, 2 * self.thresholds.timeout_s)
        if self.is_log:
            from heartbeat.logmonitor import log_observations

            records = last_heartbeats(self.cfg, self.ds, lookback, group_by=("schema", "table", "host"))
            return log_observations(records, tables)
        return observations(last_heartbeats(self.cfg, self.ds, lookback), tables)

    def check(self) -> list[Notification]:
        """The tables' verdicts first (never delayed by Kafka), then the dead letters."""
        self._retry_outbox()
        mine: list[Notification] = []
        tables = self.tables()
        if tables is not None:
            obs = self.observe(tables)  # EndpointError: no data, no verdict
            now_ms = int(self._clock() * 1000)
            before = self.store.load()
            _, notes = evaluate(self.ds, before, obs, now_ms, self.started_ms, self.thresholds)
            mine = self._notify(notes)
        return mine + self.check_dead_letters()

    def _notify(self, notes: list[Notification]) -> list[Notification]:
        mine = [n for n in notes if self._record(n)]
        self._write_points(mine)
        for note in mine:
            self._deliver(note, {c.name for c in self.channels})
        return mine

    def check_dead_letters(self) -> list[Notification]:
        """Count the dead letters written since the last check, write their points, open or clear the
        dead-letter incidents; [] (logged) when Kafka, InfluxDB or ZooKeeper cannot be reached."""
        try:
            return self._count_dead_letters()
        except (DbusError, KafkaError, *ZK_ERRORS) as e:
            if isinstance(e, DbusError) and not e.retriable:
                raise  # Kafka refused DBus's identity (KAFKA_AUTH_FAILED): no later check can do better
            log.warning("%s: dead letters not counted this check: %r", self.ds, e)
        except Exception:
            log.exception("%s: dead letters not counted this check; the consumer starts over", self.ds)
            self.dlq.close()  # the next check reads on from the committed offsets
        return []

    def _count_dead_letters(self) -> list[Notification]:
        letters = self.dlq.read()
        if letters is None:
            return []  # not reading the topic yet: no count, no verdict
        tallies = deadletters.fold(letters)
        now_ms = int(self._clock() * 1000)
        if tallies:
            try:
                influx.write(self.cfg.endpoints.influxdb, deadletters.points(self.ds, tallies, now_ms))
            except Exception as e:
                self.dlq.rewind()  # counted at the next check instead
                msg = f"{len(tallies)} {deadletters.MEASUREMENT} point(s) not written: {e}"
                raise EndpointError(msg) from e
        self.dlq.commit()
        open_ = {k: a for k, a in self.store.load().items() if a.kind == deadletters.KIND}
        updated, notes = deadletters.evaluate(self.ds, open_, tallies, now_ms, self.dl_rules, self.dlq.topic)
        for alert in updated:
            self.store.update(alert)
        return self._notify(notes)

    def _record(self, note: Notification) -> bool:
        """Open or clear the alert in ZooKeeper; False when another monitor did it first."""
        if note.event == "alert":
            return self.store.open(note.alert)
        return self.store.close(note.alert.key, note.alert, note.at_ms)

    def _write_points(self, notes: list[Notification]) -> None:
        if not notes:
            return
        try:
            influx.write(self.cfg.endpoints.influxdb, [alert_point(n) for n in notes])
        except Exception as e:
            log.warning("%s: %d dbus_alert point(s) not written: %s", self.ds, len(notes), e)

    def _deliver(self, note: Notification, pending: set[str]) -> None:
        for channel in self.channels:
            if channel.name not in pending:
                continue
            try:
                channel.send(note)
                pending.discard(channel.name)
            except ChannelError as e:
                log.warning("%s; trying again at the next check", e)
            except Exception as e:
                log.exception("%s: channel %s failed on %s (%r)", self.ds, channel.name, note.alert.key, e)
        if pending:
            self.outbox.append((note, pending))
        elif note.event == "alert":
            self.store.mark_notified(note.alert, int(self._clock() * 1000))

    def _retry_outbox(self) -> None:
        waiting, self.outbox = self.outbox, []
        for note, pending in waiting:
            self._deliver(note, pending)

    def _resume_undelivered(self) -> None:
        """Alerts a previous monitor opened but could not deliver everywhere are sent again."""
        try:
            stored = self.store.load()
        except ZK_ERRORS as e:
            log.warning("%s: cannot read open alerts (%r)", self.ds, e)
            return
        for alert in stored.values():
            if alert.notified_ms is None:
                note = Notification("alert", alert, int(self._clock() * 1000))
                self.outbox.append((note, {c.name for c in self.channels}))
