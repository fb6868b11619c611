"""dbusclient.merge: per key the change with the greatest (ums_id_, ums_uid_) wins, window by window.

The hypothesis test (acceptance item 4 of issue #17) plays random transactions against a model table (with
and without before images, updates that move a row to another key, deletes and re-inserts), takes a full
pull at a random position while the writes go on (each key read at its own later moment, some read twice as
a resumed shard does), adds duplicates of random changes (at-least-once delivery), shuffles everything,
cuts it into random windows and merges them one by one into a model sink. The sink must end equal to the
source table, and no key may ever go back to an older change.
"""

from __future__ import annotations

import random

import pytest
from cdc_history import KEYS, transactions
from hypothesis import given, settings
from hypothesis import strategies as st

from dbusclient.decode import RowChange, TableRef
from dbusclient.merge import Delete, KeyState, Merger, Upsert
from ums.message import Op

T = TableRef("demo", "shop", "orders")


def change(
    key: int, op: str, ums_id: int, uid: int, value: object = None, initial: bool = False
) -> RowChange:
    return RowChange(T, 0, (key,), Op(op), ums_id, uid, "2024-01-02 03:04:05.000", {"v": value}, initial)


@st.composite
def histories(draw):
    """(row changes in a random order, the source's final table {key: value})."""
    first_id, events, states = draw(transactions())
    state = states[-1] if states else {}
    rows = [
        change(key, op, at, at * 10**6 + i, value)
        for at, changes in events
        for i, (key, op, value) in enumerate(changes)
    ]
    # The pull: snapshot position strictly between events k-1 and k; each key read after event t-1 for
    # some t >= k; a resumed shard reads some keys a second time, later, under another ums_uid_.
    k = draw(st.integers(0, len(events)))
    pull_id = (events[k - 1][0] if k else first_id - 1) + 1
    after = [{}] + states
    for n, key in enumerate(KEYS):
        reads = sorted(draw(st.lists(st.integers(k, len(events)), min_size=1, max_size=2)))
        for r, t in enumerate(reads):
            if key in after[t]:
                uid = pull_id * 10**15 + draw(st.integers(0, 3)) * 10**9 + n * 10 + r
                rows.append(change(key, "i", pull_id, uid, after[t][key], initial=True))
    rows += draw(st.lists(st.sampled_from(rows), max_size=10)) if rows else []  # at-least-once copies
    random.Random(draw(st.integers())).shuffle(rows)
    cuts = sorted(draw(st.lists(st.integers(0, len(rows)), max_size=6)))
    windows = [rows[a:b] for a, b in zip([0, *cuts], [*cuts, len(rows)], strict=True)]
    return windows, state


def apply(windows, merger: Merger, sink: dict[int, object] | None = None) -> dict[int, object]:
    """Merge each window and apply its effects to a model sink; asserts no key ever goes backwards."""
    sink = {} if sink is None else sink
    applied_at: dict[int, tuple[int, int]] = {}
    for window in windows:
        result = merger.merge(window)
        assert result.stale + result.duplicates + len(result.applied) == len(window)
        for c in result.applied:  # the changes handed to callbacks: per key, always newer
            assert c.position > applied_at.get(c.key[0], (-1, -1))
            applied_at[c.key[0]] = c.position
        assert len({e.key for e in result.effects}) == len(result.effects)
        for effect in result.effects:
            if isinstance(effect, Upsert):
                sink[effect.change.key[0]] = effect.change.values["v"]
            else:
                sink.pop(effect.change.key[0], None)
    return sink


@given(histories())
@settings(max_examples=300, deadline=None)
def test_any_interleaving_of_pull_increments_and_duplicates_gives_the_source_table(history):
    windows, final = history
    assert apply(windows, Merger()) == final


@given(histories())
@settings(max_examples=100, deadline=None)
def test_a_replayed_window_changes_nothing(history):
    windows, _ = history
    merger = Merger()
    apply(windows, merger)
    for window in windows:  # redelivered after a crash between sink and checkpoint: all duplicate or stale
        result = merger.merge(window)
        assert result.applied == () and result.effects == ()
        assert result.duplicates + result.stale == len(window)


