"""Replication: a ``Consumer`` whose callbacks keep ``SqlSink`` replicas, its checkpoint in the target.

``dbus replicate`` (cli/replicate.py) is this module on the command line; docs/client.md, "Replicate",
says what it guarantees. ``Replicator`` is both the consumer's callbacks and its checkpoint store:

- ``on_schema_change(table, old, new, schema)``: ``SqlSink.ensure_schema`` (create the replica table, or
  follow the new version: added columns, widened types; an incompatible change fails the window with
  ``CLIENT_SINK_SCHEMA``, and the consumer stops once its retries are spent; or, with
  ``on_incompatible="rebootstrap"``, drops the replica table, makes it anew and pulls the table again);
- ``on_data_event(change)``: the change becomes its key's pending effect (an ``Upsert``, or a ``Delete``
  for a delete or a before image); the changes of a window arrive per key in ``ums_id_`` order, so the
  last one is the window's net effect;
- ``save(checkpoint)`` (the ``CheckpointStore`` side, called by the consumer once the window's callbacks
  succeeded): the pending effects and the checkpoint in **one transaction** (``SqlSink.apply``), retried
  on a lost connection within ``endpoints.retry``. A crash before the commit leaves the replica and the
  checkpoint as they were, and the window is read again; after it, both have moved. The replica's writes
  are guarded by each key's stored position, so a window applied twice changes nothing. A value that
  does not decode (the consumer's fast path leaves user values to the sink) is ``RowRefused`` naming its
  change: the transaction rolls back, and the consumer sets that record aside (``--dead-letter-file``)
  and dispatches the rest of the window again.
- ``load()``: the checkpoint row of this replicator's name in the target;
- ``on_end_bootstrap(pulls)``: each pulled table is **swept** in the target once the window is saved: its
  rows older than the pull's snapshot position ``S`` are removed, each leaving a tombstone at ``(S, 0)``.
  Every row that existed at ``S`` came with the pull at ``S`` (or a newer increment), so an older row is
  one deleted before ``S`` whose delete the replica never saw: deleted by retention before it was read
  (a re-bootstrap), or applied before a ``TRUNCATE``. The sweep runs in its own transaction after the
  window's (a crash between the two reads the window again, and sweeps again).

The merger's key states are kept in a bounded mapping (``BoundedStates``): they only save writes. What
makes the replica right is the sink's guards (a row is written only when its change is newer than the
key's row or tombstone), which hold whatever the merger remembers.
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator, MutableMapping
from dataclasses import dataclass
from typing import Any, TypeVar

from dbusclient.checkpoint import Checkpoint, TablePull
from dbusclient.consumer import ConsumerCallbacks, Result
from dbusclient.decode import RowChange, TableRef
from dbusclient.merge import Delete, Effect, Key, KeyState, Upsert
from dbusclient.sink_sql import SinkSchemaError, SqlSink
from dbuslib import retry
from ums.message import UmsSchema

log = logging.getLogger("dbus.replicate")
T = TypeVar("T")


class BoundedStates(MutableMapping[Key, KeyState]):
    """The merger's key states, at most ``limit`` keys: the least recently used goes first."""

    def __init__(self, limit: int = 200_000) -> None:
        if limit < 1:
            msg = f"BoundedStates: limit must be at least 1, got {limit}"
            raise ValueError(msg)
        self.limit = limit
        self._data: OrderedDict[Key, KeyState] = OrderedDict()

    def __getitem__(self, key: Key) -> KeyState:
        value = self._data[key]
        self._data.move_to_end(key)
        return value

    def __setitem__(self, key: Key, value: KeyState) -> None:
        self._data[key] = value
        self._data.move_to_end(key)
        if len(self._data) > self.limit:
            self._data.popitem(last=False)

    def __delitem__(self, key: Key) -> None:
        del self._data[key]

    def __iter__(self) -> Iterator[Key]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)


@dataclass
class Counts:
    """What a replicator applied since it started."""

    windows: int = 0
    upserts: int = 0
    deletes: int = 0
    schema_changes: int = 0
    swept: int = 0  # rows removed by sweeps after bootstraps


