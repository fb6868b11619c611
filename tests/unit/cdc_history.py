"""A source table's history for property tests of the merge rule (tests/unit/test_fullpull_reconcile.py,
tests/unit/test_client_merge.py): random transactions over keys 0..5, with deletes, re-inserts and (when
``before_images``) before images, some updates moving a row to another key."""

from __future__ import annotations

from hypothesis import strategies as st

KEYS = range(6)

# (ums_id_, [(key, op, value)]) per transaction
Event = tuple[int, list[tuple[int, str, int]]]


@st.composite
def transactions(draw) -> tuple[int, list[Event], list[dict[int, int]]]:
    """(the first ums_id_, the transactions in binlog order, the table after each). ``ums_id_`` steps by at
    least 2, so a full pull's position fits strictly between two transactions; the ids cross 10^7 (ids of
    different lengths)."""
    first_id = ums_id = draw(st.integers(9_999_000, 10_000_000))
    state: dict[int, int] = {}
    events: list[Event] = []
    states: list[dict[int, int]] = []
    before_images = draw(st.booleans())
    for _ in range(draw(st.integers(0, 25))):
        ums_id += draw(st.integers(2, 400))
        changes: list[tuple[int, str, int]] = []
        for _ in range(draw(st.integers(1, 3))):
            key, value = draw(st.sampled_from(KEYS)), draw(st.integers(0, 99))
            if key not in state:
                changes.append((key, "i", value))
                state[key] = value
            elif draw(st.booleans()):
                changes.append((key, "d", state.pop(key)))
            elif before_images and draw(st.booleans()) and (free := [k for k in KEYS if k not in state]):
                new_key = draw(st.sampled_from(free))  # an update that moves the row to another key
                changes += [(key, "b", state[key]), (new_key, "u", value)]
                del state[key]
                state[new_key] = value
            else:
                if before_images:
                    changes.append((key, "b", state[key]))
                changes.append((key, "u", value))
                state[key] = value
        events.append((ums_id, changes))
        states.append(dict(state))
    return first_id, events, states