@given(histories(), st.integers(0, 6))
@settings(max_examples=100, deadline=None)
def test_states_kept_with_the_sink_carry_over_a_restart(history, crash_at):
    windows, final = history
    states: dict = {}  # what a sink keeps next to its rows (ums_id_, ums_uid_, tombstones)
    sink = apply(windows[:crash_at], Merger(states))
    apply(windows[crash_at:], Merger(states), sink)  # a new merger over the kept states
    assert sink == final


def test_a_merger_that_lost_its_states_resurrects_a_deleted_key():
    # why the states must be kept during a bootstrap (docs/client.md): the delete was applied, then the
    # consumer restarted with empty states, then the older snapshot row came
    delete, snapshot_row = change(7, "d", 700, 700_000_000), change(7, "i", 500, 500 * 10**15, 1, True)
    Merger().merge([delete])
    assert Merger().merge([snapshot_row]).effects == (Upsert(snapshot_row),)


def test_ids_compare_as_numbers_not_text():
    # "999" > "1000" as text; as numbers the later change wins, whichever comes first
    old, new = change(1, "i", 999, 999_000_000, "old"), change(1, "u", 1000, 1_000_000_000, "new")
    merger = Merger()
    assert merger.merge([new]).effects == (Upsert(new),)
    result = merger.merge([old])
    assert (result.effects, result.stale) == ((), 1)


def test_a_delete_keeps_a_tombstone_that_stops_an_older_snapshot_row():
    # the snapshot at 500 read the row; the delete at 700 came first (another window)
    delete = change(7, "d", 700, 700_000_000, 1)
    snapshot_row = change(7, "i", 500, 500 * 10**15, 1, initial=True)
    merger = Merger()
    assert merger.merge([delete]).effects == (Delete(delete),)
    assert merger.states[(T, (7,))] == KeyState(700, 700_000_000, live=False)
    result = merger.merge([snapshot_row])
    assert (result.applied, result.effects, result.stale) == ((), (), 1)


def test_the_same_tuple_twice_is_a_duplicate():
    row = change(1, "i", 100, 100_000_000, "a")
    result = Merger().merge([row, row])
    assert (len(result.applied), result.duplicates, result.stale) == (1, 1, 0)


@pytest.mark.parametrize(
    ("ops", "effect"),
    [
        ([("i", 1), ("d", 2)], "delete"),  # deleted within the window
        ([("i", 1), ("d", 2), ("i", 3)], "upsert v3"),  # re-inserted after the delete
        ([("b", 1)], "delete"),  # a before image whose update moved the row to another key
        ([("b", 1), ("u", 1)], "upsert v1"),  # the same event: the u (next ums_uid_) wins over its b
    ],
)
def test_net_effect_of_a_window(ops, effect):
    rows = [change(1, op, at, at * 10**6 + i, f"v{at}") for i, (op, at) in enumerate(ops)]
    result = Merger().merge(reversed(rows))
    assert [c.position for c in result.applied] == sorted(c.position for c in rows)
    (got,) = result.effects
    assert (f"upsert {got.change.values['v']}" if isinstance(got, Upsert) else "delete") == effect


def test_an_update_that_moves_the_row_deletes_the_old_key():
    # UPDATE t SET id = 2 WHERE id = 1, with before images: b under 1, u under 2, one binlog event
    b, u = change(1, "b", 300, 300_000_000, "x"), change(2, "u", 300, 300_000_001, "x")
    merger = Merger()
    merger.merge([change(1, "i", 200, 200_000_000, "x")])
    assert merger.merge([u, b]).effects == (Delete(b), Upsert(u))


def test_a_tombstone_deleted_again_gives_no_effect():
    merger = Merger()
    merger.merge([change(1, "d", 100, 100_000_000)])
    result = merger.merge([change(1, "i", 200, 200_000_000, "a"), change(1, "d", 300, 300_000_000, "a")])
    assert len(result.applied) == 2 and result.effects == ()


def test_prune_tombstones_forgets_only_old_tombstones():
    merger = Merger()
    merger.merge([change(1, "d", 100, 100_000_000), change(2, "d", 300, 300_000_000), change(3, "i", 50, 1)])
    assert merger.prune_tombstones(below=200) == 1
    assert set(merger.states) == {(T, (2,)), (T, (3,))}
