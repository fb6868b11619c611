"""Running DBus's stages as the operator does, as processes: the demo, the benchmarks and tests use it.

- ``extractor``: ``python -m extractor --config C run --source DS``
- ``dispatcher`` / ``appender`` / ``fullpuller``: ``dbus submit <stage> --source DS`` (cli/submit.py:
  spark-submit with the master, jars, DBus's code zip, settings and the stage's resources)
- ``heartbeat``: ``python -m heartbeat --config C run --source DS`` (writer and monitor)
- ``logprocessor``: ``dbus submit logprocessor --source DS`` (DS a log source)

Each process gets its own session (``kill -9`` of its group takes the driver and its JVM together), and
its output goes to ``<log_dir>/<stage>.log``. ``stop`` returns once every process of the stage's group is
gone (SIGTERM, then SIGKILL after the timeout), so nothing outlives a demo or a benchmark.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from cli import submit
from dbuslib.config import DbusConfig
from dbuslib.errors import DbusError

REPO = Path(__file__).resolve().parent.parent
STAGES = ("extractor", "dispatcher", "appender", "fullpuller", "heartbeat", "logprocessor")


class StageError(DbusError):
    """A stage process exited or did not get ready; the message has the tail of its log."""

    code = "STAGE_FAILED"


def command(stage: str, cfg: DbusConfig, ds: str) -> list[str]:
    """The command line that starts ``stage`` for source ``ds`` with ``cfg``'s file."""
    if stage == "extractor":
        return [sys.executable, "-m", "extractor", "--config", str(cfg.path), "run", "--source", ds]
    if stage == "heartbeat":  # the writer and the monitor, one process
        return [sys.executable, "-m", "heartbeat", "--config", str(cfg.path), "run", "--source", ds]
    if stage not in STAGES:
        msg = f"unknown stage {stage!r}; known: {', '.join(STAGES)}"
        raise ValueError(msg)
    return submit.command(cfg, stage, ds)


def environment(cfg: DbusConfig) -> dict[str, str]:
    """spark-submit's environment (``dbus submit``'s): the driver, and a local master's executors, run this
    interpreter."""
    return submit.environment(cfg)


def private_rsyslog(command: str, home: Path, dbus_config: Path, down_s: float = 2) -> None:
    """``bash stack/stack.sh <command> rsyslog`` (``up``, ``restart``, ``down``) for an rsyslogd of its own
    beside the stack's: its work directory, pid and logs in ``home`` (``RSYSLOG_HOME``), shipping the log
    sources of the DBus configuration ``dbus_config`` (``RSYSLOG_DBUS_CONFIG``); ``up`` creates their raw
    topics, ``restart`` keeps it down ``down_s`` seconds (``DOWN_S``). Tests and the log latency bench run
    one each, so the stack's rsyslog and its topics are never touched."""
    env = {
        **os.environ,
        "RSYSLOG_HOME": str(home),
        "RSYSLOG_DBUS_CONFIG": str(dbus_config),
        "DOWN_S": f"{down_s:g}",
    }
    subprocess.run(["bash", str(REPO / "stack" / "stack.sh"), command, "rsyslog"], env=env, check=True)