class Replicator(ConsumerCallbacks):
    """The callbacks and the checkpoint store of a consumer that keeps ``sink``'s replicas.

    ``policy``: how long a lost connection to the target is retried (``dbuslib.retry``; None: not
    retried). ``on_saved(checkpoint, counts)`` is called after each committed window (progress, metrics).
    ``on_incompatible``: what a version change the replica cannot follow does: ``stop`` (the window fails
    with ``CLIENT_SINK_SCHEMA``, and the consumer stops once its retries are spent) or ``rebootstrap``
    (the replica table is dropped, made anew from the new version, and the table pulled again through
    ``request_bootstrap``, the consumer's ``request_bootstrap``).
    """

    def __init__(
        self,
        sink: SqlSink,
        policy: retry.RetryPolicy | None = None,
        on_saved: Callable[[Checkpoint, Counts], None] | None = None,
        sleep: Callable[[float], None] = time.sleep,
        on_incompatible: str = "stop",
    ) -> None:
        if on_incompatible not in ("stop", "rebootstrap"):
            msg = f"on_incompatible: {on_incompatible!r}, expected stop or rebootstrap"
            raise ValueError(msg)
        self.on_incompatible = on_incompatible
        # the consumer's request_bootstrap (set once the consumer is made): for on_incompatible="rebootstrap"
        self.request_bootstrap: Callable[[TableRef], object] | None = None
        self.sink = sink
        self._target = f"replica {sink.engine.url.render_as_string(hide_password=True)}"  # names retries
        self.policy = policy
        self.on_saved = on_saved
        self._sleep = sleep
        self.pending: dict[Key, Effect] = {}
        self.sweeps: dict[TableRef, int] = {}  # table -> snapshot position, swept after the next save
        self.counts = Counts()

    # ------------------------------------------------------------ CheckpointStore

    def load(self) -> Checkpoint | None:
        return self.sink.checkpoints.load()

    def save(self, checkpoint: Checkpoint) -> None:
        """The pending effects and ``checkpoint`` in one transaction of the target."""
        effects = sorted(self.pending.values(), key=lambda e: e.change.position)
        result = self._call(self.sink.apply, effects, checkpoint)
        self.pending.clear()
        if self.sweeps:
            sweeps, self.sweeps = self.sweeps, {}
            swept = self._call(self.sink.sweep, sweeps, checkpoint)
            if swept:
                log.info(
                    "%s: %d row(s) older than the pulls' positions removed",
                    ", ".join(map(str, sweeps)),
                    swept,
                )
            self.counts.swept += swept
        c = self.counts
        c.windows, c.upserts, c.deletes = (
            c.windows + 1,
            c.upserts + result.upserts,
            c.deletes + result.deletes,
        )
        if self.on_saved is not None:
            self.on_saved(checkpoint, c)

    def _call(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` on the target, a lost connection retried within ``policy``."""
        if self.policy is None:
            return fn(*args)
        return retry.call(self.policy, self._target, fn, *args, sleep=self._sleep)

    # ------------------------------------------------------------ callbacks

    def on_start_data_event_sequence(self, ums_id: int) -> Result:
        self.pending.clear()
        return Result.SUCCESS

    def on_schema_change(self, table: TableRef, old: int | None, new: int, schema: UmsSchema) -> Result:
        try:
            self.sink.ensure_schema(schema)
        except SinkSchemaError as e:
            if self.on_incompatible != "rebootstrap" or self.request_bootstrap is None:
                raise
            log.warning(
                "%s: %s; the replica is dropped and bootstrapped again from version %d", table, e, new
            )
            self.sink.drop_table(table)
            self.sink.ensure_schema(schema)
            self.request_bootstrap(table)
        if old is not None and new > old:
            log.info(
                "%s: version %d -> %d, replica %s followed", table, old, new, self.sink.replica_name(table)
            )
        self.counts.schema_changes += 1
        return Result.SUCCESS

    def on_data_event(self, change: RowChange) -> Result:
        self.pending[(change.table, change.key)] = Delete(change) if change.gone else Upsert(change)
        return Result.SUCCESS

    def on_rollback(self, checkpoint: Checkpoint) -> Result:
        self.pending.clear()
        self.sweeps.clear()
        return Result.SUCCESS

    def on_end_bootstrap(self, pulls: tuple[TablePull, ...]) -> Result:
        for p in pulls:
            table = TableRef(p.ds, p.schema, p.table)
            if p.ums_id is None:
                log.warning("%s: the pull %d ended without its start marker read: not swept", table, p.seqno)
            elif self.sink.has_replica(table):  # a table with no row change yet has no replica to sweep
                self.sweeps[table] = p.ums_id
        return Result.SUCCESS
