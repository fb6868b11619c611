"""The log processor's regex budget on the real stack (issue 29, acceptance 0b, the engine's side): a crafted
backtracking line on a backtracking rule is a dead letter ``LOG_RULE_BUDGET`` with its reason and
coordinates, within the budget, and the lines written after it arrive in the table's result topic.

The source (``pytest_lpb_<hex>``: topics, checkpoints, rules in the stack's meta store) has one table whose
group keeps the rsyslog records whose message matches ``(.*a){12}$`` (the issue's rule): ``<n>xaxa...xa``
lines match at once; ``aaa...ab`` (48 characters) backtracks for years in java.util.regex. Before the budget
this line stalled the whole source: the next line had not arrived 90 s later.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
import yaml
from helpers import wait_until

from cli.stages import Stages
from dbuslib import kafka
from dbuslib.config import load_config, raw_config
from dbuslib.logstore import LogStore

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]
EVIL = r"(.*a){12}$"
CRAFTED = "a" * 47 + "b"
BUDGET_MS = 100
TABLE = "lines"


def rules() -> list:
    return [
        {
            "groupName": "twelve_a",
            "rules": [
                {
                    "ruleTypeName": "toIndex",
                    "ruleGrammar": json.dumps([{"ruleScope": "0", "ruleParamter": "message"}]),
                },
                {
                    "ruleTypeName": "filter",
                    "ruleGrammar": json.dumps(
                        [{"ruleScope": "0", "ruleParamter": EVIL, "ruleOperate": "==", "ruleType": "regex"}]
                    ),
                },
                {
                    "ruleTypeName": "saveAs",
                    "ruleGrammar": json.dumps([{"ruleScope": "0", "name": "line", "type": "STRING"}]),
                },
            ],
        }
    ]


def record(message: str) -> bytes:
    doc = {"host": "app-01.prod", "path": "/srv/app/a.log", "timestamp": "2024-03-05T02:15:30.123Z"}
    return json.dumps({**doc, "message": message}, separators=(",", ":")).encode()


def good(n: int) -> str:
    return f"{n}" + "xa" * 12


class Env:
    def __init__(self, cfg, ds: str, tmp: Path) -> None:
        self.cfg, self.ds, self.tmp = cfg, ds, tmp
        self.stages = Stages(cfg, ds, tmp / "logs")
        self.src = cfg.log_source(ds)
        self.producer = None

    def topic(self, kind: str) -> str:
        if kind == "result":
            return self.src.topics.name("result", self.ds, self.src.schema_name(self.ds), TABLE)
        return self.src.topics.name(kind, self.ds)

    def dbus(self, *args: str) -> subprocess.CompletedProcess[str]:
        cmd = [sys.executable, "-m", "cli.main", "--config", str(self.cfg.path), *args]
        env = {k: v for k, v in os.environ.items() if k != "DBUS_CONFIG"}
        done = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=180)
        assert done.returncode == 0, f"{' '.join(args)}: {done.returncode}\n{done.stdout}\n{done.stderr}"
        return done

    def produce(self, values: list[bytes]) -> list[int]:
        futures = [self.producer.send(self.topic("raw"), key=b"/srv/app/a.log", value=v) for v in values]
        self.producer.flush()
        return [f.get(30).offset for f in futures]

    def read(self, topic: str) -> list:
        consumer = kafka.consumer(
            self.cfg.endpoints.kafka, topic, auto_offset_reset="earliest", enable_auto_commit=False
        )
        try:
            got = []
            while batch := consumer.poll(timeout_ms=1500):
                got += [r for rs in batch.values() for r in rs]
            return got
        finally:
            consumer.close()

    def lines(self) -> list[str]:
        out = []
        for r in self.read(self.topic("result")):
            m = json.loads(r.value)
            if m["protocol"]["type"] == "data_increment_data":
                out += [p["tuple"][-1] for p in m["payload"]]
        return out

    def dead_letters(self) -> list[dict]:
        return [json.loads(r.value) for r in self.read(self.topic("dead_letter"))]


@pytest.fixture
def env(tmp_path, kafka_up, cfg):
    ds = f"pytest_lpb_{uuid.uuid4().hex[:8]}"
    raw = raw_config(cfg.path)
    raw["log_sources"] = {
        ds: {
            "type": "log_rsyslog",
            "processor": {"max_offsets_per_trigger": 2000, "regex_budget_ms": BUDGET_MS},
        }
    }
    raw["spark"]["jars_file"] = str(cfg.resolve(cfg.spark.jars_file))
    raw["spark"]["checkpoint_root"] = str(tmp_path / "checkpoints")
    path = tmp_path / "dbus.yaml"
    path.write_text(yaml.safe_dump(raw))
    e = Env(load_config(path), ds, tmp_path)
    kafka.ensure_topics(kafka_up, [e.topic("raw")], partitions=1)
    e.producer = kafka.producer(kafka_up)
    yield e
    e.stages.stop_all()
    e.producer.close()
    topics = {e.topic(k) for k in ("raw", "ctrl", "unknown", "dead_letter", "result")}
    kafka.delete_topics(kafka_up, sorted(topics))
    store = LogStore(e.cfg.endpoints.meta_store.url.get_secret_value())
    try:
        store.drop_source(ds)
    finally:
        store.dispose()


def test_a_crafted_backtracking_line_is_a_dead_letter_and_the_lines_after_it_arrive(env):
    path = env.tmp / "rules.json"
    path.write_text(json.dumps(rules()))
    t = ("--source", env.ds, "--table", TABLE)
    env.dbus("logrules", "add-table", *t)
    env.dbus("logrules", "import", *t, str(path), "--active", "--replace")
    env.dbus("logrules", "publish", *t)

    env.produce([record(good(n)) for n in range(10)])
    env.stages.start("logprocessor")
    wait_until(lambda: len(env.lines()) >= 10 or None, 240, "the first lines in the result topic")

    offsets = env.produce([record(CRAFTED)] + [record(good(n)) for n in range(10, 30)])
    crafted_at = offsets[0]

    def arrived():
        lines, letters = env.lines(), env.dead_letters()
        return (lines, letters) if len(set(lines)) >= 30 and letters else None

    try:  # the bound: before the budget, the line after the crafted one had not arrived 90 s later, ever
        lines, letters = wait_until(arrived, 180, "the lines after the crafted one, and its dead letter")
    except AssertionError as e:
        log = env.stages.log("logprocessor")
        tail = log.read_text(errors="replace")[-4000:] if log.exists() else "(no log)"
        raise AssertionError(f"{e}; the processor's log ends:\n{tail}") from e

    assert sorted(set(lines), key=lambda s: int(s.split("x")[0])) == [good(n) for n in range(30)]
    assert CRAFTED not in lines
    (letter,) = letters
    assert letter["code"] == "LOG_RULE_BUDGET", letter
    assert (letter["partition"], letter["offset"], letter["topic"]) == (0, crafted_at, env.topic("raw"))
    assert letter["error"] == (
        f"table {TABLE}: group 'twelve_a' rule 2 (filter): regex '(.*a){{12}}$' ran over its budget of "
        f"{BUDGET_MS} ms on a 48-character text"
    ), letter
    assert letter["stage"] == "logprocessor" and letter["value_base64"] is not None
