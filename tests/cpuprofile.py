"""Where a test run's CPU goes, by kind of process: ``DBUS_TEST_CPU=<file.json>`` with pytest (the
controller only) samples every process's user+system time from /proc twice a second and writes, at the
end, the CPU seconds and the number of processes started per kind (a Spark stage's driver JVM, its Python
driver, PySpark's workers, each server of the stack, pytest's workers...), and prints the largest.

Each process's time is also given to the test file its pytest process (a worker, or pytest itself) runs
at that moment, when it descends from one (``by_file``: the servers of the stack descend from none and
count as ``-``): each pytest process names its current file in ``<file.json>.running/<pid>``
(``running``). A process that lives less than a sampling interval is missed (its time then shows
nowhere), so the total is a floor. The kinds come from the command line's program (a JVM's main class, a
Python script or module), never from its arguments' paths (a test's tmp_path names ``pytest``). Linux
only.
"""

from __future__ import annotations

import os
import re
import shutil
import threading
import time
from pathlib import Path

ENV = "DBUS_TEST_CPU"
INTERVAL_S = 0.5
_JAVA_MAINS = {
    "kafka.Kafka": "kafka",
    "org.apache.zookeeper.server.quorum.QuorumPeerMain": "zookeeper",
    "org.apache.spark.launcher.Main": "spark-launcher",
    "org.apache.spark.deploy.master.Master": "spark-cluster",
    "org.apache.spark.deploy.worker.Worker": "spark-cluster",
    "org.apache.spark.executor.CoarseGrainedExecutorBackend": "spark-cluster",
    "org.apache.kafka.connect.cli.ConnectDistributed": "kafka-connect",
    "org.apache.kafka.connect.cli.ConnectStandalone": "kafka-connect",
}
_STAGE_FILE = re.compile(r"(?:^|/)(\w+)/main\.py$")


def kind(argv: list[str]) -> str:
    """The kind of process of a command line (``/proc/<pid>/cmdline`` split at NULs)."""
    if not argv:
        return "?"
    exe = os.path.basename(argv[0])
    if exe == "java":
        main = next((a for a in argv[1:] if re.fullmatch(r"[a-z][\w$]*(\.[\w$]+)+", a) and "/" not in a), "")
        if main == "org.apache.spark.deploy.SparkSubmit":
            app = next((m.group(1) for a in argv if (m := _STAGE_FILE.search(a))), None)
            return f"spark-driver-jvm:{app}" if app else "spark-driver-jvm:pyspark-shell"
        if "-jar" in argv[1:-1]:  # the stack's schema registry: registry-build/.../*-runner.jar
            jar = argv[argv.index("-jar") + 1]
            return "registry" if "registry" in jar else f"java -jar {os.path.basename(jar)}"
        return _JAVA_MAINS.get(main, f"java:{main.rsplit('.', 1)[-1] or '?'}")
    if exe.startswith("python"):
        args = argv[1:]
        while args and args[0].startswith("-") and args[0] not in ("-m", "-c"):
            args = args[1:]
        if not args:
            return "python"
        if args[0] == "-m":
            return (
                "pyspark-worker"
                if args[1:2] == ["pyspark.daemon"]
                else f"python -m {args[1] if len(args) > 1 else ''}"
            )
        if args[0] == "-c":
            return "pytest-worker" if "sys.stdin.readline" in args[1] else "python -c"
        stage = _STAGE_FILE.search(args[0])
        if stage:
            return f"python-driver:{stage.group(1)}"
        return "pytest" if os.path.basename(args[0]) == "pytest" else f"python {os.path.basename(args[0])}"
    return exe.split(":")[0].split()[0] if exe.split() else exe  # "postgres: checkpointer" is postgres


def running(path: str, pid: int, test_file: str) -> None:
    """Say, for the sampler, that pytest process ``pid`` now runs ``test_file``."""
    folder = Path(path + ".running")
    folder.mkdir(exist_ok=True)
    (folder / str(pid)).write_text(test_file)


