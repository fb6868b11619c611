"""Running a stage until it is stopped: SIGTERM/SIGINT, a watchdog, and the exit codes (docs/errors.md).

Every long-running stage (extractor, dispatcher, appender, full puller, heartbeat) runs inside a
``Lifecycle``::

    with Lifecycle("appender", ds, cfg.path) as life:
        query = job.start(...)
        return life.await_query(query, "APPENDER_FAILED")

- **SIGTERM / SIGINT** set ``life.stopping`` (the stage's loop stops at its next check) and run the
  ``on_stop`` callbacks on a helper thread, never inside the signal handler. ``interrupt=True`` also
  raises ``KeyboardInterrupt`` in the main thread, once (the full puller's request loop relies on it).
- **The watchdog** (a daemon thread, one check a second) notices that the stage's Spark JVM is gone
  (a driver started by spark-submit is the JVM's child: its parent changes when the JVM dies) or that
  its configuration file was removed (missing for ``CONFIG_GONE_S`` in a row). The JVM cannot be
  replaced: the driver prints ``STAGE_JVM_GONE`` (also into the JVM's log file, which its own output
  pipe no longer reaches) and exits 5 at once; a driver already stopping (SIGTERM to the whole process
  group reaches the JVM too) gets ``JVM_GONE_STOP_S`` to finish. A removed configuration stops the stage
  like SIGTERM, with exit code 6 (``STAGE_CONFIG_GONE``).
- **Liveness**: given ``zookeeper=`` (the stages pass ``cfg.endpoints.zookeeper``), the process announces
  itself with an ephemeral node from ``__enter__`` to ``__exit__`` (dbuslib/liveness.py): the console and
  ``dbus status`` tell a running stage from a down one by it. Not in a process the stage does not own (a
  test calling ``main()`` in-process).
- **A real-time query stops at a committed point**: ``await_query`` ends its running batch first
  (``dbuslib.spark.stop_query``, docs/realtime.md#stopping), so a planned stop replays nothing.
- **A stop is bounded.** ``STOP_GRACE_S`` after a stop began (plus the time a real-time query's batch may
  take), a process still alive (a thread that does not end, a client that does not close, a call into a
  JVM that is going away) prints ``STAGE_STOP_TIMEOUT`` with every thread's stack and exits at once: a
  stopped stage never lingers.

Outside the main thread or outside a spark-submit driver (a test calling ``main()`` in-process) the
signal handlers are left alone and the JVM is not watched; ``__exit__`` restores what it replaced.
"""

from __future__ import annotations

import faulthandler
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

# Exit codes of the stages: their one home is dbuslib/errors.py (docs/errors.md).
from dbuslib.errors import (
    EXIT_CONFIG,
    EXIT_CONFIG_GONE,
    EXIT_DEPOSED,
    EXIT_FAILED,
    EXIT_JVM_GONE,
    EXIT_STOPPED,
    EXIT_UNREACHABLE,
)

if TYPE_CHECKING:
    from dbuslib.config import ZooKeeperEndpoint
    from dbuslib.errors import EndpointError
    from dbuslib.liveness import Announcer

__all__ = [
    "EXIT_CONFIG",
    "EXIT_CONFIG_GONE",
    "EXIT_DEPOSED",
    "EXIT_FAILED",
    "EXIT_JVM_GONE",
    "EXIT_STOPPED",
    "EXIT_UNREACHABLE",
    "Lifecycle",
    "first_line",
    "spark_submit_parent",
]

CHECK_S = 1.0  # watchdog period, and how long awaitTermination blocks between two looks at ``stopping``
CONFIG_GONE_S = 5.0  # a configuration file replaced by delete + write is not "gone"
JVM_GONE_STOP_S = 5.0  # a driver stopping while its JVM went away (SIGTERM to the group) ends this soon
STOP_GRACE_S = 20.0  # a stop that takes longer ends the process (a real-time query's batch: more)


