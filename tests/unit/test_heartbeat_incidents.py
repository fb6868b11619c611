from collections import defaultdict

from hypothesis import given
from hypothesis import strategies as st

from heartbeat.incidents import Alert, Observation, Thresholds, alert_key, evaluate

TH = Thresholds(timeout_s=600, latency_alert_s=300)
T0 = 1_700_000_000_000
TABLES = [("shop", "orders"), ("shop", "items"), ("crm", "users")]

# one check: seconds since the previous one, and per table a new point's latency (s) or None (no new point)
STEP = st.tuples(
    st.integers(1, 400), st.lists(st.one_of(st.none(), st.floats(0, 1000)), min_size=3, max_size=3)
)


def run(steps, alerts=None, started=T0):
    """Feed the checks through evaluate; returns (notifications per check, final alerts, observations)."""
    alerts, now, last = dict(alerts or {}), started, {}
    history = []
    for dt, points in steps:
        now += dt * 1000
        for t, latency in zip(TABLES, points, strict=False):
            if latency is not None:
                last[t] = (now - 500, latency)  # the point was written half a second ago
        obs = [Observation(s, t, *last.get((s, t), (None, None))) for s, t in TABLES]
        alerts, notes = evaluate("demo", alerts, obs, now, started, TH)
        history.append((now, obs, notes))
    return history, alerts


def expected_states(history, started=T0):
    """The oracle: per key, is the condition bad (opens), good (clears) or neither (missing data)."""
    out = []
    for now, obs, _ in history:
        states = {}
        for o in obs:
            age = (now - (o.last_ms if o.last_ms is not None else started)) / 1000
            states[alert_key(o.schema, o.table, "stale")] = (
                "bad" if age > TH.timeout_s else ("good" if o.last_ms is not None else "none")
            )
            states[alert_key(o.schema, o.table, "latency")] = (
                "none" if o.latency_s is None else ("bad" if o.latency_s > TH.latency_alert_s else "good")
            )
        out.append(states)
    return out


@given(st.lists(STEP, min_size=1, max_size=40))
def test_one_alert_per_incident_and_one_recovery(steps):
    history, final = run(steps)
    is_open: dict[str, bool] = defaultdict(bool)
    for (_, _, notes), states in zip(history, expected_states(history), strict=False):
        got = {(n.alert.key, n.event) for n in notes}
        assert len(got) == len(notes)  # at most one notice per key and check
        want = set()
        for key, state in states.items():
            if not is_open[key] and state == "bad":
                want.add((key, "alert"))
                is_open[key] = True
            elif is_open[key] and state == "good":
                want.add((key, "recovery"))
                is_open[key] = False
        assert got == want
    assert set(final) == {k for k, v in is_open.items() if v}


@given(st.lists(STEP, min_size=1, max_size=40))
def test_notices_alternate_alert_then_recovery(steps):
    history, _ = run(steps)
    per_key = defaultdict(list)
    for _, _, notes in history:
        for n in notes:
            per_key[n.alert.key].append(n.event)
    for events in per_key.values():
        assert events[::2] == ["alert"] * len(events[::2])
        assert events[1::2] == ["recovery"] * len(events[1::2])


@given(st.lists(st.tuples(st.integers(1, 400), st.floats(0, 300)), min_size=1, max_size=40))
def test_no_notice_for_a_table_within_thresholds(beats):
    # a fresh point at every check (at most 400 s apart), latency at most the threshold
    history, final = run([(dt, [lat, lat, lat]) for dt, lat in beats])
    assert [n for _, _, notes in history for n in notes] == [] and final == {}


@given(st.lists(STEP, min_size=2, max_size=30), st.integers(1, 29))
def test_a_restart_with_the_stored_alerts_neither_repeats_nor_forgets(steps, cut):
    """Stopping after any check and going on from the stored alerts gives the same notices."""
    cut = min(cut, len(steps) - 1)
    whole, final = run(steps)
    _, stored = run(steps[:cut])
    stored = {k: Alert.from_dict(a.to_dict()) for k, a in stored.items()}  # through JSON fields
    # a second monitor goes on from the stored alerts with the same observations
    second_alerts, notes = stored, []
    for t, obs, _ in whole[cut:]:
        second_alerts, n = evaluate("demo", second_alerts, obs, t, T0, TH)
        notes.append(n)
    assert [[(x.alert.key, x.event) for x in n] for n in notes] == [
        [(x.alert.key, x.event) for x in n] for _, _, n in whole[cut:]
    ]
    assert set(second_alerts) == set(final)


def test_stale_alert_content():
    obs = [Observation("shop", "orders", T0 - 610_000, 1.5)]
    alerts, notes = evaluate("demo", {}, obs, T0, T0 - 3_600_000, TH)
    (note,) = notes
    assert note.event == "alert"
    assert alerts["shop.orders.stale"].to_dict() == {
        "ds": "demo",
        "schema": "shop",
        "table": "orders",
        "kind": "stale",
        "since_ms": T0 - 610_000,
        "notified_ms": None,
        "age_s": 610.0,
        "latency_s": 1.5,
        "message": "demo: shop.orders: no heartbeat for 610 s (timeout 600 s)",
    }


def test_never_seen_table_counts_from_the_start():
    obs = [Observation("shop", "orders")]
    assert evaluate("demo", {}, obs, T0 + 600_000, T0, TH)[1] == []
    alerts, notes = evaluate("demo", {}, obs, T0 + 601_000, T0, TH)
    assert [n.alert.message for n in notes] == ["demo: shop.orders: never seen (timeout 600 s)"]
    assert alerts["shop.orders.stale"].since_ms == T0


def test_open_stale_alert_stays_open_without_a_point():
    alerts, _ = evaluate("demo", {}, [Observation("shop", "orders")], T0 + 700_000, T0, TH)
    # a restarted monitor (new start) with no point yet: no evidence, no recovery
    again, notes = evaluate("demo", alerts, [Observation("shop", "orders")], T0 + 710_000, T0 + 705_000, TH)
    assert notes == [] and set(again) == {"shop.orders.stale"}


def test_latency_alert_and_recovery():
    slow = [Observation("shop", "orders", T0, 301.0)]
    alerts, notes = evaluate("demo", {}, slow, T0 + 1000, T0, TH)
    assert [(n.event, n.alert.kind, n.alert.message) for n in notes] == [
        ("alert", "latency", "demo: shop.orders: end-to-end latency 301.0 s (threshold 300 s)")
    ]
    alerts, notes = evaluate(
        "demo", alerts, [Observation("shop", "orders", T0 + 2000, 2.0)], T0 + 3000, T0, TH
    )
    assert [(n.event, n.alert.kind, n.alert.latency_s) for n in notes] == [("recovery", "latency", 2.0)]
    assert alerts == {}


def test_alert_of_a_table_no_longer_monitored_is_recovered():
    alerts, _ = evaluate("demo", {}, [Observation("shop", "gone")], T0 + 601_000, T0, TH)
    alerts, notes = evaluate("demo", alerts, [], T0 + 602_000, T0, TH)
    assert [(n.event, n.alert.message) for n in notes] == [
        ("recovery", "demo: shop.gone: no longer monitored")
    ]
    assert alerts == {}
