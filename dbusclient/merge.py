"""The merge rule of a consumer: per key, the change with the greatest ``(ums_id_, ums_uid_)`` wins.

DBus delivers at least once, and a full pull's rows (``data_initial_data``, ``ums_id_`` = the pull's
snapshot position ``S``) arrive interleaved with increments older and newer than ``S``. Applied in
arrival order they give a wrong table; merged by this rule they give the source's table, whatever the
order and however often a change is delivered. ``fullpuller/reconcile.py`` (``merge``, and the Spark
job) is the batch form of the same rule over a whole topic; this is the incremental form, one window
(a batch of decoded ``RowChange``s) at a time, with the state it needs kept between windows.

The rule, per key (table and key columns' values):

1. Order: ``(ums_id_, ums_uid_)``, both compared **as numbers** (``"999"`` is older than ``"1000"``).
2. A change at the key's current position is a **duplicate** (the same tuple again: at-least-once
   delivery, a replayed batch): counted, not applied.
3. A change older than the key's current position is **stale**: counted, not applied. This is what keeps
   a snapshot row at ``S`` from undoing an increment after ``S``, and an increment before ``S`` from
   undoing the snapshot.
4. A newer change is applied and becomes the key's position. A delete (``d``) leaves a **tombstone**:
   the key's position is kept with no row, so an older snapshot row arriving later is stale and never
   resurrects the key. A before image (``b``) is a tombstone too: when an update keeps the key, its
   ``u`` has the next ``ums_uid_`` and wins over the ``b``; when the update changed the key, the ``u`` is
   under the new key and the ``b`` moves the row away from the old one.

Why this gives the source's table under a pull taken during live writes: docs/reconcile.md, "The merge
rule". ``Merger.merge`` returns, per window, the applied changes (by position, hence in ``ums_id_``
order per key) for callbacks, the **net effect** per key for a sink (one ``Upsert`` or ``Delete``), and
the stale and duplicate counts.

The key states are the merge's memory. ``Merger`` keeps them in a ``MutableMapping`` given to it (a
dict by default). They must outlive a restart wherever a window may be applied again or a snapshot row
may still come (during a bootstrap): a sink keeps them next to its rows (the replica row's ``ums_id_``
and ``ums_uid_``, and a tombstone table) and hands the merger a mapping over them. A merger with empty
states after a restart treats every change as new. Not handled here: rows that left the source
without a rows event (TRUNCATE, row loss: ``fullpuller/resets.py``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, MutableMapping
from dataclasses import dataclass
from operator import attrgetter

from dbusclient.decode import RowChange, TableRef
from ums.message import Op

Key = tuple[TableRef, tuple[object, ...]]


@dataclass(frozen=True, slots=True)
class KeyState:
    """Where a key stands: the position of its last applied change, and whether it has a row (``live``)
    or is a tombstone. ``{"ums_id": 1030000012345678, "ums_uid": 1030000012345678000001, "live": true}``"""

    ums_id: int
    ums_uid: int
    live: bool

    @property
    def position(self) -> tuple[int, int]:
        return self.ums_id, self.ums_uid


@dataclass(frozen=True, slots=True)
class Upsert:
    """Net effect: the key has the row ``change.values`` (insert it, or replace what is there)."""

    change: RowChange

    @property
    def key(self) -> Key:
        return self.change.table, self.change.key


@dataclass(frozen=True, slots=True)
class Delete:
    """Net effect: the key has no row (``change`` is the delete or before image that won)."""

    change: RowChange

    @property
    def key(self) -> Key:
        return self.change.table, self.change.key


Effect = Upsert | Delete


@dataclass(frozen=True)
class MergeResult:
    """What one window did.

    - ``applied``: the changes that won over their key's state when they were merged, sorted by
      position (so per key in ``ums_id_`` order); the data callbacks get these.
    - ``effects``: one per key whose state changed, the net result of the window for that key, sorted by
      the position of the change behind it; a sink applies these. A key that was a tombstone and ends
      the window as one gets none; a key with no state that ends as a tombstone gets a ``Delete`` (the
      merger does not know what the sink holds).
    - ``stale``, ``duplicates``: changes not applied (rule 2 and 3 of the module docstring).
    """

    applied: tuple[RowChange, ...]
    effects: tuple[Effect, ...]
    stale: int
    duplicates: int


class Merger:
    """Merge windows of row changes over the key states ``states`` (a new dict when None)."""

    def __init__(self, states: MutableMapping[Key, KeyState] | None = None) -> None:
        self.states: MutableMapping[Key, KeyState] = {} if states is None else states

    def merge(self, window: Iterable[RowChange]) -> MergeResult:
        """Merge one window (any order, duplicates allowed) and return what to apply."""
        ordered = sorted(window, key=_position)
        applied: list[RowChange] = []
        before: dict[Key, KeyState | None] = {}  # each touched key's state before the window
        last: dict[Key, RowChange] = {}
        stale = duplicates = 0
        states, new_state, delete, before_image = self.states, _new_state, Op.DELETE, Op.BEFORE
        for change in ordered:
            key = (change.table, change.key)
            state = states.get(key)
            if state is not None:
                position, at = (change.ums_id, change.ums_uid), (state.ums_id, state.ums_uid)
                if position <= at:
                    if position == at:
                        duplicates += 1
                    else:
                        stale += 1
                    continue
            if key not in before:
                before[key] = state
            op = change.op  # change.gone, inline: the loop runs once per change
            states[key] = new_state(change.ums_id, change.ums_uid, not (op is delete or op is before_image))
            applied.append(change)
            last[key] = change
        effects = [
            Delete(c) if c.gone else Upsert(c)
            for key, c in last.items()
            if not (c.gone and (old := before[key]) is not None and not old.live)
        ]
        effects.sort(key=_effect_position)
        return MergeResult(tuple(applied), tuple(effects), stale, duplicates)

    def prune_tombstones(self, below: int) -> int:
        """Forget the tombstones whose ``ums_id_`` is below ``below``; returns how many. Only safe once no
        change older than ``below`` can arrive any more for those keys (no bootstrap under way, and the
        topic read past any replay): a forgotten tombstone no longer stops an older row."""
        gone = [k for k, s in self.states.items() if not s.live and s.ums_id < below]
        for k in gone:
            del self.states[k]
        return len(gone)


_position = attrgetter("ums_id", "ums_uid")  # a RowChange's position, without a call of Python code


def _effect_position(effect: Effect) -> tuple[int, int]:
    return effect.change.ums_id, effect.change.ums_uid


_SET_ID, _SET_UID, _SET_LIVE = (getattr(KeyState, f.name).__set__ for f in dataclasses.fields(KeyState))


def _new_state(ums_id: int, ums_uid: int, live: bool) -> KeyState:
    """``KeyState(ums_id, ums_uid, live)`` with its slots set directly (a frozen dataclass's __init__ calls
    object.__setattr__ per field: once per applied change, it showed in the consumer's profile)."""
    state = object.__new__(KeyState)
    _SET_ID(state, ums_id)
    _SET_UID(state, ums_uid)
    _SET_LIVE(state, live)
    return state
