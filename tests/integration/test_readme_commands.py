"""The README's commands for starting each stage, copied as written, work (issue 15, acceptance 3).

The commands are read from README.md itself, the fenced blocks of "## Running the stages": the first
starts every stage, the second is the plain spark-submit form (``mapfile -t args < <(dbus spark args ...)``).
Each command runs through bash as written, from the checkout (a clone's working dir), with the venv's bin
first on PATH (the block's own ``. .venv/bin/activate`` does it, as for a user), in its own process group.
Only the source's name differs (``--source demo`` becomes the test's), and the configuration is a
throwaway copy named by ``$DBUS_CONFIG`` (the block names no file; the spark-submit form's
``--config conf/dbus.yaml`` names the copy): its own source, topics, ZooKeeper root, checkpoints and
replica id, capturing only the test's database, so the test disturbs nothing else.

Every stage starts at once: each gets to its ready line (``query <stage>_<ds> started``, ``listening on``,
``reading from``, ``heartbeat writer``), then SIGTERM to its process group stops it cleanly (exit 0, or 143
for spark-submit's JVM that ended on the signal before its driver did), leaving no process. The
spark-submit form runs the dispatcher of a second throwaway source in the same file, beside the others.
"""

from __future__ import annotations

import copy
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from extractor_env import make_env
from helpers import HB_TABLE, delete_zk_tree, wait_until

from cli.stages import group_members
from dbuslib import kafka
from dbuslib.config import load_config

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
SECTION = "## Running the stages"
READY_S = 600  # Spark start-ups while other tests load both cores; ~30-60 s here
STOP_S = 60
SPARK_STAGES = ("dispatcher", "appender", "fullpuller")
SETUP = re.compile(r"^(\.|source|export)\s")  # lines that set up the user's shell


def readme_blocks() -> list[list[str]]:
    """The command lines (comments and blank lines dropped) of each fenced block of the section."""
    text = README.read_text()
    assert SECTION in text, f"README.md has no {SECTION!r} section"
    section = text.split(SECTION, 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"^```(?:sh|bash)\n(.*?)^```", section, re.MULTILINE | re.DOTALL)
    return [
        [ln for ln in (re.sub(r"\s+#.*$", "", raw).strip() for raw in block.splitlines()) if ln]
        for block in blocks
    ]


def stage_of(line: str) -> str | None:
    """The stage a line starts (``dbus submit <stage>``, ``dbus extractor|heartbeat run``), else None."""
    m = re.match(r"dbus submit (\w+)\b|dbus (extractor|heartbeat) run\b", line)
    return (m[1] or m[2]) if m else None


def ready_text(stage: str, ds: str) -> str:
    """cli/stages.py's ready lines: the stage serves."""
    return {"extractor": "reading from", "fullpuller": "listening on", "heartbeat": "heartbeat writer"}.get(
        stage, f"query {stage}_{ds} started"
    )


def as_for(line: str, ds: str, config: Path) -> str:
    """``line`` for source ``ds`` (and the copy of the configuration where it names conf/dbus.yaml)."""
    out = re.sub(r"--source demo\b", f"--source {ds}", line)
    return re.sub(r"(?<=--config )conf/dbus\.yaml\b", str(config), out)


@dataclass
class Started:
    """One README command running through bash in its own process group."""

    name: str
    ds: str
    proc: subprocess.Popen
    log: Path

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def ready(self) -> bool:
        return ready_text(self.name, self.ds) in self.text()

    def check_alive(self) -> None:
        if self.proc.poll() is not None:
            msg = f"{self.name} ({self.ds}) exited with {self.proc.returncode}:\n{self.text()[-4000:]}"
            raise AssertionError(msg)


def user_env(config: Path) -> dict[str, str]:
    """A user's shell: nothing pointing Spark or Python elsewhere, the venv's bin first, the copy."""
    drop = (
        "DBUS_CONFIG",
        "PYSPARK_PYTHON",
        "PYSPARK_DRIVER_PYTHON",
        "SPARK_HOME",
        "PYTHONPATH",
        "VIRTUAL_ENV",
    )
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["DBUS_CONFIG"] = str(config)
    return env


