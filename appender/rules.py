"""The appender's reloadable rules: a snapshot in ZooKeeper that the driver publishes and the tasks read.

The driver (``appender/main.py``) publishes the configuration file's masking rules at start-up and again
on every ``APPENDER_RELOAD_CONFIG`` control message on ``<ds>_ctrl`` (``ReloadListener``). The snapshot is
one ZooKeeper node, ``<root>/Appender/<ds>/rules``, holding JSON::

    {"format": 1, "source": "demo", "generation": 3, "request_id": 1704164645123,
     "config": "/abs/conf/dbus.yaml", "loaded_at": "2024-01-02 03:04:05.123",
     "masking": {"shop.customers": {"phone": {"type": "default"}, ...}}}

``generation`` grows by one at every publication (compare-and-set on the node's version, so two drivers
never hand out the same number). A task calls ``current_plan(cfg, ds)`` when it builds its processor,
that is once per micro-batch and partition, so a reload applies from the next micro-batch on; a message
is never masked half with the old rules and half with the new. Without the node (no driver published
yet) the tasks use the rules of the configuration file.

Only the masking rules are reloaded: the appender has no other rules (row filters are the extractor's
``capture`` globs). Salts travel in the node as they are in the file: give ZooKeeper the protection the
configuration file has.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from pydantic import TypeAdapter, ValidationError

from dbuslib import control, zk, zkpaths
from dbuslib.config import DbusConfig, MaskRule, load_config
from dbuslib.errors import ConfigError, DbusError, EndpointError
from ums.control import ControlMessage, ControlType, peek
from ums.errors import BadControlError
from ums.masking import MaskError, MaskPlan, compile_rules

if TYPE_CHECKING:
    from kazoo.client import KazooClient

log = logging.getLogger("dbus.appender.rules")

FORMAT = 1
READ_TIMEOUT_S = 10.0
Masking = dict[str, dict[str, MaskRule]]
_MASKING = TypeAdapter(Masking)


class RulesError(DbusError):
    """A rules snapshot in ZooKeeper cannot be read (not JSON, unknown format, a bad rule)."""

    code = "APPENDER_BAD_RULES"


RELOAD_FAILED = "APPENDER_RELOAD_FAILED"  # a reload that failed for another reason than a bad file
RELOAD_KEY = b"APPENDER_RELOAD_CONFIG"


# ---------------------------------------------------------------- the snapshot (pure)


def node_path(cfg: DbusConfig, ds: str) -> str:
    """``<root>/Appender/<ds>/rules``: the rules the appender of ``ds`` applies now."""
    return zkpaths.appender_rules(cfg.endpoints.zookeeper.root, ds)


def reply_path(cfg: DbusConfig, ds: str) -> str:
    """``<root>/Appender/<ds>/reload``: the answer to the last reload request (applied or rejected)."""
    return zkpaths.appender_reload(cfg.endpoints.zookeeper.root, ds)


@dataclass(frozen=True)
class RulesSnapshot:
    """The rules of one source at one generation, as published in ZooKeeper."""

    source: str
    generation: int
    masking: Masking
    config: str = ""
    loaded_at: str = ""
    request_id: int | None = None  # the APPENDER_RELOAD_CONFIG that caused it; None at start-up

    def to_json(self) -> bytes:
        masking = {
            table: {col: _rule_dict(rule) for col, rule in cols.items()}
            for table, cols in self.masking.items()
        }
        obj = {
            "format": FORMAT,
            "source": self.source,
            "generation": self.generation,
            "request_id": self.request_id,
            "config": self.config,
            "loaded_at": self.loaded_at,
            "masking": masking,
        }
        return json.dumps(obj, sort_keys=True, separators=(",", ":")).encode("utf-8")

    @classmethod
    def from_json(cls, data: bytes | str, where: str = "rules") -> RulesSnapshot:
        """Parse and validate (rules are checked as the configuration checks them); RulesError otherwise."""
        try:
            obj = json.loads(data)
        except (ValueError, UnicodeDecodeError) as e:
            msg = f"{where}: not JSON: {e}"
            raise RulesError(msg) from None
        if not isinstance(obj, dict):
            msg = f"{where}: expected a JSON object"
            raise RulesError(msg)
        if obj.get("format") != FORMAT:
            msg = f"{where}: format {obj.get('format')!r}, this appender reads format {FORMAT}"
            raise RulesError(msg)
        generation, request_id = obj.get("generation"), obj.get("request_id")
        if isinstance(generation, bool) or not isinstance(generation, int) or generation < 1:
            msg = f"{where}: generation {generation!r}: must be a positive integer"
            raise RulesError(msg)
        if request_id is not None and (isinstance(request_id, bool) or not isinstance(request_id, int)):
            msg = f"{where}: request_id {request_id!r}: must be an integer or null"
            raise RulesError(msg)
        try:
            masking = _MASKING.validate_python(obj.get("masking", {}))
        except ValidationError as e:
            first = e.errors()[0]
            key = ".".join(str(x) for x in first["loc"])
            msg = f"{where}: masking.{key}: {first['msg']}"
            raise RulesError(msg) from None
        snap = cls(
            str(obj.get("source", "")),
            generation,
            masking,
            str(obj.get("config", "")),
            str(obj.get("loaded_at", "")),
            request_id,
        )
        try:
            snap.plan()
        except MaskError as e:
            msg = f"{where}: {e}"
            raise RulesError(msg) from None
        return snap

    def plan(self) -> MaskPlan:
        return compile_rules(self.masking)


def _rule_dict(rule: MaskRule) -> dict[str, Any]:
    out = rule.model_dump(exclude_none=True)
    if rule.salt is not None:
        out["salt"] = rule.salt.get_secret_value()
    return out


def next_snapshot(
    previous: RulesSnapshot | None,
    ds: str,
    masking: Masking,
    config: str = "",
    request_id: int | None = None,
    now: datetime | None = None,
) -> RulesSnapshot:
    """The snapshot that follows ``previous`` (generation + 1; 1 when there is none)."""
    moment = now or datetime.now(UTC)
    return RulesSnapshot(
        ds,
        (previous.generation if previous else 0) + 1,
        masking,
        config,
        moment.strftime("%Y-%m-%d %H:%M:%S.") + f"{moment.microsecond // 1000:03d}",
        request_id,
    )


def load_rules(config_path: str, ds: str) -> tuple[DbusConfig, Masking]:
    """Read and validate the configuration file and compile the source's rules; ConfigError naming the
    file and the key when anything in it is wrong (nothing is published then)."""
    cfg = load_config(config_path)
    masking = cfg.source(ds).masking
    try:
        compile_rules(masking)
    except MaskError as e:
        msg = f"{cfg.path}: sources.{ds}.{e.args[0]} ({e.code})"
        raise ConfigError(msg) from None
    return cfg, masking


# ---------------------------------------------------------------- ZooKeeper


def read_snapshot(
    client: KazooClient, path: str, timeout: float = READ_TIMEOUT_S
) -> tuple[RulesSnapshot | None, Any]:
    """(snapshot, stat) of the node, (None, None) when it does not exist."""
    from kazoo.exceptions import NoNodeError

    try:
        data, stat = client.get_async(path).get(timeout=timeout)
    except NoNodeError:
        return None, None
    return RulesSnapshot.from_json(data, path), stat


def publish(
    client: KazooClient,
    cfg: DbusConfig,
    ds: str,
    masking: Masking,
    config: str = "",
    request_id: int | None = None,
) -> RulesSnapshot:
    """Write the next generation of the rules (compare-and-set: concurrent publishers never collide)."""
    from kazoo.exceptions import BadVersionError, NodeExistsError

    path = node_path(cfg, ds)
    while True:
        try:
            previous, stat = read_snapshot(client, path)
        except RulesError as e:  # an unreadable node is replaced; its generation is lost, start above it
            log.warning("replacing unreadable rules node: %s", e)
            _, stat = client.get(path)
            previous = RulesSnapshot(ds, stat.version + 1, {})
        snap = next_snapshot(previous, ds, masking, config, request_id)
        try:
            if stat is None:
                client.create(path, snap.to_json(), makepath=True)
            else:
                client.set(path, snap.to_json(), version=stat.version)
        except (BadVersionError, NodeExistsError):
            continue  # someone published in between: read again
        return snap


def write_reply(client: KazooClient, cfg: DbusConfig, ds: str, reply: Mapping[str, Any]) -> None:
    """The answer to a reload request, for ``dbus reload --wait`` and operators."""
    path, data = reply_path(cfg, ds), json.dumps(dict(reply), sort_keys=True).encode("utf-8")
    if client.exists(path):
        client.set(path, data)
    else:
        client.create(path, data, makepath=True)


def read_reply(client: KazooClient, cfg: DbusConfig, ds: str) -> dict[str, Any] | None:
    from kazoo.exceptions import NoNodeError

    try:
        data, _ = client.get(reply_path(cfg, ds))
    except NoNodeError:
        return None
    try:
        reply = json.loads(data)
    except ValueError:
        return None
    return reply if isinstance(reply, dict) else None


# ---------------------------------------------------------------- executors


@dataclass
class _WorkerState:
    """Per Python worker (workers are reused across tasks): one client, the last plan compiled."""

    client: Any = None
    hosts: str = ""
    plans: dict[tuple[str, bytes], tuple[int, MaskPlan]] = field(default_factory=dict)
    last: dict[str, tuple[int, MaskPlan]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)


_STATE = _WorkerState()


def _client(cfg: DbusConfig) -> KazooClient:
    if _STATE.client is None or _STATE.hosts != cfg.endpoints.zookeeper.hosts:
        if _STATE.client is not None:
            _close(_STATE.client)
        _STATE.client = zk.client(cfg.endpoints.zookeeper)
        _STATE.hosts = cfg.endpoints.zookeeper.hosts
    return _STATE.client


def _close(client: Any) -> None:
    try:
        client.stop()
        client.close()
    except Exception:
        pass


def current_plan(cfg: DbusConfig, ds: str) -> tuple[int, MaskPlan]:
    """(generation, MaskPlan) the appender applies now: the ZooKeeper snapshot (one read per call), or the
    configuration file's rules (generation 0) when none was published. Plans are compiled once per
    generation in this worker. ZooKeeper not answering: the last plan this worker used, else
    EndpointError (the task fails rather than guess the rules)."""
    path = node_path(cfg, ds)
    with _STATE.lock:
        try:
            data = _read(cfg, path)
        except Exception as e:
            _close(_STATE.client)
            _STATE.client = None
            if ds in _STATE.last:
                log.warning(
                    "ZooKeeper did not answer (%s); keeping rules generation %d", e, _STATE.last[ds][0]
                )
                return _STATE.last[ds]
            hosts = cfg.endpoints.zookeeper.hosts
            msg = f"cannot read the appender rules {path} from ZooKeeper at {hosts}: {e}"
            raise EndpointError(msg) from e
        if data is None:
            key = (
                ds,
                b"file:"
                + json.dumps(
                    {
                        t: {c: _rule_dict(r) for c, r in cols.items()}
                        for t, cols in cfg.source(ds).masking.items()
                    },
                    sort_keys=True,
                ).encode(),
            )
        else:
            key = (ds, data)
        if key not in _STATE.plans:
            if data is None:
                result = (0, compile_rules(cfg.source(ds).masking))
            else:
                snap = RulesSnapshot.from_json(data, path)
                result = (snap.generation, snap.plan())
            _STATE.plans = {k: v for k, v in _STATE.plans.items() if k[0] != ds}  # keep one per source
            _STATE.plans[key] = result
        _STATE.last[ds] = _STATE.plans[key]
        return _STATE.plans[key]


def _read(cfg: DbusConfig, path: str) -> bytes | None:
    from kazoo.exceptions import NoNodeError

    try:
        data, _ = _client(cfg).get_async(path).get(timeout=READ_TIMEOUT_S)
    except NoNodeError:
        return None
    return data


# ---------------------------------------------------------------- the driver's listener


class ReloadListener(control.DriverListener):
    """Daemon thread of the appender driver: APPENDER_RELOAD_CONFIG on ``<ds>_ctrl`` -> re-read the file,
    validate, publish the next rules generation. A bad file is logged and the applied rules stay.

    No record stops it: ``handle`` never raises. A record that is not a valid control message (null,
    garbage, huge numbers, wrong types) is logged with its coordinates and, when its key or its type
    says APPENDER_RELOAD_CONFIG, answered ``rejected`` (``UMS_BAD_CONTROL``, with its id when it has
    one). A failed poll (Kafka gone) is logged and retried with backoff (``control.DriverListener``).

    ``start()`` returns once the consumer sits at the end of the topic and the start-up rules are
    published: a request sent after that is never missed; a bad masking rule fails it (``ConfigError``).
    """

    def __init__(self, cfg: DbusConfig, ds: str, config_path: str | None = None, poll_ms: int = 500) -> None:
        super().__init__(cfg, ds, cfg.source(ds).topics.name("ctrl", ds), "appender", poll_ms)
        self.config_path = str(config_path or cfg.path)
        self.generation = 0
        self._dispatcher = control.Dispatcher(
            f"appender {ds}", {ControlType.APPENDER_RELOAD_CONFIG: self._reload}, bad=self._bad
        )

    def start(self, timeout: float = 60.0) -> ReloadListener:  # type: ignore[override]  # returns itself
        try:
            super().start(timeout)
        except EndpointError:
            if isinstance(self.error, MaskError):
                msg = f"{self.cfg.path}: sources.{self.ds}.{self.error.args[0]} ({self.error.code})"
                raise ConfigError(msg) from None
            raise
        return self

    def prepare(self) -> None:
        masking = self.cfg.source(self.ds).masking
        compile_rules(masking)  # a bad rule fails the start, never publishes
        snap = publish(self._zk, self.cfg, self.ds, masking, self.config_path)
        self.generation = snap.generation
        log.info(
            "appender %s: rules generation %d published at start-up (%s)",
            self.ds,
            snap.generation,
            _summary(snap.masking),
        )

    def on_record(self, rec: control.ControlRecord) -> Any:
        return self.handle(rec.value, rec.key, rec.where)

    def handle(self, value: bytes | None, key: bytes | None = None, where: str = "") -> dict[str, Any] | None:
        """One control record (``where``: its coordinates, for the log); returns the reply written for an
        APPENDER_RELOAD_CONFIG (applied or rejected), else None. Never raises."""
        try:
            return self._handle(value, key, where or self.topic)
        except Exception:
            log.exception("appender %s: %s: the control record could not be handled", self.ds, where)
            return None

    def _handle(self, value: bytes | None, key: bytes | None, where: str) -> dict[str, Any] | None:
        return self._dispatcher.dispatch(control.ControlRecord(self.topic, -1, -1, key, value, at=where))

    def _bad(self, rec: control.ControlRecord, e: BadControlError) -> dict[str, Any] | None:
        """A record that is not a control message: answered ``rejected`` when its key or its claimed type
        says APPENDER_RELOAD_CONFIG (the sender waits for a reply), else logged and ignored."""
        where = rec.where
        request_id, kind = peek(rec.value)
        if rec.key != RELOAD_KEY and kind != ControlType.APPENDER_RELOAD_CONFIG.value:
            log.warning("appender %s: %s: ignoring a bad control message: %s", self.ds, where, e)
            return None
        log.error(
            "appender %s: %s: reload %s rejected, rules generation %d stay: %s",
            self.ds,
            where,
            request_id,
            self.generation,
            e,
        )
        return self._answer(
            {
                "request_id": request_id,
                "source": self.ds,
                "status": "rejected",
                "generation": self.generation,
                "code": e.code,
                "reason": f"{where}: {e}",
            }
        )

    def _reload(self, message: ControlMessage, rec: control.ControlRecord) -> dict[str, Any] | None:
        """APPENDER_RELOAD_CONFIG for this source (or for every source: no ``ds``): re-read the file,
        publish the next rules generation, answer ``applied`` or ``rejected``."""
        target = message.payload.get("ds")
        if target not in (None, self.ds):
            return None
        reply: dict[str, Any] = {"request_id": message.id, "source": self.ds}
        try:
            cfg, masking = load_rules(self.config_path, self.ds)
            snap = publish(self._zk, cfg, self.ds, masking, self.config_path, message.id)
        except Exception as e:
            code = e.code if isinstance(e, DbusError) else RELOAD_FAILED
            reason = str(e) if isinstance(e, DbusError) else f"{type(e).__name__}: {e}"
            log.error(
                "appender %s: reload %d rejected, rules generation %d stay: %s: %s",
                self.ds,
                message.id,
                self.generation,
                code,
                reason,
            )
            reply.update(status="rejected", generation=self.generation, code=code, reason=reason)
        else:
            self.generation = snap.generation
            log.info(
                "appender %s: reload %d applied: rules generation %d (%s), from the next micro-batch",
                self.ds,
                message.id,
                snap.generation,
                _summary(snap.masking),
            )
            reply.update(status="applied", generation=snap.generation)
        return self._answer(reply)

    def _answer(self, reply: dict[str, Any]) -> dict[str, Any]:
        try:
            write_reply(self._zk, self.cfg, self.ds, reply)
        except Exception as e:
            log.warning("appender %s: could not write the reload reply: %s", self.ds, e)
        return reply


def _summary(masking: Masking) -> str:
    columns = sum(len(c) for c in masking.values())
    return f"{columns} masked column(s) in {len(masking)} table pattern(s)"


def start_listener(cfg: DbusConfig, ds: str) -> ReloadListener:
    """What the driver calls before it starts the query."""
    return ReloadListener(cfg, ds).start()
