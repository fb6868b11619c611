"""Work that a request must not do on its own thread: a rules preview (or a viewer's masked sample) runs the
rules' regexes on lines anyone can paste, and Python's ``re`` backtracks in C holding the GIL, so one
catastrophic match on a request thread stops every thread of the console (docs/console.md, Log rules).

``Budget.run(user, fn, *args)`` runs ``fn(*args, mark=mark)`` in a process of its own, forked from a
forkserver that imported the rule engine once (a start costs milliseconds, not an interpreter), and waits
for its answer at most ``seconds``: past that the process is killed and ``OverBudget`` says where it was
(the last ``mark(record, group)`` the work made). At most ``slots`` run at once and ``per_user`` of one
user; more is refused at once with ``Busy`` (the request thread does not queue). The request thread only
waits on a pipe, which releases the GIL: the console's other requests go on. ``Slots`` alone bounds other
slow work of a request the same way (the rules' sample: a read of Kafka of up to 5 s).

The processes are ``multiprocessing``'s ``forkserver`` ones: not forked from the console's threads (a fork
of a threaded process may copy a held lock), and killable, unlike a thread.
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import sys
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

# what the forkserver imports once, before it forks a worker: the rule engine and the preview
PRELOAD = ["console.rules", "cli.logtest", "logprocessor.adapters", "logprocessor.operators"]
_CONTEXT_LOCK = threading.Lock()
_context: Any = None


class OverBudget(Exception):
    """The work ran past its budget and was killed; ``where`` is its last mark, ``seconds`` the budget."""

    def __init__(self, seconds: float, where: tuple[int, int]) -> None:
        super().__init__(f"over budget: took more than {seconds:g} s")
        self.seconds, self.where = seconds, where


class Busy(Exception):
    """No slot: too many runs at once (of everyone, or of this user)."""


class Failed(Exception):
    """The work raised (its type and message) or its process died without an answer."""


def context() -> Any:
    """The forkserver context, its preload set once per process.

    A process started from a script (``dbus``, the console's entry point, is one) has its ``__main__``
    run again by every worker before the work (multiprocessing's "spawn" fix-up, which forkserver
    workers go through too, and Python 3.11's forkserver never preloads it): the whole CLI imported per
    preview, seconds of the budget. So the script's ``__main__`` loses its ``__file__`` here, once: the
    workers then leave ``__main__`` alone (the work is in ``console``, never in the script)."""
    global _context
    with _CONTEXT_LOCK:
        if _context is None:
            main = sys.modules.get("__main__")
            if getattr(main, "__spec__", None) is None and hasattr(main, "__file__"):
                del main.__file__  # type: ignore[union-attr]
            ctx = mp.get_context("forkserver")
            ctx.set_forkserver_preload(PRELOAD)
            _context = ctx
        return _context


def _child(sender: Any, marks: Any, fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
    def mark(record: int, group: int) -> None:
        marks[0], marks[1] = record, group

    try:
        answer: tuple[bool, Any] = (True, fn(*args, mark=mark))
    except Exception as e:  # the parent raises it as Failed, with the type and message
        answer = (False, f"{type(e).__name__}: {e}")
    sender.send(answer)
    sender.close()


def run_killable(fn: Callable[..., Any], args: tuple[Any, ...], seconds: float) -> Any:
    """``fn(*args, mark=...)`` in a forkserver process; its answer, or OverBudget after ``seconds`` (the
    process killed), or Failed. ``seconds`` counts from the process's start (not the forkserver's)."""
    ctx = context()
    marks = ctx.Array("i", 2, lock=False)
    receiver, sender = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child, args=(sender, marks, fn, args), daemon=True, name="dbus-console-budget")
    proc.start()
    sender.close()
    try:
        if not receiver.poll(seconds):
            proc.kill()
            raise OverBudget(seconds, (marks[0], marks[1]))
        try:
            ok, value = receiver.recv()
        except EOFError:
            proc.join(5)
            msg = f"the preview's process ended without an answer (exit code {proc.exitcode})"
            raise Failed(msg) from None
    finally:
        if proc.is_alive():
            proc.kill()
        proc.join(5)
        receiver.close()
    if not ok:
        raise Failed(value)
    return value


class Slots:
    """At most ``total`` things at once, ``per_user`` of one user (``what`` names them in a refusal)."""

    def __init__(self, total: int, per_user: int, what: str = "previews") -> None:
        self.total, self.per_user, self.what = total, per_user, what
        self._lock = threading.Lock()
        self._running: Counter[str] = Counter()

    def running(self, user: str | None = None) -> int:
        with self._lock:
            return self._running.total() if user is None else self._running[user]

    @contextlib.contextmanager
    def take(self, user: str) -> Iterator[None]:
        """One slot for the block; Busy at once when there is none."""
        with self._lock:
            if self._running.total() >= self.total:
                msg = f"busy: {self.total} {self.what} are running; try again in a few seconds"
                raise Busy(msg)
            if self._running[user] >= self.per_user:
                msg = f"busy: you have {self.what} running already (at most {self.per_user} at once)"
                raise Busy(msg)
            self._running[user] += 1
        try:
            yield
        finally:
            with self._lock:
                self._running[user] -= 1


class Budget:
    """At most ``slots`` killable runs at once, ``per_user`` of one user, each at most ``seconds``."""

    def __init__(self, seconds: float, slots: int = 2, per_user: int = 1) -> None:
        self.seconds = seconds
        self.slots = Slots(slots, per_user)

    def run(self, user: str, fn: Callable[..., Any], *args: Any) -> Any:
        """``run_killable`` in a slot; Busy when there is none."""
        with self.slots.take(user):
            return run_killable(fn, args, self.seconds)

    def warm(self) -> None:
        """Start the forkserver (its imports) in the background, so a first preview does not wait for it."""
        threading.Thread(target=_warm, name="dbus-console-forkserver", daemon=True).start()


def _warm() -> None:
    with contextlib.suppress(Exception):  # a first preview tries again and says why
        run_killable(_nothing, (), 60.0)


def _nothing(*, mark: Callable[[int, int], None]) -> None:
    return None