class Sampler:
    """Samples in a daemon thread from ``start`` to ``stop``; ``result`` is what the file holds."""

    def __init__(self, interval_s: float = INTERVAL_S, path: str = "") -> None:
        self.interval_s = interval_s
        self._running = Path(path + ".running") if path else None
        self.by_file: dict[str, dict[str, float]] = {}  # test file -> kind -> CPU seconds
        self._seen: dict[tuple[str, str], list] = {}  # (pid, start time) -> [ticks so far, kind, comm]
        self.cpu_s: dict[str, float] = {}
        self.starts: dict[str, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="cpu-profile", daemon=True)
        self._began = 0.0
        self._ended = 0.0  # stop's time: what the file and the summary print agree on
        self._hz = os.sysconf("SC_CLK_TCK")

    def start(self) -> Sampler:
        self._began = time.monotonic()
        self._sample(count=False)  # what ran before the run is not the run's
        self._thread.start()
        return self

    def stop(self) -> dict:
        self._stop.set()
        self._thread.join(5)
        self._ended = time.monotonic()
        if self._running is not None:
            shutil.rmtree(self._running, ignore_errors=True)
        return self.result()

    def result(self) -> dict:
        return {
            "elapsed_s": round((self._ended or time.monotonic()) - self._began, 1),
            "cores": os.cpu_count(),
            "cpu_s": {k: round(v, 1) for k, v in sorted(self.cpu_s.items(), key=lambda kv: -kv[1])},
            "starts": dict(sorted(self.starts.items(), key=lambda kv: -kv[1])),
            "by_file": {
                f: {k: round(v, 1) for k, v in sorted(kinds.items(), key=lambda kv: -kv[1]) if v >= 0.1}
                for f, kinds in sorted(self.by_file.items(), key=lambda kv: -sum(kv[1].values()))
            },
        }

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._sample(count=True)

    def _sample(self, count: bool) -> None:
        rows = []  # (pid, ppid, key, ticks, comm)
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            try:
                head, tail = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)
                fields, comm = tail.split(), head.split("(", 1)[1]
                rows.append((pid, fields[1], (pid, fields[19]), int(fields[11]) + int(fields[12]), comm))
            except (OSError, IndexError, ValueError):
                continue  # ended meanwhile
        parent = {r[0]: r[1] for r in rows}
        current = self._current()
        for pid, _, key, ticks, comm in rows:
            seen = self._seen.get(key)
            if seen is None or seen[2] != comm:  # new, or it exec'd (spark-submit's bash becomes java)
                try:
                    argv = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
                except OSError:
                    continue
                before = seen[0] if seen is not None else (0 if count else ticks)
                seen = self._seen[key] = [before, kind([a for a in argv if a]), comm]
                if count:
                    self.starts[seen[1]] = self.starts.get(seen[1], 0) + 1
            if count and ticks > seen[0]:
                spent = (ticks - seen[0]) / self._hz
                self.cpu_s[seen[1]] = self.cpu_s.get(seen[1], 0.0) + spent
                kinds = self.by_file.setdefault(_test_file(pid, parent, current), {})
                kinds[seen[1]] = kinds.get(seen[1], 0.0) + spent
            seen[0] = ticks

    def _current(self) -> dict[str, str]:
        """pid of each pytest process -> the test file it runs now."""
        out: dict[str, str] = {}
        if self._running is None or not self._running.is_dir():
            return out
        for f in self._running.iterdir():
            try:
                out[f.name] = f.read_text()
            except OSError:
                continue  # a pytest process that ended meanwhile
        return out


def _test_file(pid: str, parent: dict[str, str], current: dict[str, str]) -> str:
    """The test file of ``pid``'s nearest pytest ancestor (itself included), else ``-``."""
    for _ in range(64):
        if pid in current:
            return current[pid]
        pid = parent.get(pid, "0")
        if pid in ("0", "1"):
            break
    return "-"