def first_line(error: BaseException | str) -> str:
    """The first non-empty line of an error's text (a StreamingQueryException's runs to pages)."""
    text = str(error)
    return next((ln.strip() for ln in text.splitlines() if ln.strip()), type(error).__name__)


def spark_submit_parent() -> int | None:
    """The pid of the spark-submit JVM that started this Python driver, or None (not under spark-submit:
    PySpark then launches its own JVM as a child, or none at all)."""
    if "PYSPARK_GATEWAY_PORT" not in os.environ:
        return None
    ppid = os.getppid()
    try:
        exe = os.readlink(f"/proc/{ppid}/exe")
    except OSError:
        return ppid
    return ppid if Path(exe).name.startswith("java") else None


class Lifecycle:
    """Signals, watchdog and bounded stop of one stage process; see the module docstring."""

    def __init__(
        self,
        stage: str,
        ds: str,
        config_path: Path | str | None = None,
        *,
        interrupt: bool = False,
        jvm_pid: int | None = None,
        watch_jvm: bool = True,
        zookeeper: ZooKeeperEndpoint | None = None,
    ) -> None:
        self.stage, self.ds, self.interrupt = stage, ds, interrupt
        self.config_path = Path(config_path) if config_path is not None else None
        self.jvm_pid = jvm_pid if jvm_pid is not None else (spark_submit_parent() if watch_jvm else None)
        self.stopping = threading.Event()
        self.reason = ""  # "SIGTERM", "SIGINT", "STAGE_CONFIG_GONE"
        self.code = EXIT_STOPPED
        self._on_stop: list[Callable[[], Any]] = []
        self._saved: dict[int, Any] = {}
        self._done = threading.Event()
        self._log_copy = self._jvm_log() if self.jvm_pid else None
        # never end a test process that called a stage's main() in-process
        self.owns_process = self.jvm_pid is not None or "pytest" not in sys.modules
        self._zookeeper = zookeeper
        self._announcer: Announcer | None = None
        self.refusal = ""  # the line of an endpoint that refused the stage's identity (liveness's ZooKeeper)
        self.grace_s = STOP_GRACE_S  # await_query adds the time a real-time query's planned stop may take

    # ------------------------------------------------------------------ context

    def __enter__(self) -> Lifecycle:
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGTERM, signal.SIGINT):
                self._saved[sig] = signal.signal(sig, self._on_signal)
        threading.Thread(target=self._watch, name=f"dbus-lifecycle-{self.stage}", daemon=True).start()
        if self._zookeeper is not None and self.owns_process:
            from dbuslib.liveness import Announcer

            announcer = Announcer(self._zookeeper, self.ds, self.stage, on_refused=self._refused)
            self._announcer = announcer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        if self._announcer is not None:
            self._announcer.stop()
            self._announcer = None
        for sig, handler in self._saved.items():
            signal.signal(sig, handler)
        self._saved.clear()

    def start(self) -> Lifecycle:
        """``__enter__`` for a loop that cannot be indented into a ``with`` block; ``close()`` ends it."""
        return self.__enter__()

    def close(self) -> None:
        self.__exit__(None, None, None)

    def on_stop(self, callback: Callable[[], Any]) -> None:
        """``callback()`` runs (on a helper thread, errors ignored) when the stage is asked to stop."""
        self._on_stop.append(callback)

    def _refused(self, err: EndpointError) -> None:
        """ZooKeeper refused the stage's identity (the liveness client's first request): not transient, so
        the stage stops as if it had met the refusal itself, ``<stage>: <CODE>: <message>`` its last line
        (``await_query``) and the error's exit code (3)."""
        from dbuslib.errors import error_code, exit_code

        self.refusal = f"{self.stage}: {error_code(err)}: {err}"
        self.request_stop(error_code(err), exit_code(err))

    # ------------------------------------------------------------------ stopping

    def _on_signal(self, signum: int, _frame: Any) -> None:
        first = not self.stopping.is_set()
        self.request_stop(signal.Signals(signum).name, EXIT_STOPPED)
        if first and self.interrupt and threading.current_thread() is threading.main_thread():
            raise KeyboardInterrupt

    def request_stop(self, reason: str, code: int) -> None:
        """Begin the stop (once): ``stopping`` is set, the callbacks run, and the grace timer starts."""
        if self.stopping.is_set():
            return
        self.reason, self.code = reason, code
        self.stopping.set()
        # not from the signal handler itself: a handler that writes to stderr while the interrupted code
        # was writing to it raises "reentrant call"
        threading.Thread(target=self._stop_hooks, name=f"dbus-stop-{self.stage}", daemon=True).start()

    def _stop_hooks(self) -> None:
        self.say(f"{self.stage}: {self.ds}: stopping ({self.reason})")
        for callback in self._on_stop:
            try:
                callback()
            except Exception:
                pass
        deadline = time.monotonic() + self.grace_s
        while time.monotonic() < deadline:
            if self._done.is_set() and not self.owns_process:
                return
            time.sleep(0.2)
        if self.owns_process:  # still here: a thread that does not end, a close that hangs, a dead JVM
            self.say(
                f"{self.stage}: STAGE_STOP_TIMEOUT: {self.ds}: still running {self.grace_s:.0f} s after "
                f"the stop ({self.reason}); threads: {_thread_names()}; exiting"
            )
            self._dump_stacks()
            os._exit(self.code or EXIT_FAILED)

    # ------------------------------------------------------------------ watchdog

    def _watch(self) -> None:
        missing_since = jvm_gone_since = None
        while True:  # a process that owns itself is watched until it ends, shutdown included
            time.sleep(CHECK_S)
            if self._done.is_set() and not self.owns_process:
                return
            if self.jvm_pid is not None and os.getppid() != self.jvm_pid:
                if not self.stopping.is_set():
                    self.die(
                        EXIT_JVM_GONE,
                        f"{self.stage}: STAGE_JVM_GONE: {self.ds}: the Spark JVM (pid "
                        f"{self.jvm_pid}) is gone; exiting",
                    )
                # stopping with the JVM (SIGTERM to the process group): a few seconds to finish, no more
                jvm_gone_since = jvm_gone_since or time.monotonic()
                if time.monotonic() - jvm_gone_since >= JVM_GONE_STOP_S:
                    self.die(self.code, f"{self.stage}: {self.ds}: stopped; the Spark JVM is gone too")
            if self.config_path is not None and not self.config_path.exists():
                missing_since = missing_since or time.monotonic()
                if time.monotonic() - missing_since >= CONFIG_GONE_S:
                    self.say(f"{self.stage}: STAGE_CONFIG_GONE: {self.ds}: {self.config_path} was removed")
                    self.request_stop("STAGE_CONFIG_GONE", EXIT_CONFIG_GONE)
            else:
                missing_since = None

    def die(self, code: int, message: str) -> None:
        """Print ``message`` and end the process now (no cleanup: what it would talk to is gone); in a
        process the stage does not own (a test), only stop."""
        self.say(message)
        if self.owns_process:
            os._exit(code)
        self.request_stop(message, code)

    # ------------------------------------------------------------------ output

    def say(self, message: str) -> None:
        """A line on stderr and, when stderr is a pipe to a JVM that may be dead, in the JVM's log too (a
        JSON line when ``logging.format`` is ``json``)."""
        from dbuslib.logs import final_line

        message = final_line(message, stage=self.stage)
        for out in self._outputs():
            if out is None:
                continue
            try:
                out.write(message + "\n")
                out.flush()
            except (OSError, ValueError):
                pass

    def _dump_stacks(self) -> None:
        for out in self._outputs():
            try:
                if out is not None:
                    faulthandler.dump_traceback(out, all_threads=True)
            except (OSError, ValueError):
                pass

    def _outputs(self) -> tuple[TextIO | None, ...]:
        """Where a line goes: stderr, and the JVM's log unless stderr already lands in that file: stderr
        is that file, or the JVM still runs with that file as its stdout, which carries the driver's
        stderr (spark-submit). Written once so, and never appended behind a live JVM's back: a JVM whose
        log was opened without O_APPEND writes over what others appended."""
        copy = self._log_copy
        if copy is None:
            return (sys.stderr,)
        target = os.path.realpath(copy.name)
        if target in (_fd_target("self", 2), _fd_target(str(self.jvm_pid), 1)):
            return (sys.stderr,)
        return (sys.stderr, copy)

    def _jvm_log(self) -> TextIO | None:
        """The file the spark-submit JVM writes its stderr to (the stage's log), opened for appending;
        None when it is not a regular file (a terminal, a pipe)."""
        try:
            target = os.readlink(f"/proc/{self.jvm_pid}/fd/2")
        except OSError:
            return None
        if not target.startswith("/") or not Path(target).is_file():
            return None
        try:
            return open(target, "a")
        except OSError:
            return None

    # ------------------------------------------------------------------ a streaming query

    def await_query(self, query: Any, failed_code: str) -> int:
        """Waits for ``query`` until it ends or the stage is asked to stop (then stops it): 0 stopped,
        1 with ``<stage>: <failed_code>: <ds>: <first line>`` printed when the query failed (3 and
        ENDPOINT_RETRIES_EXHAUSTED when an endpoint stayed down past its retries, 3 and KAFKA_AUTH_FAILED
        when Kafka refused the stage's identity), 5 when the
        JVM went away under a running query, 6 when the configuration file was removed."""
        from py4j.protocol import Py4JError
        from pyspark.errors import StreamingQueryException

        from dbuslib.spark import planned_stop_s, stop_query

        try:
            self.grace_s = STOP_GRACE_S + planned_stop_s(query)  # a real-time batch is finished first
            while not self.stopping.is_set():
                if query.awaitTermination(CHECK_S):
                    break
            if self.stopping.is_set():
                stop_query(query, self.say)
            error = query.exception()
        except StreamingQueryException as e:
            error = e
        except (Py4JError, ConnectionError) as e:  # the JVM is gone (SIGTERM to the group, or killed): py4j
            return self._jvm_gone(e)  # cannot reach it ("Connection refused" on a new socket)
        except Exception as e:
            if self.jvm_pid is not None and os.getppid() != self.jvm_pid:
                return self._jvm_gone(e)
            error = e
        if error is not None and not self.stopping.is_set():
            from dbuslib.kafka import KafkaAuthFailed, refused_in
            from dbuslib.retry import RetriesExhausted, gave_up_in

            refusal = refused_in(error)
            if refusal is not None:  # Kafka refused the stage's identity (or its certificate): no retry helps
                self.say(f"{self.stage}: {KafkaAuthFailed.code}: {self.ds}: {refusal}")
                return EXIT_UNREACHABLE
            if gave_up_in(error):  # an endpoint stayed down past endpoints.retry.budget_s in a task
                self.say(f"{self.stage}: {RetriesExhausted.code}: {self.ds}: {first_line(error)}")
                return EXIT_UNREACHABLE
            self.say(f"{self.stage}: {failed_code}: {self.ds}: {first_line(error)}")
            return EXIT_FAILED
        if self.refusal:
            self.say(self.refusal)
        return self.code

    def _jvm_gone(self, error: BaseException) -> int:
        if self.stopping.is_set():
            return self.code
        self.say(f"{self.stage}: STAGE_JVM_GONE: {self.ds}: {first_line(error)}")
        return EXIT_JVM_GONE


def _thread_names() -> str:
    return ", ".join(sorted(t.name for t in threading.enumerate() if t is not threading.current_thread()))


def _fd_target(pid: str, fd: int) -> str | None:
    """What ``/proc/<pid>/fd/<fd>`` points at (a file's real path, ``pipe:[...]``), None when unknown."""
    try:
        target = os.readlink(f"/proc/{pid}/fd/{fd}")
    except OSError:
        return None
    return os.path.realpath(target) if target.startswith("/") else target
