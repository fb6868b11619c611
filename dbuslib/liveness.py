"""Which stage processes run: each announces itself with an ephemeral ZooKeeper node, and readers (the
console, ``dbus status``) decide a stage's state from those nodes.

A stage process (extractor, dispatcher, appender, fullpuller, heartbeat, logprocessor) announces itself
through its ``Lifecycle`` (dbuslib/lifecycle.py, ``zookeeper=``) for as long as it runs::

    <root>/Live/<ds>/<stage>/<host>:<pid>    {"host": "db1", "pid": 4242, "started_at": 1714557600.0}

The node is ephemeral: ZooKeeper removes it when the process's session ends (a clean stop at once, a
crash or ``kill -9`` once the session times out, ``endpoints.zookeeper.timeout_s``). The announcer checks
every ``EVERY_S`` that its node is still there and creates it again after a lost session. A reader does not
wait for the timeout when it can tell better: a node of this machine whose pid no longer runs is a dead
process at once (``state``).

Pure parts (``Process``, ``state``) are unit-tested; ``Announcer`` and ``read`` are the ZooKeeper edge.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any, Literal

from kazoo.exceptions import KazooException, NodeExistsError, NoNodeError

from dbuslib import zk, zkpaths
from dbuslib.config import ZooKeeperEndpoint
from dbuslib.errors import EndpointError

log = logging.getLogger(__name__)
EVERY_S = 5.0  # how often an announcer looks that its node is still there
State = Literal["running", "down"]
RUNNING: State = "running"
DOWN: State = "down"


@dataclass(frozen=True)
class Process:
    """One announced stage process: where it runs, its pid, when it started (epoch s)."""

    stage: str
    host: str
    pid: int
    started_at: float

    def to_json(self) -> bytes:
        return json.dumps({"host": self.host, "pid": self.pid, "started_at": self.started_at}).encode()

    @classmethod
    def from_json(cls, stage: str, data: bytes) -> Process:
        """From a node's data; ValueError/KeyError/TypeError when it is not a process's."""
        doc = json.loads(data)
        return cls(stage, str(doc["host"]), int(doc["pid"]), float(doc["started_at"]))

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def pid_alive(pid: int) -> bool:
    """A process ``pid`` runs on this machine (``os.kill(pid, 0)``; one of another user counts; a zombie,
    killed but not yet reaped by its parent, does not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True  # no /proc (not Linux): os.kill's answer


def this_host() -> str:
    return socket.gethostname()


def alive(
    processes: Iterable[Process], host: str, is_alive: Callable[[int], bool] = pid_alive
) -> list[Process]:
    """The announced processes that run: a process of ``host`` (this machine) only when its pid is alive;
    one of another machine as long as its node is there (ZooKeeper ends it with its session)."""
    return [p for p in processes if p.host != host or is_alive(p.pid)]


def state(processes: Iterable[Process], host: str, is_alive: Callable[[int], bool] = pid_alive) -> State:
    """``running`` when one announced process of the stage runs (``alive``), ``down`` otherwise."""
    return RUNNING if alive(processes, host, is_alive) else DOWN


def read(client: Any, root: str, ds: str) -> dict[str, list[Process]]:
    """The announced processes of source ``ds`` by stage (a stage with none is absent); a node deleted
    while listing is left out, one that holds no process is logged and skipped. Read-only."""
    base = zkpaths.live(root, ds)
    try:
        stages = client.get_children(base)
    except NoNodeError:
        return {}
    out: dict[str, list[Process]] = {}
    for stage_node in sorted(stages):
        stage = zk.unescape(stage_node)
        try:
            names = client.get_children(zkpaths.live_stage(root, ds, stage))
        except NoNodeError:
            continue
        for name in sorted(names):
            path = zkpaths.live_process(root, ds, stage, zk.unescape(name))
            try:
                data, _ = client.get(path)
                out.setdefault(stage, []).append(Process.from_json(stage, data))
            except NoNodeError:
                continue
            except (ValueError, KeyError, TypeError) as e:
                log.warning("%s: not a stage process (%s); ignored", path, e)
    return out


def states(
    announced: Mapping[str, list[Process]],
    stages: Iterable[str],
    host: str,
    is_alive: Callable[[int], bool] = pid_alive,
) -> dict[str, State]:
    """``state`` of each of ``stages`` from ``read``'s answer."""
    return {s: state(announced.get(s, ()), host, is_alive) for s in stages}


class Announcer:
    """Keeps this process's ephemeral node under ``live_stage(root, ds, stage)`` while it runs:
    ``start()`` (a daemon thread: connects, creates the node, looks every ``every_s`` that it is still
    there and creates it again after a lost session), ``stop()`` deletes it and closes the client. A
    ZooKeeper that cannot be reached is tried again every ``every_s``: it never delays or stops a stage.
    One that refuses the stage's identity (``ZooKeeperAuthFailed``: not transient) ends the thread and is
    handed to ``on_refused`` (the stage's Lifecycle stops the stage with it)."""

    def __init__(
        self,
        endpoint: ZooKeeperEndpoint,
        ds: str,
        stage: str,
        *,
        every_s: float = EVERY_S,
        on_refused: Callable[[EndpointError], Any] | None = None,
    ) -> None:
        self.endpoint, self.ds, self.stage, self.every_s = endpoint, ds, stage, every_s
        self.on_refused = on_refused
        self.process = Process(stage, this_host(), os.getpid(), round(time.time(), 3))
        self.path = zkpaths.live_process(endpoint.root, ds, stage, zk.identity())
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._client: Any = None
        self._thread: threading.Thread | None = None

    def start(self) -> Announcer:
        self._thread = threading.Thread(target=self._run, name=f"dbus-liveness-{self.stage}", daemon=True)
        self._thread.start()
        return self

    def announced(self) -> bool:
        """The node is there now (tests)."""
        with self._lock:
            client = self._client
        return client is not None and client.connected and client.exists(self.path) is not None

    def _connected(self) -> Any:
        """The client, connected now if it was not (None once stopped)."""
        with self._lock:
            if self._client is not None or self._stop.is_set():
                return self._client
        client = zk.client(self.endpoint)  # not under the lock: stop() never waits for a connect
        with self._lock:
            if self._stop.is_set():
                client.stop()
                client.close()
                return None
            self._client = client
            return client

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                client = self._connected()
                if client is None:
                    return
                if client.connected and client.exists(self.path) is None:
                    try:
                        client.create(self.path, self.process.to_json(), ephemeral=True, makepath=True)
                        log.info("%s: %s announced at %s", self.ds, self.stage, self.path)
                    except NodeExistsError:
                        pass
            except (EndpointError, KazooException, *zk.UNREACHABLE) as e:
                if isinstance(e, EndpointError) and not e.retriable and self.on_refused is not None:
                    self.on_refused(e)
                    return
                log.warning("%s: %s not announced yet (%r); trying again", self.ds, self.stage, e)
            self._stop.wait(self.every_s)

    def stop(self) -> None:
        """Delete the node and close the client (idempotent; errors are logged, never raised)."""
        self._stop.set()
        with self._lock:
            client, self._client = self._client, None
        if client is None:
            return
        try:
            client.delete(self.path)
        except Exception as e:  # gone already, or ZooKeeper unreachable: the session's end removes it
            log.debug("%s: %s: %r", self.ds, self.path, e)
        try:
            client.stop()
            client.close()
        except Exception as e:
            log.debug("%s: closing the liveness client: %r", self.ds, e)