def bash(script: str, env: dict[str, str], log: Path) -> subprocess.Popen:
    """``script`` through bash in the checkout, in a session of its own; bash waits for its command when
    the group gets SIGTERM (``trap``) and ends with the command's exit code."""
    with log.open("wb") as out:
        return subprocess.Popen(
            ["bash", "-c", f"trap : TERM\n{script}"],
            cwd=REPO,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


@pytest.fixture
def setup(tmp_path, writer_db, kafka_up):
    """A throwaway configuration with two sources (the block's, the spark-submit form's) and its cleanup."""
    db, database = writer_db
    hb_schema = f"{database}_hb"  # the heartbeat table's own schema: the test's schema keeps its topic
    with db.cursor() as cur:
        cur.execute(f"CREATE DATABASE `{hb_schema}`")
    env = make_env(tmp_path, database)
    raw = yaml.safe_load(env.cfg_path.read_text())
    src = raw["sources"][env.ds]
    src["capture"]["include"].append(f"{hb_schema}.{HB_TABLE}")
    src["topics"]["partitions"] = 1  # one task per stage: a lighter start on two cores
    src["heartbeat"] = {"schema": hb_schema, "table": HB_TABLE, "interval_s": 1}
    other = f"{env.ds}_sf"
    raw["sources"][other] = copy.deepcopy(src)
    raw["sources"][other]["mysql"]["server_id"] = src["mysql"]["server_id"] + 1
    raw["endpoints"]["zookeeper"]["root"] = f"/DBusTest_{uuid.uuid4().hex[:10]}"
    env.cfg_path.write_text(yaml.safe_dump(raw))
    cfg = load_config(env.cfg_path)
    started: list[Started] = []
    yield env.ds, other, env.cfg_path, started
    for s in started:
        try:
            os.killpg(s.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        s.proc.wait(30)
    admin = kafka.admin(cfg.endpoints.kafka)
    try:
        mine = [t for t in admin.list_topics() if t == env.ds or t.startswith((f"{env.ds}.", f"{env.ds}_"))]
    finally:
        admin.close()
    kafka.delete_topics(cfg.endpoints.kafka, mine)
    delete_zk_tree(cfg.endpoints.zookeeper)
    from dbuslib.metastore import MetaStore, meta_version

    store = MetaStore(cfg.endpoints.meta_store.url.get_secret_value())
    try:
        with store.engine.begin() as conn:
            conn.execute(meta_version.delete().where(meta_version.c.ds.in_([env.ds, other])))
    finally:
        store.dispose()
    with db.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS `{hb_schema}`")


def test_readme_stage_commands_start_and_stop_each_stage(setup, tmp_path):
    ds, other, config, started = setup
    blocks = readme_blocks()
    assert len(blocks) >= 2, f"{SECTION}: the stage-start block and the spark-submit form, got {blocks}"
    start_block, submit_form = blocks[0], blocks[1]
    prelude = [ln for ln in start_block if SETUP.match(ln)]
    services = {stage_of(ln): ln for ln in start_block if stage_of(ln)}
    once = [ln for ln in start_block if not SETUP.match(ln) and not stage_of(ln)]
    assert set(services) == {"extractor", "dispatcher", "appender", "fullpuller", "heartbeat"}, start_block
    assert any(ln.startswith("dbus submit") for ln in services.values())
    assert any(ln.startswith("mapfile") for ln in submit_form) and "spark-submit" in submit_form[-1]
    assert re.search(r"--stage (\w+)", submit_form[0])[1] == "dispatcher"
    env = user_env(config)
    t0 = time.monotonic()

    # the block's one-shot commands (topics), for both sources, as written: side by side
    scripts = {
        source: "\n".join([*prelude, *(as_for(ln, source, config) for ln in once)]) for source in (ds, other)
    }
    running = {
        source: subprocess.Popen(
            ["bash", "-c", script],
            cwd=REPO,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for source, script in scripts.items()
    }
    for source, proc in running.items():
        stdout, stderr = proc.communicate(timeout=300)
        assert proc.returncode == 0, f"{scripts[source]}\n{stdout}\n{stderr}"
        assert f"{source}\tcreated" in stdout, stdout

    # every stage at once, and the spark-submit form for the second source's dispatcher
    for stage, line in services.items():
        command = as_for(line, ds, config)
        assert ds in command, command
        log = tmp_path / f"{stage}.log"
        started.append(Started(stage, ds, bash("\n".join([*prelude, command]), env, log), log))
    form = [as_for(ln, other, config) for ln in submit_form]
    assert str(config) in form[-1] and all(other in ln for ln in form), form
    log = tmp_path / "spark-submit-form.log"
    started.append(Started("dispatcher", other, bash("\n".join([*prelude, *form]), env, log), log))

    wait_until(
        lambda: all(s.ready() for s in started),
        READY_S,
        "every README command at its ready line",
        alive=started,
        interval=0.5,
    )
    ready_s = time.monotonic() - t0

    t1 = time.monotonic()
    for s in started:
        os.killpg(s.proc.pid, signal.SIGTERM)
    for s in started:
        code = s.proc.wait(STOP_S)
        spark = s.name in SPARK_STAGES
        assert code in ((0, 143) if spark else (0,)), f"{s.name} ({s.ds}): exit {code}\n{s.text()[-4000:]}"
        wait_until(lambda s=s: not group_members(s.proc.pid), STOP_S, f"{s.name} ({s.ds}): group gone")
        log = s.text()
        assert f"{s.name}: {s.ds}: stopping (SIGTERM)" in log, log[-4000:]
        assert "STAGE_STOP_TIMEOUT" not in log and "Traceback" not in log, log[-4000:]
    started.clear()
    print(
        f"README commands: every stage ready in {ready_s:.1f} s, all stopped in {time.monotonic() - t1:.1f} s"
    )