def group_members(pgid: int) -> list[int]:
    """Live processes (not zombies) of process group ``pgid``."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            found.append(int(stat.parent.name))
    return found


def processes_naming(*words: str) -> dict[int, str]:
    """Live processes (pid -> command line) of this user whose command line contains one of ``words``
    (a config file's path, a source name): what a stopped stage must not leave behind."""
    found = {}
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        pid = int(cmdline.parent.name)
        try:
            text = cmdline.read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
            state = (cmdline.parent / "stat").read_text().rsplit(")", 1)[1].split()[0]
            mine = cmdline.parent.stat().st_uid == os.getuid()
        except OSError:
            continue
        if mine and state != "Z" and pid != os.getpid() and any(w in text for w in words):
            found[pid] = text
    return found


def stop_group(proc: subprocess.Popen, sig: int = signal.SIGTERM, timeout: float = 60) -> int:
    """Signal ``proc``'s process group (``proc`` was started with ``start_new_session``) and wait until
    every process of the group is gone, not only ``proc``: a Spark stage's Python driver is the JVM's
    child and ends a moment after it. What is still there after ``timeout`` is killed (SIGKILL)."""
    deadline = time.monotonic() + timeout
    try:
        os.killpg(proc.pid, sig)  # also when proc itself has ended: its group may not have
    except ProcessLookupError:
        pass
    while group_members(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    if group_members(proc.pid):
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    proc.wait()
    while group_members(proc.pid) and time.monotonic() < deadline + 30:  # SIGKILLed ones take a moment
        time.sleep(0.1)
    return proc.returncode


@dataclass
class Stages:
    """The stage processes of one source."""

    cfg: DbusConfig
    ds: str
    log_dir: Path
    procs: dict[str, subprocess.Popen] = field(default_factory=dict)
    started_at: dict[str, int] = field(default_factory=dict)  # each log's size when its stage last started

    def log(self, stage: str) -> Path:
        return self.log_dir / f"{stage}.log"

    def start(self, stage: str) -> subprocess.Popen:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        with self.log(stage).open("ab") as out:
            self.started_at[stage] = out.tell()  # logs are appended to: a ready line before is an old run's
            proc = subprocess.Popen(
                command(stage, self.cfg, self.ds),
                cwd=submit.driver_dir(self.cfg, stage) or REPO if stage in submit.SUBMITTED else REPO,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=environment(self.cfg),
                start_new_session=True,
            )
        self.procs[stage] = proc
        return proc

    def stop(self, stage: str, sig: int = signal.SIGTERM, timeout: float = 60) -> int | None:
        """Signal the stage's process group and wait until every process of it is gone; SIGKILL what is
        left after ``timeout``. Returns the exit code of the process started (spark-submit's JVM for a
        Spark stage: 143 when the SIGTERM reached it, or the driver's code when the driver ended first)."""
        proc = self.procs.pop(stage, None)
        if proc is None:
            return None
        return stop_group(proc, sig, timeout)

    def stop_all(self) -> None:
        """Every stage started, each stopped as ``stop`` does, all at once (a thread each): the groups get
        SIGTERM together and end side by side, not one after the other (a Spark stage takes 1-3 s)."""
        from concurrent.futures import ThreadPoolExecutor

        names = list(reversed(list(self.procs)))
        if names:
            with ThreadPoolExecutor(len(names)) as pool:
                list(pool.map(self.stop, names))

    def check_alive(self) -> None:
        for stage, proc in self.procs.items():
            if proc.poll() is not None:
                tail = self.log(stage).read_text(errors="replace")[-3000:]
                msg = f"{stage} exited with {proc.returncode}; the end of {self.log(stage)}:\n{tail}"
                raise StageError(msg)

    def since_start(self, stage: str) -> str:
        with self.log(stage).open("rb") as f:
            f.seek(self.started_at.get(stage, 0))
            return f.read().decode(errors="replace")

    def ready_text(self, stage: str) -> str:
        """The log line that says ``stage`` is serving (Spark's own "started" lines come much earlier)."""
        return {
            "extractor": "reading from",
            "fullpuller": "listening on",
            "heartbeat": "heartbeat writer",
        }.get(stage, f"query {stage}_{self.ds} started")

    def wait_ready(self, *stages: str, timeout: float = 300) -> None:
        """Waits until each of ``stages`` is serving (its ``ready_text`` is in its log)."""
        for stage in stages:
            self.wait_log(stage, self.ready_text(stage), timeout)

    def wait_log(self, stage: str, text: str, timeout: float) -> None:
        """Waits until ``text`` appears in what the stage's log gained since the stage last started."""
        deadline = time.monotonic() + timeout
        while text not in self.since_start(stage):
            self.check_alive()
            if time.monotonic() > deadline:
                msg = f"{stage}: no '{text}' in {self.log(stage)} after {timeout:.0f}s"
                raise StageError(msg)
            time.sleep(0.1)
