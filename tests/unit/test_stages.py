"""cli/stages.py stop_group: a stage's process group is gone when stop returns, the child that outlives
its parent included (the full puller's Python driver outliving its spark-submit JVM)."""

from __future__ import annotations

import signal
import subprocess
import sys
import uuid

import pytest

from cli.stages import group_members, processes_naming, stop_group


def spawn(script: str) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", script], start_new_session=True, stdout=subprocess.PIPE)
    assert proc.stdout.readline().strip() == b"ready"
    return proc


# a parent that exits on SIGTERM at once, and its child that takes its time (like a driver and its JVM)
PARENT_AND_SLOW_CHILD = """
import signal, subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", '''
import signal, sys, time
signal.signal(signal.SIGTERM, lambda *_: (time.sleep(1.5), sys.exit(0)))
print("ready", flush=True)
time.sleep(600)
''', "{marker}"], stdout=subprocess.PIPE)
child.stdout.readline()
print("ready", flush=True)
time.sleep(600)
"""

IGNORES_SIGTERM = """
import signal, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
print("ready", flush=True)
time.sleep(600)
"""


def test_stop_group_returns_once_the_child_that_outlives_its_parent_is_gone():
    marker = f"dbus-test-{uuid.uuid4().hex}"
    proc = spawn(PARENT_AND_SLOW_CHILD.replace("{marker}", marker))
    assert len(group_members(proc.pid)) == 2 and processes_naming(marker)
    code = stop_group(proc, signal.SIGTERM, timeout=20)
    assert code == -signal.SIGTERM
    assert group_members(proc.pid) == [] and processes_naming(marker) == {}


def test_stop_group_kills_what_ignores_sigterm_after_the_timeout():
    proc = spawn(IGNORES_SIGTERM)
    assert stop_group(proc, signal.SIGTERM, timeout=0.5) == -signal.SIGKILL
    assert group_members(proc.pid) == []


def test_stop_group_of_a_process_already_gone():
    proc = spawn('print("ready", flush=True)')
    proc.wait()
    assert stop_group(proc, timeout=1) == 0


def test_a_ready_line_of_an_earlier_run_in_the_appended_log_does_not_count(tmp_path):
    from cli.stages import StageError, Stages

    stages = Stages(cfg=None, ds="demo", log_dir=tmp_path)  # type: ignore[arg-type]
    stages.log("dispatcher").write_text("query dispatcher_demo started\n")  # the previous demo's
    stages.started_at["dispatcher"] = stages.log("dispatcher").stat().st_size
    with pytest.raises(StageError, match="no 'query dispatcher_demo started'"):
        stages.wait_log("dispatcher", "query dispatcher_demo started", timeout=0.3)
    with stages.log("dispatcher").open("a") as f:
        f.write("INFO ...\nquery dispatcher_demo started\n")
    stages.wait_ready("dispatcher", timeout=5)
