"""dbuslib/lifecycle.py: signals, the config watchdog, and a query's end mapped to the stage's exit code."""

from __future__ import annotations

import os
import signal
import threading

import pytest
from hypothesis import given
from hypothesis import strategies as st
from py4j.protocol import Py4JNetworkError
from pyspark.errors import StreamingQueryException

from dbuslib import lifecycle
from dbuslib.lifecycle import (
    EXIT_CONFIG_GONE,
    EXIT_FAILED,
    EXIT_JVM_GONE,
    EXIT_STOPPED,
    Lifecycle,
    first_line,
)


class FakeQuery:
    """awaitTermination returns False ``runs`` times, then ends as told."""

    def __init__(
        self, runs: int = 0, error: BaseException | None = None, raises: BaseException | None = None
    ):
        self.runs, self.error, self.raises, self.stopped = runs, error, raises, False

    def awaitTermination(self, timeout: float) -> bool:
        if self.raises is not None:
            raise self.raises
        if self.stopped:
            return True
        self.runs -= 1
        return self.runs < 0

    def stop(self) -> None:
        self.stopped = True

    def exception(self) -> BaseException | None:
        return self.error


@given(st.text())
def test_first_line_is_one_line_of_the_text(text):
    line = first_line(text)
    assert "\n" not in line and "\r" not in line
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    assert line == (lines[0] if lines else "str")


def test_a_query_that_ends_cleanly_exits_0():
    with Lifecycle("dispatcher", "ds", watch_jvm=False) as life:
        assert life.await_query(FakeQuery(runs=2), "DISPATCH_FAILED") == EXIT_STOPPED


def test_a_failed_query_prints_its_code_and_the_first_line_and_exits_1(capsys):
    error = StreamingQueryException(
        message="[STREAM_FAILED] Query [id = 1] terminated with exception: boom\n"
        "=== Streaming Query ===\nlots more"
    )
    with Lifecycle("appender", "demo", watch_jvm=False) as life:
        assert life.await_query(FakeQuery(raises=error), "APPENDER_FAILED") == EXIT_FAILED
    err = capsys.readouterr().err
    assert (
        "appender: APPENDER_FAILED: demo: [STREAM_FAILED] Query [id = 1] terminated with exception: boom\n"
        in err
    )
    assert "Streaming Query" not in err


def test_a_query_that_ended_with_an_exception_without_raising_exits_1(capsys):
    with Lifecycle("dispatcher", "demo", watch_jvm=False) as life:
        code = life.await_query(FakeQuery(error=RuntimeError("bad batch\ntrace")), "DISPATCH_FAILED")
    assert code == EXIT_FAILED
    assert "dispatcher: DISPATCH_FAILED: demo: bad batch\n" in capsys.readouterr().err


def test_sigterm_stops_the_query_and_exits_0():
    query = FakeQuery(runs=10**9)
    with Lifecycle("dispatcher", "demo", watch_jvm=False) as life:
        os.kill(os.getpid(), signal.SIGTERM)
        assert life.await_query(query, "DISPATCH_FAILED") == EXIT_STOPPED
    assert query.stopped and life.reason == "SIGTERM"


def test_the_signal_handlers_are_given_back():
    before = signal.getsignal(signal.SIGTERM)
    with Lifecycle("extractor", "demo", watch_jvm=False):
        assert signal.getsignal(signal.SIGTERM) is not before
    assert signal.getsignal(signal.SIGTERM) is before


def test_interrupt_raises_keyboard_interrupt_once_and_runs_the_stop_callbacks():
    called = threading.Event()
    life = Lifecycle("fullpuller", "demo", interrupt=True, watch_jvm=False).start()
    life.on_stop(called.set)
    try:
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGTERM)
        os.kill(os.getpid(), signal.SIGTERM)  # a second one does not interrupt the shutdown
    finally:
        life.close()
    assert called.wait(5) and life.code == EXIT_STOPPED


def test_a_jvm_gone_under_a_running_query_exits_5(capsys):
    with Lifecycle("appender", "demo", watch_jvm=False) as life:
        code = life.await_query(
            FakeQuery(raises=Py4JNetworkError("Answer from Java side is empty")), "APPENDER_FAILED"
        )
    assert code == EXIT_JVM_GONE
    assert "appender: STAGE_JVM_GONE: demo: Answer from Java side is empty" in capsys.readouterr().err


def test_a_removed_config_file_stops_the_stage_with_6(tmp_path, monkeypatch):
    monkeypatch.setattr(lifecycle, "CHECK_S", 0.05)
    monkeypatch.setattr(lifecycle, "CONFIG_GONE_S", 0.2)
    path = tmp_path / "dbus.yaml"
    path.write_text("x")
    with Lifecycle("heartbeat", "demo", path, watch_jvm=False) as life:
        assert not life.stopping.wait(0.5)
        path.unlink()
        assert life.stopping.wait(10)
    assert life.code == EXIT_CONFIG_GONE and life.reason == "STAGE_CONFIG_GONE"


def test_a_config_file_back_within_the_grace_is_not_gone(tmp_path, monkeypatch):
    monkeypatch.setattr(lifecycle, "CHECK_S", 0.05)
    monkeypatch.setattr(lifecycle, "CONFIG_GONE_S", 1.0)
    path = tmp_path / "dbus.yaml"
    path.write_text("x")
    with Lifecycle("heartbeat", "demo", path, watch_jvm=False) as life:
        path.unlink()
        path.write_text("y")  # replaced by delete + write
        assert not life.stopping.wait(1.5)


def test_a_test_process_is_never_ended_by_the_lifecycle():
    assert not Lifecycle("dispatcher", "demo", watch_jvm=False).owns_process


def test_any_other_error_of_the_query_is_its_failure(capsys):
    with Lifecycle("appender", "demo", watch_jvm=False) as life:
        assert life.await_query(FakeQuery(raises=ValueError("odd\nmore")), "APPENDER_FAILED") == EXIT_FAILED
    assert "appender: APPENDER_FAILED: demo: odd\n" in capsys.readouterr().err


def test_a_refused_connection_to_the_gateway_is_the_jvm_gone(capsys):
    with Lifecycle("dispatcher", "demo", watch_jvm=False) as life:
        code = life.await_query(
            FakeQuery(raises=ConnectionRefusedError(111, "Connection refused")), "DISPATCH_FAILED"
        )
    assert code == EXIT_JVM_GONE
    assert "DISPATCH_FAILED" not in capsys.readouterr().err


def test_a_query_whose_task_ran_out_of_retries_exits_3_with_that_code(capsys):
    error = StreamingQueryException(
        message="[STREAM_FAILED] Query [id = 1] terminated with exception: Job "
        "aborted ... dbuslib.retry.RetriesExhausted: ENDPOINT_RETRIES_"
        "EXHAUSTED: meta store history: 12 attempts in 60.1 s"
    )
    with Lifecycle("appender", "demo", watch_jvm=False) as life:
        assert life.await_query(FakeQuery(raises=error), "APPENDER_FAILED") == 3
    assert "appender: ENDPOINT_RETRIES_EXHAUSTED: demo: [STREAM_FAILED]" in capsys.readouterr().err
