"""The control-topic listener (dbuslib/control.py): a record goes to its type's handler, an unknown type is
logged and skipped, a record that does not parse goes to the stage's own ``bad``, another stage's record
is skipped unread."""

from __future__ import annotations

import logging
from types import SimpleNamespace

from dbuslib.control import ControlRecord, Dispatcher, poll
from ums.control import ControlType, new_control_message, to_json

RELOAD = to_json(new_control_message(ControlType.APPENDER_RELOAD_CONFIG, "test", {"ds": "demo"})).encode()
PULL = to_json(new_control_message(ControlType.FULL_DATA_PULL_REQ, "test", {"SEQNO": "1"})).encode()


def rec(value, key=None, offset=3) -> ControlRecord:
    return ControlRecord("demo_ctrl", 0, offset, key, value)


def dispatcher(**kw) -> Dispatcher:
    return Dispatcher(
        "test demo",
        {ControlType.APPENDER_RELOAD_CONFIG: lambda m, r: ("reload", m.payload["ds"], r.where)},
        bad=lambda r, e: ("bad", e.code, r.where),
        **kw,
    )


def test_a_message_goes_to_its_types_handler():
    assert dispatcher().dispatch(rec(RELOAD)) == ("reload", "demo", "demo_ctrl[0]@3")


def test_an_unknown_type_is_logged_and_skipped(caplog):
    with caplog.at_level(logging.INFO, logger="dbuslib.control"):
        assert dispatcher().dispatch(rec(PULL, offset=9)) is None
    assert "demo_ctrl[0]@9: FULL_DATA_PULL_REQ" in caplog.text and "skipped" in caplog.text


def test_other_takes_what_has_no_handler():
    d = dispatcher(other=lambda m, r: ("other", m.type.value))
    assert d.dispatch(rec(PULL)) == ("other", "FULL_DATA_PULL_REQ")


def test_a_record_that_does_not_parse_goes_to_the_stages_bad():
    for value in (None, b"garbage", b"[" * 100, b'{"id": 1}'):
        assert dispatcher().dispatch(rec(value)) == ("bad", "UMS_BAD_CONTROL", "demo_ctrl[0]@3")


def test_another_stages_record_is_skipped_unread():
    d = dispatcher(accepts=lambda r: (r.key or b"").startswith(b"FULL_DATA_"))
    assert d.dispatch(rec(b"garbage", key=b"APPENDER_RELOAD_CONFIG")) is None
    assert d.dispatch(rec(b"garbage", key=b"FULL_DATA_PULL_REQ")) == (
        "bad",
        "UMS_BAD_CONTROL",
        "demo_ctrl[0]@3",
    )


def test_poll_gives_records_with_their_coordinates():
    class Consumer:
        def poll(self, timeout_ms, **kw):
            assert (timeout_ms, kw) == (100, {"max_records": 1})
            return {"tp": [SimpleNamespace(topic="demo_ctrl", partition=2, offset=7, key=b"K", value=b"V")]}

    [r] = poll(Consumer(), 100, max_records=1)
    assert (r.where, r.key, r.value) == ("demo_ctrl[2]@7", b"K", b"V")
    assert ControlRecord("t", -1, -1, None, None, at="replay").where == "replay"


def test_listen_handles_every_record_and_rides_a_failed_poll(caplog):
    """``control.listen``: a poll that raises (Kafka gone) is logged and retried after a backoff; every
    record of the polls that work reaches ``handle`` in order; ``stopping`` ends the loop."""
    import threading

    from dbuslib import control

    stopping = threading.Event()
    polls = iter(
        [
            RuntimeError("broker down"),
            [SimpleNamespace(topic="t", partition=0, offset=7, key=b"k", value=b"v")],
        ]
    )
    seen = []

    class Consumer:
        def poll(self, timeout_ms, **_):
            got = next(polls, None)
            if got is None:
                stopping.set()
                return {}
            if isinstance(got, Exception):
                raise got
            return {0: got}

    waits = []
    stopping.wait = lambda s=None: waits.append(s) or False  # no real sleep
    with caplog.at_level(logging.WARNING):
        control.listen(Consumer(), "test demo", stopping, seen.append, 5)
    assert [(r.offset, r.value) for r in seen] == [(7, b"v")]
    assert (
        waits == [0.5]
        and "test demo: reading the control topic failed (RuntimeError: broker down)" in caplog.text
    )
