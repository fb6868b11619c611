"""stack/lib.sh's pid files: `pid_alive` is true for the process `start_bg` started and for no other one
holding its pid since (a reboot or a kill -9 frees pids; `make stack-up` then waited on another process's
thread as if it were Prometheus, and timed out)."""

from __future__ import annotations

import subprocess
import threading
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def bash(script: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = {"PATH": "/usr/bin:/bin", "STACK_CACHE": str(tmp_path), "STACK_HOME": str(tmp_path)}
    script = f'. "{REPO}/stack/lib.sh"\n{script}'
    return subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True, timeout=30)


def alive(pidfile: Path, tmp_path: Path) -> bool:
    done = bash(f'pid_alive "{pidfile}"', tmp_path)
    assert done.returncode in (0, 1), done.stderr
    return done.returncode == 0


def test_the_process_start_bg_started_is_alive_until_it_ends(tmp_path):
    pidfile, log = tmp_path / "pid", tmp_path / "log"
    started = bash(f'start_bg "{pidfile}" "{log}" sleep 30', tmp_path)
    assert started.returncode == 0, started.stderr
    pid = int(pidfile.read_text())
    try:
        assert (tmp_path / "pid.start").read_text().strip().isdigit()
        assert alive(pidfile, tmp_path)
        stopped = bash(f'stop_pid sleeper "{pidfile}" 5', tmp_path)
        assert stopped.returncode == 0, stopped.stderr
        assert not pidfile.exists() and not (tmp_path / "pid.start").exists()
    finally:
        subprocess.run(["kill", "-KILL", str(pid)], capture_output=True)


def test_a_pid_now_held_by_another_process_is_not_alive(tmp_path):
    pidfile = tmp_path / "pid"
    with subprocess.Popen(["sleep", "30"]) as other:
        try:
            pidfile.write_text(f"{other.pid}\n")
            assert alive(pidfile, tmp_path), "an old pid file (no start time) naming a live process"
            (tmp_path / "pid.start").write_text("1\n")  # the process started_bg started began at tick 1
            assert not alive(pidfile, tmp_path)
        finally:
            other.kill()


def test_a_pid_now_a_thread_of_another_process_is_not_alive(tmp_path):
    pidfile, ready, stop = tmp_path / "pid", threading.Event(), threading.Event()
    ids: list[int] = []

    def run() -> None:
        ids.append(threading.get_native_id())
        ready.set()
        stop.wait(30)

    thread = threading.Thread(target=run)
    thread.start()
    try:
        assert ready.wait(10)
        pidfile.write_text(f"{ids[0]}\n")  # kill -0 accepts a thread's id
        assert not alive(pidfile, tmp_path)
    finally:
        stop.set()
        thread.join()


def test_no_pid_file_is_not_alive(tmp_path):
    assert not alive(tmp_path / "pid", tmp_path)
