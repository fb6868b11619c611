"""Reset points (fullpuller/resets.py): rows that left the source without a rows event are not
resurrected by reconcile, once a TRUNCATE or a re-pull after row loss says so."""

from hypothesis import given
from hypothesis import strategies as st

from dbuslib.metastore import Reason, Version
from fullpuller.resets import merge, reset_point

V0 = Version(0, 100, (), Reason.FIRST)


def test_a_truncate_is_a_reset_point_by_itself():
    assert reset_point([V0, Version(1, 500, (), Reason.TRUNCATE)], {}) == 500


def test_row_loss_resets_only_once_its_own_pull_has_ended():
    lost = Version(1, 500, (), Reason.ROW_LOSS)
    assert reset_point([V0, lost], {}) is None  # not pulled (yet)
    assert reset_point([V0, lost], {499: 900}) is None  # another pull (by hand, maybe partial)
    assert reset_point([V0, lost], {500: 900}) == 900
    assert reset_point([V0, lost, Version(2, 950, (), Reason.TRUNCATE)], {500: 900}) == 950
    assert reset_point([V0, Version(1, 200, (), Reason.COLUMNS)], {200: 900}) is None


def test_without_the_reset_a_dropped_partition_comes_back():
    inc = [(1, 110, 1, "i", "a"), (2, 120, 1, "i", "b")]  # both inserted; key 2's partition dropped at 500
    pulled = [(1, 900, 1, "i", "a")]  # the re-pull at 900 finds key 1 only
    assert merge(inc + pulled, None) == {1: "a", 2: "b"}
    reset = reset_point([V0, Version(1, 500, (), Reason.ROW_LOSS)], {500: 900})
    assert merge(inc + pulled, reset) == {1: "a"}


# A random history: per step an insert/update/delete of a key (one tuple, increasing position), once a
# DDL that removes a random set of rows without tuples (row loss), later the re-pull's snapshot (every
# live key a tuple at its position), then more steps. Reconcile with the reset = the final table.
_STEP = st.tuples(st.sampled_from(["w", "d"]), st.integers(0, 12))


@given(
    st.lists(_STEP, max_size=30),
    st.lists(st.integers(0, 12), max_size=8),
    st.lists(_STEP, max_size=10),
    st.lists(_STEP, max_size=20),
    st.randoms(),
)
def test_row_loss_then_a_re_pull_reconciles_to_the_final_table(before, lost, between, after, rnd):
    table: dict[int, str] = {}
    tuples = []
    pos = 1000

    def apply(steps):
        nonlocal pos
        for op, key in steps:
            pos += 10
            if op == "d" and key in table:
                tuples.append((key, pos, 1, "d", table.pop(key)))
            elif op == "w":
                table[key] = f"{key}@{pos}"
                tuples.append((key, pos, 1, "u", table[key]))

    apply(before)
    loss_at = pos + 5
    for key in lost:
        table.pop(key, None)  # gone without a tuple
    apply(between)  # changes between the DDL and the pull's snapshot
    pos += 10
    snapshot = pos
    tuples += [(key, snapshot, 1, "i", row) for key, row in table.items()]
    apply(after)
    rnd.shuffle(tuples)
    history = [V0, Version(1, loss_at, (), Reason.ROW_LOSS)]
    assert merge(tuples, reset_point(history, {loss_at: snapshot})) == table
