"""docs/logs.md's ``dbus logrules`` commands, run as written on the real stack (issue 16, rules as data).

The commands are read from the section "## Rules: draft, publish, test", every ``sh`` block in order, and
run through bash with the venv's bin first on PATH, as a user types them, in a folder of the test's own
(``conf`` there is the checkout's, so the paths read as written; ``-o FILE`` writes there). Only the source's
name differs (``--source applog`` becomes the test's), in a throwaway copy of the configuration named by
``$DBUS_CONFIG``, and the meta store is the stack's MariaDB. Every command exits 0; then:

- the publish sent ``LOG_PROCESSOR_RELOAD_CONFIG`` on the source's control topic, with the original's payload
  (``dsName``, ``dsType``) and the table and version published;
- ``test`` on the sample prints what docs/logs.md shows (and exits 1: a line breaks a rule);
- the export of the published version equals the imported file;
- a draft whose active groups save different columns is refused (exit 2, both groups named), and version 1
  stays the version in force.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
import yaml
from helpers import wait_until

from dbuslib import kafka
from dbuslib.config import load_config, raw_config
from dbuslib.logstore import LogStore
from ums.control import from_json

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "logs.md"
SECTION = "## Rules: draft, publish, test"
RULES = REPO / "conf" / "demo" / "logrules" / "order_events.json"


def doc_commands() -> list[str]:
    """The ``dbus`` lines of the section's ``sh`` blocks, in order."""
    text = DOC.read_text()
    assert SECTION in text, f"docs/logs.md has no {SECTION!r} section"
    section = text.split(SECTION, 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"^```sh\n(.*?)^```", section, re.MULTILINE | re.DOTALL)
    return [ln.strip() for b in blocks for ln in b.splitlines() if ln.strip().startswith("dbus ")]


@pytest.fixture
def setup(tmp_path, kafka_up, cfg):
    ds = f"pytest_lr_{uuid.uuid4().hex[:8]}"
    raw = raw_config(cfg.path)
    raw["log_sources"] = {ds: {"type": "log_rsyslog"}}
    path = tmp_path / "dbus.yaml"
    path.write_text(yaml.safe_dump(raw))
    mine = load_config(path)
    ctrl = mine.log_source(ds).topics.name("ctrl", ds)
    # not created here: publish makes the control topic when it is missing (no processor has run yet)
    work = tmp_path / "work"
    work.mkdir()
    (work / "conf").symlink_to(REPO / "conf")
    yield ds, path, work, ctrl
    kafka.delete_topics(kafka_up, [ctrl])
    store = LogStore(mine.endpoints.meta_store.url.get_secret_value())
    try:
        store.drop_source(ds)
    finally:
        store.dispose()


def bash(line: str, ds: str, config: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("DBUS_CONFIG", "PYTHONPATH", "VIRTUAL_ENV")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["DBUS_CONFIG"] = str(config)
    script = re.sub(r"--source applog\b", f"--source {ds}", line)
    return subprocess.run(
        ["bash", "-c", script], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
    )


def reload_messages(ctrl: str, cfg) -> list:
    consumer = kafka.consumer(
        cfg.endpoints.kafka, ctrl, auto_offset_reset="earliest", enable_auto_commit=False
    )
    try:
        got = []
        for batch in consumer.poll(timeout_ms=2000).values():
            got += [from_json(r.value) for r in batch]
        return got
    finally:
        consumer.close()


def test_the_docs_commands_draft_test_publish_and_export_on_the_stack(setup):
    ds, config, work, ctrl = setup
    commands = doc_commands()
    actions = [c.split()[2] for c in commands]
    for needed in ("add-table", "import", "show", "test", "publish", "export", "tables", "group", "reload"):
        assert needed in actions, f"docs/logs.md shows no `dbus logrules {needed}`"
    outputs = {}
    for line in commands:
        done = bash(line, ds, config, work)
        action = line.split()[2]
        expected = 1 if action == "test" else 0  # the sample has a line that breaks a rule, one not JSON
        assert done.returncode == expected, f"{line}\n{done.stdout}\n{done.stderr}"
        outputs.setdefault(action, done.stdout)

    assert f"{ds}.{ds}_schema.order_events: version 1 published" in outputs["publish"]
    cfg = load_config(config)
    sent = wait_until(lambda: reload_messages(ctrl, cfg), 30, f"a reload message on {ctrl}")
    assert [m.type.value for m in sent] == ["LOG_PROCESSOR_RELOAD_CONFIG", "LOG_PROCESSOR_RELOAD_CONFIG"]
    assert sent[0].payload == {"dsName": ds, "dsType": "log_rsyslog", "table": "order_events", "version": 1}
    assert sent[1].payload == {"dsName": ds, "dsType": "log_rsyslog"}  # dbus logrules reload
    exported = [c for c in commands if " export " in c and "--published" in c]
    out_file = work / re.search(r"-o (\S+)", exported[0])[1]
    assert out_file.read_text() == RULES.read_text()
    assert outputs["test"].endswith(
        "5 line(s): 1 accepted ('order_events' 1), 1 accepted by no group, 1 broke a rule, "
        "1 refused by the adapter, 1 heartbeat(s)\n"
    )


def test_a_draft_whose_groups_disagree_is_refused_and_the_version_stays(setup, tmp_path):
    ds, config, work, _ = setup
    t = f"--source {ds} --table order_events"
    short = json.loads(RULES.read_text())
    short[0]["groupName"] = "short"
    save_as = [{"ruleScope": "0", "name": "log_time", "type": "DATETIME"}]
    short[0]["rules"][-1]["ruleGrammar"] = json.dumps(save_as)
    (tmp_path / "short.json").write_text(json.dumps(short))
    for line in (
        f"dbus logrules add-table {t}",
        f"dbus logrules import {t} {RULES} --active",
        f"dbus logrules publish {t} --no-reload",
        f"dbus logrules import {t} {tmp_path / 'short.json'} --active",
    ):
        done = bash(line, ds, config, work)
        assert done.returncode == 0, f"{line}\n{done.stderr}"
    refused = bash(f"dbus logrules publish {t}", ds, config, work)
    assert refused.returncode == 2
    assert refused.stderr.startswith("dbus: LOG_PUBLISH_REFUSED: "), refused.stderr
    assert "['order_events'] save (log_time datetime, level string" in refused.stderr
    assert "['short'] save (log_time datetime)" in refused.stderr
    listed = bash(f"dbus logrules tables --source {ds}", ds, config, work).stdout.splitlines()
    assert listed[1].split()[:4] == ["order_events", "ok", "1", "2/2"]
