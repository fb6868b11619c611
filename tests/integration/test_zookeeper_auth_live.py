"""ZooKeeper refusals are not transient (issue #31, acceptance 2): every stage as a user starts it exits 3
at once with one line ``<stage>: ZOOKEEPER_AUTH_FAILED: ZooKeeper at <hosts> ...`` when

- its digest password is not the one that made its root (the digest scheme takes any password at login:
  DBus reads the root's ACL with its session's first request, ``dbuslib.zk``): on any ZooKeeper, under a
  root of the test's own made by the right identity;
- it has no ``endpoints.zookeeper.auth`` while the server requires every session to authenticate: on the
  secure stack (``make test-secure``, ``enforce.auth.enabled``), whose configuration sets ``auth``.
"""

from __future__ import annotations

import re
import uuid
from pathlib import Path

import pytest
import yaml
from extractor_env import cleanup, make_env
from helpers import refused_run

from dbuslib import zk
from dbuslib.config import load_config, raw_config

pytestmark = pytest.mark.integration
STAGES = (("extractor", "run"), ("heartbeat", "run"), ("submit", "dispatcher"), ("submit", "appender"))


def test_every_stage_stops_at_once_with_zookeeper_auth_failed(writer_db, tmp_path, kafka_up):
    _, name = writer_db
    env = make_env(tmp_path, name)
    base = raw_config(env.cfg_path)
    root = f"/DBusAuth_{uuid.uuid4().hex[:8]}"
    right = {"username": "dbus", "password": f"right-{uuid.uuid4().hex[:10]}"}
    made = {**base["endpoints"]["zookeeper"], "root": root, "auth": right}
    owner = zk.client(load_config_with(tmp_path / "owner.yaml", base, made).endpoints.zookeeper)
    owner.ensure_path(root)  # the root, with the ACL of the right identity (writable by it alone)
    owner.stop()
    cases = {"a wrong password": {**made, "auth": {"username": "dbus", "password": "not-the-password"}}}
    if base["endpoints"]["zookeeper"].get("auth"):  # the secure stack: its server requires authentication
        cases["no authentication"] = {k: v for k, v in made.items() if k != "auth"}
    try:
        for case, endpoint in cases.items():
            path = tmp_path / f"{case.replace(' ', '-')}.yaml"
            load_config_with(path, base, endpoint)
            for stage in STAGES:
                done, last = refused_run(path, [*stage, "--source", env.ds], case)
                hosts = re.escape(endpoint["hosts"])
                assert re.match(rf"\w+: ZOOKEEPER_AUTH_FAILED: ZooKeeper at {hosts}", last), last
                assert "not-the-password" not in done.stdout + done.stderr
                assert right["password"] not in done.stdout + done.stderr
    finally:
        owner = zk.client(load_config_with(tmp_path / "owner.yaml", base, made).endpoints.zookeeper)
        owner.delete(root, recursive=True)
        owner.stop()
        cleanup(env)


def load_config_with(path: Path, base: dict, zookeeper: dict):
    raw = {**base, "endpoints": {**base["endpoints"], "zookeeper": zookeeper}}
    path.write_text(yaml.safe_dump(raw))
    return load_config(path)
