"""No secret of a run in any stage's command line, log, console page, ``/metrics`` body or ``dbus status``
(issue #31, acceptance 3).

Every long-running process DBus has runs at once for a source of the test's own: the extractor, the
dispatcher, the appender and the full puller (spark-submit, their JVMs and Python drivers), the heartbeat
writer and monitor, ``dbus metrics exporter`` and ``dbus console``; rows are captured, a full pull runs,
every stage writes its metrics. Then the test greps, for each of the run's distinctive secrets:

- the command line of every process of every stage's process group (``/proc/<pid>/cmdline``: what ``ps``
  shows), spark-submit's JVM and the Python drivers included;
- every log the run wrote;
- every console page and JSON answer an operator reaches (crawled from the overview), and the exporter's
  ``/metrics``;
- what ``dbus status`` prints.

The secrets: the configuration's own (on the secure stack, ``make test-secure``: the random passwords of
Kafka's SCRAM user, MariaDB's accounts, the meta store's URL and ZooKeeper's digest identity), and the
test's: the console's session key and its users' passwords and hashes, an SMTP password, a webhook token and
a masking salt.
"""

from __future__ import annotations

import re
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
import yaml
from console_env import (
    ConsoleServer,
    add_made_secrets,
    crawl,
    distinctive_secrets,
    free_port,
    json_endpoints,
    session,
)
from extractor_env import cleanup, make_env
from fullpull_env import run_dbus
from helpers import wait_until

from cli.stages import Stages, group_members, stop_group
from dbuslib import kafka
from dbuslib.config import load_config, raw_config

pytestmark = pytest.mark.integration
STAGES = ("extractor", "dispatcher", "appender", "fullpuller", "heartbeat")
ROWS = 200


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:  # ended meanwhile
        return ""


def leaks(text: str, values: set[str]) -> list[str]:
    """The secrets in ``text``, each shown by its first characters only."""
    return sorted(f"{v[:4]}... ({len(v)} chars)" for v in values if v in text)


@pytest.fixture
def run(tmp_path, writer_db):
    db, database = writer_db
    with db.cursor() as cur:
        cur.execute("CREATE TABLE t (id INT PRIMARY KEY, email VARCHAR(100), note VARCHAR(40))")
    env = make_env(tmp_path, database, metrics_interval_s=1)
    raw = raw_config(env.cfg_path)
    made = add_made_secrets(raw, env.ds, f"{database}.t")
    raw["sources"][env.ds]["heartbeat"]["interval_s"] = 2
    exporter_port = free_port()
    raw["prometheus"] = {**raw.get("prometheus", {}), "listen": f"127.0.0.1:{exporter_port}"}
    raw["endpoints"]["influxdb"]["exporter"] = f"http://127.0.0.1:{exporter_port}"
    raw["console"]["audit_log"] = str(tmp_path / "logs" / "console-audit.log")
    path = tmp_path / "secrets.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    cfg = load_config(path)
    logs = tmp_path / "logs"
    stages = Stages(cfg, env.ds, logs)
    exporter_log = logs / "exporter.log"
    with exporter_log.open("ab") as out:
        exporter = subprocess.Popen(
            [str(Path(sys.executable).with_name("dbus")), "--config", str(path), "metrics", "exporter"],
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    console = ConsoleServer(path, logs)
    try:
        for stage in STAGES:
            stages.start(stage)
        stages.wait_ready(*STAGES)
        console.start()
        values = distinctive_secrets(cfg, raw) | set(made.values())
        values |= {*console.passwords.values(), *console.hashes.values()}
        yield cfg, path, env, database, db, stages, console, exporter, exporter_port, values, logs
    finally:
        console.stop()
        stages.stop_all()
        stop_group(exporter)
        cleanup(env)


def test_no_secret_in_ps_logs_pages_metrics_or_status(run) -> None:
    cfg, path, env, database, db, stages, console, exporter, port, values, logs = run
    with db.cursor() as cur:
        for i in range(ROWS):
            cur.execute("INSERT INTO t VALUES (%s, %s, 'note')", (i, f"user{i}@example.com"))
    src = cfg.source(env.ds)
    result = src.topics.name("result", env.ds, database)

    def arrived() -> bool:
        stages.check_alive()
        got = kafka.read_range(cfg.endpoints.kafka, [result])
        return sum(r.value.count(b'{"tuple":') for r in got if r.value) >= ROWS

    wait_until(arrived, 300, f"{ROWS} rows as UMS in {result}")
    pulled = run_dbus(
        path, "fullpull", "request", "--source", env.ds, "--table", f"{database}.t", "--wait", "300"
    )
    assert pulled.returncode == 0, pulled.stdout + pulled.stderr

    def scraped() -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
            body = r.read().decode()
        return body if f'ds="{env.ds}"' in body else ""

    metrics = wait_until(scraped, 120, f"{env.ds}'s metrics on the exporter's /metrics")
    assert values, "the run has secrets to look for"
    found: dict[str, list[str]] = {}

    # ps: every process of every stage's group, the exporter's and the console's
    groups = {**{s: p.pid for s, p in stages.procs.items()}, "exporter": exporter.pid}
    assert console.proc is not None
    groups["console"] = console.proc.pid
    lines = {
        f"{name} pid {pid}": cmdline(pid) for name, pgid in groups.items() for pid in group_members(pgid)
    }
    assert any("org.apache.spark.deploy.SparkSubmit" in c for c in lines.values()), lines
    assert len(lines) >= len(groups) + 3, lines  # the Spark stages' Python drivers beside their JVMs
    for where, text in lines.items():
        found[f"ps: {where}"] = leaks(text, values)

    # every log of the run (the stages', the exporter's, the console's and its audit log)
    files = [f for f in logs.rglob("*") if f.is_file()]
    assert {f"{s}.log" for s in STAGES} <= {f.name for f in files}, files
    for f in files:
        found[f"log: {f.relative_to(logs)}"] = leaks(f.read_text(errors="replace"), values)

    # every console page and JSON answer, the table's page with its masking rule among them
    opener = session(console, "operator")
    answers = crawl(console, opener, ["/", *json_endpoints(cfg), f"/tables/{env.ds}/{database}.t"])
    assert sum("/api/" not in p for p in answers) >= 6 and all(s == 200 for s, _ in answers.values()), {
        p: s for p, (s, _) in answers.items()
    }
    for page, (_, body) in answers.items():
        found[f"console: {page}"] = leaks(body, values)

    found["/metrics"] = leaks(metrics, values)
    status = run_dbus(path, "status", "--source", env.ds, timeout=120)
    assert env.ds in status.stdout, status.stdout + status.stderr
    found["dbus status"] = leaks(status.stdout + status.stderr, values)

    where = {k: v for k, v in found.items() if v}
    print(
        f"\nlooked for {len(values)} secrets in {len(lines)} command lines, {len(files)} logs, "
        f"{len(answers)} console answers, /metrics ({len(metrics)} bytes) and dbus status"
    )
    assert not where, where
    assert re.search(r"^dbus_", metrics, re.M), metrics[:2000]
